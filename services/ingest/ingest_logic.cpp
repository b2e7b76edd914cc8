#include "services/ingest/ingest_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
#include "libs/shards/check.hpp"
#include "libs/store/database.hpp"
#include "services/ingest/importer/catalog.hpp"
#include "services/ingest/importer/import_options.hpp"
#include "services/ingest/roster.hpp"
#include "services/ingest/tasks.hpp"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>

namespace loom::ingest {
namespace {

using namespace runtime;

// Longest rejects page: keeps replies far below the frame cap.
constexpr std::uint32_t max_rejects = 10000;
// A rejects page when the request names no limit: a screenful.
constexpr std::uint32_t default_rejects = 50;

// The cheap check of a dataset's files against its catalogue rows: manifest.json
// is there, every shard is there with its size (one stat each).
std::vector<shards::shard_problem> check_files(const std::string& dir, const std::vector<shard_row>& rows) {
  std::vector<shards::shard_info> listed(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    listed[i].name = rows[i].name;
    listed[i].bytes = static_cast<std::uint64_t>(rows[i].bytes);
  }
  auto p = shards::check_shards(dir, listed, shards::check_depth::cheap);
  std::vector<shards::shard_problem> out = p ? std::move(*p) : std::vector<shards::shard_problem>{};
  struct stat st {};
  const std::string manifest = dir + "/" + std::string(shards::manifest_file_name);
  if (::stat(manifest.c_str(), &st) != 0) out.insert(out.begin(), {std::string(shards::manifest_file_name), "is missing"});
  return out;
}

// "damaged" (with what) when a file check finds a problem now or the last
// verify of this version did; else the catalogue's state.
void set_health(const dataset_row& d, const std::vector<shards::shard_problem>& now, loom::v1::DatasetInfo* out) {
  std::string damage = shards::describe(now);
  if (damage.empty()) damage = d.damage;
  if (damage.empty()) return;
  out->set_state("damaged");
  out->set_damage(damage);
}

void to_proto(const dataset_row& d, const std::string& root, loom::v1::DatasetInfo* out) {
  out->mutable_id()->set_value(d.name);
  out->set_name(d.name);
  out->set_documents(static_cast<std::uint64_t>(d.documents));
  out->set_tokens(static_cast<std::uint64_t>(d.tokens));
  out->set_shards(static_cast<std::uint32_t>(d.shards));
  out->set_bytes(static_cast<std::uint64_t>(d.bytes));
  out->set_version(d.version);
  out->set_import_id(d.import_id);
  out->set_state(d.state);
  out->set_updated_unix_ns(static_cast<std::uint64_t>(d.updated_ns));
  out->set_dir(root + "/" + d.name);
  out->set_report_path(d.report_path);
  out->set_rejects(static_cast<std::uint64_t>(d.rejects));
  out->set_verified_unix_ns(static_cast<std::uint64_t>(d.verified_ns));
}

// The catalogue's answer, the gateway's audit payload for a refused import.
handled refused_import(const error& e, const loom::v1::ImportDatasetRequest& req, const std::vector<std::string>& roots) {
  handled h = fail(e);
  const std::vector<std::string> nodes(req.nodes().begin(), req.nodes().end());
  h.audit_payload = nlohmann::json{{"dataset", req.dataset()}, {"path", req.path()}, {"nodes", nodes},
                                   {"roots", roots}, {"refused", e.message}}
                        .dump();
  return h;
}

handled store_failed(const error& e) { return fail(errc::unavailable, "state store: " + e.message); }

}  // namespace

handled ingest_logic::handle(const std::string& type, const std::string& body, const call_context& ctx) {
  if (is<loom::v1::ListDatasetsRequest>(type)) return list_datasets(body);
  if (is<loom::v1::ImportDatasetRequest>(type)) return import_dataset(body, ctx);
  if (is<loom::v1::GetTaskRequest>(type)) return get_task(body);
  if (is<loom::v1::CancelTaskRequest>(type)) return cancel_task(body);
  if (is<loom::v1::DatasetStatusRequest>(type)) return dataset_status(body);
  if (is<loom::v1::ListRejectsRequest>(type)) return list_rejects(body);
  if (is<loom::v1::VerifyDatasetRequest>(type)) return verify_dataset(body, ctx);
  if (is<loom::v1::SyncInfoRequest>(type)) return sync_info(body);
  if (is<loom::v1::PullDatasetRequest>(type)) return pull_dataset(body, ctx);
  return unknown_type("ingest", type);
}

handled ingest_logic::import_dataset(const std::string& body, const call_context& ctx) {
  auto req = parse_as<loom::v1::ImportDatasetRequest>(body);
  if (!req) return fail(req.err());
  if (!p_.tasks) return fail(errc::unavailable, "imports are not available in this ingest process");
  if (req->path().empty() || req->path().front() != '/')
    return fail(errc::invalid_argument, "import path must be absolute (the ingest service reads it): '" + req->path() + "'");
  import_options o;
  o.source = req->path();
  o.dataset = req->dataset();
  if (!req->profile().empty()) o.profile = req->profile();
  if (req->memory_bytes() > 0) o.memory_budget = req->memory_bytes();
  if (!req->nodes().empty()) {
    o.nodes.assign(req->nodes().begin(), req->nodes().end());
    if (p_.trainer_nodes) {
      auto known = p_.trainer_nodes();
      if (!known) return refused_import(known.err(), *req, p_.tasks->import_roots());
      if (auto st = check_nodes(o.nodes, *known); !st) return refused_import(st.err(), *req, p_.tasks->import_roots());
    }
  }
  if (!req->deny_licences().empty()) {
    o.licences.action = licence_policy::mode::deny;
    for (const auto& id : req->deny_licences()) o.licences.deny.push_back(id);
  }
  o.pii = !req->no_pii();
  o.dedup = !req->no_dedup();
  if (!req->text_field().empty()) o.reader.jsonl_text_field = req->text_field();
  auto t = p_.tasks->start_import(std::move(o), ctx.principal);
  if (!t) return refused_import(t.err(), *req, p_.tasks->import_roots());
  loom::v1::ImportDatasetReply rep;
  *rep.mutable_task() = *t;
  auto h = reply(rep);
  h.audit_payload = nlohmann::json{{"task", t->id()}, {"dataset", req->dataset()}, {"path", req->path()},
                                   {"profile", req->profile()}, {"pii", !req->no_pii()}, {"dedup", !req->no_dedup()}}
                        .dump();
  return h;
}

handled ingest_logic::get_task(const std::string& body) {
  auto req = parse_as<loom::v1::GetTaskRequest>(body);
  if (!req) return fail(req.err());
  auto t = p_.tasks ? p_.tasks->get(req->id()) : std::nullopt;
  if (!t) return fail(errc::not_found, "no task " + req->id() + " (tasks are kept in memory: a restarted ingest forgets them)");
  loom::v1::GetTaskReply rep;
  *rep.mutable_task() = *t;
  return reply(rep);
}

handled ingest_logic::cancel_task(const std::string& body) {
  auto req = parse_as<loom::v1::CancelTaskRequest>(body);
  if (!req) return fail(req.err());
  if (!p_.tasks) return fail(errc::not_found, "no task " + req->id());
  auto t = p_.tasks->cancel(req->id());
  if (!t) return fail(t.err());
  loom::v1::CancelTaskReply rep;
  *rep.mutable_task() = *t;
  auto h = reply(rep);
  h.audit_payload = nlohmann::json{{"task", t->id()}, {"dataset", t->dataset()}}.dump();
  return h;
}

handled ingest_logic::list_datasets(const std::string& body) {
  auto req = parse_as<loom::v1::ListDatasetsRequest>(body);
  if (!req) return fail(req.err());
  loom::v1::ListDatasetsReply rep;
  if (!p_.db) return reply(rep);
  catalog cat(*p_.db);
  auto rows = cat.datasets();
  if (!rows) return store_failed(rows.err());
  for (const auto& d : *rows) {
    auto sh = cat.shards(d.name);
    if (!sh) return store_failed(sh.err());
    auto* info = rep.add_datasets();
    to_proto(d, p_.datasets_root, info);
    set_health(d, check_files(info->dir(), *sh), info);
  }
  return reply(rep);
}

handled ingest_logic::dataset_status(const std::string& body) {
  auto req = parse_as<loom::v1::DatasetStatusRequest>(body);
  if (!req) return fail(req.err());
  loom::v1::DatasetStatusReply rep;
  auto last = p_.tasks ? p_.tasks->last_for(req->name()) : std::nullopt;
  if (last) *rep.mutable_last_task() = *last;
  std::optional<dataset_row> row;
  if (p_.db) {
    catalog cat(*p_.db);
    auto d = cat.dataset(req->name());
    if (!d) return store_failed(d.err());
    row = *d;
    if (row) {
      to_proto(*row, p_.datasets_root, rep.mutable_dataset());
      auto sh = cat.shards(req->name());
      if (!sh) return store_failed(sh.err());
      const auto problems = check_files(rep.dataset().dir(), *sh);
      set_health(*row, problems, rep.mutable_dataset());
      for (const auto& s : *sh) {
        auto* p = rep.add_shards();
        p->set_name(s.name);
        p->set_node(s.node);
        p->set_bytes(static_cast<std::uint64_t>(s.bytes));
        p->set_tokens(static_cast<std::uint64_t>(s.tokens));
        p->set_sha256(s.sha256);
        for (const auto& x : problems)
          if (x.shard == s.name) p->set_problem(x.what);
      }
    }
  }
  if (!row && !last) return fail(errc::not_found, "no dataset " + req->name() + " (`loom data list` lists them)");
  return reply(rep);
}

handled ingest_logic::list_rejects(const std::string& body) {
  auto req = parse_as<loom::v1::ListRejectsRequest>(body);
  if (!req) return fail(req.err());
  if (!p_.db) return fail(errc::not_found, "no dataset " + req->dataset());
  catalog cat(*p_.db);
  auto d = cat.dataset(req->dataset());
  if (!d) return store_failed(d.err());
  if (!*d) return fail(errc::not_found, "no dataset " + req->dataset() + " (`loom data list` lists them)");
  const std::uint32_t limit = req->limit() == 0 ? default_rejects : std::min(req->limit(), max_rejects);
  auto rows = cat.rejects(req->dataset(), limit, req->offset());
  if (!rows) return store_failed(rows.err());
  auto stored = cat.stored_rejects(req->dataset());
  if (!stored) return store_failed(stored.err());
  loom::v1::ListRejectsReply rep;
  rep.set_total(std::max<std::uint64_t>(static_cast<std::uint64_t>((*d)->rejects), *stored));
  rep.set_stored(*stored);
  rep.set_offset(req->offset());
  for (const auto& r : *rows) {
    auto* p = rep.add_rejects();
    p->set_file(r.file);
    p->set_line(r.line);
    p->set_rule(r.rule);
    p->set_detail(r.detail);
    p->set_stage(r.stage);
  }
  return reply(rep);
}

handled ingest_logic::verify_dataset(const std::string& body, const call_context& ctx) {
  auto req = parse_as<loom::v1::VerifyDatasetRequest>(body);
  if (!req) return fail(req.err());
  if (!p_.tasks) return fail(errc::unavailable, "verifies are not available in this ingest process");
  auto t = p_.tasks->start_verify(req->name(), ctx.principal);
  if (!t) return fail(t.err());
  loom::v1::VerifyDatasetReply rep;
  *rep.mutable_task() = *t;
  auto h = reply(rep);
  h.audit_payload = nlohmann::json{{"task", t->id()}, {"dataset", req->name()}}.dump();
  return h;
}

handled ingest_logic::sync_info(const std::string& body) {
  auto req = parse_as<loom::v1::SyncInfoRequest>(body);
  if (!req) return fail(req.err());
  if (!p_.sync_info) return fail(errc::unavailable, "this ingest runs no sync server");
  auto r = p_.sync_info();
  if (!r) return fail(r.err());
  return reply(*r);
}

handled ingest_logic::pull_dataset(const std::string& body, const call_context& ctx) {
  auto req = parse_as<loom::v1::PullDatasetRequest>(body);
  if (!req) return fail(req.err());
  if (!p_.pull) return fail(errc::unavailable, "this ingest cannot pull datasets (no sync client)");
  auto t = p_.pull(*req, ctx.principal);
  if (!t) return fail(t.err());
  loom::v1::PullDatasetReply rep;
  *rep.mutable_task() = *t;
  auto h = reply(rep);
  h.audit_payload =
      nlohmann::json{{"task", t->id()}, {"dataset", req->dataset()}, {"from", req->endpoint()}}.dump();
  return h;
}

}  // namespace loom::ingest
