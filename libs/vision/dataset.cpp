// load_labelled_dir and training from it: the path `loom data train-filter
// --kind image <dir>` takes.
#include "libs/media/codec.hpp"
#include "libs/files/files.hpp"
#include "libs/vision/filter.hpp"

#include <algorithm>
#include <filesystem>

namespace loom::vision {

result<labelled_dir> load_labelled_dir(const std::string& dir, const media::limits& lim) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return make_error(errc::not_found, "labelled images: " + dir + " is not a directory");
  std::vector<std::pair<std::string, image_label>> paths;
  for (const auto& sub : fs::directory_iterator(dir, ec)) {
    if (!sub.is_directory()) continue;
    const std::string name = sub.path().filename().string();
    const auto label = parse_label(name);
    if (!label)
      return make_error(errc::invalid_argument, "labelled images: " + sub.path().string() +
                                                    " is not a label (ok, blank, blurred, corrupted, mostly_text)");
    for (const auto& f : fs::recursive_directory_iterator(sub.path(), ec))
      if (f.is_regular_file()) paths.emplace_back(f.path().string(), *label);
  }
  if (ec) return make_error(errc::internal, "labelled images: listing " + dir + ": " + ec.message());
  std::sort(paths.begin(), paths.end());
  labelled_dir out;
  for (const auto& [path, label] : paths) {
    auto bytes = files::read_file(path);
    if (!bytes) return bytes.err();
    auto img = media::decode(*bytes, lim);
    if (!img) {
      ++out.skipped;
      continue;
    }
    out.images.push_back({std::move(*img), label});
  }
  if (out.images.empty()) return make_error(errc::invalid_argument, "labelled images: no decodable image under " + dir);
  return out;
}

result<image_filter_model> train_image_filter_from_dir(const filter_options& opt, const std::string& dir) {
  auto set = load_labelled_dir(dir);
  if (!set) return set.err();
  return train_image_filter(opt, set->images);
}

}  // namespace loom::vision
