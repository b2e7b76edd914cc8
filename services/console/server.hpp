// server: the console's HTTPS listener (cpp-httplib over OpenSSL, TLS 1.3
// only). It serves the embedded front end, logs browsers in with a bearer
// token (verified here against the deployment's token key, then sent with
// every request so the services verify it again), keeps their sessions in a
// cookie (HttpOnly, Secure, SameSite=Strict), demands the session's CSRF
// token and a same-origin request on every POST, and hands each API call to
// api.hpp. /api/events is a server-sent-event stream (live.hpp) that asks
// the services again whenever the scheduler's change events say something
// changed (change_feed.hpp), and every 5 s for what changes without an event.
// Owns a worker thread pool; start() returns once listening, the destructor
// stops and joins it (bounded by the live streams' 1 s wait).
#pragma once

#include "libs/layout/layout.hpp"
#include "libs/status/status.hpp"
#include "services/console/tls.hpp"

#include <memory>
#include <string>
#include <vector>

namespace zmq {
class context_t;
}
namespace loom::audit {
class emitter;
}
namespace loom::metrics {
class service_metrics;
}

namespace loom::console {

class change_feed;

struct server_options {
  std::string host = "127.0.0.1";  // where to listen
  int port = 0;                    // 0 = any free port
  cert_files tls;
  layout::paths paths;
  std::vector<std::string> template_dirs;
  std::string zone;  // for the audit records of log-ins
  // At most this many live streams at once (each holds a worker): 503 beyond.
  int max_streams = 64;
  int workers = 96;
  // The scheduler's change events (change_feed.hpp): a live stream asks the
  // services again when one arrives. Null: every 200 ms instead (tests).
  change_feed* feed = nullptr;
};

class server {
 public:
  // Binds and starts serving. unavailable when the port cannot be bound.
  static result<std::unique_ptr<server>> start(zmq::context_t& ctx, server_options opt, audit::emitter* audit,
                                               metrics::service_metrics* metrics);
  ~server();
  int port() const;

  struct impl;

 private:
  explicit server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

}  // namespace loom::console
