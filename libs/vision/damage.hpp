// Real file damage for the "corrupted" class: cut or bit-flip the entropy-
// coded data of an encoded JPEG, then decode what libjpeg-turbo gives back
// the way a lenient viewer does (warnings ignored, missing rows grey).
// media::decode() refuses such files (truncated / corrupt), as ingest should;
// this is the picture a tool that re-saved the damaged file would have kept.
// Pure functions; thread-safe (each call owns its codec state).
#pragma once

#include "libs/media/image.hpp"
#include "libs/status/status.hpp"

#include <cstddef>
#include <random>
#include <string>
#include <string_view>

namespace loom::vision {

// Offset of the first entropy-coded byte (just past the first SOS header);
// 0 when there is none.
std::size_t jpeg_scan_start(std::string_view jpeg);

// The file cut keep (0..1) of the way through its entropy-coded data.
std::string truncate_jpeg(std::string_view jpeg, double keep);

// `count` bytes of the entropy-coded data XORed with random non-zero values.
std::string flip_jpeg_bytes(std::string_view jpeg, int count, std::mt19937_64& rng);

// Decodes a baseline or progressive JPEG whatever its damage: libjpeg's
// warnings (premature end, bad Huffman code, resync) are ignored, so cut
// data comes back as flat grey and damaged data as shifted, discoloured
// blocks; after a fatal error the rows not yet decoded are grey (128).
// corruption when not even the header can be read.
result<media::image> decode_jpeg_lenient(std::string_view jpeg);

}  // namespace loom::vision
