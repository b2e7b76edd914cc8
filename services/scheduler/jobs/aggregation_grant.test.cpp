// The grant a diloco stage's assignment carries: what it binds, and none for other stages.
#include "services/scheduler/jobs/aggregation_grant.hpp"

#include "libs/diloco/grant/grant.hpp"
#include "loom/v1/aggregator.pb.h"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::scheduler;

namespace {

const std::string key(32, 'k');
constexpr std::int64_t started_s = 1'700'000'000;

const char* diloco_toml =
    "kind = \"diloco\"\n[model]\nlayers = 2\nheads = 2\nchannels = 64\nmax_seq_len = 64\n"
    "[data]\ndataset = \"text\"\n[train]\nbatch = 8\nseq_len = 64\nsteps = 16\nseed = 9\n"
    "[diloco]\nsites = [\"north\", \"south\"]\ninner_steps = 8\n";

job_rec job() {
  job_rec j;
  j.id = "job-000042";
  j.tenant = "acme";
  j.out_dir = "/data/jobs/job-000042";
  j.submitted_ns = (started_s - 10) * 1'000'000'000;
  stage_rec s;
  s.name = "pretrain";
  s.config_toml = diloco_toml;
  s.started_ns = started_s * 1'000'000'000;
  j.stages.push_back(s);
  return j;
}

}  // namespace

TEST_CASE("a diloco stage's assignment carries a grant binding job, stage, tenant, stage dir, sites, spec and expiry") {
  const auto j = job();
  const std::string bytes =
      aggregation_grant_for(j, j.stages[0], diloco_toml, "/data/jobs/job-000042/pretrain", "", key);
  REQUIRE_FALSE(bytes.empty());
  v1::AggregationGrant g;
  REQUIRE(g.ParseFromString(bytes));
  auto t = diloco::verify_grant(g, key, started_s + 60);
  REQUIRE_MESSAGE(t.ok(), t.err().to_string());
  CHECK(t->job == "job-000042");
  CHECK(t->stage == "pretrain");
  CHECK(t->tenant == "acme");
  CHECK(t->stage_dir == "/data/jobs/job-000042/pretrain");
  CHECK(t->sites == std::vector<std::string>{"north", "south"});
  CHECK(t->edge_sites);
  CHECK(t->expires_unix == started_s + 30 * 24 * 3600);
  CHECK(g.spec().job() == "job-000042.pretrain");
  CHECK(g.spec().init_seed() == 9);  // a first stage: GPT-2's init from train.seed
  CHECK(g.spec().max_delta_tokens() == 16u * 8 * 64);
  // The same placement, polled again: the same grant (the trainer's copy stays good).
  CHECK(aggregation_grant_for(j, j.stages[0], diloco_toml, "/data/jobs/job-000042/pretrain", "", key) == bytes);
  // Under another key it does not verify.
  CHECK_FALSE(diloco::verify_grant(g, std::string(32, 'x'), started_s).ok());
}

TEST_CASE("a later diloco stage's grant starts from the job's previous stage, this deployment's sites are site-0..N-1") {
  auto j = job();
  std::string toml = diloco_toml;
  toml.replace(toml.find("sites = [\"north\", \"south\"]"), 26, "sites = 3");
  const std::string prev = "/data/jobs/job-000042/lm/checkpoints";
  v1::AggregationGrant g;
  REQUIRE(g.ParseFromString(aggregation_grant_for(j, j.stages[0], toml, "/data/jobs/job-000042/pretrain", prev, key)));
  CHECK(g.spec().init_snapshot() == prev);
  CHECK(g.spec().init_seed() == 0);
  CHECK_FALSE(g.edge_sites());
  REQUIRE(g.sites_size() == 3);
  CHECK(g.sites(2) == "site-2");
}

TEST_CASE("no grant for a stage that is not diloco, or without the cloud's token key") {
  auto j = job();
  const std::string lm = "kind = \"lm\"\n[data]\ndataset = \"text\"\n[diloco]\nsites = 2\n";
  CHECK(aggregation_grant_for(j, j.stages[0], lm, "/data/jobs/job-000042/pretrain", "", key).empty());
  CHECK(aggregation_grant_for(j, j.stages[0], diloco_toml, "/data/jobs/job-000042/pretrain", "", "").empty());
}
