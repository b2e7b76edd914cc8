#include "libs/ckpt/safetensors.hpp"

#include "libs/atrest/object.hpp"
#include "libs/files/fault.hpp"

#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::ckpt {
namespace {

using json = nlohmann::json;

// The reference validator's cap (HeaderTooLarge): a larger header is an attack
// or garbage, never a real model.
constexpr std::uint64_t max_header_bytes = 100'000'000;

struct dtype_row {
  dtype type;
  std::string_view name;
  std::size_t size;
};
constexpr std::array<dtype_row, 15> dtype_table{{
    {dtype::BOOL, "BOOL", 1}, {dtype::U8, "U8", 1},     {dtype::I8, "I8", 1},
    {dtype::F8_E5M2, "F8_E5M2", 1}, {dtype::F8_E4M3, "F8_E4M3", 1}, {dtype::I16, "I16", 2},
    {dtype::U16, "U16", 2}, {dtype::F16, "F16", 2},   {dtype::BF16, "BF16", 2},
    {dtype::I32, "I32", 4}, {dtype::U32, "U32", 4},   {dtype::F32, "F32", 4},
    {dtype::F64, "F64", 8}, {dtype::I64, "I64", 8},   {dtype::U64, "U64", 8},
}};

error corrupt(const std::string& what, const std::string& why) {
  return make_error(errc::corruption, "safetensors " + what + ": " + why);
}

// prod(shape) * elem_size, or nullopt on overflow.
std::optional<std::uint64_t> byte_count(const std::vector<std::uint64_t>& shape, std::size_t elem) {
  std::uint64_t n = elem;
  for (auto d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

struct entry {
  std::string name;
  tensor_info info;
  std::uint64_t begin = 0, end = 0;
};

struct parsed_header {
  std::uint64_t data_start = 0;  // 8 + N
  std::vector<entry> entries;    // sorted by begin
  metadata meta;
};

// The 8-byte length prefix, checked against the cap and the file size.
result<std::uint64_t> header_length(std::string_view first8, std::uint64_t file_size,
                                    const std::string& what) {
  if (file_size < 8 || first8.size() < 8)
    return corrupt(what, "file of " + std::to_string(file_size) + " bytes is shorter than the 8-byte header length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(first8[static_cast<std::size_t>(i)]);
  if (n > max_header_bytes)
    return corrupt(what, "header length " + std::to_string(n) + " exceeds the cap of " + std::to_string(max_header_bytes));
  if (n > file_size - 8)
    return corrupt(what, "header length " + std::to_string(n) + " runs past the end of the " +
                             std::to_string(file_size) + "-byte file");
  return n;
}

result<entry> parse_entry(const std::string& name, const json& v, const std::string& what) {
  const std::string where = "tensor '" + name + "': ";
  if (!v.is_object()) return corrupt(what, where + "entry is not an object");
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
      return corrupt(what, where + "unknown field '" + it.key() + "'");
  if (!v.contains("dtype") || !v["dtype"].is_string()) return corrupt(what, where + "dtype missing or not a string");
  auto t = dtype_from_string(v["dtype"].get_ref<const std::string&>());
  if (!t) return corrupt(what, where + "unknown dtype '" + v["dtype"].get<std::string>() + "'");
  entry e;
  e.name = name;
  e.info.type = *t;
  if (!v.contains("shape") || !v["shape"].is_array()) return corrupt(what, where + "shape missing or not an array");
  for (const auto& d : v["shape"]) {
    if (!d.is_number_unsigned()) return corrupt(what, where + "shape has a non-integer or negative dimension");
    e.info.shape.push_back(d.get<std::uint64_t>());
  }
  const auto& off = v.contains("data_offsets") ? v["data_offsets"] : json();
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    return corrupt(what, where + "data_offsets must be [begin, end] of unsigned integers");
  e.begin = off[0].get<std::uint64_t>();
  e.end = off[1].get<std::uint64_t>();
  if (e.end < e.begin) return corrupt(what, where + "data_offsets end < begin");
  auto want = byte_count(e.info.shape, dtype_size(*t));
  if (!want) return corrupt(what, where + "shape x dtype size overflows");
  if (*want != e.end - e.begin)
    return corrupt(what, where + "shape x dtype size is " + std::to_string(*want) + " bytes but data_offsets span " +
                             std::to_string(e.end - e.begin));
  return e;
}

// Parses and checks the JSON header against a data section of `data_bytes`.
result<parsed_header> parse_header(std::string_view text, std::uint64_t data_bytes, const std::string& what) {
  // nlohmann keeps the last of duplicate keys silently; track keys per object.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  json::parser_callback_t cb = [&](int, json::parse_event_t ev, json& v) {
    if (ev == json::parse_event_t::object_start) open_objects.emplace_back();
    else if (ev == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
    else if (ev == json::parse_event_t::key && !open_objects.empty() && duplicate.empty() &&
             !open_objects.back().insert(v.get<std::string>()).second)
      duplicate = v.get<std::string>();
    return true;
  };
  json j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt(what, "header is not valid UTF-8 JSON");
  if (!duplicate.empty()) return corrupt(what, "duplicate key '" + duplicate + "' in header");
  if (!j.is_object()) return corrupt(what, "header is not a JSON object");

  parsed_header h;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return corrupt(what, "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return corrupt(what, "__metadata__ value of '" + m.key() + "' is not a string");
        h.meta[m.key()] = m->get<std::string>();
      }
      continue;
    }
    auto e = parse_entry(it.key(), *it, what);
    if (!e) return e.err();
    if (e->end > data_bytes)
      return corrupt(what, "tensor '" + e->name + "': data_offsets end " + std::to_string(e->end) +
                               " is out of range of the " + std::to_string(data_bytes) + "-byte data section");
    h.entries.push_back(std::move(*e));
  }
  std::sort(h.entries.begin(), h.entries.end(),
            [](const entry& a, const entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t pos = 0;
  for (const auto& e : h.entries) {
    if (e.begin < pos) return corrupt(what, "tensor '" + e.name + "' overlaps the previous tensor at offset " + std::to_string(e.begin));
    if (e.begin > pos)
      return corrupt(what, "hole of " + std::to_string(e.begin - pos) + " bytes before tensor '" + e.name + "' at offset " + std::to_string(pos));
    pos = e.end;
  }
  if (pos != data_bytes)
    return corrupt(what, std::to_string(data_bytes - pos) + " trailing bytes after the last tensor (data ends at " +
                             std::to_string(pos) + ")");
  return h;
}

}  // namespace

std::string_view to_string(dtype t) {
  for (const auto& r : dtype_table)
    if (r.type == t) return r.name;
  return "unknown";
}

std::optional<dtype> dtype_from_string(std::string_view s) {
  for (const auto& r : dtype_table)
    if (r.name == s) return r.type;
  return std::nullopt;
}

std::size_t dtype_size(dtype t) {
  for (const auto& r : dtype_table)
    if (r.type == t) return r.size;
  return 0;
}

const tensor_info* safetensors_file::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

namespace {
// The 8-byte length and the padded JSON header of `tensors`; `what` names them in errors.
result<std::string> safetensors_prefix(const std::string& what, std::span<const tensor_view> tensors,
                                       const metadata& meta) {
  const std::string& path = what;
  json header = json::object();
  if (!meta.empty()) header["__metadata__"] = meta;
  std::uint64_t pos = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || header.contains(t.name))
      return make_error(errc::invalid_argument, "safetensors " + path + ": empty, reserved or duplicate tensor name '" + t.name + "'");
    auto want = byte_count(t.shape, dtype_size(t.type));
    if (!want || *want != t.bytes || (t.bytes > 0 && t.data == nullptr))
      return make_error(errc::invalid_argument, "safetensors " + path + ": tensor '" + t.name + "' has " +
                                                    std::to_string(t.bytes) + " bytes, not shape x dtype size");
    header[t.name] = {{"dtype", to_string(t.type)}, {"shape", t.shape}, {"data_offsets", {pos, pos + t.bytes}}};
    pos += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-aligned
  std::string out(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text;
}
}  // namespace

status stream_safetensors(std::span<const tensor_view> tensors, const metadata& meta, const std::string& what,
                          const std::function<status(std::string_view)>& sink) {
  auto prefix = safetensors_prefix(what, tensors, meta);
  if (!prefix) return prefix.err();
  if (auto st = sink(*prefix); !st) return st;
  for (const auto& t : tensors)
    if (auto st = sink(std::string_view(static_cast<const char*>(t.data), t.bytes)); !st) return st;
  return ok_status();
}

status write_safetensors(const std::string& path, std::span<const tensor_view> tensors, const metadata& meta) {
  auto prefix = safetensors_prefix(path, tensors, meta);
  if (!prefix) return prefix.err();
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return files::errno_error("create", tmp);
  auto fail = [&](error e) -> status {
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  };
  if (auto s = files::write_all(fd, *prefix, tmp); !s) return fail(s.err());
  for (const auto& t : tensors) {
    const std::string_view bytes(static_cast<const char*>(t.data), t.bytes);
    if (auto s = files::write_all(fd, bytes, tmp); !s) return fail(s.err());
  }
  if (files::fsync_fd(fd) != 0) return fail(files::errno_error("fsync", tmp));
  if (::close(fd) != 0) {
    auto e = files::errno_error("close", tmp);
    ::unlink(tmp.c_str());
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto e = files::errno_error("rename to", path);
    ::unlink(tmp.c_str());
    return e;
  }
  std::filesystem::path p(path);
  return files::fsync_dir(p.has_parent_path() ? p.parent_path().string() : ".");
}

result<safetensors_file> parse_safetensors(std::string bytes, const std::string& what) {
  auto n = header_length(bytes, bytes.size(), what);
  if (!n) return n.err();
  const std::uint64_t data_start = 8 + *n;
  auto h = parse_header(std::string_view(bytes).substr(8, *n), bytes.size() - data_start, what);
  if (!h) return h.err();
  safetensors_file f;
  f.buffer_ = std::make_shared<const std::string>(std::move(bytes));
  const auto* base = reinterpret_cast<const std::byte*>(f.buffer_->data()) + data_start;
  for (auto& e : h->entries) {
    e.info.data = std::span<const std::byte>(base + e.begin, e.end - e.begin);
    f.tensors_.emplace(e.name, std::move(e.info));
  }
  f.meta_ = std::move(h->meta);
  return f;
}

result<safetensors_file> read_safetensors(const std::string& path) {
  auto bytes = atrest::read_object(path);  // a sealed file (libs/atrest) unsealed, a plain one as is
  if (!bytes) return bytes.err();
  return parse_safetensors(std::move(*bytes), path);
}

status check_safetensors_head(std::string_view head, std::uint64_t file_size, const std::string& what) {
  auto n = header_length(head.substr(0, std::min<std::size_t>(head.size(), 8)), file_size, what);
  if (!n) return n.err();
  if (head.size() < 8 + *n) return corrupt(what, "short read of the header");
  auto h = parse_header(head.substr(8, *n), file_size - 8 - *n, what);
  if (!h) return h.err();
  return {};
}

std::uint64_t safetensors_head_bytes(std::string_view first8) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0 && static_cast<std::size_t>(i) < first8.size(); --i)
    n = (n << 8) | static_cast<unsigned char>(first8[static_cast<std::size_t>(i)]);
  return 8 + std::min(n, max_header_bytes + 1);
}

status check_safetensors(const std::string& path) {
  if (atrest::is_sealed_file(path)) {
    auto f = read_safetensors(path);
    if (!f) return f.err();
    return ok_status();
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  struct stat st {};
  std::string head(8, '\0');
  auto read_at = [&](std::string& buf, off_t at) {
    std::size_t got = 0;
    while (got < buf.size()) {
      ssize_t r = ::pread(fd, buf.data() + got, buf.size() - got, at + static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    buf.resize(got);
  };
  if (::fstat(fd, &st) != 0) {
    auto e = files::errno_error("stat", path);
    ::close(fd);
    return e;
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  read_at(head, 0);
  auto n = header_length(head, size, path);
  if (!n) {
    ::close(fd);
    return n.err();
  }
  std::string text(*n, '\0');
  read_at(text, 8);
  ::close(fd);
  if (text.size() != *n) return corrupt(path, "short read of the header");
  auto h = parse_header(text, size - 8 - *n, path);
  if (!h) return h.err();
  return {};
}

}  // namespace loom::ckpt
