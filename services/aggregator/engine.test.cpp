// engine: a job started from a signed snapshot (the trainer's layout:
// <root>/step-N/model.safetensors under a signed MANIFEST.json) gets exactly
// its parameters; an altered or outside snapshot is refused.
#include "services/aggregator/engine.hpp"

#include "libs/auth/token.hpp"
#include "libs/ckpt/safetensors.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/layout/layout.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

using namespace loom;
using namespace loom::aggregator;

namespace {

model::gpt2_config tiny() { return {2, 2, 8, 8, 16, 16}; }

// Publishes <root>/step-000003 holding model.safetensors with `params` (the
// trainer's layout), signed with `key`.
void publish(const std::string& root, const std::vector<float>& params, const std::string& key) {
  const auto cfg = tiny();
  const auto lay = model::make_param_layout(cfg);
  ckpt::snapshot_writer w;
  REQUIRE(w.begin(root, 3).ok());
  std::vector<ckpt::tensor_view> tensors;
  for (int i = 0; i < model::num_tensors; ++i) {
    const auto t = static_cast<model::tensor_id>(i);
    tensors.push_back({std::string(model::tensor_name(t)), ckpt::dtype::F32, model::tensor_shape(cfg, t),
                       params.data() + lay.offset(t), lay.size(t) * sizeof(float)});
  }
  REQUIRE(ckpt::write_safetensors(w.dir() + "/model.safetensors", tensors).ok());
  REQUIRE(w.add_existing("model.safetensors").ok());
  REQUIRE(w.publish(key, 0).ok());
}

aggregation_spec from(const std::string& job, const std::string& snapshot) {
  aggregation_spec s;
  s.job = job;
  s.gpt2 = tiny();
  s.fragments = 2;
  s.sync_every = 4;
  s.codec = codec::codec_id::fp32;
  s.init_snapshot = snapshot;
  return s;
}

}  // namespace

TEST_CASE("an aggregation starts from a signed snapshot's parameters and refuses an altered or outside one") {
  files::temp_dir dir;
  const layout::paths paths{dir.path()};
  REQUIRE(files::make_dirs(dir.path() + "/keys").ok());
  REQUIRE(auth::create_token_key(paths.checkpoint_key()).ok());
  const std::string key = auth::load_token_key(paths.checkpoint_key()).value();
  const std::size_t total = model::make_param_layout(tiny()).total;
  std::vector<float> params(total);
  for (std::size_t i = 0; i < total; ++i) params[i] = 0.001f * static_cast<float>(i);
  publish(dir.path() + "/snaps", params, key);

  engine e({dir.path(), "aggregator@test", "local", {}, nullptr});
  auto started = e.start(from("from-snap", "snaps"), nanos(0));
  REQUIRE_MESSAGE(started.ok(), started.err().message);
  REQUIRE(e.join("from-snap", "a", "a").ok());
  const auto plan = make_plan(from("from-snap", "snaps")).value();
  for (std::uint32_t p = 0; p < 2; ++p) {
    auto got = e.pull("from-snap", "a", p, 0, true).value();
    std::vector<float> values(got.header.elements), want(plan.size(static_cast<int>(p)));
    REQUIRE(codec::decode({reinterpret_cast<const std::byte*>(got.payload->data()), got.payload->size()}, values).ok());
    plan.gather(static_cast<int>(p), params, want);
    CHECK(values == want);
  }

  const std::string model = dir.path() + "/snaps/step-000003/model.safetensors";
  std::string bytes = *files::read_file(model);
  bytes[bytes.size() - 3] ^= 0x01;
  REQUIRE(files::write_atomic(model, bytes).ok());
  auto altered = e.start(from("altered", "snaps"), nanos(0));
  REQUIRE_FALSE(altered.ok());
  CHECK(altered.err().message.find("init_snapshot snaps") != std::string::npos);
  auto outside = e.start(from("outside", "/usr/share"), nanos(0));
  CHECK(outside.code() == errc::permission_denied);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/aggregator/altered"));
}

TEST_CASE("a reloaded job's directory loses the temp file of a save that a kill -9 cut short") {
  files::temp_dir dir;
  aggregation_spec s;
  s.job = "j";
  s.flat_size = 64;
  s.fragments = 2;
  s.sync_every = 2;
  {
    engine first(engine_options{dir.path(), "agg", "", {}, nullptr});
    REQUIRE(first.start(s, nanos{1}).ok());
  }
  const std::string job_dir = dir.path() + "/aggregator/j";
  REQUIRE(std::filesystem::exists(job_dir + "/state.bin"));
  REQUIRE(files::write_atomic(job_dir + "/other.txt", "kept").ok());
  {
    std::ofstream cut(job_dir + "/state.bin.tmp.4242.7");
    cut << "half a save";
  }
  engine second(engine_options{dir.path(), "agg", "", {}, nullptr});
  const auto loaded = second.load_saved(nanos{2});
  REQUIRE(loaded.size() == 1);
  CHECK(loaded[0] == "j");
  CHECK(!std::filesystem::exists(job_dir + "/state.bin.tmp.4242.7"));
  CHECK(std::filesystem::exists(job_dir + "/state.bin"));
  CHECK(std::filesystem::exists(job_dir + "/other.txt"));
}
