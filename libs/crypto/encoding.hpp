// Text encodings for binary values: lower-case hex and unpadded base64url.
#pragma once

#include "libs/status/status.hpp"

#include <string>
#include <string_view>

namespace loom::crypto {

std::string to_hex(std::string_view bytes);
result<std::string> from_hex(std::string_view hex);
std::string base64url_encode(std::string_view bytes);  // RFC 4648 §5, no padding
result<std::string> base64url_decode(std::string_view text);  // rejects padding and stray chars

}  // namespace loom::crypto
