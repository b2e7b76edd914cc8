#include "services/console/console_service.hpp"

#include "services/console/change_feed.hpp"
#include "services/console/server.hpp"

#include <cstdio>

namespace loom::console {

namespace {
// The console's own request types: none (builtin_logic adds Ping and Crash).
class no_requests final : public runtime::service_logic {
 public:
  runtime::handled handle(const std::string& type, const std::string&, const runtime::call_context&) override {
    runtime::handled h;
    h.code = errc::unimplemented;
    h.message = "the console answers " + type + " nowhere: use HTTPS";
    return h;
  }
};
}  // namespace

std::unique_ptr<runtime::service_logic> make_logic() { return std::make_unique<no_requests>(); }

result<std::shared_ptr<void>> start(runtime::service_env& env, const console_config& cfg) {
  server_options o;
  o.paths = env.paths;
  o.template_dirs = cfg.template_dirs;
  o.zone = env.zone;
  if (cfg.https_port >= 0) {
    o.host = cfg.https_host;
    o.port = cfg.https_port;
  } else {
    auto hp = host_port(runtime::data_bind(env));
    if (!hp) return hp.err();
    o.host = hp->first == "*" ? "0.0.0.0" : hp->first;
    o.port = hp->second;
  }
  // The certificate names every address a browser may use.
  std::vector<std::string> hosts{"localhost", "127.0.0.1", "::1"};
  if (!env.eps.net.advertise.empty() && env.eps.net.advertise != "127.0.0.1") hosts.push_back(env.eps.net.advertise);
  auto tls = ensure_certificate(cfg.cert, cfg.cert_key, env.paths.state("console") + "/tls", hosts);
  if (!tls) return tls.err();
  o.tls = *tls;
  // The feed outlives the server (declared first in the handle, destroyed last).
  struct running {
    std::unique_ptr<change_feed> feed;
    std::unique_ptr<server> srv;
  };
  auto handle = std::make_shared<running>();
  handle->feed = std::make_unique<change_feed>(*env.ctx, env.paths, env.keys);
  o.feed = handle->feed.get();
  auto srv = server::start(*env.ctx, std::move(o), env.audit, env.metrics);
  if (!srv) return srv.err();
  auto fp = fingerprint(tls->cert);
  std::printf("loom-console: https://%s:%d (certificate %s%s, SHA-256 %s)\n", env.eps.net.advertise.c_str(),
              (*srv)->port(), tls->cert.c_str(), tls->generated ? ", made now" : "", fp ? fp->c_str() : "?");
  std::fflush(stdout);
  handle->srv = std::move(*srv);
  return std::shared_ptr<void>(handle);
}

}  // namespace loom::console
