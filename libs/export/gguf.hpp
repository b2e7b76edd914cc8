// GGUF v3 (ggml's model file: github.com/ggml-org/ggml docs/gguf.md), the
// subset an EdgeLoom export needs: a writer that streams tensors (f32, f16,
// q8_0) into a file published atomically, and a strict reader that checks
// every length, count and offset against the file and names what is wrong.
//
// Layout: "GGUF" u32 version u64 n_tensors u64 n_kv; n_kv × (string key,
// u32 type, value); n_tensors × (string name, u32 n_dims, u64 ne[n_dims],
// u32 ggml_type, u64 offset); zero padding to `alignment`; tensor data, each
// at data_start + offset (a multiple of alignment). Strings are u64 length +
// bytes; all integers little-endian. ne[0] is the innermost dimension, so a
// row-major (rows, cols) matrix has ne = {cols, rows}.
// Stateless functions; a gguf_file is an immutable value (copies share one
// buffer), safe to read from any thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::exporter {

// ggml_type numbers of the tensor encodings we write and read.
enum class gguf_type : std::uint32_t { f32 = 0, f16 = 1, q8_0 = 8 };
std::string_view to_string(gguf_type t);  // "f32", "f16", "q8_0"
// Bytes of `count` elements; nullopt when count does not fill whole q8_0 blocks.
std::optional<std::uint64_t> gguf_bytes(gguf_type t, std::uint64_t count);

// GGUF metadata value types (gguf_type in ggml's gguf.h).
enum class gguf_value_type : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
std::string_view to_string(gguf_value_type t);  // "u32", "string", ...

// One metadata value: a scalar (one element) or an array of one element type
// (nested arrays are not supported). Integers and booleans are held in
// `ints` (u64 values as their bit pattern), floats in `floats`, strings in
// `strings`; only the vector of the element type is filled.
struct gguf_value {
  gguf_value_type type = gguf_value_type::u32;  // array for arrays
  gguf_value_type elem = gguf_value_type::u32;  // the element type (== type for scalars)
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;

  static gguf_value u32(std::uint32_t v);
  static gguf_value f32(float v);
  static gguf_value string(std::string v);
  static gguf_value string_array(std::vector<std::string> v);
  static gguf_value i32_array(std::vector<std::int32_t> v);
  bool is_array() const { return type == gguf_value_type::array; }
  std::size_t size() const;  // elements (1 for a scalar)
  bool operator==(const gguf_value&) const = default;
};

struct gguf_kv {
  std::string key;
  gguf_value value;
};

// A tensor's entry in the file's table.
struct gguf_tensor_info {
  std::string name;
  std::vector<std::uint64_t> ne;  // ne[0] innermost
  gguf_type type = gguf_type::f32;
  std::uint64_t offset = 0;       // from the start of the data section
  std::uint64_t bytes = 0;        // its encoded size
  std::uint64_t count() const;    // product of ne
};

class gguf_file {
 public:
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_start() const { return data_start_; }  // absolute offset of the data section
  const std::vector<gguf_kv>& kv() const { return kv_; }
  const std::vector<gguf_tensor_info>& tensors() const { return tensors_; }
  const gguf_value* find(std::string_view key) const;                 // nullptr if absent
  const gguf_tensor_info* find_tensor(std::string_view name) const;  // nullptr if absent
  std::span<const std::byte> data(const gguf_tensor_info& t) const;  // REQUIRES: t from tensors()

 private:
  friend result<gguf_file> parse_gguf(std::string bytes, const std::string& what);
  std::shared_ptr<const std::string> buffer_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32, data_start_ = 0;
  std::vector<gguf_kv> kv_;
  std::vector<gguf_tensor_info> tensors_;
};

// Reads and validates a whole file: not_found if absent; corruption naming the
// file, the byte offset and the field (bad magic, a version other than 2 or 3,
// truncation, a count or length past the end, a bad value or tensor type, a
// tensor whose data is misaligned, overlaps another or runs past the end,
// duplicate keys or names); unimplemented for nested arrays.
result<gguf_file> read_gguf(const std::filesystem::path& path);
result<gguf_file> parse_gguf(std::string bytes, const std::string& what);
// A tensor's values as fp32 (f16 and q8_0 decoded).
std::vector<float> dequantize(const gguf_file& f, const gguf_tensor_info& t);

// A tensor to write: `values` (row-major, ne[0] innermost) encoded as `type`.
// REQUIRES: values.size() == prod(ne); for q8_0, ne[0] % 32 == 0.
struct gguf_tensor_in {
  std::string name;
  std::vector<std::uint64_t> ne;
  gguf_type type = gguf_type::f32;
  std::span<const float> values;
};

// Test hook: called with each tensor's name before its data is written; an
// error it returns fails the write there (as a full disk would).
using gguf_fault = std::function<status(std::string_view tensor)>;

// Writes a GGUF v3 file at `path` (general.alignment, if among `kv`, must be a
// u32 power of two; default 32): into a temp file beside it, fsynced, then
// renamed into place, refusing (already_exists) a path that exists. On any
// error the temp file is removed and `path` is untouched. invalid_argument for
// a non-finite value, an f16 value out of range, or sizes that do not match.
status write_gguf_file(const std::filesystem::path& path, std::span<const gguf_kv> kv,
                       std::span<const gguf_tensor_in> tensors, const gguf_fault& fault = {});

}  // namespace loom::exporter
