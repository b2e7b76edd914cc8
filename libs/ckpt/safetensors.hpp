// safetensors: our writer and a strict reader (layout and rules:
// research/reliability.md §1.3). The writer streams tensors to a temp file,
// fsyncs it and renames it into place. The reader refuses, with
// errc::corruption naming the file and the reason, everything the reference
// validator refuses plus duplicate keys, unknown fields and trailing bytes.
// Stateless functions; a safetensors_file is an immutable value (copies share
// one buffer), safe to read from any thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::ckpt {

// Whole-byte safetensors dtypes (the sub-byte F4/F6 kinds are refused).
enum class dtype : std::uint8_t {
  BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64,
};

std::string_view to_string(dtype t);                      // "BF16"
std::optional<dtype> dtype_from_string(std::string_view s);  // nullopt if unknown
std::size_t dtype_size(dtype t);                           // bytes per element

using metadata = std::map<std::string, std::string>;  // "__metadata__": string -> string only

// A tensor to write. REQUIRES: data points at `bytes` row-major little-endian
// bytes and bytes == prod(shape) * dtype_size(type) (checked: invalid_argument).
struct tensor_view {
  std::string name;
  dtype type = dtype::F32;
  std::vector<std::uint64_t> shape;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

// The bytes write_safetensors would write, handed to `sink` in order (the
// header, then each tensor's bytes as the caller holds them: no copy) — how a
// writer that seals them at rest streams them into an atrest::sealed_writer,
// never putting the plaintext on disk nor holding the file whole. `what`
// names them in errors; a sink's error ends it and is returned.
status stream_safetensors(std::span<const tensor_view> tensors, const metadata& meta, const std::string& what,
                          const std::function<status(std::string_view)>& sink);

// Writes `tensors` (in the given order) to `path` atomically: temp -> fsync ->
// rename -> fsync dir. A failed write/fsync/rename is errc::internal naming the path.
status write_safetensors(const std::string& path, std::span<const tensor_view> tensors,
                         const metadata& meta = {});

// One tensor of a file that was read; `data` points into the file's buffer.
struct tensor_info {
  dtype type = dtype::F32;
  std::vector<std::uint64_t> shape;
  std::span<const std::byte> data;
};

class safetensors_file {
 public:
  const metadata& meta() const { return meta_; }
  const std::map<std::string, tensor_info>& tensors() const { return tensors_; }
  const tensor_info* find(const std::string& name) const;  // nullptr if absent

 private:
  friend result<safetensors_file> parse_safetensors(std::string bytes, const std::string& what);
  std::shared_ptr<const std::string> buffer_;  // keeps `data` spans alive
  std::map<std::string, tensor_info> tensors_;
  metadata meta_;
};

// Reads and validates the whole file (one sealed at rest is unsealed with the
// process's keys: libs/atrest/object.hpp). not_found if absent, corruption if invalid.
result<safetensors_file> read_safetensors(const std::string& path);
// Validates `bytes` as a safetensors file; `what` names it in errors.
result<safetensors_file> parse_safetensors(std::string bytes, const std::string& what);
// The same check on a file's first bytes (`head`: at least
// safetensors_head_bytes(its first 8) of them, or all there are) and its
// size; `what` names it. For a reader that streams the file (a sealed one).
status check_safetensors_head(std::string_view head, std::uint64_t file_size, const std::string& what);
// How many first bytes check_safetensors_head needs, from the first 8.
std::uint64_t safetensors_head_bytes(std::string_view first8);
// Validates a file's header against its size without reading the tensor data
// (a sealed file is unsealed and parsed whole: its size says nothing).
status check_safetensors(const std::string& path);

}  // namespace loom::ckpt
