// write_gguf_file: header and table built in memory, tensor data encoded in
// chunks and streamed through a staged_file (temp file, fsync, rename).
#include "libs/export/gguf.hpp"

#include "libs/export/quant.hpp"
#include "libs/export/staging.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <set>

namespace loom::exporter {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is written little-endian");

// Values encoded per write: a multiple of the q8_0 block, a few hundred KB of output.
constexpr std::size_t chunk_values = 64 * 1024;
constexpr std::uint64_t default_alignment = 32;  // ggml's GGUF_DEFAULT_ALIGNMENT
// Largest finite half; q8_0's scale is max|x| / 127 as a half.
constexpr float f16_max = 65504.0f;

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_string(std::string& out, std::string_view s) {
  put<std::uint64_t>(out, s.size());
  out.append(s);
}

void put_element(std::string& out, const gguf_value& v, std::size_t i) {
  const auto n = [&] { return v.ints[i]; };
  switch (v.elem) {
    case gguf_value_type::u8: case gguf_value_type::boolean: put<std::uint8_t>(out, static_cast<std::uint8_t>(n())); break;
    case gguf_value_type::i8: put<std::int8_t>(out, static_cast<std::int8_t>(n())); break;
    case gguf_value_type::u16: put<std::uint16_t>(out, static_cast<std::uint16_t>(n())); break;
    case gguf_value_type::i16: put<std::int16_t>(out, static_cast<std::int16_t>(n())); break;
    case gguf_value_type::u32: put<std::uint32_t>(out, static_cast<std::uint32_t>(n())); break;
    case gguf_value_type::i32: put<std::int32_t>(out, static_cast<std::int32_t>(n())); break;
    case gguf_value_type::u64: put<std::uint64_t>(out, static_cast<std::uint64_t>(n())); break;
    case gguf_value_type::i64: put<std::int64_t>(out, n()); break;
    case gguf_value_type::f32: put<float>(out, static_cast<float>(v.floats[i])); break;
    case gguf_value_type::f64: put<double>(out, v.floats[i]); break;
    case gguf_value_type::string: put_string(out, v.strings[i]); break;
    case gguf_value_type::array: break;  // refused by check_value
  }
}

std::optional<error> check_value(const gguf_kv& e) {
  const gguf_value& v = e.value;
  const auto bad = [&](const std::string& why) { return make_error(errc::invalid_argument, "GGUF metadata '" + e.key + "': " + why); };
  if (v.elem == gguf_value_type::array) return bad("arrays of arrays are not supported");
  if (!v.is_array() && v.type != v.elem) return bad("a scalar's element type must be its type");
  if (!v.is_array() && v.size() != 1) return bad("a scalar holds exactly one value");
  const bool is_float = v.elem == gguf_value_type::f32 || v.elem == gguf_value_type::f64;
  const bool is_string = v.elem == gguf_value_type::string;
  if (v.size() != (is_float ? v.floats.size() : is_string ? v.strings.size() : v.ints.size()))
    return bad("values are held in the vector of another type");
  return std::nullopt;
}

std::string header(std::span<const gguf_kv> kv, std::span<const gguf_tensor_in> tensors,
                   std::span<const std::uint64_t> offsets) {
  std::string h;
  h.append("GGUF");
  put<std::uint32_t>(h, 3);
  put<std::uint64_t>(h, tensors.size());
  put<std::uint64_t>(h, kv.size());
  for (const auto& e : kv) {
    put_string(h, e.key);
    put<std::uint32_t>(h, static_cast<std::uint32_t>(e.value.type));
    if (e.value.is_array()) {
      put<std::uint32_t>(h, static_cast<std::uint32_t>(e.value.elem));
      put<std::uint64_t>(h, e.value.size());
    }
    for (std::size_t i = 0; i < e.value.size(); ++i) put_element(h, e.value, i);
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    put_string(h, tensors[i].name);
    put<std::uint32_t>(h, static_cast<std::uint32_t>(tensors[i].ne.size()));
    for (auto d : tensors[i].ne) put<std::uint64_t>(h, d);
    put<std::uint32_t>(h, static_cast<std::uint32_t>(tensors[i].type));
    put<std::uint64_t>(h, offsets[i]);
  }
  return h;
}

std::uint64_t align_up(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }

// Encodes values[begin, begin + n) of tensor t into `out`; invalid_argument
// naming the tensor and index for a value the type cannot hold.
status encode(const gguf_tensor_in& t, std::size_t begin, std::size_t n, std::vector<std::byte>& out) {
  const float* x = t.values.data() + begin;
  const auto bad = [&](std::size_t i, const std::string& why) {
    return make_error(errc::invalid_argument, "tensor '" + t.name + "' value " + std::to_string(begin + i) + " (" +
                                                  std::to_string(x[i]) + ") " + why);
  };
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return bad(i, "is not finite");
  switch (t.type) {
    case gguf_type::f32:
      out.resize(n * 4);
      std::memcpy(out.data(), x, n * 4);
      break;
    case gguf_type::f16:
      out.resize(n * 2);
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t h = f32_to_f16(x[i]);
        if ((h & 0x7FFFu) == 0x7C00u) return bad(i, "is out of f16's range (|x| <= 65504)");
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      break;
    case gguf_type::q8_0:
      for (std::size_t i = 0; i < n; ++i)
        if (std::fabs(x[i]) / 127.0f > f16_max) return bad(i, "is too large for a q8_0 scale");
      out.resize(n / q8_0_block * q8_0_block_bytes);
      quantize_q8_0({x, n}, out);
      break;
  }
  return ok_status();
}

}  // namespace

status write_gguf_file(const std::filesystem::path& path, std::span<const gguf_kv> kv,
                       std::span<const gguf_tensor_in> tensors, const gguf_fault& fault) {
  std::uint64_t alignment = default_alignment;
  std::set<std::string_view> seen;
  for (const auto& e : kv) {
    if (auto err = check_value(e)) return *err;
    if (!seen.insert(e.key).second) return make_error(errc::invalid_argument, "GGUF metadata key '" + e.key + "' given twice");
    if (e.key == "general.alignment") {
      if (e.value.type != gguf_value_type::u32 || e.value.ints[0] <= 0 ||
          !std::has_single_bit(static_cast<std::uint64_t>(e.value.ints[0])))
        return make_error(errc::invalid_argument, "general.alignment must be a u32 power of two");
      alignment = static_cast<std::uint64_t>(e.value.ints[0]);
    }
  }
  std::vector<std::uint64_t> offsets;
  std::uint64_t end = 0;
  seen.clear();
  for (const auto& t : tensors) {
    const auto bad = [&](const std::string& why) { return make_error(errc::invalid_argument, "GGUF tensor '" + t.name + "': " + why); };
    if (!seen.insert(t.name).second) return bad("given twice");
    if (t.ne.empty() || t.ne.size() > 4) return bad("must have 1 to 4 dimensions");
    std::uint64_t count = 1;
    for (auto d : t.ne) count *= d;
    if (count != t.values.size()) return bad("shape holds " + std::to_string(count) + " values, given " + std::to_string(t.values.size()));
    if (t.type == gguf_type::q8_0 && t.ne[0] % q8_0_block != 0) return bad("q8_0 needs rows (ne[0]) in whole blocks of 32");
    offsets.push_back(align_up(end, alignment));
    end = offsets.back() + *gguf_bytes(t.type, count);
  }

  auto file = staged_file::create(path);
  if (!file) return file.err();
  std::string h = header(kv, tensors, offsets);
  const std::uint64_t data_start = align_up(h.size(), alignment);
  h.resize(data_start, '\0');
  if (auto st = file->write(h); !st) return st;
  std::vector<std::byte> buf;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (fault)
      if (auto st = fault(t.name); !st) return st;
    const std::string pad(data_start + offsets[i] - file->written(), '\0');
    if (auto st = file->write(pad); !st) return st;
    for (std::size_t begin = 0; begin < t.values.size(); begin += chunk_values) {
      const std::size_t n = std::min(chunk_values, t.values.size() - begin);
      if (auto st = encode(t, begin, n, buf); !st) return st;
      if (auto st = file->write(buf); !st) return st;
    }
  }
  // ggml pads the last tensor too, so the file ends on the alignment.
  const std::string tail(data_start + align_up(end, alignment) - file->written(), '\0');
  if (auto st = file->write(tail); !st) return st;
  return file->commit();
}

}  // namespace loom::exporter
