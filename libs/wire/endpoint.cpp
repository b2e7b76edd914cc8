#include "libs/wire/endpoint.hpp"

#include <charconv>

namespace loom::wire {

bool valid_tcp_endpoint(std::string_view endpoint, endpoint_use use) {
  constexpr std::string_view scheme = "tcp://";
  if (!endpoint.starts_with(scheme)) return false;
  const std::string_view rest = endpoint.substr(scheme.size());
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view host = rest.substr(0, colon), port = rest.substr(colon + 1);
  if (host.empty() || host.find_first_of(" \t\r\n/") != std::string_view::npos) return false;
  const bool bind = use == endpoint_use::bind;
  if (host == "*" && !bind) return false;
  if (port == "*") return bind;
  unsigned n = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
  return !port.empty() && ec == std::errc() && end == port.data() + port.size() && n >= 1 && n <= 65535;
}

}  // namespace loom::wire
