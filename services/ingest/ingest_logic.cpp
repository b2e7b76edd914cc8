#include "services/ingest/ingest_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
#include "libs/store/database.hpp"
#include "services/ingest/importer/catalog.hpp"
#include "services/ingest/importer/import_options.hpp"
#include "services/ingest/tasks.hpp"

#include <nlohmann/json.hpp>

namespace loom::ingest {
namespace {

using namespace runtime;

// Longest rejects answer: keeps replies far below the frame cap.
constexpr std::uint32_t max_rejects = 10000;

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
  if (!req->nodes().empty()) o.nodes.assign(req->nodes().begin(), req->nodes().end());
  if (!req->deny_licences().empty()) {
    o.licences.action = licence_policy::mode::deny;
    for (const auto& id : req->deny_licences()) o.licences.deny.push_back(id);
  }
  o.pii = !req->no_pii();
  o.dedup = !req->no_dedup();
  if (!req->text_field().empty()) o.reader.jsonl_text_field = req->text_field();
  auto t = p_.tasks->start_import(std::move(o), ctx.principal);
  if (!t) return fail(t.err());
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
  for (const auto& d : *rows) to_proto(d, p_.datasets_root, rep.add_datasets());
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
      for (const auto& s : *sh) {
        auto* p = rep.add_shards();
        p->set_name(s.name);
        p->set_node(s.node);
        p->set_bytes(static_cast<std::uint64_t>(s.bytes));
        p->set_tokens(static_cast<std::uint64_t>(s.tokens));
        p->set_sha256(s.sha256);
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
  std::uint32_t limit = req->limit() == 0 || req->limit() > max_rejects ? max_rejects : req->limit();
  auto rows = cat.rejects(req->dataset(), 0);
  if (!rows) return store_failed(rows.err());
  loom::v1::ListRejectsReply rep;
  rep.set_total(rows->size());
  for (std::size_t i = 0; i < rows->size() && i < limit; ++i) {
    const auto& r = (*rows)[i];
    auto* p = rep.add_rejects();
    p->set_file(r.file);
    p->set_line(r.line);
    p->set_rule(r.rule);
    p->set_detail(r.detail);
    p->set_stage(r.stage);
  }
  return reply(rep);
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
