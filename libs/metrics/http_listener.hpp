// The /metrics HTTP listener: one thread, one epoll loop, non-blocking
// sockets. It replaces prometheus-cpp's civetweb exposer, whose worker
// threads each block on one connection until its request arrives: 223 idle
// connections were enough to starve every scrape (issue #13, item 22). Here
// an idle connection costs a file descriptor and nothing else, and the limits
// below bound even that:
//   * at most max_connections open; a new one past that closes the oldest
//     connection still waiting for its request (one that asked nothing);
//   * a request head must arrive within head_timeout of the accept, and the
//     reply must be taken within write_timeout, or the connection is closed;
//   * request heads over max_head_bytes get 431; one request per connection
//     (Connection: close), so no keep-alive connection idles between scrapes.
// GET or HEAD /metrics answers render()'s text; other paths 404, other
// methods 405. The listener owns its thread and sockets; render is called on
// that thread and must be thread-safe with respect to the callers' updates.
#pragma once

#include "libs/status/status.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace loom::metrics {

struct http_limits {
  // An fd and ~1 KiB each: far above the few scrapers of one service, far
  // below the 1,024-descriptor default the service also needs for ZeroMQ and
  // its database.
  std::size_t max_connections = 512;
  // A scraper sends its request at once; 5 s forgives a loaded machine.
  std::chrono::milliseconds head_timeout{5000};
  // Replies are a few hundred KiB at most; a reader that stalls 5 s is gone.
  std::chrono::milliseconds write_timeout{5000};
  // Prometheus's request head is ~300 bytes.
  std::size_t max_head_bytes = 8192;
};

class http_listener {
 public:
  // Listens on `bind` ("127.0.0.1:0" picks a free port; "[::1]:9100" for
  // IPv6) and serves until destroyed. unavailable when the address cannot be
  // bound (port taken), invalid_argument when `bind` is not host:port.
  static result<std::unique_ptr<http_listener>> start(const std::string& bind, std::function<std::string()> render,
                                                      http_limits limits = {});
  ~http_listener();  // stops the thread and closes every connection
  http_listener(const http_listener&) = delete;
  http_listener& operator=(const http_listener&) = delete;

  int port() const;
  // Connections open right now (tests).
  std::size_t open_connections() const;

 private:
  struct impl;
  explicit http_listener(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace loom::metrics
