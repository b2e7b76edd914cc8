// The spec a diloco stage runs, as the scheduler grants it and a trainer asks for it.
#include "libs/diloco/grant/stage_spec.hpp"

#include "loom/v1/aggregator.pb.h"

#include <doctest/doctest.h>

using namespace loom;

namespace {

runspec::run_config diloco_config() {
  auto c = runspec::parse_run_config(
      "kind = \"diloco\"\n[model]\nlayers = 2\nheads = 2\nchannels = 64\nmax_seq_len = 64\n"
      "[data]\ndataset = \"text\"\n[train]\nbatch = 8\nseq_len = 64\ngrad_accum = 2\nsteps = 16\nseed = 7\n"
      "[diloco]\nsites = [\"north\", \"south\"]\ninner_steps = 8\nfragments = 2\ncodec = \"int4\"\nmin_sites = 1\n",
      "/cfg/config.toml", {});
  REQUIRE_MESSAGE(c.ok(), c.err().to_string());
  return *c;
}

}  // namespace

TEST_CASE("a diloco stage's spec comes from its config: model, rounds, the token bound and min_sites") {
  const auto cfg = diloco_config();
  v1::AggregationSpec s;
  diloco::stage_spec(cfg, "job-1.pretrain", "", &s);
  CHECK(s.job() == "job-1.pretrain");
  CHECK(s.gpt2_layers() == 2);
  CHECK(s.gpt2_channels() == 64);
  CHECK(s.fragments() == 2);
  CHECK(s.sync_every() == 8);
  CHECK(s.codec() == "int4");
  CHECK(s.init_seed() == 7);
  CHECK(s.init_snapshot().empty());
  CHECK(s.max_delta_tokens() == 16u * 8 * 64 * 2);
  CHECK(s.min_sites() == 1);
  v1::AggregationSpec later;
  diloco::stage_spec(cfg, "job-1.pretrain", "/data/jobs/job-1/lm/checkpoints", &later);
  CHECK(later.init_snapshot() == "/data/jobs/job-1/lm/checkpoints");
  CHECK(later.init_seed() == 0);
  CHECK(diloco::stage_sites(cfg) == std::vector<std::string>{"north", "south"});
}

TEST_CASE("a stage of this deployment's trainers has sites site-0..N-1, aggregation names keep to [A-Za-z0-9._-] and 64 characters") {
  auto cfg = diloco_config();
  cfg.diloco.site_names.clear();
  cfg.diloco.sites = 3;
  CHECK(diloco::stage_sites(cfg) == std::vector<std::string>{"site-0", "site-1", "site-2"});
  CHECK(diloco::aggregation_name("job-000001", "pre train/x") == "job-000001.pre-train-x");
  const auto a = diloco::aggregation_name("job-1", std::string(100, 's') + "a"),
             b = diloco::aggregation_name("job-1", std::string(100, 's') + "b");
  CHECK(a.size() == 64);
  CHECK(a != b);  // long names that share a prefix are still two aggregations
}

TEST_CASE("diloco.min_sites must be between 1 and the number of sites") {
  auto bad = runspec::parse_run_config("kind = \"diloco\"\n[data]\ndataset = \"t\"\n[diloco]\nsites = 2\nmin_sites = 3\n",
                                       "/cfg/config.toml", {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().message.find("diloco.min_sites") != std::string::npos);
  auto zero = runspec::parse_run_config("kind = \"diloco\"\n[data]\ndataset = \"t\"\n[diloco]\nsites = 2\nmin_sites = 0\n",
                                        "/cfg/config.toml", {});
  CHECK_FALSE(zero.ok());
  auto fine = runspec::parse_run_config("kind = \"diloco\"\n[data]\ndataset = \"t\"\n[diloco]\nsites = 2\nmin_sites = 2\n",
                                        "/cfg/config.toml", {});
  CHECK(fine.ok());
}
