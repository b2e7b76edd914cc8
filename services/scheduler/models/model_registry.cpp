#include "services/scheduler/models/model_registry.hpp"

#include "libs/auth/token.hpp"
#include "libs/runspec/run_config.hpp"
#include "libs/store/database.hpp"
#include "services/scheduler/jobs/job_store.hpp"
#include "services/scheduler/models/data_hashes.hpp"

#include <array>
#include <cstdio>
#include <set>
#include <sstream>

namespace loom::scheduler {
namespace {

std::string version_id(std::uint64_t seq) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "mv-%06llu", static_cast<unsigned long long>(seq));
  return buf;
}

// The resolved config's lines as "[section] key = value", for diff.
std::set<std::string> config_lines(const std::string& toml) {
  std::set<std::string> out;
  std::istringstream in(toml);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.front() == '[') {
      section = line;
      continue;
    }
    out.insert(section.empty() ? line : section + " " + line);
  }
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

checkpoint_inspector verifying_inspector(std::string key_path) {
  return [key_path = std::move(key_path)](const std::string& dir) -> result<checkpoint_facts> {
    // Read at each call: the trainer makes the key on its first snapshot,
    // which may be after the scheduler started.
    auto key = auth::load_token_key(key_path);
    if (!key) return make_error(key.code(), "checkpoint signing key: " + key.err().message);
    return ckpt::inspect_snapshot(dir, *key);
  };
}

stage_outcome outcome_of(const job_rec& j, std::size_t i) {
  const stage_rec& s = j.stages[i];
  stage_outcome o;
  o.tenant = j.tenant.empty() ? "default" : j.tenant;
  o.model = j.name;
  o.job_id = j.id;
  o.stage = s.name;
  o.checkpoint = s.checkpoint;
  o.config_toml = s.config_toml;
  o.parent_stage = i > 0 ? j.stages[i - 1].name : "";
  o.metrics = {{"loss", s.loss}, {"first_loss", s.first_loss}, {"tokens_per_s", s.tokens_per_s},
               {"steps", static_cast<double>(s.step)}};
  // A later stage's stored config has no model.init_from (the scheduler
  // hands the previous stage's checkpoint over at placement): read it with that
  // checkpoint, or an alignment stage would not parse and be recorded as lm.
  std::vector<std::string> parent;
  if (i > 0 && !j.stages[i - 1].checkpoint.empty()) parent.push_back("model.init_from=" + j.stages[i - 1].checkpoint);
  auto spec = runspec::parse_run_config(s.config_toml, j.id + "/" + s.name, parent);
  o.kind = spec ? spec->kind : "lm";
  o.tokenizer = spec && !spec->tokenizer.empty() ? spec->tokenizer : "gpt2";
  if (spec) {
    o.init_from = spec->init_from;
    if (!spec->dataset.empty()) o.datasets.push_back("dataset:" + spec->dataset);
    if (!spec->text.empty()) o.datasets.push_back("text:" + spec->text);
    if (!spec->sft.empty()) o.datasets.push_back("sft:" + spec->sft);
    if (!spec->shards.empty()) o.datasets.push_back("shards:" + spec->shards);
    if (!spec->prefs.empty()) o.datasets.push_back("prefs:" + spec->prefs);
    if (spec->synthetic_prefs) o.datasets.push_back("prefs:synthetic(seed " + std::to_string(spec->seed) + ")");
  }
  return o;
}

model_registry::model_registry(store::database* db, clock_fn now, checkpoint_inspector inspect, std::string data_dir)
    : db_(db), now_(std::move(now)), inspect_(std::move(inspect)), data_dir_(std::move(data_dir)) {}

result<model_version_rec> model_registry::register_stage(const stage_outcome& s) {
  if (s.checkpoint.empty())
    return make_error(errc::not_found, "stage " + s.stage + " of " + s.job_id + " reported no final checkpoint");
  auto facts = inspect_(s.checkpoint);  // outside the transaction: it reads files
  if (!facts) return facts.err();
  const auto hashes = data_dir_.empty() ? std::map<std::string, std::string>{} : data_hashes(s.datasets, data_dir_);
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(now_().time_since_epoch()).count();
  model_version_rec v;
  auto st = db_->with_transaction([&](store::transaction& tx) -> status {
    auto seen = find_stage_version(tx, s.job_id, s.stage);
    if (!seen) return seen.err();
    if (*seen) {
      v = **seen;
      return make_error(errc::already_exists, "stage " + s.stage + " of " + s.job_id + " is " + v.version);
    }
    std::optional<model_version_rec> parent;
    if (!s.parent_stage.empty()) {
      auto p = find_stage_version(tx, s.job_id, s.parent_stage);
      if (!p) return p.err();
      parent = *p;
    } else if (!s.init_from.empty()) {
      auto p = find_checkpoint_version(tx, s.tenant, s.init_from);
      if (!p) return p.err();
      parent = *p;
    }
    auto seq = max_model_seq(tx);
    if (!seq) return seq.err();
    v.seq = *seq + 1;
    v.version = version_id(v.seq);
    v.tenant = s.tenant;
    v.model = s.model;
    v.job_id = s.job_id;
    v.stage = s.stage;
    v.kind = s.kind;
    v.checkpoint = s.checkpoint;
    v.step = facts->step;
    v.manifest_sha256 = facts->manifest_sha256;
    v.params_sha256 = facts->params_sha256;
    v.parent = parent ? parent->version : "";
    v.datasets = s.datasets;
    v.data_sha256 = hashes;
    v.tokenizer = s.tokenizer;
    v.metrics = s.metrics;
    v.metrics.insert(facts->eval.begin(), facts->eval.end());
    v.config_toml = s.config_toml;
    v.created_ns = now;
    if (auto w = insert_model_version(tx, v); !w) return w;
    return set_model_current(tx, {v.tenant, v.model, v.version, "scheduler", "new version", now});
  });
  if (!st) return st.err();
  return v;
}

result<std::vector<model_version_rec>> model_registry::list(const model_scope& scope, const std::string& model,
                                                            std::uint64_t limit) {
  return db_->with_read_transaction(
      [&](store::transaction& tx) { return load_model_versions(tx, scope, model, limit); });
}

result<model_version_rec> model_registry::get(const model_scope& scope, const std::string& version) {
  auto v = db_->with_read_transaction([&](store::transaction& tx) { return find_model_version(tx, version); });
  if (!v) return v.err();
  // Another tenant's version reads exactly like one that does not exist.
  if (!*v || !scope.sees((*v)->tenant))
    return make_error(errc::not_found, "no model version " + version +
                                           (scope.all_tenants ? "" : " in tenant " + scope.tenant) +
                                           " (`loom model list` shows them)");
  return **v;
}

result<std::vector<model_version_rec>> model_registry::lineage(const model_scope& scope, const std::string& version) {
  constexpr int max_ancestors = 256;  // a longer chain is a cycle in the registry, not a history
  auto v = get(scope, version);
  if (!v) return v.err();
  std::vector<model_version_rec> out{*v};
  while (!out.back().parent.empty()) {
    if (out.size() > max_ancestors)
      return make_error(errc::corruption, "the lineage of " + version + " is longer than 256 versions (a cycle?)");
    auto p = get(scope, out.back().parent);
    if (!p) {
      if (p.code() == errc::not_found) break;  // gone or another tenant's: the chain ends here
      return p.err();
    }
    out.push_back(std::move(*p));
  }
  return out;
}

result<std::set<std::string>> model_registry::current_versions(const model_scope& scope) {
  return db_->with_read_transaction([&](store::transaction& tx) { return load_current_versions(tx, scope); });
}

result<bool> model_registry::is_current(const model_version_rec& v) {
  auto cur = db_->with_read_transaction(
      [&](store::transaction& tx) { return load_model_current(tx, v.tenant, v.model); });
  if (!cur) return cur.err();
  return *cur == v.version;
}

result<std::vector<std::array<std::string, 3>>> model_registry::diff(const model_version_rec& a,
                                                                      const model_version_rec& b) {
  std::vector<std::array<std::string, 3>> out;
  auto field = [&](const std::string& name, const std::string& x, const std::string& y) {
    if (x != y) out.push_back({name, x, y});
  };
  field("model", a.model, b.model);
  field("job", a.job_id, b.job_id);
  field("stage", a.stage, b.stage);
  field("kind", a.kind, b.kind);
  field("step", std::to_string(a.step), std::to_string(b.step));
  field("parent", a.parent, b.parent);
  field("datasets", joined(a.datasets), joined(b.datasets));
  auto pins = [](const model_version_rec& v) {
    std::vector<std::string> out;
    for (const auto& [d, h] : v.data_sha256) out.push_back(d + "=" + h);
    return joined(out);
  };
  field("data_sha256", pins(a), pins(b));
  field("tokenizer", a.tokenizer, b.tokenizer);
  field("params_sha256", a.params_sha256, b.params_sha256);
  field("manifest_sha256", a.manifest_sha256, b.manifest_sha256);
  std::set<std::string> keys;
  for (const auto& [k, v] : a.metrics) keys.insert(k);
  for (const auto& [k, v] : b.metrics) keys.insert(k);
  for (const auto& k : keys) {
    auto x = a.metrics.find(k), y = b.metrics.find(k);
    field("metric " + k, x == a.metrics.end() ? "-" : number(x->second), y == b.metrics.end() ? "-" : number(y->second));
  }
  const auto ca = config_lines(a.config_toml), cb = config_lines(b.config_toml);
  for (const auto& l : ca)
    if (!cb.count(l)) out.push_back({"config", l, ""});
  for (const auto& l : cb)
    if (!ca.count(l)) out.push_back({"config", "", l});
  return out;
}

result<std::string> model_registry::rollback(const model_scope& scope, const std::string& version,
                                             const std::string& by, const std::string& reason) {
  auto v = get(scope, version);
  if (!v) return v.err();
  auto facts = inspect_(v->checkpoint);
  if (!facts)
    return make_error(facts.code() == errc::not_found ? errc::not_found : errc::corruption,
                      "cannot roll back to " + version + ": " + facts.err().message);
  if (facts->params_sha256 != v->params_sha256 || facts->manifest_sha256 != v->manifest_sha256)
    return make_error(errc::corruption, "cannot roll back to " + version + ": its checkpoint " + v->checkpoint +
                                            " now hashes to params " + facts->params_sha256 + ", manifest " +
                                            facts->manifest_sha256 + "; recorded params " + v->params_sha256 +
                                            ", manifest " + v->manifest_sha256);
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(now_().time_since_epoch()).count();
  std::string previous;
  auto st = db_->with_transaction([&](store::transaction& tx) -> status {
    auto cur = load_model_current(tx, v->tenant, v->model);
    if (!cur) return cur.err();
    previous = *cur;
    return set_model_current(tx, {v->tenant, v->model, v->version, by, reason.empty() ? "rollback" : reason, now});
  });
  if (!st) return st.err();
  return previous;
}

}  // namespace loom::scheduler
