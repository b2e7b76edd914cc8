#include "libs/status/status.hpp"

#include <array>

namespace loom {
namespace {
constexpr std::array<std::string_view, 14> names = {
    "ok",          "invalid_argument",  "not_found",     "already_exists", "conflict",
    "corruption",  "unavailable",       "deadline_exceeded", "permission_denied",
    "unauthenticated", "resource_exhausted", "unimplemented", "device_failure", "internal"};
}  // namespace

std::string_view to_string(errc c) {
  auto i = static_cast<std::size_t>(c);
  return i < names.size() ? names[i] : std::string_view{"unknown"};
}

std::optional<errc> errc_from_string(std::string_view name) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<errc>(i);
  return std::nullopt;
}

int exit_code(errc c) {
  switch (c) {
    case errc::ok: return 0;
    case errc::permission_denied:
    case errc::unauthenticated: return 3;
    case errc::unavailable:
    case errc::deadline_exceeded: return 4;
    default: return 1;
  }
}

std::string error::to_string() const {
  return std::string(loom::to_string(code)) + ": " + message;
}

}  // namespace loom
