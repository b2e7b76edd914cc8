// The image filter's model file, little-endian:
//   "LOOMVISF" | u32 version (1) | i32 input, channels[4], hand, embed, classes
//   | u32 embed_dim | f32 hand_mean[hand], hand_std[hand]
//   | f32 embed_mean[embed_dim], embed_std[embed_dim] | f32 params[layout.total]
//   | SHA-256 of every byte before it (32)
// Every size follows from the config, so a file that is cut or extended is
// told apart from one whose bytes were damaged.
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/vision/filter.hpp"

#include <bit>
#include <cstring>

namespace loom::vision {
namespace {

static_assert(std::endian::native == std::endian::little, "the model file is written in host order");

constexpr char magic[8] = {'L', 'O', 'O', 'M', 'V', 'I', 'S', 'F'};
constexpr std::uint32_t version = 1;
constexpr std::size_t header_bytes = 8 + 4 + 8 * 4 + 4;  // magic, version, config, embed_dim
constexpr std::size_t digest_bytes = 32;

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_floats(std::string& out, const float* p, std::size_t n) {
  out.append(reinterpret_cast<const char*>(p), n * sizeof(float));
}
template <class T>
T get(const std::string& in, std::size_t& at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return v;
}
void get_floats(const std::string& in, std::size_t& at, float* p, std::size_t n) {
  std::memcpy(p, in.data() + at, n * sizeof(float));
  at += n * sizeof(float);
}

error fault(errc c, const std::string& path, const std::string& what) {
  return make_error(c, "image filter model " + path + ": " + what);
}

}  // namespace

status save(const image_filter_model& m, const std::string& path) {
  if (auto st = m.net.validate(); !st) return fault(errc::invalid_argument, path, st.err().message);
  const std::size_t D = std::size_t(embedding_dim(m.net));
  if (m.params.size() != make_layout(m.net).total || m.embed_mean.size() != D || m.embed_std.size() != D ||
      m.net.hand > hand_features)
    return fault(errc::invalid_argument, path, "the model's sizes do not match its config (not trained?)");
  std::string out;
  out.append(magic, sizeof magic);
  put(out, version);
  for (int v : {m.net.input, m.net.channels[0], m.net.channels[1], m.net.channels[2], m.net.channels[3], m.net.hand,
                m.net.embed, m.net.classes})
    put<std::int32_t>(out, v);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(D));
  put_floats(out, m.hand_mean.data(), m.net.hand);
  put_floats(out, m.hand_std.data(), m.net.hand);
  put_floats(out, m.embed_mean.data(), D);
  put_floats(out, m.embed_std.data(), D);
  put_floats(out, m.params.data(), m.params.size());
  const crypto::digest d = crypto::sha256(out);
  out.append(reinterpret_cast<const char*>(d.data()), d.size());
  return files::write_atomic(path, out);
}

result<image_filter_model> load(const std::string& path) {
  auto bytes = files::read_file(path);
  if (!bytes) return bytes.err();
  const std::string& in = *bytes;
  if (in.size() < sizeof magic || std::memcmp(in.data(), magic, sizeof magic) != 0)
    return fault(errc::invalid_argument, path, "not an image filter model (no LOOMVISF magic)");
  if (in.size() < header_bytes)
    return fault(errc::corruption, path, "truncated: " + std::to_string(in.size()) + " bytes, shorter than the header");
  std::size_t at = sizeof magic;
  if (const auto v = get<std::uint32_t>(in, at); v != version)
    return fault(errc::corruption, path, "unsupported version " + std::to_string(v) + " (this build reads 1)");
  image_filter_model m;
  m.net.input = get<std::int32_t>(in, at);
  for (auto& c : m.net.channels) c = get<std::int32_t>(in, at);
  m.net.hand = get<std::int32_t>(in, at);
  m.net.embed = get<std::int32_t>(in, at);
  m.net.classes = get<std::int32_t>(in, at);
  const std::uint32_t D = get<std::uint32_t>(in, at);
  if (auto st = m.net.validate(); !st || m.net.hand > hand_features || m.net.classes != num_labels)
    return fault(errc::corruption, path, "invalid config in the header");
  if (D != std::uint32_t(embedding_dim(m.net))) return fault(errc::corruption, path, "embedding size disagrees with the config");
  const std::size_t total = make_layout(m.net).total;
  const std::size_t want = header_bytes + (2 * std::size_t(m.net.hand) + 2 * D + total) * sizeof(float) + digest_bytes;
  if (in.size() < want)
    return fault(errc::corruption, path,
                 "truncated: " + std::to_string(in.size()) + " bytes of the " + std::to_string(want) + " its header implies");
  if (in.size() > want)
    return fault(errc::corruption, path,
                 std::to_string(in.size() - want) + " bytes after the end its header implies");
  const crypto::digest d = crypto::sha256(std::string_view(in).substr(0, want - digest_bytes));
  if (std::memcmp(d.data(), in.data() + want - digest_bytes, digest_bytes) != 0)
    return fault(errc::corruption, path, "checksum mismatch: the file is damaged");
  get_floats(in, at, m.hand_mean.data(), m.net.hand);
  get_floats(in, at, m.hand_std.data(), m.net.hand);
  m.embed_mean.resize(D);
  m.embed_std.resize(D);
  get_floats(in, at, m.embed_mean.data(), D);
  get_floats(in, at, m.embed_std.data(), D);
  m.params.resize(total);
  get_floats(in, at, m.params.data(), total);
  return m;
}

}  // namespace loom::vision
