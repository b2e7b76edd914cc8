#include "services/trainer/run/snapshot_io.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/atrest/object.hpp"
#include "libs/auth/token.hpp"
#include "libs/ckpt/gpt2_checkpoint.hpp"
#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "libs/retry/backoff.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <thread>
#include <filesystem>
#include <sys/stat.h>

namespace loom::trainer {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* optimizer_file = "optimizer.safetensors";

json schedule_json(const engine::lr_schedule& s) {
  return {{"max_lr", s.max_lr}, {"min_lr", s.min_lr}, {"warmup_steps", s.warmup_steps}, {"total_steps", s.total_steps}};
}

result<train_state> parse_state(const std::string& text, const std::string& file) {
  try {
    json j = json::parse(text);
    train_state s;
    s.step = j.at("step").get<std::uint64_t>();
    s.config_hash = j.at("config_hash").get<std::string>();
    const json& sch = j.at("lr_schedule");
    s.schedule.max_lr = sch.at("max_lr").get<float>();
    s.schedule.min_lr = sch.at("min_lr").get<float>();
    s.schedule.warmup_steps = sch.at("warmup_steps").get<int>();
    s.schedule.total_steps = sch.at("total_steps").get<int>();
    s.seed = j.at("rng").at("seed").get<std::uint64_t>();
    s.cursor.epoch = j.at("cursor").at("epoch").get<std::uint64_t>();
    s.cursor.position = j.at("cursor").at("position").get<std::uint64_t>();
    s.threads = j.at("threads").get<int>();
    s.tokens_seen = j.at("tokens_seen").get<std::uint64_t>();
    s.last_loss = j.at("loss").get<float>();
    s.precision = j.value("precision", std::string("fp32"));  // snapshots from before issue 28: fp32
    if (s.precision != "fp32" && s.precision != "bf16")
      return make_error(errc::corruption, file + ": precision \"" + s.precision + "\" is neither fp32 nor bf16");
    s.micro_batch = j.value("micro_batch", 0);  // snapshots from before issue 30: train.batch
    if (s.micro_batch < 0) return make_error(errc::corruption, file + ": micro_batch " + std::to_string(s.micro_batch));
    for (const json& c : j.value("skipped", json::array()))
      s.skipped.push_back({c.at("epoch").get<std::uint64_t>(), c.at("position").get<std::uint64_t>()});
    return s;
  } catch (const std::exception& e) {
    return make_error(errc::corruption, file + ": " + e.what());
  }
}

// The tensor `name` of `f`, checked to be F32 with exactly `shape`.
result<std::span<const std::byte>> f32_tensor(const ckpt::safetensors_file& f, const std::string& name,
                                              const std::vector<std::uint64_t>& shape, const std::string& file) {
  const ckpt::tensor_info* t = f.find(name);
  if (!t) return make_error(errc::corruption, file + ": no tensor \"" + name + "\"");
  if (t->type != ckpt::dtype::F32 || t->shape != shape) {
    std::string want, got;
    for (auto d : shape) want += (want.empty() ? "" : ",") + std::to_string(d);
    for (auto d : t->shape) got += (got.empty() ? "" : ",") + std::to_string(d);
    return make_error(errc::invalid_argument, file + ": tensor \"" + name + "\" is " +
                                                  std::string(ckpt::to_string(t->type)) + "[" + got +
                                                  "], the model needs F32[" + want + "]");
  }
  return t->data;
}

}  // namespace

result<std::string> checkpoint_key(const std::string& data_dir, const std::string& snapshot_root) {
  const layout::paths p{data_dir};
  struct stat st {};
  if (::stat(p.checkpoint_key().c_str(), &st) != 0) {
    std::string signed_one = layout::find_snapshot(p.jobs());
    if (signed_one.empty() && !snapshot_root.empty()) signed_one = layout::find_snapshot(snapshot_root);
    if (!signed_one.empty())
      return make_error(errc::not_found,
                        "the checkpoint signing key " + p.checkpoint_key() + " is missing, but checkpoints signed "
                        "with it exist (" + signed_one + "): a new key would refuse every one of them. Restore it "
                        "from a backup, or run `loom keys init --force --data-dir " + data_dir + "` to create a new "
                        "one (those checkpoints can then no longer be resumed or sampled)");
    if (auto r = auth::create_token_key(p.checkpoint_key()); !r && r.code() != errc::already_exists) return r.err();
  }
  return existing_checkpoint_key(data_dir);
}

result<std::string> existing_checkpoint_key(const std::string& data_dir) {
  const std::string path = layout::paths{data_dir}.checkpoint_key();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return make_error(errc::not_found, "no checkpoint signing key at " + path);
  auto key = auth::load_token_key(path);
  if (!key) return make_error(key.code(), "checkpoint signing key: " + key.err().message);
  return key;
}

result<std::string> save_snapshot(const std::string& root, const engine::gpt2& model, const engine::adamw& opt,
                                  const train_state& st, std::string_view key, int keep,
                                  std::span<const extra_file> extras, const snapshot_retry& retry) {
  std::vector<extra_file> files;  // optimizer.safetensors first, then the stage's own
  const std::uint64_t n = opt.m().size();
  files.push_back({optimizer_file,
                   {{"adamw.m", ckpt::dtype::F32, {n}, opt.m().data(), n * sizeof(float)},
                    {"adamw.v", ckpt::dtype::F32, {n}, opt.v().data(), n * sizeof(float)}},
                   {{"steps_taken", std::to_string(opt.steps_taken())}}});
  files.insert(files.end(), extras.begin(), extras.end());
  json state = {{"step", st.step},
                {"config_hash", st.config_hash},
                {"lr_schedule", schedule_json(st.schedule)},
                {"rng", {{"seed", st.seed}}},
                {"cursor", {{"epoch", st.cursor.epoch}, {"position", st.cursor.position}}},
                {"threads", st.threads},
                {"tokens_seen", st.tokens_seen},
                {"loss", st.last_loss},
                {"precision", st.precision},
                {"micro_batch", st.micro_batch},
                {"skipped", json::array()}};
  for (const auto& c : st.skipped) state["skipped"].push_back({{"epoch", c.epoch}, {"position", c.position}});
  const std::string state_text = state.dump(1) + "\n";
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       loom::wall_now().time_since_epoch()).count();
  // Sealed at rest under the process's keys, which a trainer process opens at
  // start unless LOOM_AT_REST=off (at_rest.hpp).
  const auto seal = atrest::sealing_keys();
  const ckpt::gpt2_snapshot snap{model.config(), model.params(), state_text, files, seal.get()};
  retry::backoff pause(std::chrono::milliseconds(250), std::chrono::milliseconds(4000));
  const int attempts = std::max(1, retry.attempts);
  result<std::string> dir = make_error(errc::internal, "not written");
  for (int attempt = 1;; ++attempt) {
    dir = ckpt::write_gpt2_snapshot(root, st.step, snap, key, now);
    // Storage faults pass (a full disk, an I/O error); anything else would fail again.
    const bool passing = !dir && files::storage_fault(dir.err());
    if (dir || !passing) break;
    if (attempt >= attempts)
      return make_error(dir.code(), dir.err().message + " (snapshot step " + std::to_string(st.step) + ", " +
                                        std::to_string(attempts) + " attempts)");
    const auto d = pause.next();
    std::fprintf(stderr, "snapshot step %llu, attempt %d of %d: %s; writing it again in %lld ms\n",
                 static_cast<unsigned long long>(st.step), attempt, attempts, dir.err().message.c_str(),
                 static_cast<long long>(d.count()));
    std::fflush(stderr);
    if (retry.wait) retry.wait(d);
    else std::this_thread::sleep_for(d);
  }
  if (!dir) return dir;
  if (auto r = ckpt::retain(root, static_cast<std::size_t>(std::max(1, keep)), key); !r) return r.err();
  return dir;
}

result<opened_snapshot> open_snapshot(const std::string& path, std::string_view key) {
  opened_snapshot out;
  auto where = ckpt::open_snapshot_at(path, key);
  if (!where) return where.err();
  out.where = std::move(*where);
  const std::string sfile = out.where.dir + "/" + ckpt::gpt2_state_file;
  auto st_text = atrest::read_object(sfile);
  if (!st_text) return st_text.err();
  auto state = parse_state(*st_text, sfile);
  if (!state) return state.err();
  out.state = std::move(*state);
  auto model = ckpt::read_gpt2_model(out.where);
  if (!model) return model.err();
  auto cfg = ckpt::gpt2_config_from(model->meta(), out.where.dir + "/" + ckpt::gpt2_model_file);
  if (!cfg) return cfg.err();
  out.model = *cfg;
  out.params = std::move(*model);
  return out;
}

status load_params(const opened_snapshot& s, engine::gpt2& model) {
  return ckpt::gpt2_copy_params(s.params, model.config(), s.where.dir + "/" + ckpt::gpt2_model_file, model.params());
}

status load_optimizer(const opened_snapshot& s, engine::adamw& opt) {
  const std::string file = s.where.dir + "/" + optimizer_file;
  auto f = ckpt::read_safetensors(file);
  if (!f) return f.err();
  return load_optimizer(*f, file, opt, "adamw");
}

result<ckpt::safetensors_file> read_extra(const opened_snapshot& s, const std::string& name) {
  const std::string file = s.where.dir + "/" + name;
  if (!fs::exists(file)) return make_error(errc::not_found, s.where.dir + " has no " + name);
  return ckpt::read_safetensors(file);
}

void add_optimizer(extra_file& f, const engine::adamw& opt, const std::string& prefix) {
  const std::uint64_t n = opt.m().size();
  f.tensors.push_back({prefix + ".m", ckpt::dtype::F32, {n}, opt.m().data(), n * sizeof(float)});
  f.tensors.push_back({prefix + ".v", ckpt::dtype::F32, {n}, opt.v().data(), n * sizeof(float)});
  f.meta[prefix + ".steps_taken"] = std::to_string(opt.steps_taken());
}

status load_optimizer(const ckpt::safetensors_file& fr, const std::string& file, engine::adamw& opt,
                      const std::string& prefix) {
  const ckpt::safetensors_file* f = &fr;
  const std::uint64_t n = opt.m().size();
  auto m = f32_tensor(*f, prefix + ".m", {n}, file);
  if (!m) return m.err();
  auto v = f32_tensor(*f, prefix + ".v", {n}, file);
  if (!v) return v.err();
  int t = -1;  // all of the value a count, or the file is corrupt
  const std::string steps_key = prefix == "adamw" ? "steps_taken" : prefix + ".steps_taken";
  if (auto it = f->meta().find(steps_key); it != f->meta().end()) {
    const std::string& v = it->second;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), t);
    if (ec != std::errc() || end != v.data() + v.size()) t = -1;
  }
  if (t < 0) return make_error(errc::corruption, file + ": metadata steps_taken missing or not a count");
  auto as_floats = [](std::span<const std::byte> b) {
    return std::span<const float>(reinterpret_cast<const float*>(b.data()), b.size() / sizeof(float));
  };
  return opt.restore(as_floats(*m), as_floats(*v), t);
}

}  // namespace loom::trainer
