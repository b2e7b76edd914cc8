// Hostile audio: cut files, wrong magic, lying headers (hours of audio, 1000
// channels, absurd rates), silence, and the memory a long decode may use.
#include "libs/media/audio.hpp"
#include "libs/media/audio_fixtures.hpp"
#include "libs/media/audio_testing.hpp"
#include "libs/media/peak_rss.test.hpp"
#include "libs/media/reject.hpp"

#include <doctest/doctest.h>
#include <sndfile.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <random>

using namespace loom::media;
using namespace loom::media::testing;

namespace {

// 1.5 s of speech-like stereo at 44.1 kHz in every container.
std::map<std::string, std::string> valid_files() {
  const auto x = speechlike(11, 1.5, 44100, 2);
  std::map<std::string, std::string> out = {
      {"wav", sf_encode(x, 44100, 2, SF_FORMAT_WAV | SF_FORMAT_PCM_16)},
      {"flac", sf_encode(x, 44100, 2, SF_FORMAT_FLAC | SF_FORMAT_PCM_16)},
      {"ogg", sf_encode(x, 44100, 2, SF_FORMAT_OGG | SF_FORMAT_VORBIS)}};
  if (sf_can_write(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 44100, 2))
    out["mp3"] = sf_encode(x, 44100, 2, SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III);
  return out;
}

template <class T>
std::optional<reject_reason> why(const loom::result<T>& r) {
  REQUIRE_FALSE(r.ok());
  return reason_of(r.err());
}

std::size_t find(const std::string& s, std::string_view what) {
  const auto at = s.find(what);
  REQUIRE(at != std::string::npos);
  return at;
}


}  // namespace

TEST_CASE("cut audio files of every format are refused as truncated or corrupt, never decoded") {
  std::map<std::string, int> seen;
  for (const auto& file : valid_files()) {
    const std::string& name = file.first;
    const std::string& bytes = file.second;
    REQUIRE_MESSAGE(decode_mono(bytes).ok(), name);
    std::vector<std::size_t> cuts = {12, 13, 30, 60, bytes.size() - 1};  // 12: every magic is whole
    for (int tenth = 1; tenth <= 9; ++tenth) cuts.push_back(bytes.size() * tenth / 10);
    for (auto cut : cuts) {
      if (cut < 12) continue;  // a cut inside the magic is wrong_magic, rightly (tenths of a tiny file)
      const auto r = process_audio(std::string_view(bytes).substr(0, cut));
      REQUIRE_MESSAGE(!r.ok(), name << " cut at " << cut << " of " << bytes.size() << " decoded");
      const auto w = reason_of(r.err());
      REQUIRE_MESSAGE(w.has_value(), r.err().to_string());
      CHECK_MESSAGE((*w == reject_reason::truncated || *w == reject_reason::corrupt),
                    name << " cut at " << cut << ": " << r.err().to_string());
      ++seen[std::string(reason_code(*w))];
    }
  }
  MESSAGE("cut files: " << seen["truncated"] << " truncated, " << seen["corrupt"] << " corrupt");
  CHECK(seen["truncated"] > 3 * seen["corrupt"]);
}

TEST_CASE("zero bytes, text and images are refused as wrong_magic") {
  for (std::string_view bytes : {std::string_view(""), std::string_view("hello, world"),
                                 std::string_view("\x89PNG\r\n\x1a\n", 8), std::string_view("RIFF\x04\0\0\0WEBPVP8 ", 16)}) {
    const auto r = process_audio(bytes);
    CHECK(why(r) == reject_reason::wrong_magic);
    CHECK(r.code() == loom::errc::invalid_argument);
  }
}

TEST_CASE("a FLAC named .wav probes fine but fails the extension check") {
  const auto files = valid_files();
  const auto info = probe_audio(files.at("flac"));
  REQUIRE(info.ok());
  CHECK(why(check_extension("upload/clip.wav", info->fmt)) == reject_reason::extension_mismatch);
  CHECK(check_extension("upload/clip.flac", info->fmt).ok());
}

TEST_CASE("headers claiming hours of audio are refused too_long on the header, fast and without memory") {
  const auto files = valid_files();
  std::string wav = files.at("wav");
  set_le32(wav, find(wav, "data") + 4, 0x7FFFFF00u);  // 3.4 h of 44.1 kHz stereo 16-bit
  std::string flac = files.at("flac");
  flac[21] = static_cast<char>((flac[21] & 0xF0) | 0x0F);  // STREAMINFO total samples: 2^36 - 1 (18 days)
  for (int i = 22; i < 26; ++i) flac[i] = '\xFF';
  for (const std::string* f : {&wav, &flac}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = process_audio(*f);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    CHECK(why(r) == reject_reason::too_long);
    CHECK(r.code() == loom::errc::resource_exhausted);
    CHECK(ms < 100);
    CHECK(child_peak_growth_mb([&] { return !process_audio(*f).ok(); }) < 4);
  }
}

TEST_CASE("a FLAC that hides its length is stopped by the decode guard at max_seconds") {
  const auto x = speechlike(12, 3.0, 16000);
  std::string flac = sf_encode(x, 16000, 1, SF_FORMAT_FLAC | SF_FORMAT_PCM_16);
  flac[21] = static_cast<char>(flac[21] & 0xF0);  // total samples 0: "unknown"
  for (int i = 22; i < 26; ++i) flac[i] = 0;
  audio_limits lim;
  lim.max_seconds = 2;
  const auto info = probe_audio(flac, lim);
  REQUIRE(info.ok());  // nothing on the header to refuse
  CHECK_FALSE(info->length_known);
  CHECK(why(decode_mono(flac, lim)) == reject_reason::too_long);
  CHECK(decode_mono(flac).ok());
}

TEST_CASE("too many channels, absurd sample rates and too-short clips are refused on the header") {
  const auto x = tone(440, 0.3, 1.0, 16000, 16);
  CHECK(why(probe_audio(sf_encode(x, 16000, 16, SF_FORMAT_WAV | SF_FORMAT_PCM_16))) ==
        reject_reason::too_many_channels);
  std::string wav = encode_wav16(tone(440, 0.3, 1.0, 16000), 16000, 1);
  std::string many = wav;
  set_le16(many, 22, 1000);  // 1000 channels, block align left at 2: a lie
  CHECK(why(probe_audio(many)) == reject_reason::too_many_channels);
  for (std::uint32_t rate : {1u, 4000u, 10'000'000u}) {
    std::string w = wav;
    set_le32(w, 24, rate);
    CHECK_MESSAGE(why(probe_audio(w)) == reject_reason::bad_sample_rate, rate);
  }
  CHECK(why(process_audio(encode_wav16(tone(440, 0.3, 0.1, 16000), 16000, 1))) == reject_reason::too_short);
  CHECK(why(process_audio(encode_wav16({}, 16000, 1))) == reject_reason::too_short);
  // 0.2 s of tone in 2 s of silence passes the header but is too short once trimmed.
  const auto blip = pad(tone(440, 0.3, 0.02, 16000), 1, 1, 16000);
  CHECK(why(process_audio(encode_wav16(blip, 16000, 1))) == reject_reason::too_short);
}

TEST_CASE("pure silence and a noise floor under -60 dBFS are refused as silent") {
  CHECK(why(process_audio(encode_wav16(std::vector<float>(32000, 0.0f), 16000, 1))) == reject_reason::silent);
  CHECK(why(process_audio(sf_encode(noise(3, 0.0005, 2.0, 44100, 2), 44100, 2, SF_FORMAT_FLAC | SF_FORMAT_PCM_16))) ==
        reject_reason::silent);
}

TEST_CASE("an Ogg stream that is not Vorbis or Opus is unsupported_format") {
  std::string ogg = valid_files().at("ogg");
  ogg[find(ogg, "\x01vorbis") + 6] = 'X';
  CHECK(why(probe_audio(ogg)) == reject_reason::unsupported_format);
}

TEST_CASE("random bytes behind a valid audio magic are refused with a reason") {
  const std::string magics[] = {"RIFF____WAVEfmt ", "fLaC", "OggS", "ID3\x04", "\xFF\xFB\x90\x64"};
  std::mt19937_64 rng(33);
  std::map<std::string, int> seen;
  for (const auto& magic : magics)
    for (int trial = 0; trial < 40; ++trial) {
      std::string bytes = magic;
      const std::size_t n = 16 + rng() % 4000;
      for (std::size_t i = 0; i < n; ++i) bytes += static_cast<char>(rng());
      const auto r = process_audio(bytes);
      REQUIRE_MESSAGE(!r.ok(), "random bytes decoded behind " << magic);
      const auto w = reason_of(r.err());
      REQUIRE_MESSAGE(w.has_value(), r.err().to_string());
      ++seen[std::string(reason_code(*w))];
    }
  std::string summary;
  for (const auto& [code, n] : seen) summary += code + "=" + std::to_string(n) + " ";
  MESSAGE("random behind magic: " << summary);
}

TEST_CASE("decoding a minute of 8-channel 48 kHz audio keeps peak memory to the 16 kHz mono output") {
  // 60 s x 48000 x 8 channels: 46 MB of WAV, 92 MB were it decoded to float
  // at once. Streamed, the decode holds the 16 kHz mono floats (3.8 MB) and
  // the output WAV (1.9 MB) plus block buffers and codec state.
  const std::string wav = encode_wav16(speechlike(13, 60.0, 48000, 8), 48000, 8);
  REQUIRE(wav.size() > 46'000'000);
  const long growth = child_peak_growth_mb([&] {
    auto clip = process_audio(wav);
    return clip.ok() && clip->report.seconds_out > 59;
  });
  // The harness sees a 92 MB allocation (a control: the growth is measurable).
  const long control = child_peak_growth_mb([] {
    std::vector<float> all(23'040'000);
    for (std::size_t i = 0; i < all.size(); i += 1024) all[i] = 1;
    return all[1024] == 1;
  });
  MESSAGE("peak RSS growth: process_audio " << growth << " MiB; 92 MB control " << control << " MiB");
  CHECK(growth >= 0);
  CHECK(growth < 16);
  CHECK(control > 80);
}
