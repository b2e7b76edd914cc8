// gguf.hpp's value types: names, sizes, constructors and lookups.
#include "libs/export/gguf.hpp"
#include "libs/export/quant.hpp"

#include <cstring>

namespace loom::exporter {

std::string_view to_string(gguf_type t) {
  switch (t) {
    case gguf_type::f32: return "f32";
    case gguf_type::f16: return "f16";
    case gguf_type::q8_0: return "q8_0";
  }
  return "unknown";
}

std::optional<std::uint64_t> gguf_bytes(gguf_type t, std::uint64_t count) {
  switch (t) {
    case gguf_type::f32: return count * 4;
    case gguf_type::f16: return count * 2;
    case gguf_type::q8_0:
      if (count % q8_0_block != 0) return std::nullopt;
      return count / q8_0_block * q8_0_block_bytes;
  }
  return std::nullopt;
}

std::string_view to_string(gguf_value_type t) {
  static constexpr std::string_view names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                               "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<std::uint32_t>(t);
  return i < std::size(names) ? names[i] : "unknown";
}

gguf_value gguf_value::u32(std::uint32_t v) {
  gguf_value x;
  x.type = x.elem = gguf_value_type::u32;
  x.ints = {v};
  return x;
}

gguf_value gguf_value::f32(float v) {
  gguf_value x;
  x.type = x.elem = gguf_value_type::f32;
  x.floats = {v};
  return x;
}

gguf_value gguf_value::string(std::string v) {
  gguf_value x;
  x.type = x.elem = gguf_value_type::string;
  x.strings = {std::move(v)};
  return x;
}

gguf_value gguf_value::string_array(std::vector<std::string> v) {
  gguf_value x;
  x.type = gguf_value_type::array;
  x.elem = gguf_value_type::string;
  x.strings = std::move(v);
  return x;
}

gguf_value gguf_value::i32_array(std::vector<std::int32_t> v) {
  gguf_value x;
  x.type = gguf_value_type::array;
  x.elem = gguf_value_type::i32;
  x.ints.assign(v.begin(), v.end());
  return x;
}

std::size_t gguf_value::size() const { return ints.size() + floats.size() + strings.size(); }

std::uint64_t gguf_tensor_info::count() const {
  std::uint64_t n = 1;
  for (auto d : ne) n *= d;
  return n;
}

const gguf_value* gguf_file::find(std::string_view key) const {
  for (const auto& e : kv_)
    if (e.key == key) return &e.value;
  return nullptr;
}

const gguf_tensor_info* gguf_file::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const std::byte> gguf_file::data(const gguf_tensor_info& t) const {
  const auto* base = reinterpret_cast<const std::byte*>(buffer_->data());
  return {base + data_start_ + t.offset, static_cast<std::size_t>(t.bytes)};
}

std::vector<float> dequantize(const gguf_file& f, const gguf_tensor_info& t) {
  const auto bytes = f.data(t);
  std::vector<float> out(static_cast<std::size_t>(t.count()));
  switch (t.type) {
    case gguf_type::f32:
      std::memcpy(out.data(), bytes.data(), bytes.size());
      break;
    case gguf_type::f16:
      for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      break;
    case gguf_type::q8_0:
      dequantize_q8_0(bytes, out);
      break;
  }
  return out;
}

}  // namespace loom::exporter
