// Audio through ingest (issue 33): sniff and probe WAV, FLAC, Ogg (Vorbis,
// Opus) and MP3 from bytes in memory with limits checked on the header before
// any decode, then decode -> mono -> 16 kHz -> trim silence -> EBU R128
// loudness -> 16-bit PCM WAV. Decoding is libsndfile (virtual I/O over the
// caller's bytes), resampling libsamplerate, loudness libebur128. Every call
// owns its codec state: pure functions, thread-safe. Refusals carry a
// reject_reason (reject.hpp), as the image functions do.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::media {

enum class audio_format { wav, flac, ogg, mp3 };

// "wav", "flac", "ogg", "mp3".
std::string_view audio_format_name(audio_format f);

// The sample rate of every output: what speech models (Whisper, wav2vec 2.0,
// HuBERT) consume, and it keeps the 0-8 kHz band that carries speech.
inline constexpr std::uint32_t audio_output_rate = 16000;

// What probe_audio() learns from the headers, without decoding samples.
struct audio_info {
  audio_format fmt = audio_format::wav;
  std::string codec;              // libsndfile's name of the encoding: "Signed 16 bit PCM", "Vorbis", ...
  std::uint32_t sample_rate = 0;
  std::uint32_t channels = 0;
  std::uint64_t frames = 0;       // per channel, as the header claims; 0 when !length_known
  bool length_known = false;      // false: a FLAC without total_samples, a WAV written to a pipe
  double seconds = 0;             // frames / sample_rate
};

// Refusal thresholds, checked on the header before anything is decoded, and
// again while decoding (a header may lie about the length).
struct audio_limits {
  // 10 min: speech corpora cut long-form audio into utterances upstream
  // (Whisper trains on 30 s windows); it bounds a decode at ~60 MB (README).
  double max_seconds = 600;
  // Under a quarter second (a syllable) there is no usable utterance.
  double min_seconds = 0.25;
  // 7.1 surround is the widest layout in real files; more is crafted.
  std::uint32_t max_channels = 8;
  // Telephony's 8 kHz is the lowest rate in real speech data (below it even
  // the 4 kHz speech band is gone); 192 kHz the highest studio rate.
  std::uint32_t min_sample_rate = 8000;
  std::uint32_t max_sample_rate = 192000;
  // The caller holds the whole file: 10 min of 44.1 kHz stereo 16-bit WAV is
  // 106 MB. Larger inputs are refused unread.
  std::uint64_t max_bytes = 128ull << 20;
};

// How process_audio() shapes the signal; defaults and their reasons in README.md.
struct audio_options {
  double target_lufs = -23;           // EBU R128 programme loudness
  double true_peak_ceiling_dbtp = -1; // EBU R128's maximum true peak; the gain is capped to stay under it
  bool trim = true;
  double trim_relative_db = -40;      // a 10 ms window this far below the loudest window is silence
  double trim_absolute_dbfs = -60;    // ... and so is any window under this; also the "silent" floor
  double trim_pad_ms = 100;           // kept on each side of the speech (onsets, decaying consonants)
};

// What happened to one clip.
struct audio_report {
  audio_info source;
  double seconds_decoded = 0;         // at 16 kHz, before trimming
  double seconds_out = 0;
  double trimmed_start_ms = 0;
  double trimmed_end_ms = 0;
  double loudness_before_lufs = 0;    // integrated (EBU R128), mono 16 kHz, trimmed, before the gain
  double true_peak_before_dbtp = 0;
  double gain_db = 0;
  bool peak_limited = false;          // the gain was cut to keep the true peak under the ceiling
  double loudness_after_lufs = 0;     // measured again on the 16-bit output
};

struct audio_clip {
  std::string wav;                    // 16-bit PCM, mono, 16 kHz, canonical 44-byte header
  audio_report report;
};

// The container by magic bytes: "RIFF....WAVE", "fLaC", "OggS", an "ID3" tag
// or an MPEG audio frame sync (layer I-III). nullopt for anything else.
std::optional<audio_format> sniff_audio(std::string_view bytes);

// Header facts and the limits. WAV: our RIFF walk (fmt, data size: a data
// chunk longer than the file is truncated); FLAC: STREAMINFO; Ogg: a walk of
// the page lengths; then libsndfile opens the bytes and its facts are checked
// too (MP3 length from the Xing/Info frame or mpg123's estimate).
// Errors: too_large, wrong_magic, truncated, corrupt, unsupported_format,
// too_many_channels, bad_sample_rate, too_long, too_short.
result<audio_info> probe_audio(std::string_view bytes, const audio_limits& lim = {});

// Whether a name agrees with the sniffed container: "a/b.WAV", ".flac",
// "x.oga", "x.opus", "mp3". No extension claims nothing. Error: extension_mismatch.
status check_extension(std::string_view path_or_ext, audio_format actual);

// The formats the linked libsndfile reads (SFC_GET_FORMAT_MAJOR); MP3 needs
// libsndfile >= 1.1 built with mpg123 (Debian 12's is).
std::vector<audio_format> readable_audio_formats();

// Mono float samples in [-1, 1] at `rate` Hz.
struct mono_audio {
  std::vector<float> samples;
  std::uint32_t rate = audio_output_rate;
  double seconds() const { return rate ? static_cast<double>(samples.size()) / rate : 0; }
};

// probe_audio(), then decode in blocks of 4096 frames, downmix (channel mean)
// and resample to 16 kHz as the blocks arrive: memory is the 16 kHz output plus
// fixed buffers, whatever the source rate and channels. Stops with too_long
// once more than max_seconds have decoded; truncated when fewer frames than
// the header claims arrive.
result<mono_audio> decode_mono(std::string_view bytes, const audio_limits& lim = {});

// [begin, end) of the samples to keep: the first to the last 10 ms window
// above the silence threshold, refined to the sample and padded (options).
// Error: silent when no window reaches trim_absolute_dbfs.
struct sample_span {
  std::size_t begin = 0, end = 0;
};
result<sample_span> find_sound(std::span<const float> samples, std::uint32_t rate, const audio_options& opt = {});

// Integrated loudness (LUFS) and true peak (dBTP) of mono samples
// (libebur128). Error: silent when everything is under the -70 LUFS gate.
struct loudness {
  double integrated_lufs = 0;
  double true_peak_dbtp = 0;
};
result<loudness> measure_loudness(std::span<const float> samples, std::uint32_t rate);

// A canonical 16-bit PCM WAV (RIFF, fmt, data; 44-byte header) of
// interleaved float samples times `gain`, rounded and clipped to int16.
std::string encode_wav16(std::span<const float> interleaved, std::uint32_t rate, std::uint32_t channels,
                         float gain = 1);

// The whole path: decode_mono -> find_sound -> measure_loudness -> gain with
// the true-peak cap -> encode_wav16, and the output measured again.
// Errors: those of probe_audio and decode_mono, silent, too_short (after trimming).
result<audio_clip> process_audio(std::string_view bytes, const audio_limits& lim = {},
                                 const audio_options& opt = {});

}  // namespace loom::media
