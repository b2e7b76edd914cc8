// libsndfile in write mode over a growing std::string, and espeak-ng via a temp file.
#include "libs/media/audio_fixtures.hpp"

#include <sndfile.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace loom::media::testing {
namespace {

struct sink {
  std::string* out;
  const std::string* in;
  sf_count_t pos = 0;
};
const std::string& data(void* u) { auto* s = static_cast<sink*>(u); return s->out ? *s->out : *s->in; }
sf_count_t v_len(void* u) { return static_cast<sf_count_t>(data(u).size()); }
sf_count_t v_seek(sf_count_t off, int whence, void* u) {
  auto* s = static_cast<sink*>(u);
  const sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? s->pos : v_len(u);
  s->pos = std::max<sf_count_t>(0, base + off);
  return s->pos;
}
sf_count_t v_read(void* dst, sf_count_t n, void* u) {
  auto* s = static_cast<sink*>(u);
  const sf_count_t size = v_len(u);
  if (s->pos >= size) return 0;
  n = std::min(n, size - s->pos);
  std::memcpy(dst, data(u).data() + s->pos, static_cast<std::size_t>(n));
  s->pos += n;
  return n;
}
sf_count_t v_write(const void* src, sf_count_t n, void* u) {
  auto* s = static_cast<sink*>(u);
  if (static_cast<sf_count_t>(s->out->size()) < s->pos + n) s->out->resize(static_cast<std::size_t>(s->pos + n));
  std::memcpy(s->out->data() + s->pos, src, static_cast<std::size_t>(n));
  s->pos += n;
  return n;
}
sf_count_t v_tell(void* u) { return static_cast<sink*>(u)->pos; }
SF_VIRTUAL_IO vio{v_len, v_seek, v_read, v_write, v_tell};

}  // namespace

bool sf_can_write(int sf_format, std::uint32_t rate, std::uint32_t channels) {
  SF_INFO info{};
  info.samplerate = static_cast<int>(rate);
  info.channels = static_cast<int>(channels);
  info.format = sf_format;
  return sf_format_check(&info) != 0;
}

std::string sf_encode(const std::vector<float>& x, std::uint32_t rate, std::uint32_t channels, int sf_format) {
  std::string out;
  sink s{&out, nullptr};
  SF_INFO info{};
  info.samplerate = static_cast<int>(rate);
  info.channels = static_cast<int>(channels);
  info.format = sf_format;
  SNDFILE* f = sf_open_virtual(&vio, SFM_WRITE, &info, &s);
  if (!f) {
    std::fprintf(stderr, "sf_encode %#x: %s\n", sf_format, sf_strerror(nullptr));
    std::abort();
  }
  if (sf_writef_float(f, x.data(), static_cast<sf_count_t>(x.size() / channels)) !=
      static_cast<sf_count_t>(x.size() / channels))
    std::abort();
  sf_close(f);
  return out;
}

decoded sf_decode(const std::string& bytes) {
  sink s{nullptr, &bytes};
  SF_INFO info{};
  SNDFILE* f = sf_open_virtual(&vio, SFM_READ, &info, &s);
  if (!f) std::abort();
  decoded d;
  d.rate = static_cast<std::uint32_t>(info.samplerate);
  d.channels = static_cast<std::uint32_t>(info.channels);
  std::vector<float> block(4096 * d.channels);
  for (sf_count_t n; (n = sf_readf_float(f, block.data(), 4096)) > 0;)
    d.samples.insert(d.samples.end(), block.begin(), block.begin() + n * d.channels);
  sf_close(f);
  return d;
}

std::optional<std::string> espeak(const std::string& text) {
  if (std::system("espeak-ng --version >/dev/null 2>&1") != 0) return std::nullopt;
  char path[] = "/tmp/loom-espeak-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) std::abort();
  ::close(fd);
  // The text is ours (no quotes in it); espeak-ng's default voice is en, 22050 Hz.
  const std::string cmd = std::string("espeak-ng -w ") + path + " \"" + text + "\" 2>/dev/null";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  ::unlink(path);
  if (rc != 0) std::abort();
  return ss.str();
}

void set_le16(std::string& s, std::size_t at, std::uint32_t v) {
  s[at] = static_cast<char>(v);
  s[at + 1] = static_cast<char>(v >> 8);
}

void set_le32(std::string& s, std::size_t at, std::uint32_t v) {
  set_le16(s, at, v & 0xFFFF);
  set_le16(s, at + 2, v >> 16);
}

}  // namespace loom::media::testing
