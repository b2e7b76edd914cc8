// InspectCheckpointRequest at the aggregator (a cloud split over hosts): for
// this deployment's scheduler key only; a checkpoint the aggregator exported
// under its <data>/jobs verifies and is described exactly as the scheduler's
// own inspection describes it; anything outside jobs/ (a link leading out
// included) is permission_denied whether it exists or not; a tampered file is
// corruption, a missing directory not_found.
#include "services/aggregator/aggregator_logic.hpp"
#include "services/aggregator/checkpoint_inspect.hpp"

#include "libs/auth/token.hpp"
#include "libs/ckpt/inspect.hpp"
#include "libs/ckpt/safetensors.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/layout/layout.hpp"
#include "libs/model/gpt_config.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/engine.hpp"
#include "services/aggregator/global_export.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <vector>

using namespace loom;
namespace fs = std::filesystem;

namespace {

model::gpt2_config tiny() { return {2, 2, 8, 8, 16, 16}; }

// A cloud data dir with its checkpoint key and an aggregator's logic over it.
struct cloud_fixture {
  files::temp_dir dir{"loom-inspect"};
  layout::paths paths{dir.path()};
  std::string key;
  std::unique_ptr<aggregator::aggregator_logic> logic;

  cloud_fixture() {
    REQUIRE(auth::create_token_key(paths.checkpoint_key()).ok());
    key = auth::load_token_key(paths.checkpoint_key()).value();
    aggregator::engine_options o{dir.path(), "aggregator@test", "local", {}, nullptr};
    logic = std::make_unique<aggregator::aggregator_logic>(std::make_shared<aggregator::engine>(std::move(o)),
                                                           aggregator::delta_endpoint{"tcp://127.0.0.1:5555", "k"},
                                                           dir.path());
  }
  // What the aggregator's export writes: <stage_dir>/checkpoints/step-<step>.
  std::string export_global(const std::string& stage_dir, std::uint64_t step) {
    std::vector<float> theta(model::make_param_layout(tiny()).total, 0.25f);
    auto d = aggregator::write_global_snapshot(dir.path(), tiny(), theta, stage_dir, step,
                                               "{\"step\":" + std::to_string(step) + "}");
    REQUIRE_MESSAGE(d.ok(), d.err().message);
    return *d;
  }
  runtime::handled ask(const std::string& checkpoint, const std::string& peer = "scheduler", bool manifest_only = false) {
    v1::InspectCheckpointRequest q;
    q.set_checkpoint(checkpoint);
    q.set_manifest_only(manifest_only);
    runtime::call_context ctx{"r1", "svc:scheduler", "operator", "local", "default", peer};
    return logic->handle("loom.v1.InspectCheckpointRequest", q.SerializeAsString(), ctx);
  }
};

}  // namespace

TEST_CASE("the aggregator describes a checkpoint it exported under its jobs dir exactly as the scheduler's own inspection does") {
  cloud_fixture f;
  const std::string stage = f.paths.jobs() + "/job-1/pretrain";
  const auto d = f.export_global(stage, 7);
  REQUIRE(files::write_atomic(stage + "/eval.json", R"({"before":{"loss":3.5},"after":{"loss":2.25}})").ok());
  auto h = f.ask(d);
  REQUIRE_MESSAGE(h.code == errc::ok, h.message);
  auto rep = runtime::parse_as<v1::InspectCheckpointReply>(h.body);
  REQUIRE(rep.ok());
  auto local = ckpt::inspect_snapshot(d, f.key);
  REQUIRE(local.ok());
  CHECK(rep->step() == 7);
  CHECK(rep->step() == local->step);
  CHECK(rep->manifest_sha256() == local->manifest_sha256);
  CHECK(rep->params_sha256() == local->params_sha256);
  CHECK(rep->manifest_sha256().size() == 64);
  CHECK(rep->params_sha256() != rep->manifest_sha256());
  CHECK(std::map<std::string, double>(rep->eval().begin(), rep->eval().end()) == local->eval);
  CHECK(rep->eval().at("eval_after_loss") == doctest::Approx(2.25));
}

TEST_CASE("a checkpoint outside the aggregator's jobs dir, or reached through a link leading out, is permission_denied naming it") {
  cloud_fixture f;
  // A good snapshot signed with the same key, but outside jobs/.
  REQUIRE(files::make_dirs(f.paths.jobs(), 0700).ok());
  ckpt::snapshot_writer w;
  REQUIRE(w.begin(f.dir.path() + "/elsewhere", 5).ok());
  std::vector<float> p(64, 1.0f);
  std::vector<ckpt::tensor_view> t = {{"wte", ckpt::dtype::F32, {8, 8}, p.data(), p.size() * sizeof(float)}};
  REQUIRE(ckpt::write_safetensors(w.dir() + "/model.safetensors", t).ok());
  REQUIRE(w.add_existing("model.safetensors").ok());
  const auto outside = w.publish(f.key, 0).value();
  REQUIRE(ckpt::inspect_snapshot(outside, f.key).ok());
  fs::create_directories(f.paths.jobs() + "/job-2/pretrain");
  fs::create_directory_symlink(f.dir.path() + "/elsewhere", f.paths.jobs() + "/job-2/pretrain/checkpoints");
  const std::string via_link = f.paths.jobs() + "/job-2/pretrain/checkpoints/step-000005";
  for (const std::string& p : {outside, via_link, f.paths.jobs() + "/../elsewhere/step-000005",
                               std::string("/nowhere/at/all/step-000001"), f.dir.path() + "/keys/checkpoint.key"}) {
    auto h = f.ask(p);
    CHECK_MESSAGE(h.code == errc::permission_denied, p << ": " << h.message);
    CHECK_MESSAGE(h.message.find(p) != std::string::npos, h.message);
    CHECK(h.body.empty());
  }
  auto relative = f.ask("jobs/job-1/pretrain/checkpoints/step-000005");
  CHECK(relative.code == errc::permission_denied);
  CHECK(relative.message.find("is not an absolute path under " + f.paths.jobs()) != std::string::npos);
  CHECK(f.ask("").code == errc::permission_denied);
}

TEST_CASE("a tampered checkpoint under the jobs dir is corruption naming the file, a missing one not_found") {
  cloud_fixture f;
  const auto d = f.export_global(f.paths.jobs() + "/job-3/pretrain", 4);
  {
    std::fstream io(d + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-4, std::ios::end);
    io.write("\x01\x02\x03\x04", 4);
  }
  // The manifest alone (the stage's result check) still verifies: no file is hashed.
  auto cheap = f.ask(d, "scheduler", true);
  REQUIRE_MESSAGE(cheap.code == errc::ok, cheap.message);
  auto step = runtime::parse_as<v1::InspectCheckpointReply>(cheap.body);
  REQUIRE(step.ok());
  CHECK(step->step() == 4);
  CHECK(step->params_sha256().empty());
  auto bad = f.ask(d);
  CHECK(bad.code == errc::corruption);
  CHECK(bad.message.find("model.safetensors: sha256 mismatch") != std::string::npos);
  // A manifest tampered with fails either way.
  {
    std::fstream io(d + "/MANIFEST.json", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-3, std::ios::end);
    io.write("x", 1);
  }
  CHECK(f.ask(d, "scheduler", true).code == errc::corruption);
  CHECK(f.ask(d).code == errc::corruption);
  auto missing = f.ask(f.paths.jobs() + "/job-3/pretrain/checkpoints/step-000009");
  CHECK(missing.code == errc::not_found);
  CHECK(missing.message.find("step-000009 is not there") != std::string::npos);
  CHECK(f.ask(f.paths.jobs() + "/job-3/pretrain/checkpoints").code == errc::invalid_argument);  // not step-N
}

TEST_CASE("only this deployment's scheduler key may ask the aggregator to inspect a checkpoint, whatever the token") {
  cloud_fixture f;
  const auto d = f.export_global(f.paths.jobs() + "/job-4/pretrain", 2);
  REQUIRE(f.ask(d).code == errc::ok);
  for (const std::string peer : {"client", "trainer", "ingest", "audit", "aggregator", "site:north:scheduler",
                                 "site:north:trainer", "unenrolled", ""}) {
    auto h = f.ask(d, peer);
    CHECK_MESSAGE(h.code == errc::permission_denied, "peer '" << peer << "': " << h.message);
    CHECK(h.message.find("for this deployment's scheduler") != std::string::npos);
    CHECK(h.message.find(d) == std::string::npos);  // nothing of the path is told
  }
  CHECK(aggregator::scheduler_only("scheduler", "").ok());
  CHECK(aggregator::scheduler_only("client", "matrix-admin").err().message.find("not matrix-admin over client") !=
        std::string::npos);
}
