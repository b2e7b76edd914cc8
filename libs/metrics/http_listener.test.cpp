#include "libs/metrics/http_listener.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

using namespace loom::metrics;
using namespace std::chrono_literals;

namespace {
using steady = std::chrono::steady_clock;

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// Everything the server sends until it closes (or `timeout` passes).
std::string read_all(int fd, std::chrono::milliseconds timeout = 3000ms) {
  std::string out;
  const auto until = steady::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

std::string request(int port, const std::string& head) {
  int fd = connect_to(port);
  REQUIRE(::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size()));
  auto r = read_all(fd);
  ::close(fd);
  return r;
}

// True when the server closed `fd` within `timeout`.
bool closed_by_server(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char ch;
  return ::recv(fd, &ch, 1, MSG_DONTWAIT) <= 0;
}

std::unique_ptr<http_listener> listen(http_limits limits = {}) {
  auto l = http_listener::start("127.0.0.1:0", [] { return std::string("loom_test_up 1\n"); }, limits);
  REQUIRE(l.ok());
  REQUIRE((*l)->port() > 0);
  return std::move(*l);
}
}  // namespace

TEST_CASE("GET and HEAD /metrics answer the rendered text and other paths and methods are refused") {
  auto l = listen();
  auto ok = request(l->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
  CHECK(ok.starts_with("HTTP/1.1 200 OK\r\n"));
  CHECK(ok.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(ok.find("Content-Length: 15\r\n") != std::string::npos);
  CHECK(ok.ends_with("\r\n\r\nloom_test_up 1\n"));
  CHECK(request(l->port(), "GET /metrics?x=1 HTTP/1.0\n\n").ends_with("loom_test_up 1\n"));
  auto head = request(l->port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  CHECK(head.starts_with("HTTP/1.1 200 OK"));
  CHECK(head.ends_with("\r\n\r\n"));
  CHECK(request(l->port(), "GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
  CHECK(request(l->port(), "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
  CHECK(request(l->port(), "garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
  CHECK(request(l->port(), "GET /metrics SPDY/3\r\n\r\n").starts_with("HTTP/1.1 505"));
  CHECK(request(l->port(), "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'a')).starts_with("HTTP/1.1 431"));
}

TEST_CASE("a scrape is answered at once while 250 idle connections are held open") {
  auto l = listen();
  std::vector<int> idle;
  for (int i = 0; i < 250; ++i) idle.push_back(connect_to(l->port()));
  for (int i = 0; i < 100 && l->open_connections() < 250; ++i) std::this_thread::sleep_for(10ms);
  CHECK(l->open_connections() == 250);
  for (int round = 0; round < 5; ++round) {
    auto t0 = steady::now();
    auto r = request(l->port(), "GET /metrics HTTP/1.1\r\n\r\n");
    auto took = steady::now() - t0;
    CHECK(r.ends_with("loom_test_up 1\n"));
    CHECK(took < 2s);
  }
  for (int fd : idle) ::close(fd);
}

TEST_CASE("a connection that sends no request is closed after the head timeout") {
  http_limits lim;
  lim.head_timeout = 300ms;
  auto l = listen(lim);
  int fd = connect_to(l->port());
  int partial = connect_to(l->port());
  REQUIRE(::send(partial, "GET /metr", 9, MSG_NOSIGNAL) == 9);  // a slow drip never finishes
  CHECK_FALSE(closed_by_server(fd, 100ms));
  CHECK(closed_by_server(fd, 2000ms));
  CHECK(closed_by_server(partial, 2000ms));
  ::close(fd);
  ::close(partial);
  for (int i = 0; i < 50 && l->open_connections() > 0; ++i) std::this_thread::sleep_for(10ms);
  CHECK(l->open_connections() == 0);
}

TEST_CASE("past max_connections a new connection closes the oldest one that has asked nothing") {
  http_limits lim;
  lim.max_connections = 8;
  auto l = listen(lim);
  std::vector<int> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(connect_to(l->port()));
    for (int k = 0; k < 100 && l->open_connections() < idle.size(); ++k) std::this_thread::sleep_for(5ms);
  }
  CHECK(l->open_connections() == 8);
  // Twenty more scrapes: each is answered, each evicting the oldest idle one.
  for (int i = 0; i < 20; ++i) CHECK(request(l->port(), "GET /metrics HTTP/1.1\r\n\r\n").ends_with("loom_test_up 1\n"));
  CHECK(closed_by_server(idle[0], 1000ms));
  CHECK(l->open_connections() <= 8);
  for (int fd : idle) ::close(fd);
}
