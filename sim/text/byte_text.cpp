#include "sim/text/byte_text.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace loom::sim {

result<std::string> licence_corpus() {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/common-licenses", ec))
    if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string all;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    all += ss.str();
  }
  if (all.size() < 100'000)
    return make_error(errc::not_found, "/usr/share/common-licenses is missing or small (package base-files)");
  return all;
}

engine::micro_batch window_stream::next() {
  const std::vector<std::int32_t>& tokens = *tokens_;
  for (int b = 0; b < B_; ++b) {
    const std::size_t start = rng_() % (tokens.size() - std::size_t(T_) - 1);
    for (int t = 0; t < T_; ++t) {
      in_[std::size_t(b) * T_ + t] = tokens[start + t];
      tgt_[std::size_t(b) * T_ + t] = tokens[start + t + 1];
    }
  }
  return {in_, tgt_, {}};
}

}  // namespace loom::sim
