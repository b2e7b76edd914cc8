// sndfile_reader: SF_VIRTUAL_IO callbacks over a string_view, and libsndfile's
// open errors turned into reject reasons.
#include "libs/media/audio_sndfile.hpp"

#include "libs/media/reject.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

namespace loom::media::detail {
namespace {

using io = memory_cursor;

sf_count_t io_length(void* user) { return static_cast<sf_count_t>(static_cast<io*>(user)->bytes.size()); }

sf_count_t io_seek(sf_count_t offset, int whence, void* user) {
  auto* c = static_cast<io*>(user);
  const auto size = static_cast<sf_count_t>(c->bytes.size());
  const sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? c->pos : size;
  // A seek past the end is allowed (as for a file); reads there return 0.
  c->pos = std::max<sf_count_t>(0, base + offset);
  return c->pos;
}

sf_count_t io_read(void* dst, sf_count_t count, void* user) {
  auto* c = static_cast<io*>(user);
  const auto size = static_cast<sf_count_t>(c->bytes.size());
  if (count <= 0 || c->pos >= size) return 0;
  const sf_count_t n = std::min(count, size - c->pos);
  std::memcpy(dst, c->bytes.data() + c->pos, static_cast<std::size_t>(n));
  c->pos += n;
  return n;
}

sf_count_t io_write(const void*, sf_count_t, void*) { return 0; }  // read-only

sf_count_t io_tell(void* user) { return static_cast<io*>(user)->pos; }

SF_VIRTUAL_IO virtual_io{io_length, io_seek, io_read, io_write, io_tell};

}  // namespace

result<sndfile_reader> sndfile_reader::open(std::string_view bytes) {
  sndfile_reader r;
  r.cursor_ = std::make_unique<memory_cursor>(memory_cursor{bytes, 0});
  r.file_ = sf_open_virtual(&virtual_io, SFM_READ, &r.info_, r.cursor_.get());
  if (!r.file_) {
    const int code = sf_error(nullptr);
    const std::string why = sf_strerror(nullptr);
    // The magic was already ours, so "not recognised" means a damaged header.
    if (code == SF_ERR_UNSUPPORTED_ENCODING) return reject(reject_reason::unsupported_format, "libsndfile: " + why);
    return reject(reject_reason::corrupt, "libsndfile: " + why);
  }
  return r;
}

sndfile_reader::sndfile_reader(sndfile_reader&& o) noexcept
    : cursor_(std::move(o.cursor_)), file_(std::exchange(o.file_, nullptr)), info_(o.info_) {}

sndfile_reader::~sndfile_reader() {
  if (file_) sf_close(file_);
}

std::optional<audio_format> format_of(const SF_INFO& info) {
  switch (info.format & SF_FORMAT_TYPEMASK) {
    case SF_FORMAT_WAV:
    case SF_FORMAT_WAVEX: return audio_format::wav;
    case SF_FORMAT_FLAC: return audio_format::flac;
    case SF_FORMAT_OGG: return audio_format::ogg;
    case SF_FORMAT_MPEG: return audio_format::mp3;
  }
  return std::nullopt;
}

std::string codec_name(const SF_INFO& info) {
  SF_FORMAT_INFO fi{};
  fi.format = info.format & SF_FORMAT_SUBMASK;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &fi, sizeof fi) != 0 || !fi.name) return "unknown";
  return fi.name;
}

}  // namespace loom::media::detail
