#include "services/trainer/run/metrics_log.hpp"

#include "libs/files/files.hpp"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace loom::trainer {

std::string to_jsonl(const step_record& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"step\":%llu,\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,\"tokens_per_s\":%.1f,"
                "\"ms_per_step\":%.3f}\n",
                static_cast<unsigned long long>(r.step), double(r.loss), double(r.lr), double(r.grad_norm),
                r.tokens_per_s, r.ms_per_step);
  std::string line = buf;
  for (const auto& [name, value] : r.extra) {
    std::snprintf(buf, sizeof buf, ",\"%s\":%.9g", name.c_str(), value);
    line.insert(line.size() - 2, buf);  // before "}\n"
  }
  return line;
}

metrics_log::~metrics_log() {
  if (f_) std::fclose(f_);
}

namespace {
// The complete lines with step <= keep_through (a torn last line is dropped).
void kept_lines(const std::string& path, std::uint64_t keep_through, std::string* kept, std::vector<float>& losses) {
  auto old = files::read_file(path);
  if (!old) return;
  std::size_t pos = 0;
  while (pos < old->size()) {
    std::size_t nl = old->find('\n', pos);
    if (nl == std::string::npos) break;  // a torn last line: dropped
    std::string_view line(old->data() + pos, nl - pos);
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_unsigned() &&
        j["step"].get<std::uint64_t>() <= keep_through && j.contains("loss") && j["loss"].is_number()) {
      if (kept) kept->append(line).push_back('\n');
      losses.push_back(j["loss"].get<float>());
    }
    pos = nl + 1;
  }
}
}  // namespace

result<std::vector<float>> metrics_log::read_losses(const std::string& path, std::uint64_t keep_through) {
  std::vector<float> losses;
  kept_lines(path, keep_through, nullptr, losses);
  return losses;
}

result<std::vector<float>> metrics_log::open(const std::string& path, std::uint64_t keep_through) {
  if (f_) {
    std::fclose(f_);
    f_ = nullptr;
  }
  path_ = path;
  std::string kept;
  std::vector<float> losses;
  kept_lines(path, keep_through, &kept, losses);
  if (auto st = files::write_atomic(path, kept); !st) return st.err();
  f_ = std::fopen(path.c_str(), "a");
  if (!f_) return files::errno_error("open metrics log", path);
  return losses;
}

status metrics_log::append(const step_record& r) {
  const std::string line = to_jsonl(r);
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    return files::errno_error("append to metrics log", path_);
  return ok_status();
}

}  // namespace loom::trainer
