#include "libs/crypto/encoding.hpp"

namespace loom::crypto {
namespace {
constexpr char hexd[] = "0123456789abcdef";
constexpr char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
int b64_val(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}
}  // namespace

std::string to_hex(std::string_view bytes) {
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    s += hexd[c >> 4];
    s += hexd[c & 15];
  }
  return s;
}

result<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2) return make_error(errc::invalid_argument, "hex string has odd length");
  std::string out(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    int hi = hex_val(hex[2 * i]), lo = hex_val(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return make_error(errc::invalid_argument, "not a hex digit at offset " + std::to_string(2 * i));
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

std::string base64url_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto u = [&](std::size_t k) { return static_cast<unsigned char>(bytes[k]); };
  for (; i + 3 <= bytes.size(); i += 3) {
    unsigned v = u(i) << 16 | u(i + 1) << 8 | u(i + 2);
    out += b64[v >> 18 & 63];
    out += b64[v >> 12 & 63];
    out += b64[v >> 6 & 63];
    out += b64[v & 63];
  }
  std::size_t rest = bytes.size() - i;
  if (rest == 1) {
    unsigned v = u(i) << 16;
    out += b64[v >> 18 & 63];
    out += b64[v >> 12 & 63];
  } else if (rest == 2) {
    unsigned v = u(i) << 16 | u(i + 1) << 8;
    out += b64[v >> 18 & 63];
    out += b64[v >> 12 & 63];
    out += b64[v >> 6 & 63];
  }
  return out;
}

result<std::string> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1) return make_error(errc::invalid_argument, "base64url length is impossible");
  std::string out;
  out.reserve(text.size() * 3 / 4);
  unsigned acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    int v = b64_val(text[i]);
    if (v < 0)
      return make_error(errc::invalid_argument, "not a base64url character at offset " + std::to_string(i));
    acc = acc << 6 | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>(acc >> bits & 0xff);
    }
  }
  // Leftover bits must be zero, so every text has exactly one decoding.
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
    return make_error(errc::invalid_argument, "base64url has non-zero trailing bits");
  return out;
}

}  // namespace loom::crypto
