// Internal to libs/media: what a file name claims about its format, for the
// image and audio check_extension(). Pure; thread-safe.
#pragma once

#include <cctype>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace loom::media::detail {

// The lower-case extension `path`'s file name claims, or nullopt when it
// claims nothing: no extension ("photo"), or an empty one ("x."). A bare
// extension ("jpg", "mp3") claims itself when it is one of `known`.
inline std::optional<std::string> claimed_extension(std::string_view path, std::span<const std::string_view> known) {
  const auto slash = path.find_last_of("/\\");
  const auto name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const auto dot = name.rfind('.');
  std::string ext(dot == std::string_view::npos ? name : name.substr(dot + 1));
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  bool is_known = false;
  for (auto k : known) is_known |= ext == k;
  if ((dot == std::string_view::npos && !is_known) || ext.empty()) return std::nullopt;
  return ext;
}

}  // namespace loom::media::detail
