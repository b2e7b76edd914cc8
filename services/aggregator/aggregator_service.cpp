#include "services/aggregator/aggregator_service.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/auth/token.hpp"
#include "libs/runtime/admission.hpp"
#include "libs/wire/endpoint.hpp"
#include "services/aggregator/delta_server.hpp"
#include "services/aggregator/engine.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace loom::aggregator {

result<std::string> delta_bind_from(const char* value) {
  if (!value || !*value) return std::string();  // the deployment's: runtime::data_bind
  if (!wire::valid_tcp_endpoint(value, wire::endpoint_use::bind))
    return make_error(errc::invalid_argument, std::string("LOOM_AGGREGATOR_DELTA_BIND=") + value +
                                                  " is not an endpoint to listen on: want tcp://HOST:PORT "
                                                  "(HOST may be *, PORT 1..65535 or *)");
  return std::string(value);
}

result<int> resident_fragments_from(const char* value) {
  if (!value || !*value) return engine_options{}.resident_fragments;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || n < 0 || n > 1 << 20)
    return make_error(errc::invalid_argument, std::string("LOOM_AGGREGATOR_RESIDENT_FRAGMENTS=") + value +
                                                  " is not a count of fragments: want 0 (every fragment) or more");
  return static_cast<int>(n);
}

result<std::shared_ptr<void>> start_parts(runtime::service_env& env, const std::string& bind, aggregator_handles& out) {
  audit::emitter* em = env.audit;
  // The token key verifies the scheduler's aggregation grants (service_main
  // refuses to start without it, for the gateway's tokens).
  auto key = auth::load_token_key(env.paths.token_key());
  if (!key) return make_error(key.code(), "the token key (it verifies aggregation grants): " + key.err().message);
  engine_options eo{env.paths.root, env.node_id, env.zone, [em](audit::record r) { em->emit(std::move(r)); },
                    env.metrics};
  eo.token_key = *key;
  auto resident = resident_fragments_from(std::getenv("LOOM_AGGREGATOR_RESIDENT_FRAGMENTS"));
  if (!resident) return resident.err();
  eo.resident_fragments = *resident;
  auto jobs = std::make_shared<engine>(std::move(eo));
  const auto now = std::chrono::duration_cast<nanos>(std::chrono::steady_clock::now().time_since_epoch());
  for (const auto& job : jobs->load_saved(now)) std::fprintf(stderr, "loom-aggregator: resumed job %s\n", job.c_str());
  auto* adm = env.admission;
  auto server = delta_server::start({env.paths.root, env.keys, bind.empty() ? runtime::data_bind(env) : bind, jobs,
                                     bind.empty() && !env.data_endpoint.empty(),
                                     [adm](std::string_view site) { return !adm || adm->site_admitted(site); }});
  if (!server) return server.err();
  std::shared_ptr<delta_server> s = std::move(*server);
  std::fprintf(stderr, "loom-aggregator: delta socket on %s\n", s->endpoint().c_str());
  out.jobs = jobs;
  out.data_dir = env.paths.root;
  out.where = {runtime::advertised(env, s->endpoint()), s->public_key()};  // what sites on other hosts reach
  return std::static_pointer_cast<void>(s);  // the server holds the engine: its thread stops first
}

std::unique_ptr<runtime::service_logic> make_logic(const aggregator_handles& h) {
  return std::make_unique<aggregator_logic>(h.jobs.lock(), h.where, h.data_dir);
}

}  // namespace loom::aggregator
