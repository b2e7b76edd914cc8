#include "client/up_network.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace loom::cli {
namespace {

// A TCP socket bound to addr:port (0 = any), or -1 with errno set. Held by
// the caller: ports picked together stay distinct until all are picked.
int bind_tcp(const std::string& addr, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, addr.c_str(), &a.sin_addr) != 1) {
    errno = EINVAL;
    return -1;
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;  // as ZeroMQ's listeners do: a port in TIME_WAIT is free to them
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int port_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  return ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 ? ntohs(a.sin_port) : 0;
}

}  // namespace

bool network_options_given(const context& c) {
  return c.a.get("listen") || c.a.get("advertise") || c.a.get("ports");
}

result<layout::network> network_option(const context& c, const layout::network& previous) {
  layout::network n = previous;
  const auto listen = c.a.get("listen"), adv = c.a.get("advertise"), ports = c.a.get("ports");
  if (listen) {
    if (auto st = layout::check_listen(*listen); !st) return st.err();
    n.listen = *listen;
    // A wildcard keeps the advertised address it had (check_network: loopback will not do).
    if (!adv && *listen != "0.0.0.0") n.advertise = *listen;
  }
  if (adv) {
    if (auto st = layout::check_advertise(*adv); !st) return st.err();
    n.advertise = *adv;
  }
  if (ports) {
    auto r = layout::parse_port_range(*ports);
    if (!r) return r.err();
    n.first_port = r->first;
    n.last_port = r->second;
  }
  if (auto st = layout::check_network(n); !st) return st.err();
  if (n.listen != "0.0.0.0") {  // an address of this host, or nothing can listen there
    const int fd = bind_tcp(n.listen, 0);
    if (fd < 0) {
      const int e = errno;
      return make_error(errc::invalid_argument,
                        "--listen " + n.listen + (e == EADDRNOTAVAIL ? std::string(" is not an address of this host")
                                                                     : ": cannot listen there: " + std::string(std::strerror(e))));
    }
    ::close(fd);
  }
  return n;
}

result<std::vector<int>> pick_ports(const layout::network& n, int count) {
  std::vector<int> fds, ports;
  auto done = [&] {
    for (int fd : fds) ::close(fd);
  };
  if (n.has_range()) {
    for (int p = n.first_port; p <= n.last_port && static_cast<int>(ports.size()) < count; ++p) {
      const int fd = bind_tcp(n.listen, p);
      if (fd < 0) continue;  // taken (by another program, or a stopped service's socket not yet gone)
      fds.push_back(fd);
      ports.push_back(p);
    }
  } else {
    for (int i = 0; i < count; ++i) {
      const int fd = bind_tcp(n.listen, 0);
      if (fd < 0) break;
      fds.push_back(fd);
      ports.push_back(port_of(fd));
    }
  }
  done();
  if (static_cast<int>(ports.size()) < count)
    return make_error(errc::resource_exhausted,
                      (n.has_range() ? "--ports " + n.ports() + ": " : std::string()) + "EdgeLoom needs " +
                          std::to_string(count) + " ports on " + n.listen + " here, and only " +
                          std::to_string(ports.size()) + " are free" +
                          (n.has_range() ? "; widen the range or free some of its ports" : ""));
  return ports;
}

}  // namespace loom::cli
