// job_manager's judgement of a stage's result: a stage succeeds only with a
// final checkpoint under its own stage directory whose MANIFEST.json verifies
// under the cloud's checkpoint key (manifest_check, set by the scheduler).
#include "services/scheduler/jobs/job_manager.hpp"

#include "libs/auth/token.hpp"
#include "libs/ckpt/inspect.hpp"

#include <filesystem>

namespace loom::scheduler {

std::function<status(const std::string& dir)> manifest_check(std::string key_path) {
  return [key_path = std::move(key_path)](const std::string& dir) -> status {
    auto key = auth::load_token_key(key_path);
    if (!key) return make_error(key.code(), "the checkpoint key " + key_path + ": " + key.err().message);
    return ckpt::check_manifest(dir, *key);
  };
}

std::string job_manager::result_problem(const job_rec& j, std::size_t i) const {
  if (!check_) return "";
  const stage_rec& s = j.stages[i];
  if (s.checkpoint.empty()) return "it reported success without a final checkpoint";
  // Its own stage's directory only: a checkpoint of another job (another
  // tenant's, signed with the same key) is never this stage's result.
  namespace fs = std::filesystem;
  const fs::path dir = (fs::path(j.out_dir) / s.name).lexically_normal();
  const fs::path ckpt = fs::path(s.checkpoint).lexically_normal();
  const fs::path rel = ckpt.lexically_relative(dir);
  if (!ckpt.is_absolute() || rel.empty() || rel == "." || *rel.begin() == "..")
    return "its checkpoint " + s.checkpoint + " is not under its stage directory " + dir.string();
  if (auto st = check_(s.checkpoint); !st) return "its final checkpoint does not verify: " + st.err().message;
  return "";
}

}  // namespace loom::scheduler
