// Where a deployment listens and what it tells others to connect to (issue 26
// item 1): `loom up --listen ADDR --advertise HOST --ports FIRST-LAST`, kept in
// endpoints.json like --trainers. Loopback is the default: listen and
// advertise 127.0.0.1, any free port.
//
// endpoints.json holds every endpoint in its advertised form (tcp://HOST:PORT
// with HOST = advertise), because that is what the deployment's own CLI, its
// peers and the cloud connect to. A server binds bind_of(net, advertised) and
// reports advertised(net, what it bound), so a service listening on 0.0.0.0
// never tells anyone to connect to 0.0.0.0. With the default network both are
// the identity. Value types and pure functions; any thread.
#pragma once

#include "libs/status/status.hpp"

#include <string>
#include <utility>

namespace loom::layout {

struct network {
  std::string listen = "127.0.0.1";     // an IPv4 address of this host, or 0.0.0.0 (every interface)
  std::string advertise = "127.0.0.1";  // the host name or address other hosts reach this one at
  int first_port = 0, last_port = 0;    // the range every listener's port comes from; 0 = any free port

  bool is_default() const { return listen == "127.0.0.1" && advertise == "127.0.0.1" && first_port == 0; }
  bool has_range() const { return first_port > 0; }
  std::string ports() const;  // "7400-7499", or "" without a range
};

// The option values checked one by one: invalid_argument naming the option and
// the value. --listen: an IPv4 literal (0.0.0.0 = every interface; IPv6 is
// refused by name, the services' sockets are IPv4). --advertise: an IPv4
// literal or a DNS name, never a wildcard. --ports: FIRST-LAST, 1024..65535.
status check_listen(const std::string& value);
status check_advertise(const std::string& value);
result<std::pair<int, int>> parse_port_range(const std::string& value);

// The combination: a wildcard --listen needs --advertise; a loopback --listen
// cannot be reached at a non-loopback --advertise. invalid_argument naming both.
status check_network(const network& n);

// "tcp://H:P" or "H:P" with H replaced by `host` (scheme kept). `endpoint`
// unchanged when it has no ":PORT".
std::string with_host(const std::string& endpoint, const std::string& host);
// The host of "tcp://H:P" or "H:P" ("" when there is none).
std::string host_of(const std::string& endpoint);

// Where to bind an endpoint advertised as `advertised`: its host replaced by
// n.listen when it is n.advertise; anything else (a test's explicit bind) as is.
std::string bind_of(const network& n, const std::string& advertised);
// What to tell others about an endpoint bound as `bound` (a socket's last
// endpoint, e.g. tcp://0.0.0.0:7403): its host replaced by n.advertise when
// it is n.listen or a wildcard; anything else as is.
std::string advertised(const network& n, const std::string& bound);

}  // namespace loom::layout
