#include "libs/textq/filter_model.hpp"

#include <bit>
#include <cmath>
#include <cstring>

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"

namespace loom::textq {
namespace {

static_assert(std::endian::native == std::endian::little, "the model file is written in host order: little-endian only");

constexpr char magic[8] = {'L', 'O', 'O', 'M', 'T', 'Q', 'F', '\0'};
constexpr std::uint32_t version = 1;
constexpr std::size_t header_bytes = 8 + 4 + 4 + 7 * 4 + 4 + 4 * 4 + 8;  // up to and including n_params
constexpr std::size_t trailer_bytes = 32;

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_floats(std::string& out, const std::vector<float>& v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

struct reader {
  std::string_view b;
  std::size_t at = 0;
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, b.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  void floats(std::vector<float>& v, std::size_t n) {
    v.resize(n);
    std::memcpy(v.data(), b.data() + at, n * sizeof(float));
    at += n * sizeof(float);
  }
};

}  // namespace

std::string_view to_string(ppl_bucket b) {
  switch (b) {
    case ppl_bucket::head: return "head";
    case ppl_bucket::middle: return "middle";
    case ppl_bucket::tail: return "tail";
  }
  return "unknown";
}

status filter_model::validate() const {
  auto bad = [](std::string w) { return make_error(errc::invalid_argument, "filter_model: " + w); };
  if (auto s = config.validate(); !s) return bad(s.err().message);
  if (tokenizer != tokenizer_kind::bytes) return bad("unknown tokenizer kind " + std::to_string(std::uint32_t(tokenizer)));
  if (config.vocab != byte_vocab) return bad("a byte tokenizer needs vocab " + std::to_string(byte_vocab));
  if (window < 1 || window > config.max_seq_len) return bad("window must be in [1, max_seq_len]");
  if (params.size() != model::make_param_layout(config).total) return bad("params do not match the config");
  const std::size_t C = std::size_t(config.channels);
  if (quality_w.size() != C) return bad("quality_w needs C values");
  if (embed_center.size() != std::size_t(window) * C) return bad("embed_center needs window x C values");
  if (!std::isfinite(head_max) || !std::isfinite(middle_max) || head_max > middle_max)
    return bad("bucket thresholds must be finite with head_max <= middle_max");
  if (!(quality_threshold >= 0 && quality_threshold <= 1)) return bad("quality_threshold must be in [0, 1]");
  return ok_status();
}

std::string serialize(const filter_model& m) {
  std::string out;
  out.reserve(header_bytes + 4 * (m.params.size() + 2 * m.quality_w.size()) + trailer_bytes);
  out.append(magic, sizeof magic);
  put(out, version);
  put(out, std::uint32_t(m.tokenizer));
  for (int v : {m.config.layers, m.config.heads, m.config.channels, m.config.max_seq_len, m.config.vocab,
                m.config.padded_vocab, m.window})
    put(out, std::int32_t(v));
  put(out, std::uint32_t(m.has_quality_head));
  for (float f : {m.head_max, m.middle_max, m.quality_b, m.quality_threshold}) put(out, f);
  put(out, std::uint64_t(m.params.size()));
  put_floats(out, m.params);
  put_floats(out, m.quality_w);
  put_floats(out, m.embed_center);
  const auto d = crypto::sha256(out);
  out.append(reinterpret_cast<const char*>(d.data()), d.size());
  return out;
}

result<filter_model> parse(std::string_view bytes, const std::string& name) {
  auto fail = [&](errc c, const std::string& what) { return make_error(c, name + ": " + what); };
  if (bytes.size() < sizeof magic || std::memcmp(bytes.data(), magic, sizeof magic) != 0)
    return fail(errc::invalid_argument, "not a textq filter model (no LOOMTQF magic)");
  if (bytes.size() < header_bytes + trailer_bytes)
    return fail(errc::corruption, "truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the header");
  reader r{bytes, sizeof magic};
  const auto ver = r.get<std::uint32_t>();
  if (ver != version)
    return fail(errc::invalid_argument, "format version " + std::to_string(ver) + ", this build reads " + std::to_string(version));
  filter_model m;
  m.tokenizer = tokenizer_kind(r.get<std::uint32_t>());
  m.config.layers = r.get<std::int32_t>();
  m.config.heads = r.get<std::int32_t>();
  m.config.channels = r.get<std::int32_t>();
  m.config.max_seq_len = r.get<std::int32_t>();
  m.config.vocab = r.get<std::int32_t>();
  m.config.padded_vocab = r.get<std::int32_t>();
  m.window = r.get<std::int32_t>();
  m.has_quality_head = r.get<std::uint32_t>() != 0;
  m.head_max = r.get<float>();
  m.middle_max = r.get<float>();
  m.quality_b = r.get<float>();
  m.quality_threshold = r.get<float>();
  const auto n = r.get<std::uint64_t>();
  const std::uint64_t C = m.config.channels > 0 ? std::uint64_t(m.config.channels) : 0;
  // n and C come from the file: bound them before multiplying.
  if (n > bytes.size() || C > bytes.size()) return fail(errc::corruption, "truncated or corrupt: sizes exceed the file");
  const std::uint64_t W = m.window > 0 ? std::uint64_t(m.window) : 0;
  if (W > bytes.size()) return fail(errc::corruption, "truncated or corrupt: sizes exceed the file");
  const std::uint64_t want = header_bytes + 4 * (n + C + W * C) + trailer_bytes;
  if (bytes.size() != want)
    return fail(errc::corruption, (bytes.size() < want ? "truncated: " : "trailing bytes: ") + std::to_string(bytes.size()) +
                                      " bytes, the header says " + std::to_string(want));
  const auto d = crypto::sha256(bytes.substr(0, bytes.size() - trailer_bytes));
  if (std::memcmp(d.data(), bytes.data() + bytes.size() - trailer_bytes, trailer_bytes) != 0)
    return fail(errc::corruption, "checksum mismatch (SHA-256 of the body differs from the trailer)");
  r.floats(m.params, n);
  r.floats(m.quality_w, C);
  r.floats(m.embed_center, W * C);
  if (auto s = m.validate(); !s) return fail(errc::corruption, s.err().message);
  return m;
}

status save(const filter_model& m, const std::string& path) {
  if (auto s = m.validate(); !s) return make_error(s.err().code, path + ": " + s.err().message);
  return files::write_atomic(path, serialize(m));
}

result<filter_model> load(const std::string& path) {
  auto bytes = files::read_file(path);
  if (!bytes) return bytes.err();
  return parse(*bytes, path);
}

}  // namespace loom::textq
