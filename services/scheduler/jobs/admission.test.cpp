// Admission at submit (zone, memory, threads, group size) and the reasons a
// queued stage gives for waiting. Plain values; no clock.
#include "services/scheduler/jobs/admission.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::scheduler;

namespace {

runspec::job_plan plan_of(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), "text=/data/corpus.txt");
  auto p = runspec::resolve_template("t", "[model]\nlayers = 4\nheads = 4\nchannels = 128\nmax_seq_len = 64\n"
                                          "[train]\nbatch = 4\nseq_len = 64\nthreads = 2\n",
                                     overrides);
  REQUIRE(p.ok());
  return *p;
}

trainer_view trainer(const std::string& id, std::uint64_t gib = 23, std::uint32_t cores = 2) {
  return {id, "local", cores, gib << 30, true, false, ""};
}

const std::set<std::string> zones{"local"};

}  // namespace

TEST_CASE("a stage whose memory estimate fits no trainer is refused with the estimate and the node's memory") {
  const auto ok = plan_of({});
  CHECK(admit(ok, "local", zones, {trainer("t1")}).ok());
  const auto huge = plan_of({"batch=65536"});
  auto st = admit(huge, "local", zones, {trainer("t1")});
  REQUIRE(!st.ok());
  CHECK(st.code() == errc::invalid_argument);
  CHECK(st.err().message.find("stage pretrain needs an estimated") != std::string::npos);
  CHECK(st.err().message.find("GiB (GiB: parameters") != std::string::npos);
  CHECK(st.err().message.find("17.25 GiB") != std::string::npos);  // 3/4 of 23 GiB
  CHECK(st.err().message.find("train.batch (now 65536)") != std::string::npos);
}

TEST_CASE("threads beyond the largest trainer's cores are refused, 0 and up to the cores are taken") {
  auto st = admit(plan_of({"threads=1000"}), "local", zones, {trainer("t1"), trainer("t2", 23, 4)});
  REQUIRE(!st.ok());
  CHECK(st.err().message.find("train.threads 1000 exceeds the 4 cores") != std::string::npos);
  CHECK(admit(plan_of({"threads=4"}), "local", zones, {trainer("t1"), trainer("t2", 23, 4)}).ok());
  CHECK(admit(plan_of({"threads=0"}), "local", zones, {trainer("t1")}).ok());
}

TEST_CASE("an unknown zone is refused naming the known ones, a known zone without trainers yet is taken") {
  auto st = admit(plan_of({}), "mars", zones, {trainer("t1")});
  REQUIRE(!st.ok());
  CHECK(st.code() == errc::not_found);
  CHECK(st.err().message.find("zone mars is not a zone of this deployment (known: local)") != std::string::npos);
  CHECK(admit(plan_of({"batch=65536"}), "local", zones, {}).ok());  // starting up: placement decides
}

TEST_CASE("a gang larger than the zone's trainers is taken (more may start) and waits saying why") {
  CHECK(admit(plan_of({"train.grad_accum=4", "trainers=3"}), "local", zones, {trainer("t1"), trainer("t2")}).ok());
  CHECK(waiting_reason("local", 3, 1 << 20, {trainer("t1"), trainer("t2")}) ==
        "a group of 3 trainers; zone local has 2 that can take it (draining ones excluded)");
}

TEST_CASE("a queued stage says why it waits") {
  CHECK(waiting_reason("local", 1, 1 << 20, {}) == "no live trainer in zone local");
  auto small = trainer("t1", 1);  // 1 GiB: 768 MiB usable
  CHECK(waiting_reason("local", 1, 2ull << 30, {small}).find("needs an estimated 2.00 GiB per trainer") !=
        std::string::npos);
  auto busy = trainer("t1");
  busy.running = "job-000001/pretrain";
  CHECK(waiting_reason("local", 1, 1 << 20, {busy}) == "waiting for a free trainer: t1 runs job-000001/pretrain");
  auto draining = trainer("t2");
  draining.draining = true;
  CHECK(waiting_reason("local", 2, 1 << 20, {trainer("t1"), draining}).find("a group of 2 trainers") !=
        std::string::npos);
  CHECK(waiting_reason("local", 1, 1 << 20, {trainer("t1")}).find("queued behind") != std::string::npos);
  auto dead = trainer("t1");
  dead.live = false;
  CHECK(waiting_reason("local", 1, 1 << 20, {dead}) == "no live trainer in zone local");
}
