// Format sniffing and header probes: what an image is and whether it may be
// decoded, from its first bytes and headers only. probe() never allocates
// pixel memory; it is what ingest runs first on every image, and decode()
// runs it again itself. Pure functions; thread-safe.
#pragma once

#include "libs/media/image.hpp"
#include "libs/status/status.hpp"

#include <optional>
#include <string_view>

namespace loom::media {

// The format by magic bytes: PNG signature, JPEG SOI + marker, RIFF....WEBP,
// GIF87a/GIF89a. nullopt for anything else.
std::optional<format> sniff(std::string_view bytes);

// Header facts and the limits check. Reads PNG IHDR (CRC checked) and walks the
// chunk lengths (acTL, tRNS, truncation), JPEG markers via jpeg_read_header,
// WebPGetFeatures and the RIFF chunk list, the GIF screen and block structure
// (frames counted by skipping sub-blocks, nothing decompressed).
// Errors (reject_reason): wrong_magic, truncated, corrupt, too_large, bomb,
// unsupported_colour (JPEG precision other than 8 bits).
result<image_info> probe(std::string_view bytes, const limits& lim = {});

// Whether a file name or extension agrees with the format sniffed from its
// bytes: "x/photo.JPG", ".jpeg" and "jpg" agree with format::jpeg; "a.png"
// does not. A name without an extension claims nothing and agrees with any
// format. Error: extension_mismatch.
status check_extension(std::string_view path_or_ext, format actual);

}  // namespace loom::media
