#include "libs/ckpt/inspect.hpp"

#include "libs/ckpt/snapshot.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>

namespace loom::ckpt {

std::map<std::string, double> stage_eval_beside(const std::string& dir) {
  constexpr std::uintmax_t max_eval_bytes = 64 * 1024;  // a few dozen figures; more is not an eval.json
  std::map<std::string, double> out;
  const auto path = std::filesystem::path(dir).parent_path().parent_path() / "eval.json";
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > max_eval_bytes) return out;
  auto text = files::read_file(path.string());
  if (!text) return out;
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return out;
  for (const char* when : {"before", "after"}) {
    const auto it = j.find(when);
    if (it == j.end() || !it->is_object()) continue;
    for (const auto& [k, v] : it->items())
      if (v.is_number()) out["eval_" + std::string(when) + "_" + k] = v.get<double>();
  }
  return out;
}

result<snapshot_facts> inspect_snapshot(const std::string& dir, std::string_view key) {
  const auto step = parse_step_dir(std::filesystem::path(dir).filename().string());
  if (!step) return make_error(errc::invalid_argument, "checkpoint " + dir + " is not a snapshot's step-N directory");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return make_error(errc::not_found, "checkpoint " + dir + " is not there");
  loaded_snapshot s;
  auto problems = verify_snapshot(dir, *step, key, &s);
  if (!problems.empty()) {
    std::string why;
    for (const auto& p : problems) why += (why.empty() ? "" : "; ") + p;
    return make_error(errc::corruption, "checkpoint " + dir + " does not verify: " + why);
  }
  auto model = s.files.find("model.safetensors");
  if (model == s.files.end()) return make_error(errc::corruption, "checkpoint " + dir + " lists no model.safetensors");
  auto manifest = files::read_file(dir + "/MANIFEST.json");
  if (!manifest) return manifest.err();
  return snapshot_facts{*step, crypto::sha256_hex(*manifest), model->second.sha256_hex, stage_eval_beside(dir)};
}

status check_manifest(const std::string& dir, std::string_view key) {
  const auto step = parse_step_dir(std::filesystem::path(dir).filename().string());
  if (!step) return make_error(errc::invalid_argument, dir + " is not a snapshot's step-N directory");
  if (auto problem = verify_manifest(dir, *step, key); !problem.empty())
    return make_error(errc::corruption, dir + ": " + problem);
  return ok_status();
}

}  // namespace loom::ckpt
