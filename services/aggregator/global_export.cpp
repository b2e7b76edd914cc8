#include "services/aggregator/global_export.hpp"

#include "libs/auth/token.hpp"
#include "libs/files/confine.hpp"
#include "libs/files/files.hpp"
#include "libs/ckpt/safetensors.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/layout/layout.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>

namespace loom::aggregator {
namespace fs = std::filesystem;

namespace {

// The stage dir, made if need be, as a canonical path strictly under
// <data>/jobs (files::confined: every link resolved). Its missing parts are
// made one by one below the deepest part that exists, which must be inside:
// nothing is created through a link that leads out.
result<std::string> confined_stage_dir(const std::string& jobs_root, const std::string& stage_dir) {
  if (auto st = files::make_dirs(jobs_root, 0700); !st) return st.err();
  if (!fs::path(stage_dir).is_absolute())
    return make_error(errc::permission_denied, "stage dir " + stage_dir + " is not an absolute path under " + jobs_root);
  std::vector<fs::path> missing;
  fs::path at = fs::path(stage_dir).lexically_normal();
  std::error_code ec;
  while (!fs::exists(fs::symlink_status(at, ec)) && at.has_parent_path() && at != at.parent_path()) {
    missing.push_back(at);
    at = at.parent_path();
  }
  auto base = files::confined({jobs_root}, at.string());
  if (!base) return base.err();
  for (auto it = missing.rbegin(); it != missing.rend(); ++it)
    if (::mkdir(it->c_str(), 0700) != 0 && errno != EEXIST)
      return make_error(errc::internal, "cannot make " + it->string() + ": " + std::strerror(errno));
  auto dir = files::confined({jobs_root}, stage_dir);
  if (!dir) return dir.err();
  auto root = files::confined({jobs_root}, jobs_root);
  if (root && *root == *dir) return make_error(errc::permission_denied, "the stage dir is " + jobs_root + " itself");
  return dir;
}

// Removes the snapshot writer's temp directory unless disarmed (published).
struct temp_cleanup {
  std::string dir;
  ~temp_cleanup() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

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
  const std::string root = *dir + "/checkpoints";
  if (auto st = files::make_dirs(root, 0700); !st) return st.err();
  if (auto in = files::confined({paths.jobs()}, root); !in) return in.err();  // not a link out

  ckpt::snapshot_writer w;
  if (auto st = w.begin(root, step); !st) return st.err();
  temp_cleanup cleanup{w.dir()};  // every failure below leaves no .tmp-step-* behind
  std::vector<ckpt::tensor_view> tensors;
  for (int i = 0; i < model::num_tensors; ++i) {
    const auto t = static_cast<model::tensor_id>(i);
    tensors.push_back({std::string(model::tensor_name(t)), ckpt::dtype::F32, model::tensor_shape(cfg, t),
                       theta.data() + lay.offset(t), lay.size(t) * sizeof(float)});
  }
  // The trainer's model metadata (services/trainer/run/snapshot_io.cpp, model_meta).
  const ckpt::metadata meta{{"format", "loom-gpt2"},
                            {"layers", std::to_string(cfg.layers)},
                            {"heads", std::to_string(cfg.heads)},
                            {"channels", std::to_string(cfg.channels)},
                            {"max_seq_len", std::to_string(cfg.max_seq_len)},
                            {"vocab", std::to_string(cfg.vocab)},
                            {"padded_vocab", std::to_string(cfg.padded_vocab)}};
  if (auto st = ckpt::write_safetensors(w.dir() + "/model.safetensors", tensors, meta); !st) return st.err();
  if (auto st = w.add_existing("model.safetensors"); !st) return st.err();
  if (auto st = w.add_file("trainer_state.json", state.dump(1) + "\n"); !st) return st.err();
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  return w.publish(*key, now);  // renamed away when published: the cleanup then finds nothing
}

}  // namespace loom::aggregator
