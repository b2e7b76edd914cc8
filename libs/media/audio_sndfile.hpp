// Internal: libsndfile over bytes in memory (sf_open_virtual), for
// audio_probe.cpp and audio_decode.cpp. A reader owns its SNDFILE and a
// cursor into the caller's bytes, which must outlive it. One thread at a time.
#pragma once

#include "libs/media/audio.hpp"
#include "libs/status/status.hpp"

#include <sndfile.h>

#include <memory>
#include <string_view>

namespace loom::media::detail {

// Where libsndfile's reads are in the caller's bytes.
struct memory_cursor {
  std::string_view bytes;
  sf_count_t pos = 0;
};

class sndfile_reader {
 public:
  // Opens `bytes` read-only. Errors: unsupported_format (a container
  // libsndfile reads with an encoding it does not), corrupt (anything else).
  static result<sndfile_reader> open(std::string_view bytes);

  sndfile_reader(sndfile_reader&& o) noexcept;
  sndfile_reader& operator=(sndfile_reader&&) = delete;
  ~sndfile_reader();

  const SF_INFO& info() const { return info_; }
  SNDFILE* get() const { return file_; }

 private:
  sndfile_reader() = default;

  std::unique_ptr<memory_cursor> cursor_;  // libsndfile keeps its address as user_data
  SNDFILE* file_ = nullptr;
  SF_INFO info_{};
};

// The container libsndfile found, if it is one of ours.
std::optional<audio_format> format_of(const SF_INFO& info);

// libsndfile's name for the subtype (SFC_GET_FORMAT_INFO): "Signed 16 bit PCM".
std::string codec_name(const SF_INFO& info);

// decode_mono() after its probe: process_audio() has probed already.
// REQUIRES: info == *probe_audio(bytes, lim).
result<mono_audio> decode_probed(std::string_view bytes, const audio_info& info, const audio_limits& lim);

}  // namespace loom::media::detail
