// Why an image or an audio clip was refused. Every refusal from probe(), decode() and
// check_extension() is a loom::error whose message starts "<reason_code>: "
// and whose errc follows from the reason (table below), so callers keep the
// one error vocabulary and the importer still counts per reason:
//   if (auto r = reason_of(res.err())) ++rejected[reason_code(*r)];
// Errors without a reason (errc::internal: out of memory, an encoder failure)
// are not the input's fault. Pure functions; thread-safe.
#pragma once

#include "libs/status/status.hpp"

#include <optional>
#include <string_view>

namespace loom::media {

enum class reject_reason {
  wrong_magic,         // not PNG, JPEG, WebP or GIF            -> invalid_argument
  truncated,           // the data ends early                   -> corruption
  corrupt,             // malformed header, chunk, CRC or data  -> corruption
  too_large,           // width, height, pixels or file size over the limits -> resource_exhausted
  bomb,                // a large decode from a tiny file       -> resource_exhausted
  unsupported_colour,  // a colour model or precision we do not convert -> unimplemented
  extension_mismatch,  // the file name claims another format   -> invalid_argument
  // Audio (audio.hpp). One enum for both media: the importer counts a mixed
  // folder in one map, and wrong_magic, truncated, corrupt (a bad header),
  // too_large (file bytes) and extension_mismatch mean the same for both.
  unsupported_format,  // a known container with a codec we do not accept -> unimplemented
  too_long,            // duration over max_seconds (header claim or decoded) -> resource_exhausted
  too_short,           // duration under min_seconds (header, or after trimming) -> invalid_argument
  too_many_channels,   // channels over max_channels            -> resource_exhausted
  bad_sample_rate,     // sample rate outside [min, max]_sample_rate -> invalid_argument
  silent,              // nothing above the silence floor       -> invalid_argument
};

inline constexpr int reject_reason_count = 13;

// Stable snake_case name: "wrong_magic", "truncated", ...
std::string_view reason_code(reject_reason r);
errc reason_errc(reject_reason r);

// The error for a refusal: {reason_errc(r), "<reason_code>: <detail>"}.
error reject(reject_reason r, std::string_view detail);

// The reason of an error made by reject(); nullopt for any other error.
std::optional<reject_reason> reason_of(const error& e);

}  // namespace loom::media
