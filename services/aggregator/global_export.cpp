#include "services/aggregator/global_export.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/atrest/object.hpp"
#include "libs/auth/token.hpp"
#include "libs/files/confine.hpp"
#include "libs/files/files.hpp"
#include "libs/ckpt/gpt2_checkpoint.hpp"
#include "libs/layout/layout.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>

namespace loom::aggregator {
namespace fs = std::filesystem;

namespace {

// The stage dir, made if need be (files::make_confined_dirs: nothing is made
// through a link that leads out), as a canonical path strictly under
// <data>/jobs.
result<std::string> confined_stage_dir(const std::string& jobs_root, const std::string& stage_dir) {
  if (auto st = files::make_dirs(jobs_root, 0700); !st) return st.err();
  if (!fs::path(stage_dir).is_absolute())
    return make_error(errc::permission_denied, "stage dir " + stage_dir + " is not an absolute path under " + jobs_root);
  auto dir = files::make_confined_dirs({jobs_root}, stage_dir, 0700);
  if (!dir) return dir.err();
  auto root = files::confined({jobs_root}, jobs_root);
  if (root && *root == *dir) return make_error(errc::permission_denied, "the stage dir is " + jobs_root + " itself");
  return dir;
}

}  // namespace

result<std::string> write_global_snapshot(const std::string& data_dir, const model::gpt2_config& cfg,
                                          std::span<const float> theta, const std::string& stage_dir,
                                          std::uint64_t step, const std::string& trainer_state) {
  const layout::paths paths{data_dir};
  auto state = nlohmann::json::parse(trainer_state, nullptr, false);
  if (!state.is_object() || !state.contains("step") || state["step"] != step)
    return make_error(errc::invalid_argument, "trainer_state is not the trainer's state of step " + std::to_string(step));
  const model::param_layout lay = model::make_param_layout(cfg);
  if (theta.size() != lay.total)
    return make_error(errc::invalid_argument, "the job's parameters (" + std::to_string(theta.size()) +
                                                  ") are not the model's (" + std::to_string(lay.total) + ")");
  auto key = auth::load_token_key(paths.checkpoint_key());
  if (!key) return make_error(key.code(), "the checkpoint signing key: " + key.err().message);
  auto dir = confined_stage_dir(paths.jobs(), stage_dir);
  if (!dir) return dir.err();
  auto root = files::make_confined_dirs({paths.jobs()}, *dir + "/checkpoints", 0700);  // not a link out
  if (!root) return root.err();
  const std::string text = state.dump(1) + "\n";
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       loom::wall_now().time_since_epoch()).count();
  // Sealed at rest like every stage's snapshots (unless LOOM_AT_REST=off):
  // the global model is the job's checkpoint too.
  const auto seal = atrest::sealing_keys();
  return ckpt::write_gpt2_snapshot(*root, step, {cfg, theta, text, {}, seal.get()}, *key, now);
}

}  // namespace loom::aggregator
