// sniff_audio(), probe_audio(), check_extension() for audio: magic bytes, our
// own header walks (audio_containers.hpp), the limits, then libsndfile's view
// of the same bytes.
#include "libs/media/audio.hpp"

#include "libs/media/audio_containers.hpp"
#include "libs/media/audio_sndfile.hpp"
#include "libs/media/names.hpp"
#include "libs/media/reject.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

namespace loom::media {
namespace {

using detail::header_claim;
using detail::u8;

status check_limits(std::uint32_t channels, std::uint32_t rate, std::uint64_t frames, bool length_known,
                    const audio_limits& lim) {
  if (channels > lim.max_channels)
    return reject(reject_reason::too_many_channels,
                  std::to_string(channels) + " channels exceeds " + std::to_string(lim.max_channels));
  if (rate < lim.min_sample_rate || rate > lim.max_sample_rate)
    return reject(reject_reason::bad_sample_rate, std::to_string(rate) + " Hz outside [" +
                                                      std::to_string(lim.min_sample_rate) + ", " +
                                                      std::to_string(lim.max_sample_rate) + "]");
  if (!length_known) return ok_status();
  const double seconds = static_cast<double>(frames) / rate;
  if (seconds > lim.max_seconds)
    return reject(reject_reason::too_long, std::to_string(seconds) + " s exceeds " + std::to_string(lim.max_seconds));
  if (seconds < lim.min_seconds)
    return reject(reject_reason::too_short, std::to_string(seconds) + " s under " + std::to_string(lim.min_seconds));
  return ok_status();
}

}  // namespace

std::optional<audio_format> sniff_audio(std::string_view b) {
  if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WAVE") return audio_format::wav;
  if (b.size() >= 4 && b.substr(0, 4) == "fLaC") return audio_format::flac;
  if (b.size() >= 4 && b.substr(0, 4) == "OggS") return audio_format::ogg;
  if (b.size() >= 3 && b.substr(0, 3) == "ID3") return audio_format::mp3;  // an ID3v2 tag leads MP3s only
  // An MPEG audio frame: 11 sync bits, a layer (bits 1-2 of byte 1) that is
  // not the reserved 00 (which ADTS AAC uses), a bitrate index other than 15
  // and a sample rate index other than 3.
  if (b.size() >= 4 && u8(b, 0) == 0xFF && (u8(b, 1) & 0xE0) == 0xE0 && (u8(b, 1) & 0x06) != 0 &&
      (u8(b, 2) >> 4) != 15 && ((u8(b, 2) >> 2) & 3) != 3)
    return audio_format::mp3;
  return std::nullopt;
}

result<audio_info> probe_audio(std::string_view bytes, const audio_limits& lim) {
  if (bytes.size() > lim.max_bytes)
    return reject(reject_reason::too_large,
                  std::to_string(bytes.size()) + " bytes exceeds " + std::to_string(lim.max_bytes));
  const auto fmt = sniff_audio(bytes);
  if (!fmt) return reject(reject_reason::wrong_magic, "not a WAV, FLAC, Ogg or MP3 signature");

  // 1. Our walk, and the limits on what it claims, before any codec runs.
  header_claim claim;
  if (*fmt == audio_format::wav || *fmt == audio_format::flac) {
    auto c = *fmt == audio_format::wav ? detail::walk_wav(bytes) : detail::walk_flac(bytes);
    if (!c) return c.err();
    claim = *c;
    if (auto st = check_limits(claim.channels, claim.rate, claim.frames, claim.length_known, lim); !st)
      return st.err();
  } else if (*fmt == audio_format::ogg) {
    if (auto st = detail::walk_ogg(bytes); !st) return st.err();
  } else if (auto st = detail::walk_mp3(bytes); !st) {
    return st.err();
  }

  // 2. libsndfile's view: it must agree on the container, and for Ogg and MP3
  // its rate, channels and length are the first we learn.
  auto sf = detail::sndfile_reader::open(bytes);
  if (!sf) return sf.err();
  const SF_INFO& si = sf->info();
  if (detail::format_of(si) != fmt)
    return reject(reject_reason::corrupt, "libsndfile reads it as another container");
  audio_info info;
  info.fmt = *fmt;
  info.codec = detail::codec_name(si);
  info.sample_rate = si.samplerate > 0 ? static_cast<std::uint32_t>(si.samplerate) : 0;
  info.channels = si.channels > 0 ? static_cast<std::uint32_t>(si.channels) : 0;
  if (info.channels == 0 || info.sample_rate == 0)
    return reject(reject_reason::corrupt, "libsndfile reports zero channels or sample rate");
  if (claim.length_known) {  // libsndfile shortens a WAV data chunk to the file: keep the claim
    info.frames = claim.frames;
    info.length_known = true;
  } else if (si.frames >= 0 && si.frames != SF_COUNT_MAX) {
    info.frames = static_cast<std::uint64_t>(si.frames);
    info.length_known = true;
  }
  info.seconds = info.length_known ? static_cast<double>(info.frames) / info.sample_rate : 0;
  if (auto st = check_limits(info.channels, info.sample_rate, info.frames, info.length_known, lim); !st)
    return st.err();
  if (claim.data_cut)
    return reject(reject_reason::truncated, "WAV data chunk claims " + std::to_string(claim.frames) +
                                                " frames, more than the file holds");
  return info;
}

status check_extension(std::string_view path, audio_format actual) {
  static constexpr std::string_view known[] = {"wav", "wave", "flac", "ogg", "oga", "opus", "mp3", "mp2", "mpga"};
  const auto claimed = detail::claimed_extension(path, known);
  if (!claimed) return ok_status();  // "clip": claims nothing
  const std::string& ext = *claimed;
  const bool agrees = actual == audio_format::wav    ? (ext == "wav" || ext == "wave")
                      : actual == audio_format::flac ? ext == "flac"
                      : actual == audio_format::ogg  ? (ext == "ogg" || ext == "oga" || ext == "opus")
                                                     : (ext == "mp3" || ext == "mp2" || ext == "mpga");
  if (agrees) return ok_status();
  return reject(reject_reason::extension_mismatch,
                "name says ." + ext + " but the bytes are " + std::string(audio_format_name(actual)));
}

std::vector<audio_format> readable_audio_formats() {
  std::vector<audio_format> out;
  int count = 0;
  sf_command(nullptr, SFC_GET_FORMAT_MAJOR_COUNT, &count, sizeof count);
  for (int i = 0; i < count; ++i) {
    SF_FORMAT_INFO fi{};
    fi.format = i;
    if (sf_command(nullptr, SFC_GET_FORMAT_MAJOR, &fi, sizeof fi) != 0) continue;
    SF_INFO probe{};
    probe.format = fi.format;
    if (auto f = detail::format_of(probe); f && std::find(out.begin(), out.end(), *f) == out.end()) out.push_back(*f);
  }
  return out;
}

}  // namespace loom::media
