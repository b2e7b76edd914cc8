// Cross-process, on loopback (issue 15, "through the real services"): a cloud
// (`loom up`) and four edge sites (`loom up --site NAME --cloud EP
// --enrol-token T`), each with its own data dir, store, one trainer and its
// own text imported as dataset "text". Every site's link to the cloud's
// aggregator goes through the link shaper (LOOM_LINK_SHAPE: 2 ms latency,
// 1 ms jitter, seeded per site). `pretrain-diloco-tiny` on the four sites is
// submitted to the cloud; mid-run the aggregator is killed with -9 (its
// watcher restarts it, it reloads its state.bin), later one site's trainer
// (its site's watcher restarts it, the group re-forms, every site resumes and
// joins again). The job still succeeds; every snapshot in the cloud's stage
// dir (the global model the aggregator exported) verifies against the cloud's
// checkpoint key, the newest is the aggregator's saved θ bit for bit and
// member 0's last snapshot byte for byte; every site's snapshots (from which
// they resumed) verify against that site's key; and the global model learned.
//
// Not checked: bitwise equality with an uninterrupted run. Which deltas a
// round holds depends on when they arrive (four processes, the shaper's
// jitter, the kills, the adaptive deadline), which no seed fixes across
// processes; so the global model's loss is checked against a random model's
// instead, as diloco_job_tests does.
#include "libs/ckpt/snapshot.hpp"
#include "tests/support/at_rest.hpp"
#include "tests/support/edge_sites.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cmath>
#include <cstdlib>
#include <set>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> names{"north", "south", "east", "west"};
const std::vector<std::string> corpora{"GPL-3", "GPL-2", "LGPL-2.1", "MPL-2.0"};
constexpr int steps = 32;  // 4 rounds of fragment 0 (H = 8)
constexpr std::size_t victim = 2;  // the site whose trainer is killed

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("a cloud and four edge sites on shaped links finish a diloco job through kill -9 of the aggregator and of a site's trainer, and the global snapshot chain verifies") {
  const auto t0 = std::chrono::steady_clock::now();
  // Read by each site's trainer (inherited through its `loom up`).
  struct shaped_env {
    shaped_env() { ::setenv("LOOM_LINK_SHAPE", "lat=2ms,jitter=1ms,seed=3", 1); }
    ~shaped_env() { ::unsetenv("LOOM_LINK_SHAPE"); }
  } shaped;
  cluster c;
  REQUIRE(c.up);
  std::vector<std::unique_ptr<edge_site>> sites;
  for (std::size_t s = 0; s < names.size(); ++s) sites.push_back(start_edge_site(c, names[s], corpora[s]));
  MESSAGE("cloud and 4 sites up, data imported: " << seconds_since(t0) << " s");

  auto sub = loom_json(c.home.path(),
                       {"job", "submit", "--template", "pretrain-diloco-tiny", "--set",
                        "diloco.sites=[\"north\", \"south\", \"east\", \"west\"]", "--set", "dataset=text", "--set",
                        "pretrain.steps=" + std::to_string(steps)});
  REQUIRE(sub.contains("id"));
  const std::string id = sub["id"].get<std::string>();

  // Mid-run, once fragment 0 closed two rounds and an open round holds a
  // delta: kill -9 the aggregator (its pid from the cloud's endpoints.json).
  long aggregator = 0;
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto a = aggregation(c);
                        if (!a || a->fragments_size() != 2 || a->fragments(0).round() < 2 ||
                            (a->fragments(0).arrived() == 0 && a->fragments(1).arrived() == 0))
                          return false;
                        aggregator = c.ep("aggregator").pid;
                        return true;
                      },
                      120s, 20ms),
                  loom_json(c.home.path(), {"job", "show", id}).dump());
  REQUIRE(::kill(static_cast<pid_t>(aggregator), SIGKILL) == 0);
  MESSAGE("aggregator killed: " << seconds_since(t0) << " s");

  // With the aggregator back and a round further: kill -9 east's trainer.
  long trainer = 0;
  REQUIRE(eventually(
      [&] {
        auto a = aggregation(c);
        if (!a || a->fragments_size() != 2 || a->fragments(0).round() < 3) return false;
        trainer = site_trainer_pid(*sites[victim]);
        return trainer > 0;
      },
      120s, 50ms));
  REQUIRE(::kill(static_cast<pid_t>(trainer), SIGKILL) == 0);
  MESSAGE(names[victim] << "'s trainer killed: " << seconds_since(t0) << " s");

  const json j = wait_job_done(c.home.path(), id, 240s);
  REQUIRE_MESSAGE(j.value("state", "") == "succeeded", j.dump());
  MESSAGE("job done: " << seconds_since(t0) << " s");
  const json& pre = j["stages"][0];
  CHECK(pre["step"] == steps);
  CHECK(pre["generation"] == 2);  // re-formed once, after the trainer's kill
  // `loom job show`: a line per site (by name), each through to the last step.
  REQUIRE(pre["sites"].size() == names.size());
  std::set<std::string> reported;
  for (const auto& x : pre["sites"]) {
    reported.insert(x.value("site", ""));
    CHECK_MESSAGE(x["step"] == steps, x.dump());
    CHECK_MESSAGE(x["bytes_sent"].get<std::uint64_t>() > 0, x.dump());
  }
  CHECK(reported == std::set<std::string>(names.begin(), names.end()));
  // East's watcher restarted its trainer; every site's link was shaped.
  CHECK(site_trainer_pid(*sites[victim]) != trainer);
  for (auto& st : sites) {
    auto log = files::read_file(st->home.path() + "/logs/trainer.log");
    REQUIRE(log.ok());
    CHECK_MESSAGE(log->find("link to the aggregator shaped by LOOM_LINK_SHAPE") != std::string::npos, st->name);
    CHECK(log->find("diloco " + st->name + ": joined") != std::string::npos);
  }

  // The aggregator came back (another pid), reloaded the job and went on with
  // all four; the stage's end retired it (its status as it stood then).
  std::optional<v1::AggregationStatus> a;
  v1::RetiredAggregation retired;
  REQUIRE(eventually([&] { return (a = aggregation(c, &retired)).has_value(); }, 10s, 200ms));
  CHECK(retired.reason().rfind("exported to " + c.home.path() + "/jobs/" + id, 0) == 0);
  CHECK(retired.contributed_size() == static_cast<int>(names.size()));
  CHECK(c.ep("aggregator").pid != aggregator);
  CHECK(a->restarts() == 1);
  REQUIRE(a->fragments_size() == 2);
  for (const auto& f : a->fragments()) {
    CHECK(f.active_sites() == names.size());
    CHECK(f.round() >= 4);
  }

  // The chain of global snapshots in the cloud's stage dir: each verifies
  // (manifest HMAC with the cloud's checkpoint key, every file's SHA-256),
  // the newest is the stage's model, and it is the aggregator's θ bit for bit.
  const std::string ckpt_dir = pre["checkpoint"].get<std::string>();
  const std::string root = c.home.path() + "/jobs/" + id + "/pretrain/checkpoints";
  CHECK(ckpt_dir == root + "/" + ckpt::step_dir_name(steps));
  auto key = auth::load_token_key(layout::paths{c.home.path()}.checkpoint_key());
  REQUIRE(key.ok());
  std::optional<test::process_keys_of> cloud_keys(std::in_place, c.home.path());  // sealed at rest with the cloud's keys
  CHECK(atrest::is_sealed_file(ckpt_dir + "/model.safetensors"));
  int verified = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    const auto step = ckpt::parse_step_dir(e.path().filename().string());
    if (!step) continue;
    const auto problems = ckpt::verify_snapshot(e.path().string(), *step, *key);
    CHECK_MESSAGE(problems.empty(), e.path().string() << ": " << (problems.empty() ? "" : problems.front()));
    ++verified;
  }
  CHECK(verified >= 1);
  auto latest = ckpt::load_latest(root, *key);
  REQUIRE(latest.ok());
  CHECK(latest->step == steps);
  CHECK(latest->warnings.empty());
  // θ when the aggregation retired (its tombstone's SHA-256; its state is gone).
  const auto mine = snapshot_params(ckpt_dir, tiny_config());
  CHECK(params_sha256(mine) == retired.theta_sha256());
  CHECK_FALSE(fs::exists(c.home.path() + "/aggregator/" + a->spec().job() + "/state.bin"));
  cloud_keys.reset();
  MESSAGE(verified << " global snapshot(s) verified; rounds closed " << a->fragments(0).rounds_closed_total()
                   << ", late folded " << a->fragments(0).late_folded_total());
  // Each site's own snapshots verify with its own key (it resumed from them
  // after the kills), and member 0's last one is the global model too.
  for (auto& st : sites) {
    test::process_keys_of site_keys(st->home.path());  // its snapshots are sealed at rest with its own keys
    const std::string site_root = st->home.path() + "/jobs/" + id + "/pretrain/checkpoints";
    auto site_key = auth::load_token_key(layout::paths{st->home.path()}.checkpoint_key());
    REQUIRE(site_key.ok());
    for (const auto& e : fs::directory_iterator(site_root))
      if (const auto step = ckpt::parse_step_dir(e.path().filename().string()))
        CHECK_MESSAGE(ckpt::verify_snapshot(e.path().string(), *step, *site_key).empty(), e.path().string());
    auto l = ckpt::load_latest(site_root, *site_key);
    REQUIRE_MESSAGE(l.ok(), st->name);
    CHECK(l->step == steps);
  }
  auto cloud_model = atrest::read_object(ckpt_dir + "/model.safetensors", test::keys_of(c.home.path()).get());
  const std::string north_model = test::plain_file(sites[0]->home.path() + "/jobs/" + id + "/pretrain/checkpoints/" +
                                                       ckpt::step_dir_name(steps) + "/model.safetensors",
                                                   sites[0]->home.path());
  REQUIRE(cloud_model.ok());
  CHECK(*cloud_model == north_model);

  // What crossed from the sites since the restart: deltas and control messages only.
  {
    auto cli = c.client("aggregator", 3, 10000ms);
    REQUIRE(cli);
    auto r = cli->call(wire::request{wire::new_request_id(), "loom.v1.AggregatorStatusRequest", "",
                                     c.token(auth::role::viewer)});
    v1::AggregatorStatusReply rep;
    REQUIRE((r && r->ok() && rep.ParseFromString(r->body)));
    for (const auto& [type, n] : rep.frames_received())
      CHECK_MESSAGE((type == "DeltaHeader" || type == "DeltaJoin" || type == "GlobalPull" || type == "RoundStatusQuery"),
                    n << " frame(s) of type " << type);
    CHECK(rep.frames_received().count("DeltaHeader") == 1);
  }

  // The global model learned: its loss on north's text against a random model's.
  const std::string text = std::string(licences) + "/" + corpora[0];
  const double global_loss = model_loss(c.home.path(), text, ckpt_dir);
  const double random_loss = model_loss(c.home.path(), text, "");
  MESSAGE("loss " << pre["first_loss"].get<double>() << " -> " << pre["loss"].get<double>() << "; on " << corpora[0]
                  << ": the global model " << global_loss << ", a random one " << random_loss);
  CHECK(std::isfinite(global_loss));
  CHECK(global_loss < random_loss - 1.0);
  MESSAGE("whole test " << seconds_since(t0) << " s");
}
