#include "services/scheduler/jobs/aggregation_grant.hpp"

#include "libs/diloco/grant/grant.hpp"
#include "libs/diloco/grant/stage_spec.hpp"
#include "libs/runspec/run_config.hpp"
#include "loom/v1/aggregator.pb.h"

namespace loom::scheduler {

std::string aggregation_grant_for(const job_rec& j, const stage_rec& s, const std::string& config_toml,
                                  const std::string& stage_dir, const std::string& init_from, std::string_view key) {
  if (key.empty() || config_toml.find("diloco") == std::string::npos) return "";  // most stages: no parse
  // The config as the trainer reads it (worker.cpp: the scheduler's init_from placed over it).
  std::vector<std::string> placed;
  if (!init_from.empty()) placed.push_back("model.init_from=\"" + init_from + "\"");
  auto cfg = runspec::parse_run_config(config_toml, stage_dir + "/config.toml", placed);
  if (!cfg || !cfg->is_diloco()) return "";  // a config that does not parse fails at the trainer, naming why
  loom::v1::AggregationGrant g;
  g.set_job(j.id);
  g.set_stage(s.name);
  g.set_tenant(j.tenant);
  g.set_stage_dir(stage_dir);
  for (const auto& site : diloco::stage_sites(*cfg)) g.add_sites(site);
  g.set_edge_sites(!cfg->diloco.site_names.empty());
  diloco::stage_spec(*cfg, diloco::aggregation_name(j.id, s.name), cfg->init_from, g.mutable_spec());
  const std::int64_t from_ns = s.started_ns ? s.started_ns : j.submitted_ns;
  g.set_expires_unix(from_ns / 1'000'000'000 + std::chrono::duration_cast<std::chrono::seconds>(grant_lifetime).count());
  diloco::sign_grant(&g, key);
  return g.SerializeAsString();
}

}  // namespace loom::scheduler
