// Test support for the web console (header-only, tests only): an HTTPS client
// that trusts exactly the console's own certificate, logs in with a token,
// keeps the session cookie and CSRF token, and a raw TLS handshake with a
// chosen protocol range (to show what the console refuses). One thread each.
#pragma once

#include "tests/support/cluster.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace loom::test {

// The console's port and certificate in a cluster's data dir.
inline int console_port(const cluster& c) {
  const auto& d = c.ep("console").data;  // tcp://127.0.0.1:PORT
  return std::stoi(d.substr(d.rfind(':') + 1));
}
inline std::string console_cert(const cluster& c) { return c.home.path() + "/console/tls/cert.pem"; }

struct console_session {
  int port = 0;
  std::string ca, cookie, csrf;
  nlohmann::json who;

  std::unique_ptr<httplib::SSLClient> client() const {
    auto cli = std::make_unique<httplib::SSLClient>("127.0.0.1", port);
    cli->set_ca_cert_path(ca.c_str());
    cli->enable_server_certificate_verification(true);
    cli->set_connection_timeout(5);
    cli->set_read_timeout(30);
    return cli;
  }
  httplib::Headers headers(const httplib::Headers& extra = {}) const {
    httplib::Headers h = extra;
    if (!cookie.empty()) h.emplace("Cookie", cookie);
    return h;
  }
  // status and parsed body (null when not JSON); -1 when no reply.
  std::pair<int, nlohmann::json> get(const std::string& path, const httplib::Headers& extra = {}) const {
    auto cli = client();
    auto r = cli->Get(path.c_str(), headers(extra));
    if (!r) return {-1, nullptr};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }
  std::pair<int, nlohmann::json> post(const std::string& path, const nlohmann::json& body = nlohmann::json::object(),
                                      httplib::Headers extra = {}, bool with_csrf = true) const {
    auto cli = client();
    if (with_csrf && !csrf.empty()) extra.emplace("X-CSRF-Token", csrf);
    auto r = cli->Post(path.c_str(), headers(extra), body.dump(), "application/json");
    if (!r) return {-1, nullptr};
    return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
  }
};

// Logs in with `token`: the session (cookie, csrf) and the raw Set-Cookie
// header in *set_cookie; status in *status.
inline console_session console_login(const cluster& c, const std::string& token, int* status = nullptr,
                                     std::string* set_cookie = nullptr) {
  console_session s;
  s.port = console_port(c);
  s.ca = console_cert(c);
  auto cli = s.client();
  auto r = cli->Post("/api/login", nlohmann::json{{"token", token}}.dump(), "application/json");
  if (status) *status = r ? r->status : -1;
  if (!r || r->status != 200) return s;
  const auto sc = r->get_header_value("Set-Cookie");
  if (set_cookie) *set_cookie = sc;
  s.cookie = sc.substr(0, sc.find(';'));
  s.who = nlohmann::json::parse(r->body, nullptr, false);
  s.csrf = s.who.value("csrf", "");
  return s;
}

// A session's live stream (GET /api/events) read into a buffer on a thread
// of its own. The thread ends at the stream's next piece after stop(): log
// the session out first, which ends the stream within one tick.
class event_stream {
 public:
  explicit event_stream(const console_session& s) : s_(s), thread_([this] {
    auto cli = s_.client();
    cli->Get("/api/events", s_.headers(), [this](const char* data, std::size_t n) {
      std::lock_guard lk(mu_);
      buffer_.append(data, n);
      return !stop_.load();
    });
  }) {}
  ~event_stream() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool seen(const std::string& what) const {
    std::lock_guard lk(mu_);
    return buffer_.find(what) != std::string::npos;
  }
  // Polls seen(what) until it holds or `timeout` passes; whether it held.
  bool wait_for(const std::string& what, std::chrono::milliseconds timeout) const {
    for (auto until = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < until;) {
      if (seen(what)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return seen(what);
  }

 private:
  console_session s_;
  mutable std::mutex mu_;
  std::string buffer_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A TLS handshake with 127.0.0.1:port allowing only versions [min, max]:
// true when it completes.
inline bool tls_handshake(int port, int min_version, int max_version) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(ctx, min_version);
  SSL_CTX_set_max_proto_version(ctx, max_version);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    ok = SSL_connect(ssl) == 1;
    if (ok) SSL_shutdown(ssl);
    SSL_free(ssl);
  }
  ::close(fd);
  SSL_CTX_free(ctx);
  return ok;
}

}  // namespace loom::test
