#include "libs/collective/frame.hpp"

#include <cstdio>

namespace loom::collective {
namespace {

constexpr std::uint32_t magic = 0x3141524cu;  // "LRA1" read as a little-endian u32

template <class T>
void put(unsigned char* out, std::size_t at, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out[at + i] = static_cast<unsigned char>(v >> (8 * i));
}

template <class T>
T get(const unsigned char* in, std::size_t at) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(in[at + i]) << (8 * i);
  return v;
}

}  // namespace

void encode_header(const frame_header& h, void* out) {
  auto* p = static_cast<unsigned char*>(out);
  put<std::uint32_t>(p, 0, magic);
  put<std::uint32_t>(p, 4, h.sender);
  put<std::uint32_t>(p, 8, h.world);
  put<std::uint32_t>(p, 12, static_cast<std::uint32_t>(h.ph));
  put<std::uint64_t>(p, 16, h.generation);
  put<std::uint64_t>(p, 24, h.call);
  put<std::uint32_t>(p, 32, h.step);
  put<std::uint32_t>(p, 36, h.chunk);
  put<std::uint64_t>(p, 40, h.offset);
  put<std::uint64_t>(p, 48, h.count);
  put<std::uint64_t>(p, 56, h.total);
}

result<frame_header> decode_header(const void* frame, std::size_t size) {
  if (size < frame_header_bytes)
    return make_error(errc::corruption, "short ring frame of " + std::to_string(size) +
                                            " bytes (the header alone is " +
                                            std::to_string(frame_header_bytes) + ")");
  const auto* p = static_cast<const unsigned char*>(frame);
  const auto m = get<std::uint32_t>(p, 0);
  if (m != magic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", m);
    return make_error(errc::corruption,
                      std::string("not a ring frame (magic ") + hex + ", expected \"LRA1\")");
  }
  frame_header h;
  h.sender = get<std::uint32_t>(p, 4);
  h.world = get<std::uint32_t>(p, 8);
  const auto ph = get<std::uint32_t>(p, 12);
  h.generation = get<std::uint64_t>(p, 16);
  h.call = get<std::uint64_t>(p, 24);
  h.step = get<std::uint32_t>(p, 32);
  h.chunk = get<std::uint32_t>(p, 36);
  h.offset = get<std::uint64_t>(p, 40);
  h.count = get<std::uint64_t>(p, 48);
  h.total = get<std::uint64_t>(p, 56);
  if (ph > 1)
    return make_error(errc::corruption, "ring frame from rank " + std::to_string(h.sender) +
                                            " has unknown phase " + std::to_string(ph));
  h.ph = static_cast<phase>(ph);
  // count <= size / 4 first, so count * 4 cannot overflow.
  const std::size_t payload = size - frame_header_bytes;
  if (h.count > payload / 4 || payload != h.count * 4)
    return make_error(errc::corruption, "ring frame from rank " + std::to_string(h.sender) + " announces " +
                                            with_commas(h.count) + " floats but carries " +
                                            with_commas(payload) + " payload bytes");
  return h;
}

std::string with_commas(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string describe_position(const frame_header& h) {
  return std::string(h.ph == phase::reduce_scatter ? "reduce-scatter" : "all-gather") + " step " +
         std::to_string(h.step) + " chunk " + std::to_string(h.chunk);
}

}  // namespace loom::collective
