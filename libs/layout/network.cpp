#include "libs/layout/network.hpp"

#include <arpa/inet.h>

#include <cctype>
#include <charconv>

namespace loom::layout {
namespace {

bool ipv4(const std::string& v) {
  in_addr a{};
  return ::inet_pton(AF_INET, v.c_str(), &a) == 1;
}
bool ipv6(const std::string& v) {
  in6_addr a{};
  std::string s = v;
  if (s.size() > 2 && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  return ::inet_pton(AF_INET6, s.c_str(), &a) == 1;
}
bool wildcard(const std::string& h) { return h == "0.0.0.0" || h == "*"; }
bool loopback(const std::string& h) { return h == "localhost" || (ipv4(h) && h.rfind("127.", 0) == 0); }

// RFC 1123 host name: labels of letters, digits and '-', not starting or ending with '-'.
bool dns_name(const std::string& v) {
  if (v.empty() || v.size() > 253) return false;
  std::size_t start = 0;
  while (start <= v.size()) {
    const auto dot = v.find('.', start);
    const std::string label = v.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (unsigned char ch : label)
      if (!std::isalnum(ch) && ch != '-') return false;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  // All digits and dots is a malformed address, not a name.
  return v.find_first_not_of("0123456789.") != std::string::npos;
}

int parse_port(const std::string& s) {
  int n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size() ? n : -1;
}

// The ':' before the port of "tcp://H:P" / "H:P", and where the host starts.
std::pair<std::size_t, std::size_t> split(const std::string& ep) {
  const auto scheme = ep.find("://");
  const std::size_t start = scheme == std::string::npos ? 0 : scheme + 3;
  const auto colon = ep.rfind(':');
  if (colon == std::string::npos || colon < start) return {std::string::npos, start};
  return {colon, start};
}

}  // namespace

std::string network::ports() const {
  return has_range() ? std::to_string(first_port) + "-" + std::to_string(last_port) : std::string();
}

status check_listen(const std::string& value) {
  if (ipv6(value))
    return make_error(errc::invalid_argument,
                      "--listen " + value + ": IPv6 is not supported yet; give an IPv4 address of this host or 0.0.0.0");
  if (!ipv4(value))
    return make_error(errc::invalid_argument,
                      "--listen " + value + " is not an IPv4 address (an address of this host, or 0.0.0.0 for all)");
  return ok_status();
}

status check_advertise(const std::string& value) {
  if (wildcard(value) || value == "::" || value == "[::]")
    return make_error(errc::invalid_argument, "--advertise " + value +
                                                  " is a wildcard: give the address or name other hosts reach this one at");
  if (ipv6(value)) return make_error(errc::invalid_argument, "--advertise " + value + ": IPv6 is not supported yet");
  if (!ipv4(value) && !dns_name(value))
    return make_error(errc::invalid_argument, "--advertise " + value + " is neither an IPv4 address nor a host name");
  return ok_status();
}

result<std::pair<int, int>> parse_port_range(const std::string& value) {
  const auto dash = value.find('-');
  const int first = dash == std::string::npos ? -1 : parse_port(value.substr(0, dash));
  const int last = dash == std::string::npos ? -1 : parse_port(value.substr(dash + 1));
  if (first < 0 || last < 0)
    return make_error(errc::invalid_argument, "--ports " + value + " is not FIRST-LAST (e.g. 7400-7499)");
  if (first < 1024 || last > 65535 || first > last)
    return make_error(errc::invalid_argument, "--ports " + value + ": the range must lie in 1024-65535, FIRST <= LAST");
  return std::pair<int, int>{first, last};
}

status check_network(const network& n) {
  if (auto st = check_listen(n.listen); !st) return st;
  if (auto st = check_advertise(n.advertise); !st) return st;
  if (wildcard(n.listen) && loopback(n.advertise))
    return make_error(errc::invalid_argument, "--listen " + n.listen + " needs --advertise HOST: the address or name "
                                                                       "the other hosts reach this one at");
  if (loopback(n.listen) && !loopback(n.advertise))
    return make_error(errc::invalid_argument, "--advertise " + n.advertise + " with --listen " + n.listen +
                                                  ": nothing on another host can reach a loopback listener; give "
                                                  "--listen an address of this host (or 0.0.0.0)");
  return ok_status();
}

std::string with_host(const std::string& endpoint, const std::string& host) {
  const auto [colon, start] = split(endpoint);
  if (colon == std::string::npos) return endpoint;
  return endpoint.substr(0, start) + host + endpoint.substr(colon);
}

std::string host_of(const std::string& endpoint) {
  const auto [colon, start] = split(endpoint);
  return colon == std::string::npos ? std::string() : endpoint.substr(start, colon - start);
}

std::string bind_of(const network& n, const std::string& advertised_ep) {
  if (n.listen == n.advertise || host_of(advertised_ep) != n.advertise) return advertised_ep;
  return with_host(advertised_ep, n.listen);
}

std::string advertised(const network& n, const std::string& bound) {
  const std::string h = host_of(bound);
  if (h.empty() || n.listen == n.advertise) return bound;
  if (h == n.listen || wildcard(h)) return with_host(bound, n.advertise);
  return bound;
}

}  // namespace loom::layout
