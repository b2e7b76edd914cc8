#include "services/scheduler/jobs/job_store.hpp"

#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"

#include <nlohmann/json.hpp>

namespace loom::scheduler {

const store::migration& jobs_migration() {
  // Times are unix nanoseconds. A job's stages are rows of job_stages (idx =
  // position in the pipeline); job_events is append-only, one seq per job.
  static const store::migration m{
      .owner = "scheduler",
      .version = 2,
      .description = "jobs, job_stages, job_events: training jobs and their pipeline stages",
      .sql = R"sql(
CREATE TABLE jobs (
  id TEXT NOT NULL PRIMARY KEY,
  seq BIGINT NOT NULL UNIQUE,
  request_id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  template_name TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  tenant TEXT NOT NULL,
  priority_class TEXT NOT NULL,
  zone TEXT NOT NULL DEFAULT '',
  principal TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL DEFAULT '',
  out_dir TEXT NOT NULL,
  overrides TEXT NOT NULL DEFAULT '[]',
  submitted_unix_ns BIGINT NOT NULL,
  updated_unix_ns BIGINT NOT NULL,
  next_event BIGINT NOT NULL DEFAULT 1
);
CREATE INDEX jobs_by_state ON jobs (state);
CREATE TABLE job_stages (
  job_id TEXT NOT NULL REFERENCES jobs (id),
  idx BIGINT NOT NULL,
  name TEXT NOT NULL,
  config_toml TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'queued', 'running', 'succeeded', 'failed', 'cancelled')),
  step BIGINT NOT NULL DEFAULT 0,
  total_steps BIGINT NOT NULL DEFAULT 0,
  loss DOUBLE PRECISION NOT NULL DEFAULT 0,
  first_loss DOUBLE PRECISION NOT NULL DEFAULT 0,
  tokens_per_s DOUBLE PRECISION NOT NULL DEFAULT 0,
  node TEXT NOT NULL DEFAULT '',
  checkpoint TEXT NOT NULL DEFAULT '',
  attempts BIGINT NOT NULL DEFAULT 0,
  started_unix_ns BIGINT NOT NULL DEFAULT 0,
  finished_unix_ns BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (job_id, idx)
);
CREATE TABLE job_events (
  job_id TEXT NOT NULL REFERENCES jobs (id),
  seq BIGINT NOT NULL,
  unix_ns BIGINT NOT NULL,
  stage TEXT NOT NULL DEFAULT '',
  kind TEXT NOT NULL,
  text TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, seq)
);
)sql",
      .append_only_tables = {"job_events"}};
  return m;
}

const store::migration& groups_migration() {
  // members: a JSON array of trainer node ids by rank (data-parallel groups).
  static const store::migration m{
      .owner = "scheduler",
      .version = 3,
      .description = "job_stages.members, job_stages.generation: a stage's trainer group",
      .sql = R"sql(
ALTER TABLE job_stages ADD COLUMN members TEXT NOT NULL DEFAULT '[]';
ALTER TABLE job_stages ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
)sql"};
  return m;
}

const store::migration& spec_migration() {
  // Stages written before v4 read 0 for memory_bytes and 1..1 trainers: the
  // job manager then derives them once from config_toml (job_manager::load).
  static const store::migration m{
      .owner = "scheduler",
      .version = 4,
      .description = "job_stages spec figures and node losses; job_requests: request ids per principal",
      .sql = R"sql(
ALTER TABLE job_stages ADD COLUMN min_trainers BIGINT NOT NULL DEFAULT 0;
ALTER TABLE job_stages ADD COLUMN max_trainers BIGINT NOT NULL DEFAULT 0;
ALTER TABLE job_stages ADD COLUMN memory_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE job_stages ADD COLUMN node_losses BIGINT NOT NULL DEFAULT 0;
CREATE TABLE job_requests (
  principal TEXT NOT NULL,
  request_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('submit', 'cancel')),
  body_sha256 TEXT NOT NULL,
  job_id TEXT NOT NULL,
  unix_ns BIGINT NOT NULL,
  PRIMARY KEY (principal, request_id)
);
)sql",
      .append_only_tables = {"job_requests"}};
  return m;
}

const store::migration& submit_request_migration() {
  // A submit's request record is its job row (request_id is already the
  // unique principal + request id key): one row and one index entry fewer
  // per admission than a job_requests row. job_requests keeps cancels, and
  // the submits written by v4-v6.
  static const store::migration m{
      .owner = "scheduler",
      .version = 7,
      .description = "jobs.body_sha256: a submit's request record lives on its job row",
      .sql = "ALTER TABLE jobs ADD COLUMN body_sha256 TEXT NOT NULL DEFAULT '';\n"};
  return m;
}

const store::migration& hpo_best_migration() {
  // '' for every stage without one (and every row from before v12).
  static const store::migration m{
      .owner = "scheduler",
      .version = 12,
      .description = "job_stages.hpo_best: an hpo stage's best trial, typed for `loom job show`",
      .sql = "ALTER TABLE job_stages ADD COLUMN hpo_best TEXT NOT NULL DEFAULT '';\n"};
  return m;
}

const store::migration& precision_migration() {
  // '' for every stage not yet reported (and every row from before v13).
  static const store::migration m{
      .owner = "scheduler",
      .version = 13,
      .description = "job_stages.matmul_precision: what a stage's matmuls run in, for `loom job show`",
      .sql = "ALTER TABLE job_stages ADD COLUMN matmul_precision TEXT NOT NULL DEFAULT '';\n"};
  return m;
}

const store::migration& hpo_search_migration() {
  // '' for every stage without a running search (and every row from before v14).
  static const store::migration m{
      .owner = "scheduler",
      .version = 14,
      .description = "job_stages.hpo_search: a running hpo search's journal and trials, so it resumes after a restart",
      .sql = "ALTER TABLE job_stages ADD COLUMN hpo_search TEXT NOT NULL DEFAULT '';\n"};
  return m;
}

namespace {
std::string members_json(const stage_rec& s) { return nlohmann::json(s.members).dump(); }

// {"trial":3,"values":[["optim.lr","0.00233"]],...}; "" for none.
std::string hpo_best_json(const hpo_best_rec& b) {
  if (b.trial < 0) return "";
  return nlohmann::json{{"trial", b.trial},
                        {"values", b.values},
                        {"validation_loss", b.validation_loss},
                        {"step", b.step},
                        {"checkpoint", b.checkpoint},
                        {"steps_granted", b.steps_granted},
                        {"sweep_steps", b.sweep_steps}}
      .dump();
}

// A column that does not parse as written above reads as none: the figures
// are to show, and the stage's hpo_best event still says them in words.
hpo_best_rec hpo_best_of(const std::string& text) {
  hpo_best_rec b;
  if (text.empty()) return b;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return b;
  try {
    b.trial = j.at("trial").get<std::int64_t>();
    b.values = j.at("values").get<std::vector<std::pair<std::string, std::string>>>();
    b.validation_loss = j.at("validation_loss").get<double>();
    b.step = j.at("step").get<std::uint64_t>();
    b.checkpoint = j.at("checkpoint").get<std::string>();
    b.steps_granted = j.at("steps_granted").get<std::uint64_t>();
    b.sweep_steps = j.at("sweep_steps").get<std::uint64_t>();
  } catch (const nlohmann::json::exception&) {
    return hpo_best_rec{};
  }
  return b;
}
}  // namespace

result<std::vector<job_rec>> load_jobs(store::transaction& tx) {
  auto rows = tx.query(
      "SELECT id, seq, request_id, name, template_name, state, tenant, priority_class, zone, principal, message, "
      "out_dir, overrides, submitted_unix_ns, updated_unix_ns, next_event, body_sha256 FROM jobs ORDER BY seq");
  if (!rows) return rows.err();
  std::vector<job_rec> out;
  for (const auto& r : *rows) {
    auto t = [&](std::size_t i) { return r.get_text(i).ok() ? *r.get_text(i) : std::string(); };
    auto i = [&](std::size_t k) { return r.get_i64(k).ok() ? *r.get_i64(k) : 0; };
    job_rec j;
    j.id = t(0);
    j.seq = static_cast<std::uint64_t>(i(1));
    j.request_id = t(2);
    j.name = t(3);
    j.template_name = t(4);
    j.state = t(5);
    j.tenant = t(6);
    j.priority_class = t(7);
    j.zone = t(8);
    j.principal = t(9);
    j.message = t(10);
    j.out_dir = t(11);
    auto ov = nlohmann::json::parse(t(12), nullptr, false);
    if (ov.is_array())
      for (const auto& o : ov)
        if (o.is_string()) j.overrides.push_back(o.get<std::string>());
    j.submitted_ns = i(13);
    j.updated_ns = i(14);
    j.next_event = static_cast<std::uint64_t>(i(15));
    j.body_sha256 = t(16);
    out.push_back(std::move(j));
  }
  for (auto& j : out) {
    // The events table, not the jobs row, says where the event seq is: the row is
    // not rewritten for every event.
    auto last = tx.query("SELECT COALESCE(MAX(seq), 0) FROM job_events WHERE job_id = $1", {j.id});
    if (!last) return last.err();
    if (!last->empty() && (*last)[0].get_i64(0).ok())
      j.next_event = static_cast<std::uint64_t>(*(*last)[0].get_i64(0)) + 1;
    auto st = tx.query(
        "SELECT name, config_toml, state, step, total_steps, loss, first_loss, tokens_per_s, node, checkpoint, "
        "attempts, started_unix_ns, finished_unix_ns, members, generation, min_trainers, max_trainers, memory_bytes, "
        "node_losses, hpo_best, matmul_precision, hpo_search FROM job_stages WHERE job_id = $1 ORDER BY idx",
        {j.id});
    if (!st) return st.err();
    for (const auto& r : *st) {
      auto t = [&](std::size_t i) { return r.get_text(i).ok() ? *r.get_text(i) : std::string(); };
      auto i = [&](std::size_t k) { return r.get_i64(k).ok() ? *r.get_i64(k) : 0; };
      auto f = [&](std::size_t k) { return r.get_f64(k).ok() ? *r.get_f64(k) : 0.0; };
      stage_rec s;
      s.name = t(0);
      s.config_toml = t(1);
      s.state = t(2);
      s.step = static_cast<std::uint64_t>(i(3));
      s.total_steps = static_cast<std::uint64_t>(i(4));
      s.loss = f(5);
      s.first_loss = f(6);
      s.tokens_per_s = f(7);
      s.node = t(8);
      s.checkpoint = t(9);
      s.attempts = static_cast<std::uint32_t>(i(10));
      s.started_ns = i(11);
      s.finished_ns = i(12);
      auto m = nlohmann::json::parse(t(13), nullptr, false);
      if (m.is_array())
        for (const auto& n : m)
          if (n.is_string()) s.members.push_back(n.get<std::string>());
      s.generation = static_cast<std::uint64_t>(i(14));
      s.min_trainers = static_cast<std::uint32_t>(i(15));  // 0: a row from before v4
      s.max_trainers = static_cast<std::uint32_t>(i(16));
      s.memory_bytes = static_cast<std::uint64_t>(i(17));
      s.node_losses = static_cast<std::uint32_t>(i(18));
      s.hpo_best = hpo_best_of(t(19));
      s.precision = t(20);
      s.hpo_search = t(21);
      j.stages.push_back(std::move(s));
    }
  }
  return out;
}

status save_job(store::transaction& tx, const job_rec& j) {
  const std::string overrides = nlohmann::json(j.overrides).dump();
  auto r = tx.exec(
      "INSERT INTO jobs (id, seq, request_id, name, template_name, state, tenant, priority_class, zone, principal, "
      "message, out_dir, overrides, submitted_unix_ns, updated_unix_ns, next_event, body_sha256) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) "
      "ON CONFLICT (id) DO UPDATE SET state = excluded.state, message = excluded.message, "
      "updated_unix_ns = excluded.updated_unix_ns, next_event = excluded.next_event",
      {j.id, static_cast<std::int64_t>(j.seq), j.request_id, j.name, j.template_name, j.state, j.tenant,
       j.priority_class, j.zone, j.principal, j.message, j.out_dir, overrides, j.submitted_ns, j.updated_ns,
       static_cast<std::int64_t>(j.next_event), j.body_sha256});
  if (!r) return r.err();
  for (std::size_t i = 0; i < j.stages.size(); ++i) {
    const stage_rec& s = j.stages[i];
    auto w = tx.exec(
        "INSERT INTO job_stages (job_id, idx, name, config_toml, state, step, total_steps, loss, first_loss, "
        "tokens_per_s, node, checkpoint, attempts, started_unix_ns, finished_unix_ns, members, generation, "
        "min_trainers, max_trainers, memory_bytes, node_losses, hpo_best, matmul_precision, hpo_search) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, "
        "$23, $24) "
        "ON CONFLICT (job_id, idx) DO UPDATE SET state = excluded.state, step = excluded.step, "
        "total_steps = excluded.total_steps, config_toml = excluded.config_toml, "
        "memory_bytes = excluded.memory_bytes, "
        "loss = excluded.loss, first_loss = excluded.first_loss, tokens_per_s = excluded.tokens_per_s, "
        "node = excluded.node, checkpoint = excluded.checkpoint, attempts = excluded.attempts, "
        "started_unix_ns = excluded.started_unix_ns, finished_unix_ns = excluded.finished_unix_ns, "
        "members = excluded.members, generation = excluded.generation, node_losses = excluded.node_losses, "
        "hpo_best = excluded.hpo_best, matmul_precision = excluded.matmul_precision, hpo_search = excluded.hpo_search",
        {j.id, static_cast<std::int64_t>(i), s.name, s.config_toml, s.state, static_cast<std::int64_t>(s.step),
         static_cast<std::int64_t>(s.total_steps), s.loss, s.first_loss, s.tokens_per_s, s.node, s.checkpoint,
         static_cast<std::int64_t>(s.attempts), s.started_ns, s.finished_ns, members_json(s),
         static_cast<std::int64_t>(s.generation), static_cast<std::int64_t>(s.min_trainers),
         static_cast<std::int64_t>(s.max_trainers), static_cast<std::int64_t>(s.memory_bytes),
         static_cast<std::int64_t>(s.node_losses), hpo_best_json(s.hpo_best), s.precision, s.hpo_search});
    if (!w) return w.err();
  }
  return ok_status();
}

status save_stage(store::transaction& tx, const job_rec& j, std::size_t i) {
  const stage_rec& s = j.stages.at(i);
  auto w = tx.exec(
      "UPDATE job_stages SET state = $3, step = $4, loss = $5, first_loss = $6, tokens_per_s = $7, node = $8, "
      "checkpoint = $9, attempts = $10, started_unix_ns = $11, finished_unix_ns = $12, members = $13, "
      "generation = $14, node_losses = $15, matmul_precision = $16, hpo_search = $17 WHERE job_id = $1 AND idx = $2",
      {j.id, static_cast<std::int64_t>(i), s.state, static_cast<std::int64_t>(s.step), s.loss, s.first_loss,
       s.tokens_per_s, s.node, s.checkpoint, static_cast<std::int64_t>(s.attempts), s.started_ns, s.finished_ns,
       members_json(s), static_cast<std::int64_t>(s.generation), static_cast<std::int64_t>(s.node_losses),
       s.precision, s.hpo_search});
  if (!w) return w.err();
  if (*w != 1) return make_error(errc::not_found, "no stage " + std::to_string(i) + " of job " + j.id);
  return ok_status();
}

status add_event(store::transaction& tx, const std::string& job_id, const job_event& e) {
  auto r = tx.exec("INSERT INTO job_events (job_id, seq, unix_ns, stage, kind, text) VALUES ($1, $2, $3, $4, $5, $6)",
                   {job_id, static_cast<std::int64_t>(e.seq), e.unix_ns, e.stage, e.kind, e.text});
  if (!r) return r.err();
  return ok_status();
}

status add_request(store::transaction& tx, const request_rec& r) {
  auto w = tx.exec("INSERT INTO job_requests (principal, request_id, kind, body_sha256, job_id, unix_ns) "
                   "VALUES ($1, $2, $3, $4, $5, $6)",
                   {r.principal, r.request_id, r.kind, r.body_sha256, r.job_id, r.unix_ns});
  if (!w) return w.err();
  return ok_status();
}

result<std::vector<request_rec>> load_requests(store::transaction& tx) {
  auto rows = tx.query("SELECT principal, request_id, kind, body_sha256, job_id, unix_ns FROM job_requests");
  if (!rows) return rows.err();
  std::vector<request_rec> out;
  for (const auto& r : *rows) {
    auto t = [&](std::size_t i) { return r.get_text(i).ok() ? *r.get_text(i) : std::string(); };
    out.push_back({t(0), t(1), t(2), t(3), t(4), r.get_i64(5).ok() ? *r.get_i64(5) : 0});
  }
  return out;
}

result<std::vector<job_event>> load_events(store::transaction& tx, const std::string& job_id, std::uint64_t after) {
  auto rows = tx.query("SELECT seq, unix_ns, stage, kind, text FROM job_events WHERE job_id = $1 AND seq > $2 "
                       "ORDER BY seq",
                       {job_id, static_cast<std::int64_t>(after)});
  if (!rows) return rows.err();
  std::vector<job_event> out;
  for (const auto& r : *rows) {
    job_event e;
    e.seq = static_cast<std::uint64_t>(r.get_i64(0).ok() ? *r.get_i64(0) : 0);
    e.unix_ns = r.get_i64(1).ok() ? *r.get_i64(1) : 0;
    e.stage = r.get_text(2).ok() ? *r.get_text(2) : "";
    e.kind = r.get_text(3).ok() ? *r.get_text(3) : "";
    e.text = r.get_text(4).ok() ? *r.get_text(4) : "";
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace loom::scheduler
