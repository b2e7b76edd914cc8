#include "libs/media/reject.hpp"

#include <string>

namespace loom::media {

std::string_view reason_code(reject_reason r) {
  switch (r) {
    case reject_reason::wrong_magic: return "wrong_magic";
    case reject_reason::truncated: return "truncated";
    case reject_reason::corrupt: return "corrupt";
    case reject_reason::too_large: return "too_large";
    case reject_reason::bomb: return "bomb";
    case reject_reason::unsupported_colour: return "unsupported_colour";
    case reject_reason::extension_mismatch: return "extension_mismatch";
    case reject_reason::unsupported_format: return "unsupported_format";
    case reject_reason::too_long: return "too_long";
    case reject_reason::too_short: return "too_short";
    case reject_reason::too_many_channels: return "too_many_channels";
    case reject_reason::bad_sample_rate: return "bad_sample_rate";
    case reject_reason::silent: return "silent";
  }
  return "unknown";
}

errc reason_errc(reject_reason r) {
  switch (r) {
    case reject_reason::wrong_magic:
    case reject_reason::extension_mismatch:
    case reject_reason::too_short:
    case reject_reason::bad_sample_rate:
    case reject_reason::silent: return errc::invalid_argument;
    case reject_reason::truncated:
    case reject_reason::corrupt: return errc::corruption;
    case reject_reason::too_large:
    case reject_reason::bomb:
    case reject_reason::too_long:
    case reject_reason::too_many_channels: return errc::resource_exhausted;
    case reject_reason::unsupported_colour:
    case reject_reason::unsupported_format: return errc::unimplemented;
  }
  return errc::internal;
}

error reject(reject_reason r, std::string_view detail) {
  std::string msg(reason_code(r));
  msg += ": ";
  msg += detail;
  return make_error(reason_errc(r), std::move(msg));
}

std::optional<reject_reason> reason_of(const error& e) {
  for (int i = 0; i < reject_reason_count; ++i) {
    const auto r = static_cast<reject_reason>(i);
    const auto code = reason_code(r);
    if (e.code == reason_errc(r) && e.message.size() > code.size() && e.message.compare(0, code.size(), code) == 0 &&
        e.message[code.size()] == ':')
      return r;
  }
  return std::nullopt;
}

}  // namespace loom::media
