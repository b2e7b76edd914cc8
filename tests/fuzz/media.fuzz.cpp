// Fuzzes the image reader (libs/media, issue 33): probe, decode and the
// metadata scan take the bytes of any file an import finds. Limits are tight
// (1 Mpx) so a mutated header cannot make the fuzzer itself run out of
// memory. It checks what the API promises: decode never succeeds where probe
// refuses, a decoded image has the probed size and w*h*3 bytes, a refusal of
// the input carries a reject reason, and the metadata scan, the pHash and
// normalise run on whatever decodes.
#include "libs/media/codec.hpp"
#include "libs/media/metadata.hpp"
#include "libs/media/normalise.hpp"
#include "libs/media/phash.hpp"
#include "libs/media/probe.hpp"
#include "libs/media/reject.hpp"

#include <cstdlib>
#include <string_view>

using namespace loom;

namespace {
void require(bool ok) {
  if (!ok) std::abort();  // a broken promise: libFuzzer saves the input
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  media::limits lim;
  lim.max_width = lim.max_height = 4096;
  lim.max_pixels = 1u << 20;
  lim.max_file_bytes = 1u << 20;
  (void)media::scan_metadata(bytes);
  const auto info = media::probe(bytes, lim);
  const auto img = media::decode(bytes, lim);
  if (!img) {
    require(img.code() == errc::internal || media::reason_of(img.err()).has_value());
    return 0;
  }
  require(info.ok());
  require(img->width == info->width && img->height == info->height);
  require(img->pixels.size() == std::size_t{img->width} * img->height * 3);
  (void)media::phash(*img);
  const auto small = media::normalise(*img, {64, media::fit_mode::center_crop});
  require(small.width <= 64 && small.height <= 64 && small.width == small.height);
  return 0;
}
