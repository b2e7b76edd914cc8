// backend: the console's way to the services. Every page and API call becomes
// the typed ZeroMQ request the CLI sends: over CURVE with this deployment's
// client key (the key `loom` presents) and the session's bearer token, so the
// services check role, tenant, zones and revocation, and audit, exactly as
// for the CLI. Endpoints are read from endpoints.json at each call (a
// restarted service is found where the watcher put it).
// Thread-safe: the HTTPS workers share one backend; each call checks a client
// socket out of a per-endpoint pool and returns it when the call succeeded.
#pragma once

#include "libs/layout/layout.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/envelope.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace google::protobuf {
class Message;
}
namespace zmq {
class context_t;
}
namespace loom::wire {
class client;
}

namespace loom::console {

class backend {
 public:
  // `timeout`: how long one request waits (2 s: services answer in ms).
  backend(zmq::context_t& ctx, layout::paths p, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  ~backend();

  // One request to `service` ("scheduler", "trainer", ...) under `token`:
  // the reply (ok or the service's error), or unavailable when it is not
  // running or does not answer.
  result<wire::reply> call(const std::string& service, const google::protobuf::Message& req, const std::string& token);

  // The reply parsed as M; the service's own error otherwise.
  template <class M>
  result<M> typed(const std::string& service, const google::protobuf::Message& req, const std::string& token) {
    auto rep = call(service, req, token);
    if (!rep) return rep.err();
    if (!rep->ok()) return make_error(rep->code, service + ": " + rep->message);
    M m;
    if (rep->type != M::descriptor()->full_name() || !m.ParseFromString(rep->body))
      return make_error(errc::internal, service + " answered with " + rep->type);
    return m;
  }

  const layout::paths& paths() const { return paths_; }

 private:
  zmq::context_t& ctx_;
  layout::paths paths_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::map<std::string, std::vector<std::unique_ptr<wire::client>>> idle_;  // endpoint -> clients
};

}  // namespace loom::console
