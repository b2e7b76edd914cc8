#include "services/ingest/task_ids.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace loom::ingest {

task_ids::task_ids(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  auto text = files::read_file(path_);
  if (!text) {
    if (text.code() == errc::not_found) return;
    warning_ = text.err().message;
  } else {
    try {
      const auto j = nlohmann::json::parse(*text);
      if (!j.is_object()) throw std::runtime_error("not a JSON object");
      for (const auto& [prefix, n] : j.items()) last_[prefix] = n.get<std::uint64_t>();
      return;
    } catch (const std::exception& e) {
      warning_ = path_ + " is not a task id file: " + e.what();
      last_.clear();
    }
  }
  floor_ = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(loom::wall_now().time_since_epoch()).count());
  warning_ += "; task numbers start at " + std::to_string(floor_ + 1) + " so that none is reused";
}

result<std::string> task_ids::next(const std::string& prefix) {
  auto it = last_.find(prefix);
  const std::uint64_t n = (it == last_.end() ? floor_ : it->second) + 1;
  if (!path_.empty()) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [p, v] : last_) j[p] = v;
    j[prefix] = n;
    if (auto st = files::make_dirs(std::filesystem::path(path_).parent_path().string()); !st) return st.err();
    if (auto st = files::write_atomic(path_, j.dump() + "\n"); !st)
      return make_error(st.code(), "cannot record the task counter: " + st.err().message);
  }
  last_[prefix] = n;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s-%06llu", prefix.c_str(), static_cast<unsigned long long>(n));
  return std::string(buf);
}

}  // namespace loom::ingest
