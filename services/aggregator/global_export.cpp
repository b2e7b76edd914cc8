#include "services/aggregator/global_export.hpp"

#include "libs/auth/token.hpp"
#include "libs/ckpt/safetensors.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/layout/layout.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace loom::aggregator {
namespace fs = std::filesystem;

result<std::string> write_global_snapshot(const std::string& data_dir, const model::gpt2_config& cfg,
                                          std::span<const float> theta, const std::string& stage_dir,
                                          std::uint64_t step, const std::string& trainer_state) {
  const layout::paths paths{data_dir};
  const fs::path jobs = fs::weakly_canonical(paths.jobs());
  const fs::path dir = fs::weakly_canonical(stage_dir);
  const bool inside = std::mismatch(jobs.begin(), jobs.end(), dir.begin(), dir.end()).first == jobs.end() && dir != jobs;
  if (!fs::path(stage_dir).is_absolute() || !inside)
    return make_error(errc::permission_denied, "stage dir " + stage_dir + " is not under " + jobs.string());
  auto state = nlohmann::json::parse(trainer_state, nullptr, false);
  if (!state.is_object() || !state.contains("step") || state["step"] != step)
    return make_error(errc::invalid_argument, "trainer_state is not the trainer's state of step " + std::to_string(step));
  const model::param_layout lay = model::make_param_layout(cfg);
  if (theta.size() != lay.total)
    return make_error(errc::invalid_argument, "the job's parameters (" + std::to_string(theta.size()) +
                                                  ") are not the model's (" + std::to_string(lay.total) + ")");
  auto key = auth::load_token_key(paths.checkpoint_key());
  if (!key) return make_error(key.code(), "the checkpoint signing key: " + key.err().message);

  ckpt::snapshot_writer w;
  if (auto st = w.begin(dir.string() + "/checkpoints", step); !st) return st.err();
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
  return w.publish(*key, now);
}

}  // namespace loom::aggregator
