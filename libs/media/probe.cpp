// sniff(), probe() and check_extension(): magic bytes, the per-format header
// readers of the codec files, then the limits.
#include "libs/media/probe.hpp"

#include "libs/media/codecs.hpp"
#include "libs/media/names.hpp"
#include "libs/media/reject.hpp"

#include <cctype>
#include <string>

namespace loom::media {
namespace {

status check_limits(const image_info& info, std::size_t file_bytes, const limits& lim) {
  const std::string dims = std::to_string(info.width) + "x" + std::to_string(info.height);
  if (info.width > lim.max_width || info.height > lim.max_height)
    return reject(reject_reason::too_large, dims + " exceeds " + std::to_string(lim.max_width) + "x" +
                                                std::to_string(lim.max_height));
  const std::uint64_t pixels = std::uint64_t{info.width} * info.height;
  if (pixels > lim.max_pixels)
    return reject(reject_reason::too_large, dims + " exceeds " + std::to_string(lim.max_pixels) + " pixels");
  const double decoded = static_cast<double>(pixels) * 3;
  if (lim.max_expansion > 0 && decoded > static_cast<double>(lim.bomb_min_bytes) &&
      decoded > lim.max_expansion * static_cast<double>(file_bytes))
    return reject(reject_reason::bomb, dims + " from " + std::to_string(file_bytes) + " bytes");
  return ok_status();
}

}  // namespace

std::optional<format> sniff(std::string_view b) {
  if (b.size() >= 8 && b.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) return format::png;
  if (b.size() >= 3 && b.substr(0, 3) == "\xFF\xD8\xFF") return format::jpeg;
  if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WEBP") return format::webp;
  if (b.size() >= 6 && (b.substr(0, 6) == "GIF87a" || b.substr(0, 6) == "GIF89a")) return format::gif;
  return std::nullopt;
}

result<image_info> probe(std::string_view bytes, const limits& lim) {
  if (bytes.size() > lim.max_file_bytes)
    return reject(reject_reason::too_large, std::to_string(bytes.size()) + " bytes exceeds " +
                                                std::to_string(lim.max_file_bytes));
  const auto f = sniff(bytes);
  if (!f) return reject(reject_reason::wrong_magic, "not a PNG, JPEG, WebP or GIF signature");
  auto info = *f == format::png    ? detail::png_info(bytes)
              : *f == format::jpeg ? detail::jpeg_info(bytes)
              : *f == format::webp ? detail::webp_info(bytes)
                                   : detail::gif_info(bytes);
  if (!info) return info;
  if (auto st = check_limits(*info, bytes.size(), lim); !st) return st.err();
  return info;
}

status check_extension(std::string_view path, format actual) {
  // "jpg" alone is an extension; "photo" (no dot, not a known extension) claims nothing.
  static constexpr std::string_view known[] = {"png", "apng", "jpg", "jpeg", "jpe", "jfif", "webp", "gif"};
  const auto claimed = detail::claimed_extension(path, known);
  if (!claimed) return ok_status();
  const std::string& ext = *claimed;
  const bool agrees = actual == format::png    ? (ext == "png" || ext == "apng")
                      : actual == format::jpeg ? (ext == "jpg" || ext == "jpeg" || ext == "jpe" || ext == "jfif")
                      : actual == format::webp ? ext == "webp"
                                               : ext == "gif";
  if (agrees) return ok_status();
  return reject(reject_reason::extension_mismatch,
                "name says ." + ext + " but the bytes are " + std::string(format_name(actual)));
}

}  // namespace loom::media
