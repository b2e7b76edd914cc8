#include "libs/metrics/http_listener.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <unordered_map>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace loom::metrics {
namespace {
using clock = std::chrono::steady_clock;

// epoll data ids below first_conn_id are the listener's own descriptors.
constexpr std::uint64_t listen_id = 0, wake_id = 1, first_conn_id = 2;
// How long accepting pauses when the process is out of descriptors (EMFILE):
// the listen socket stays readable, so retrying at once would spin.
constexpr std::chrono::milliseconds accept_pause{100};
// The loop wakes at least this often to close connections past their deadline.
constexpr int tick_ms = 100;

struct conn {
  int fd = -1;
  std::string in, out;
  std::size_t sent = 0;
  bool replying = false;
  clock::time_point accepted, deadline;
};

std::string status_line(int code) {
  switch (code) {
    case 200: return "200 OK";
    case 400: return "400 Bad Request";
    case 404: return "404 Not Found";
    case 405: return "405 Method Not Allowed";
    case 431: return "431 Request Header Fields Too Large";
    case 500: return "500 Internal Server Error";
    default: return "505 HTTP Version Not Supported";
  }
}

std::string response(int code, const std::string& body, bool head_only, bool metrics) {
  std::string r = "HTTP/1.1 " + status_line(code) + "\r\nContent-Type: " +
                   (metrics ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8") +
                   "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n";
  if (code == 405) r += "Allow: GET, HEAD\r\n";
  r += "\r\n";
  if (!head_only) r += body;
  return r;
}

// Not files::errno_error: that one sorts file errors (EACCES permission_denied,
// ENOSPC resource_exhausted, the rest internal); a listener that cannot get its
// socket is unavailable whatever errno says (a taken port included).
error socket_error(const std::string& what) { return make_error(errc::unavailable, what + ": " + std::strerror(errno)); }

}  // namespace

struct http_listener::impl {
  http_limits limits;
  std::function<std::string()> render;
  int listen_fd = -1, epoll_fd = -1, wake_fd = -1, bound_port = 0;
  std::unordered_map<std::uint64_t, conn> conns;
  std::uint64_t next_id = first_conn_id;
  std::atomic<std::size_t> open{0};
  std::atomic<bool> stop{false};
  bool accept_paused = false;
  clock::time_point resume_accept{};
  std::thread thread;

  ~impl() {
    for (auto& [id, c] : conns) ::close(c.fd);
    for (int fd : {listen_fd, epoll_fd, wake_fd})
      if (fd >= 0) ::close(fd);
  }

  void watch(int op, int fd, std::uint64_t id, std::uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = id;
    ::epoll_ctl(epoll_fd, op, fd, &ev);
  }

  void close_conn(std::uint64_t id) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, it->second.fd, nullptr);
    ::close(it->second.fd);
    conns.erase(it);
    open.store(conns.size());
  }

  // At capacity: the oldest connection that has not sent a request goes.
  bool evict_oldest_waiting() {
    std::uint64_t victim = 0;
    clock::time_point oldest = clock::time_point::max();
    for (const auto& [id, c] : conns)
      if (!c.replying && c.accepted < oldest) oldest = c.accepted, victim = id;
    if (victim == 0) return false;
    close_conn(victim);
    return true;
  }

  void accept_all(clock::time_point now) {
    for (;;) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          accept_paused = true;
          resume_accept = now + accept_pause;
          watch(EPOLL_CTL_MOD, listen_fd, listen_id, 0);
        }
        return;  // EAGAIN: all taken
      }
      if (conns.size() >= limits.max_connections && !evict_oldest_waiting()) {
        ::close(fd);  // every slot is busy replying: refuse the newcomer
        continue;
      }
      const std::uint64_t id = next_id++;
      conn c;
      c.fd = fd;
      c.accepted = now;
      c.deadline = now + limits.head_timeout;
      conns.emplace(id, std::move(c));
      open.store(conns.size());
      watch(EPOLL_CTL_ADD, fd, id, EPOLLIN | EPOLLRDHUP);
    }
  }

  void start_reply(std::uint64_t id, conn& c, int code, const std::string& body, bool head_only, bool metrics,
                   clock::time_point now) {
    c.out = response(code, body, head_only, metrics);
    c.in.clear();
    c.replying = true;
    c.deadline = now + limits.write_timeout;
    watch(EPOLL_CTL_MOD, c.fd, id, EPOLLOUT);
    on_writable(id, c);
  }

  void on_readable(std::uint64_t id, conn& c, clock::time_point now) {
    char buf[4096];
    bool ended = false;  // the peer closed (or reset) its side
    for (;;) {
      ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        c.in.append(buf, static_cast<std::size_t>(n));
        if (c.in.size() > limits.max_head_bytes) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      ended = true;
      break;
    }
    std::size_t end = c.in.find("\r\n\r\n");
    if (end == std::string::npos) end = c.in.find("\n\n");
    if (end == std::string::npos) {
      if (c.in.size() > limits.max_head_bytes) start_reply(id, c, 431, "request head too large\n", false, false, now);
      else if (ended) close_conn(id);  // gone before a whole request
      return;
    }
    const std::string line = c.in.substr(0, c.in.find_first_of("\r\n"));
    const auto sp1 = line.find(' ');
    const auto sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
    if (sp2 == std::string::npos) return start_reply(id, c, 400, "bad request line\n", false, false, now);
    const std::string method = line.substr(0, sp1);
    const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string version = line.substr(sp2 + 1);
    const bool head_only = method == "HEAD";
    if (!version.starts_with("HTTP/1.")) return start_reply(id, c, 505, "HTTP/1.x only\n", false, false, now);
    if (method != "GET" && !head_only) return start_reply(id, c, 405, "GET or HEAD only\n", false, false, now);
    if (target.substr(0, target.find('?')) != "/metrics")
      return start_reply(id, c, 404, "not found: the metrics are at /metrics\n", head_only, false, now);
    std::string body;
    try {
      body = render();
    } catch (const std::exception& e) {
      return start_reply(id, c, 500, std::string("cannot render metrics: ") + e.what() + "\n", head_only, false, now);
    }
    start_reply(id, c, 200, body, head_only, true, now);
  }

  void on_writable(std::uint64_t id, conn& c) {
    while (c.sent < c.out.size()) {
      ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT brings us back
      break;
    }
    ::shutdown(c.fd, SHUT_WR);
    close_conn(id);
  }

  void expire(clock::time_point now) {
    for (auto it = conns.begin(); it != conns.end();) {
      if (now < it->second.deadline) {
        ++it;
        continue;
      }
      ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, it->second.fd, nullptr);
      ::close(it->second.fd);
      it = conns.erase(it);
    }
    open.store(conns.size());
    if (accept_paused && now >= resume_accept) {
      accept_paused = false;
      watch(EPOLL_CTL_MOD, listen_fd, listen_id, EPOLLIN);
    }
  }

  void loop() {
    epoll_event events[64];
    while (!stop.load()) {
      int n = ::epoll_wait(epoll_fd, events, 64, tick_ms);
      const auto now = clock::now();
      for (int i = 0; i < n; ++i) {
        const std::uint64_t id = events[i].data.u64;
        if (id == wake_id) continue;
        if (id == listen_id) {
          accept_all(now);
          continue;
        }
        auto it = conns.find(id);
        if (it == conns.end()) continue;  // closed earlier in this batch
        if (it->second.replying) on_writable(id, it->second);
        else on_readable(id, it->second, now);
      }
      expire(now);
    }
  }
};

http_listener::http_listener(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

http_listener::~http_listener() {
  impl_->stop.store(true);
  std::uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(impl_->wake_fd, &one, sizeof one);
  if (impl_->thread.joinable()) impl_->thread.join();
}

int http_listener::port() const { return impl_->bound_port; }
std::size_t http_listener::open_connections() const { return impl_->open.load(); }

result<std::unique_ptr<http_listener>> http_listener::start(const std::string& bind,
                                                            std::function<std::string()> render,
                                                            http_limits limits) {
  const auto colon = bind.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == bind.size())
    return make_error(errc::invalid_argument, "metrics address '" + bind + "' is not host:port");
  std::string host = bind.substr(0, colon);
  const std::string port = bind.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return make_error(errc::invalid_argument, "metrics address '" + bind + "': " + ::gai_strerror(rc));
  auto p = std::make_unique<impl>();
  p->limits = limits;
  p->render = std::move(render);
  error last = make_error(errc::unavailable, "metrics address '" + bind + "' resolves to nothing");
  for (addrinfo* a = found; a && p->listen_fd < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = socket_error("metrics listener " + bind + ": socket");
      continue;
    }
    // A restarted service rebinds its fixed port while old connections linger in TIME_WAIT.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      last = socket_error("metrics listener cannot listen on " + bind);
      ::close(fd);
      continue;
    }
    p->listen_fd = fd;
  }
  ::freeaddrinfo(found);
  if (p->listen_fd < 0) return last;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(p->listen_fd, reinterpret_cast<sockaddr*>(&ss), &len);
  p->bound_port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  p->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  p->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (p->epoll_fd < 0 || p->wake_fd < 0) return socket_error("metrics listener: epoll/eventfd");
  p->watch(EPOLL_CTL_ADD, p->listen_fd, listen_id, EPOLLIN);
  p->watch(EPOLL_CTL_ADD, p->wake_fd, wake_id, EPOLLIN);
  impl* raw = p.get();
  p->thread = std::thread([raw] { raw->loop(); });
  return std::unique_ptr<http_listener>(new http_listener(std::move(p)));
}

}  // namespace loom::metrics
