// parse_gguf / read_gguf: every read is bounds-checked against the file; the
// first problem ends the parse with an error naming the file, the byte offset
// and the field.
#include "libs/export/gguf.hpp"

#include "libs/files/files.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>

namespace loom::exporter {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is read as little-endian");

// ggml's limit on tensor dimensions (GGML_MAX_DIMS).
constexpr std::uint32_t max_dims = 4;

// Thrown inside this file only; parse_gguf turns it into its result.
struct parse_failure {
  error e;
};

class cursor {
 public:
  cursor(std::string_view bytes, const std::string& what) : b_(bytes), what_(what) {}

  [[noreturn]] void fail(std::size_t at, const std::string& msg, errc code = errc::corruption) const {
    throw parse_failure{make_error(code, what_ + ": at byte " + std::to_string(at) + ": " + msg)};
  }
  std::size_t pos() const { return pos_; }
  std::size_t left() const { return b_.size() - pos_; }

  template <class T>
  T get(const std::string& field) {
    if (left() < sizeof(T))
      fail(pos_, field + " is cut off (file ends after " + std::to_string(b_.size()) + " bytes)");
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const std::string& field) {
    const std::size_t at = pos_;
    const auto n = get<std::uint64_t>(field + " length");
    if (n > left())
      fail(at, field + " has length " + std::to_string(n) + " but only " + std::to_string(left()) +
                   " bytes are left in the file");
    std::string s(b_.substr(pos_, static_cast<std::size_t>(n)));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  // A count of entries each at least `min_bytes` long: more than fit is corruption.
  std::uint64_t count(const std::string& field, std::size_t min_bytes) {
    const std::size_t at = pos_;
    const auto n = get<std::uint64_t>(field);
    if (n > left() / min_bytes)
      fail(at, field + " is " + std::to_string(n) + ", more than the " + std::to_string(left()) +
                   " bytes left could hold");
    return n;
  }

 private:
  std::string_view b_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

std::size_t scalar_bytes(gguf_value_type t) {
  switch (t) {
    case gguf_value_type::u8: case gguf_value_type::i8: case gguf_value_type::boolean: return 1;
    case gguf_value_type::u16: case gguf_value_type::i16: return 2;
    case gguf_value_type::u32: case gguf_value_type::i32: case gguf_value_type::f32: return 4;
    case gguf_value_type::u64: case gguf_value_type::i64: case gguf_value_type::f64: return 8;
    case gguf_value_type::string: return 8;  // at least its length
    default: return 0;
  }
}

gguf_value_type value_type(cursor& c, const std::string& field) {
  const std::size_t at = c.pos();
  const auto t = c.get<std::uint32_t>(field);
  if (t > static_cast<std::uint32_t>(gguf_value_type::f64)) c.fail(at, field + " " + std::to_string(t) + " is not a GGUF value type");
  return static_cast<gguf_value_type>(t);
}

void read_element(cursor& c, gguf_value_type t, gguf_value& v, const std::string& field) {
  switch (t) {
    case gguf_value_type::u8: v.ints.push_back(c.get<std::uint8_t>(field)); break;
    case gguf_value_type::i8: v.ints.push_back(c.get<std::int8_t>(field)); break;
    case gguf_value_type::u16: v.ints.push_back(c.get<std::uint16_t>(field)); break;
    case gguf_value_type::i16: v.ints.push_back(c.get<std::int16_t>(field)); break;
    case gguf_value_type::u32: v.ints.push_back(c.get<std::uint32_t>(field)); break;
    case gguf_value_type::i32: v.ints.push_back(c.get<std::int32_t>(field)); break;
    case gguf_value_type::u64: v.ints.push_back(static_cast<std::int64_t>(c.get<std::uint64_t>(field))); break;
    case gguf_value_type::i64: v.ints.push_back(c.get<std::int64_t>(field)); break;
    case gguf_value_type::f32: v.floats.push_back(c.get<float>(field)); break;
    case gguf_value_type::f64: v.floats.push_back(c.get<double>(field)); break;
    case gguf_value_type::boolean: {
      const std::size_t at = c.pos();
      const auto b = c.get<std::uint8_t>(field);
      if (b > 1) c.fail(at, field + " is a bool of value " + std::to_string(b));
      v.ints.push_back(b);
      break;
    }
    case gguf_value_type::string: v.strings.push_back(c.str(field)); break;
    case gguf_value_type::array: break;  // handled by the caller
  }
}

gguf_value read_value(cursor& c, const std::string& key) {
  gguf_value v;
  const std::string field = "value of '" + key + "'";
  v.type = v.elem = value_type(c, "type of '" + key + "'");
  if (v.type != gguf_value_type::array) {
    read_element(c, v.type, v, field);
    return v;
  }
  const std::size_t at = c.pos();
  v.elem = value_type(c, "element type of '" + key + "'");
  if (v.elem == gguf_value_type::array) c.fail(at, "'" + key + "' is an array of arrays (not supported)", errc::unimplemented);
  const auto n = c.count("length of array '" + key + "'", scalar_bytes(v.elem));
  for (std::uint64_t i = 0; i < n; ++i) read_element(c, v.elem, v, field + "[" + std::to_string(i) + "]");
  return v;
}

std::uint64_t align_up(std::uint64_t x, std::uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

result<gguf_file> parse_gguf(std::string bytes, const std::string& what) {
  gguf_file f;
  try {
    cursor c(bytes, what);
    if (bytes.size() < 4 || std::memcmp(bytes.data(), "GGUF", 4) != 0)
      c.fail(0, "bad magic: a GGUF file starts with \"GGUF\"");
    c.get<std::uint32_t>("magic");
    f.version_ = c.get<std::uint32_t>("version");
    if (f.version_ != 2 && f.version_ != 3)
      c.fail(4, "version " + std::to_string(f.version_) + " (only GGUF 2 and 3 are read)");
    const auto n_tensors_at = c.pos();
    const auto n_tensors = c.get<std::uint64_t>("tensor count");
    const auto n_kv = c.count("metadata count", 8 + 4 + 1);
    std::set<std::string, std::less<>> keys;
    for (std::uint64_t i = 0; i < n_kv; ++i) {
      const std::size_t at = c.pos();
      gguf_kv e;
      e.key = c.str("key of metadata entry " + std::to_string(i));
      if (!keys.insert(e.key).second) c.fail(at, "metadata key '" + e.key + "' appears twice");
      e.value = read_value(c, e.key);
      f.kv_.push_back(std::move(e));
    }
    if (n_tensors > c.left() / (8 + 4 + 4 + 8))
      c.fail(n_tensors_at, "tensor count is " + std::to_string(n_tensors) + ", more than the rest of the file could hold");
    if (const gguf_value* a = f.find("general.alignment")) {
      if (a->type != gguf_value_type::u32 || a->ints[0] == 0 || !std::has_single_bit(static_cast<std::uint64_t>(a->ints[0])))
        c.fail(8, "general.alignment must be a u32 power of two");
      f.alignment_ = static_cast<std::uint64_t>(a->ints[0]);
    }
    std::set<std::string, std::less<>> names;
    std::vector<std::size_t> info_at;
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
      const std::size_t at = c.pos();
      gguf_tensor_info t;
      t.name = c.str("name of tensor " + std::to_string(i));
      const std::string tn = "tensor '" + t.name + "'";
      if (!names.insert(t.name).second) c.fail(at, tn + " appears twice");
      const auto dims = c.get<std::uint32_t>("dimension count of " + tn);
      if (dims == 0 || dims > max_dims) c.fail(at, tn + " has " + std::to_string(dims) + " dimensions (1 to 4 allowed)");
      std::uint64_t count = 1;
      for (std::uint32_t d = 0; d < dims; ++d) {
        const auto ne = c.get<std::uint64_t>("ne[" + std::to_string(d) + "] of " + tn);
        if (ne == 0 || count > (std::uint64_t(1) << 62) / ne) c.fail(at, tn + " has a bad shape (ne[" + std::to_string(d) + "] = " + std::to_string(ne) + ")");
        count *= ne;
        t.ne.push_back(ne);
      }
      const std::size_t type_at = c.pos();
      const auto type = c.get<std::uint32_t>("type of " + tn);
      if (type != 0 && type != 1 && type != 8)
        c.fail(type_at, tn + " has ggml type " + std::to_string(type) + " (only f32 = 0, f16 = 1 and q8_0 = 8 are read)",
               errc::unimplemented);
      t.type = static_cast<gguf_type>(type);
      if (t.type == gguf_type::q8_0 && t.ne[0] % 32 != 0)
        c.fail(type_at, tn + " is q8_0 but its rows (ne[0] = " + std::to_string(t.ne[0]) + ") are not whole blocks of 32");
      t.bytes = *gguf_bytes(t.type, count);
      t.offset = c.get<std::uint64_t>("data offset of " + tn);
      info_at.push_back(at);
      f.tensors_.push_back(std::move(t));
    }
    f.data_start_ = align_up(c.pos(), f.alignment_);
    const std::uint64_t data_size = bytes.size() > f.data_start_ ? bytes.size() - f.data_start_ : 0;
    if (!f.tensors_.empty() && f.data_start_ > bytes.size())
      c.fail(c.pos(), "the file ends before its data section (at byte " + std::to_string(f.data_start_) + ")");
    // Offsets: aligned, inside the data section, not overlapping.
    std::vector<std::size_t> order(f.tensors_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (std::size_t i : order) {
      const auto& t = f.tensors_[i];
      if (t.offset % f.alignment_ != 0)
        c.fail(info_at[i], "tensor '" + t.name + "' has data offset " + std::to_string(t.offset) +
                               ", not a multiple of the alignment " + std::to_string(f.alignment_));
      if (t.offset > data_size || t.bytes > data_size - t.offset)
        c.fail(info_at[i], "tensor '" + t.name + "' (" + std::to_string(t.bytes) + " bytes at data offset " +
                               std::to_string(t.offset) + ") runs past the end of the file (data section of " +
                               std::to_string(data_size) + " bytes)");
    }
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return f.tensors_[a].offset < f.tensors_[b].offset; });
    for (std::size_t k = 1; k < order.size(); ++k) {
      const auto& prev = f.tensors_[order[k - 1]];
      const auto& t = f.tensors_[order[k]];
      if (prev.offset + prev.bytes > t.offset)
        c.fail(info_at[order[k]], "tensor '" + t.name + "' overlaps tensor '" + prev.name + "'");
    }
  } catch (const parse_failure& p) {
    return p.e;
  }
  f.buffer_ = std::make_shared<const std::string>(std::move(bytes));
  return f;
}

result<gguf_file> read_gguf(const std::filesystem::path& path) {
  auto bytes = files::read_file(path.string());
  if (!bytes) return bytes.err();
  return parse_gguf(std::move(*bytes), path.string());
}

}  // namespace loom::exporter
