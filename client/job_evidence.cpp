#include "client/job_evidence.hpp"
#include "libs/status/unix_time.hpp"
#include "client/typed_call.hpp"

#include "libs/files/files.hpp"
#include "libs/model/gpt_config.hpp"
#include "libs/runspec/run_config.hpp"
#include "loom/v1/audit.pb.h"
#include "loom/v1/ingest.pb.h"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/scheduler.pb.h"

#include <nlohmann/json.hpp>

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

namespace loom::cli {
namespace {

namespace dg = loom::diagnose;

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(loom::wall_now().time_since_epoch()).count());
}

dg::stage_fact stage_of(const loom::v1::StageInfo& s) {
  dg::stage_fact f;
  f.name = s.name();
  f.state = s.state();
  f.node = s.node();
  f.waiting = s.waiting();
  f.precision = s.precision();
  f.step = s.step();
  f.total_steps = s.total_steps();
  f.memory_bytes = s.memory_bytes();
  f.loss = s.loss();
  f.first_loss = s.first_loss();
  f.tokens_per_s = s.tokens_per_s();
  f.attempts = s.attempts();
  f.min_trainers = s.min_trainers();
  f.max_trainers = s.max_trainers();
  f.started_unix_ns = s.started_unix_ns();
  f.finished_unix_ns = s.finished_unix_ns();
  for (const auto& x : s.sites()) {
    f.sites.push_back({x.site(), x.node(), x.step(), x.round(), x.loss(), x.stall_s(), x.deltas_sent(),
                       x.deltas_deferred(), x.deltas_late(), x.deltas_dropped(), {}});
    const int n = std::min(x.curve_steps_size(), x.curve_losses_size());
    for (int i = 0; i < n; ++i) f.sites.back().curve.emplace_back(x.curve_steps(i), x.curve_losses(i));
  }
  for (const auto& m : s.missing_sites()) f.missing_sites.push_back(m);
  for (const auto& m : s.members()) f.members.push_back(m);
  return f;
}

// The stage's metrics.jsonl: one point per line that is a JSON object with a step.
std::vector<dg::step_point> read_steps(const std::string& text) {
  std::vector<dg::step_point> out;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    auto j = nlohmann::json::parse(text.substr(at, end - at), nullptr, false);
    at = end + 1;
    if (!j.is_object() || !j.contains("step")) continue;
    auto num = [&](const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; };
    out.push_back({j.value("step", std::uint64_t{0}), num("loss"), num("lr"), num("grad_norm"), num("tokens_per_s"),
                   num("ms_per_step")});
  }
  return out;
}

// What the stage's directory on this host says: its metrics and config.
void read_stage_dir(dg::evidence& e, dg::stage_fact& s, const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    if (s.state != "queued" && s.state != "cancelled")
      e.gaps.push_back("the files of stage " + s.name + ": " + dir + " is not on this host");
    return;
  }
  if (auto m = files::read_file(dir + "/metrics.jsonl"); m) s.steps = read_steps(*m);
  if (auto t = files::read_file(dir + "/config.toml"); t) {
    if (auto c = runspec::parse_run_config(*t, dir + "/config.toml", {}); c) {
      auto& f = s.config;
      f.known = true, f.kind = c->kind, f.precision = c->precision, f.threads = c->threads, f.batch = c->batch;
      f.grad_accum = c->grad_accum, f.seq_len = c->seq_len, f.steps = c->steps, f.warmup_steps = c->warmup_steps;
      f.lr = c->lr, f.keep = c->keep, f.text = *t, f.dataset = c->dataset, f.data_text = c->text;
      if (c->is_diloco()) {
        s.config.inner_steps = static_cast<int>(c->diloco.inner_steps);
        s.config.codec = c->diloco.codec;
      }
      s.config.layers = c->model.layers;
      s.config.heads = c->model.heads;
      s.config.channels = c->model.channels;
      s.config.params = model::make_param_layout(c->model).total;
      s.config.tokenizer = c->tokenizer;
      s.hpo = s.hpo || c->kind == "hpo";
    }
  }
}

// Free space of the nearest existing directory at or above `path`.
void read_disk(dg::evidence& e, std::string path) {
  std::error_code ec;
  while (!path.empty() && !std::filesystem::exists(path, ec)) path = std::filesystem::path(path).parent_path().string();
  struct statvfs v {};
  if (path.empty() || ::statvfs(path.c_str(), &v) != 0) return;
  e.disks.push_back({path, std::uint64_t(v.f_bavail) * v.f_frsize, std::uint64_t(v.f_blocks) * v.f_frsize});
}

// The dataset `name` at ingest, as the job's tenant sees it: its catalogue
// entry and the rules its latest import rejected by (of the first 10,000).
void read_dataset(context& c, dg::evidence& e, const std::string& name) {
  dg::dataset_fact d;
  d.name = name;
  loom::v1::DatasetStatusRequest q;
  q.set_name(name);
  q.set_for_tenant(e.tenant);
  auto st = typed_call<loom::v1::DatasetStatusReply>(c, "ingest", q, 1);
  if (!st) {
    e.gaps.push_back("dataset " + name + ": " + st.err().message);
    return;
  }
  d.documents = st->dataset().documents();
  d.tokens = st->dataset().tokens();
  d.rejects = st->dataset().rejects();
  if (st->has_last_task() && st->last_task().kind() == "import") d.source = st->last_task().source();
  if (d.rejects > 0) {
    loom::v1::ListRejectsRequest r;
    r.set_dataset(name);
    r.set_limit(10000);
    r.set_for_tenant(e.tenant);
    if (auto page = typed_call<loom::v1::ListRejectsReply>(c, "ingest", r, 1); page) {
      std::map<std::string, std::uint64_t> by;
      for (const auto& x : page->rejects()) ++by[x.rule()];
      d.sampled = static_cast<std::uint64_t>(page->rejects_size());
      d.rejects_by_rule.assign(by.begin(), by.end());
      std::stable_sort(d.rejects_by_rule.begin(), d.rejects_by_rule.end(),
                       [](const auto& a, const auto& b) { return a.second > b.second; });
      if (page->rejects_size() > 0) {
        const auto& x = page->rejects(0);
        d.example = x.rule() + " at " + x.file() + (x.line() > 0 ? ":" + std::to_string(x.line()) : "") +
                    (x.detail().empty() ? "" : ": " + x.detail());
      }
    } else {
      e.gaps.push_back("the rejects of dataset " + name + ": " + page.err().message);
    }
  }
  e.datasets.push_back(std::move(d));
}

// A stage's data.text on this host: its size in tokens (bytes: exact; GPT-2 BPE: about a quarter).
void read_text_data(dg::evidence& e, const std::string& path, const std::string& tokenizer) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    e.gaps.push_back("data.text " + path + ": " + ec.message());
    return;
  }
  dg::dataset_fact d;
  d.name = path;
  d.text_file = true;
  d.documents = 1;
  d.tokens_estimated = tokenizer != "bytes";
  d.tokens = d.tokens_estimated ? size / 4 : size;
  e.datasets.push_back(std::move(d));
}

}  // namespace

result<dg::evidence> job_evidence(context& c, const std::string& id) {
  dg::evidence e;
  e.now_unix_ns = now_ns();
  loom::v1::GetJobRequest req;
  req.set_id(id);
  auto rep = typed_call<loom::v1::GetJobReply>(c, "scheduler", req, 1);
  if (!rep) return rep.err();
  const auto& j = rep->job();
  e.job = j.id();
  e.name = j.name();
  e.template_name = j.template_name();
  e.state = j.state();
  e.message = j.message();
  e.zone = j.zone();
  e.tenant = j.tenant();
  e.submitted_unix_ns = j.submitted_unix_ns();
  for (const auto& ev : rep->events()) e.events.push_back({ev.unix_ns(), ev.stage(), ev.kind(), ev.text()});
  for (const auto& s : j.stages()) {
    auto f = stage_of(s);
    for (const auto& ev : e.events)
      if (ev.stage == f.name && ev.kind.starts_with("hpo_")) f.hpo = true;
    if (!j.out_dir().empty()) read_stage_dir(e, f, j.out_dir() + "/" + f.name);
    e.stages.push_back(std::move(f));
  }
  if (!j.out_dir().empty()) read_disk(e, j.out_dir());
  for (const auto& s : e.stages) {
    const auto& cfg = s.config;
    const std::string name = !cfg.dataset.empty() ? cfg.dataset : cfg.data_text;
    if (name.empty() || std::any_of(e.datasets.begin(), e.datasets.end(), [&](const auto& d) { return d.name == name; }))
      continue;
    if (!cfg.dataset.empty()) read_dataset(c, e, cfg.dataset);
    else read_text_data(e, cfg.data_text, cfg.tokenizer);
  }
  if (auto nodes = typed_call<loom::v1::ListNodesReply>(c, "scheduler", loom::v1::ListNodesRequest{}, 1); nodes) {
    for (const auto& n : nodes->nodes())
      e.nodes.push_back({n.node().value(), n.service(), n.zone(), n.state(), n.resources().cpu_cores(),
                         n.resources().memory_bytes(),
                         n.last_seen_unix_ns() && e.now_unix_ns > n.last_seen_unix_ns()
                             ? double(e.now_unix_ns - n.last_seen_unix_ns()) / 1e9
                             : 0.0});
  } else {
    e.gaps.push_back("the node roster: " + nodes.err().message);
  }
  loom::v1::AuditQueryRequest q;
  q.set_job_id(id);
  q.set_limit(10000);
  if (auto trail = typed_call<loom::v1::AuditQueryReply>(c, "audit", q, 1); trail) {
    for (const auto& a : trail->events())
      e.audit.push_back({a.seq(), a.action(), a.service(), a.reason(), a.unix_ns(), a.principal(),
                         loom::v1::Decision_Name(a.decision())});
  } else {
    e.gaps.push_back("the audit trail: " + trail.err().message);
  }
  return e;
}


}  // namespace loom::cli
