#include "services/ingest/ingest_logic.hpp"

#include "libs/auth/identity.hpp"
#include "libs/auth/token.hpp"
#include "libs/layout/dataset_dirs.hpp"
#include "libs/shards/check.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/store/database.hpp"
#include "loom/v1/ingest.pb.h"
#include "services/ingest/importer/catalog.hpp"
#include "services/ingest/placing.hpp"
#include "services/ingest/roster.hpp"
#include "services/ingest/sync_service.hpp"
#include "services/ingest/tasks.hpp"
#include "services/ingest/wire.hpp"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

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

// What makes a dataset "damaged": a problem the file check finds now, else
// what the last verify of this version found ("" = neither).
std::string damage_of(const dataset_row& d, const std::vector<shards::shard_problem>& now) {
  std::string damage = shards::describe(now);
  return damage.empty() ? d.damage : damage;
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

// What any tenant's missing dataset answers: the same for one that does not
// exist and one of another tenant (existence is not disclosed).
handled no_dataset(const std::string& name) {
  return fail(errc::not_found, "no dataset " + name + " (`loom data list` lists them)");
}

bool is_admin(const call_context& ctx) { return ctx.role == "admin"; }

// A reply carrying `t` as its task (Import/Verify/Pull/GetTask/CancelTask).
template <class Reply>
handled task_reply(const task_info& t) {
  Reply rep;
  to_wire(t, rep.mutable_task());
  return reply(rep);
}

}  // namespace

result<std::string> acting_tenant(const call_context& ctx, const std::string& for_tenant) {
  const std::string own = ctx.tenant.empty() ? std::string(layout::default_tenant) : ctx.tenant;
  if (for_tenant.empty() || for_tenant == own) return own;
  if (auto st = auth::validate_name("for_tenant", for_tenant); !st) return st.err();
  const auth::peer_id peer = auth::parse_peer(ctx.peer);
  const bool service = peer.kind == auth::peer_kind::own_service &&
                       (peer.service == "scheduler" || peer.service == "trainer");
  if (is_admin(ctx) || service) return for_tenant;
  return make_error(errc::permission_denied,
                    "tenant " + for_tenant + ": a " + (ctx.role.empty() ? std::string("caller") : ctx.role) +
                        " of tenant " + own + " (key " + (ctx.peer.empty() ? std::string("none") : ctx.peer) +
                        ") acts only on its own tenant's datasets; admins and this deployment's scheduler and "
                        "trainer act for another");
}

ingest_logic::ingest_logic(ingest_parts parts) : p_(std::move(parts)) {
  using namespace loom::v1;
  using ctx_t = const call_context&;
  table_
      // The catalogue of the caller's tenant (an admin's: every tenant's), files checked cheaply (viewer).
      .on<ListDatasetsRequest>([this](const ListDatasetsRequest& r, ctx_t c) { return list_datasets(r, c); })
      // An import of a path inside the import roots, as a task answered at once (operator, audited).
      .on<ImportDatasetRequest>([this](const ImportDatasetRequest& r, ctx_t c) { return import_dataset(r, c); })
      // A task's live progress and outcome, of the caller's tenant (viewer).
      .on<GetTaskRequest>([this](const GetTaskRequest& r, ctx_t c) { return get_task(r, c); })
      // Stops a queued or running task of the caller's tenant (operator, audited).
      .on<CancelTaskRequest>([this](const CancelTaskRequest& r, ctx_t c) { return cancel_task(r, c); })
      // One dataset: its row, its shards with any problem, its newest task (viewer).
      .on<DatasetStatusRequest>([this](const DatasetStatusRequest& r, ctx_t c) { return dataset_status(r, c); })
      // A page of the latest import's rejects, read with LIMIT/OFFSET (viewer).
      .on<ListRejectsRequest>([this](const ListRejectsRequest& r, ctx_t c) { return list_rejects(r, c); })
      // A full hash of every shard, as a task (operator, audited).
      .on<VerifyDatasetRequest>([this](const VerifyDatasetRequest& r, ctx_t c) { return verify_dataset(r, c); })
      // Where this ingest's sync server listens and its key; re-reads the trusted peers; may grant one a dataset.
      .on<SyncInfoRequest>([this](const SyncInfoRequest& r, ctx_t c) { return sync_info(r, c); })
      // A pull of a dataset from another site's sync server, as a task (operator, audited).
      .on<PullDatasetRequest>([this](const PullDatasetRequest& r, ctx_t c) { return pull_dataset(r, c); })
      // Places a dataset's shards anew on roster nodes; only files whose owner changes move (operator, audited).
      .on<PlaceDatasetRequest>([this](const PlaceDatasetRequest& r, ctx_t c) { return place_dataset(r, c); });
}

handled ingest_logic::import_dataset(const loom::v1::ImportDatasetRequest& req, const call_context& ctx) {
  if (!p_.tasks) return fail(errc::unavailable, "imports are not available in this ingest process");
  auto tenant = acting_tenant(ctx, req.for_tenant());
  if (!tenant) return refused_import(tenant.err(), req, p_.tasks->import_roots());
  if (req.path().empty() || req.path().front() != '/')
    return fail(errc::invalid_argument, "import path must be absolute (the ingest service reads it): '" + req.path() + "'");
  import_options o = import_options_from_wire(req);
  if (req.nodes().empty() && p_.own_trainer_nodes) {  // placement names the real nodes that train here
    if (auto own = p_.own_trainer_nodes(); own && !own->empty()) o.nodes = *own;
  }
  if (!req.nodes().empty() && p_.trainer_nodes) {
    auto known = p_.trainer_nodes();
    if (!known) return refused_import(known.err(), req, p_.tasks->import_roots());
    if (auto st = check_nodes(o.nodes, *known); !st) return refused_import(st.err(), req, p_.tasks->import_roots());
  }
  auto t = p_.tasks->start_import(std::move(o), *tenant, ctx.principal);
  if (!t) return refused_import(t.err(), req, p_.tasks->import_roots());
  auto h = task_reply<loom::v1::ImportDatasetReply>(*t);
  h.audit_payload = nlohmann::json{{"task", t->id},           {"tenant", *tenant},       {"dataset", req.dataset()},
                                   {"path", req.path()},      {"profile", req.profile()}, {"pii", !req.no_pii()},
                                   {"dedup", !req.no_dedup()}}
                        .dump();
  return h;
}

handled ingest_logic::get_task(const loom::v1::GetTaskRequest& req, const call_context& ctx) {
  auto t = p_.tasks ? p_.tasks->get(req.id()) : std::nullopt;
  if (!t || (t->tenant != ctx.tenant && !is_admin(ctx)))
    return fail(errc::not_found, "no task " + req.id() + " (tasks are kept in memory: a restarted ingest forgets them)");
  return task_reply<loom::v1::GetTaskReply>(*t);
}

handled ingest_logic::cancel_task(const loom::v1::CancelTaskRequest& req, const call_context& ctx) {
  auto seen = p_.tasks ? p_.tasks->get(req.id()) : std::nullopt;
  if (!seen || (seen->tenant != ctx.tenant && !is_admin(ctx))) return fail(errc::not_found, "no task " + req.id());
  auto t = p_.tasks->cancel(req.id());
  if (!t) return fail(t.err());
  auto h = task_reply<loom::v1::CancelTaskReply>(*t);
  h.audit_payload = nlohmann::json{{"task", t->id}, {"tenant", t->tenant}, {"dataset", t->dataset}}.dump();
  return h;
}

handled ingest_logic::list_datasets(const loom::v1::ListDatasetsRequest& req, const call_context& ctx) {
  // An admin naming no tenant sees every tenant's; everyone else one tenant's.
  std::string tenant;
  if (!(is_admin(ctx) && req.for_tenant().empty())) {
    auto t = acting_tenant(ctx, req.for_tenant());
    if (!t) return fail(t.err());
    tenant = *t;
  }
  loom::v1::ListDatasetsReply rep;
  if (!p_.db) return reply(rep);
  catalog cat(*p_.db);
  auto rows = cat.datasets(tenant);
  if (!rows) return store_failed(rows.err());
  for (const auto& d : *rows) {
    auto sh = cat.shards(d.tenant, d.name);
    if (!sh) return store_failed(sh.err());
    const std::string dir = layout::tenant_dataset_dir(p_.datasets_root, d.tenant, d.name);
    to_wire(d, dir, damage_of(d, check_files(dir, *sh)), rep.add_datasets());
  }
  return reply(rep);
}

namespace {

// The media tars manifest.json lists, each with the cheap check's finding.
void add_media(const std::string& dir, loom::v1::DatasetStatusReply& rep) {
  auto m = shards::read_manifest(dir);
  if (!m || m->media.empty()) return;
  const auto files = shards::media_as_files(*m);
  auto problems = shards::check_shards(dir, files, shards::check_depth::cheap);
  for (const auto& t : m->media) {
    auto* out = rep.add_media();
    out->set_name(t.name);
    out->set_node(t.node);
    out->set_records(t.records);
    out->set_bytes(t.bytes);
    out->set_kind(t.kind);
    if (problems)
      for (const auto& p : *problems)
        if (p.shard == t.name) out->set_problem(p.what);
  }
}

}  // namespace

handled ingest_logic::dataset_status(const loom::v1::DatasetStatusRequest& req, const call_context& ctx) {
  auto tenant = acting_tenant(ctx, req.for_tenant());
  if (!tenant) return fail(tenant.err());
  loom::v1::DatasetStatusReply rep;
  auto last = p_.tasks ? p_.tasks->last_for(*tenant, req.name()) : std::nullopt;
  if (last) to_wire(*last, rep.mutable_last_task());
  std::optional<dataset_row> row;
  if (p_.db) {
    catalog cat(*p_.db);
    auto d = cat.dataset(*tenant, req.name());
    if (!d) return store_failed(d.err());
    row = *d;
    if (row) {
      auto sh = cat.shards(*tenant, req.name());
      if (!sh) return store_failed(sh.err());
      const std::string dir = layout::tenant_dataset_dir(p_.datasets_root, *tenant, row->name);
      const auto problems = check_files(dir, *sh);
      to_wire(*row, dir, damage_of(*row, problems), rep.mutable_dataset());
      for (const auto& s : *sh) {
        std::string problem;
        for (const auto& x : problems)
          if (x.shard == s.name) problem = x.what;
        to_wire(s, problem, rep.add_shards());
      }
      add_media(dir, rep);
    }
  }
  if (!row && !last) return no_dataset(req.name());
  return reply(rep);
}

handled ingest_logic::list_rejects(const loom::v1::ListRejectsRequest& req, const call_context& ctx) {
  auto tenant = acting_tenant(ctx, req.for_tenant());
  if (!tenant) return fail(tenant.err());
  if (!p_.db) return fail(errc::not_found, "no dataset " + req.dataset());
  catalog cat(*p_.db);
  auto d = cat.dataset(*tenant, req.dataset());
  if (!d) return store_failed(d.err());
  if (!*d) return no_dataset(req.dataset());
  const std::uint32_t limit = req.limit() == 0 ? default_rejects : std::min(req.limit(), max_rejects);
  auto rows = cat.rejects(*tenant, req.dataset(), limit, req.offset());
  if (!rows) return store_failed(rows.err());
  auto stored = cat.stored_rejects(*tenant, req.dataset());
  if (!stored) return store_failed(stored.err());
  loom::v1::ListRejectsReply rep;
  rep.set_total(std::max<std::uint64_t>(static_cast<std::uint64_t>((*d)->rejects), *stored));
  rep.set_stored(*stored);
  rep.set_offset(req.offset());
  for (const auto& r : *rows) to_wire(r, rep.add_rejects());
  return reply(rep);
}

handled ingest_logic::verify_dataset(const loom::v1::VerifyDatasetRequest& req, const call_context& ctx) {
  if (!p_.tasks) return fail(errc::unavailable, "verifies are not available in this ingest process");
  auto tenant = acting_tenant(ctx, req.for_tenant());
  if (!tenant) return fail(tenant.err());
  auto t = p_.tasks->start_verify(*tenant, req.name(), ctx.principal);
  if (!t) return fail(t.err());
  auto h = task_reply<loom::v1::VerifyDatasetReply>(*t);
  h.audit_payload = nlohmann::json{{"task", t->id}, {"tenant", *tenant}, {"dataset", req.name()}}.dump();
  return h;
}

handled ingest_logic::sync_info(const loom::v1::SyncInfoRequest& req, const call_context& ctx) {
  if (!p_.sync_info) return fail(errc::unavailable, "this ingest runs no sync server");
  std::string granted;
  if (!req.dataset().empty() || !req.peer_public_key().empty()) {
    if (req.dataset().empty() || req.peer_public_key().empty())
      return fail(errc::invalid_argument, "SyncInfo: a grant names both the dataset and the pulling key (peer_public_key)");
    auto tenant = acting_tenant(ctx, req.for_tenant());
    if (!tenant) return fail(tenant.err());
    if (auto st = validate_dataset_name(req.dataset()); !st) return fail(st.err());
    std::error_code ec;  // a dataset of the tenant: recorded, or at least there (a pull in flight)
    if (!std::filesystem::is_directory(layout::tenant_dataset_dir(p_.datasets_root, *tenant, req.dataset()), ec))
      return no_dataset(req.dataset());
    if (!p_.sync_grant) return fail(errc::unavailable, "this ingest runs no sync server");
    if (auto st = p_.sync_grant(req.peer_public_key(), *tenant, req.dataset(), ctx.principal); !st)
      return fail(st.err());
    granted = *tenant;
  }
  auto r = p_.sync_info();
  if (!r) return fail(r.err());
  loom::v1::SyncInfoReply rep;
  to_wire(*r, granted, &rep);
  return reply(rep);
}

handled ingest_logic::pull_dataset(const loom::v1::PullDatasetRequest& req, const call_context& ctx) {
  if (!p_.pull) return fail(errc::unavailable, "this ingest cannot pull datasets (no sync client)");
  auto tenant = acting_tenant(ctx, req.for_tenant());
  if (!tenant) return fail(tenant.err());
  auto t = p_.pull(*tenant, req.dataset(), req.endpoint(), req.public_key(), req.source_tenant(), ctx.principal);
  if (!t) return fail(t.err());
  auto h = task_reply<loom::v1::PullDatasetReply>(*t);
  h.audit_payload = nlohmann::json{{"task", t->id},
                                   {"tenant", *tenant},
                                   {"dataset", req.dataset()},
                                   {"from", req.endpoint()},
                                   {"source_tenant", req.source_tenant()}}
                        .dump();
  return h;
}

// A dataset placed anew: the caller's tenant's dataset (hidden otherwise), no
// task of it running, every node in the roster; then manifest.json and the
// catalogue rows change together (catalog::record_placement).
handled ingest_logic::place_dataset(const loom::v1::PlaceDatasetRequest& req, const call_context& ctx) {
  auto tenant = acting_tenant(ctx, req.for_tenant());
  if (!tenant) return fail(tenant.err());
  if (auto st = validate_dataset_name(req.dataset()); !st) return fail(st.err());
  if (!p_.db) return no_dataset(req.dataset());
  catalog cat(*p_.db);
  auto row = cat.dataset(*tenant, req.dataset());
  if (!row) return store_failed(row.err());
  if (!*row) return no_dataset(req.dataset());
  const std::vector<std::string> nodes(req.nodes().begin(), req.nodes().end());
  if (nodes.empty())
    return fail(errc::invalid_argument, "place " + req.dataset() + ": name the nodes to place it on (--nodes a,b,c)");
  if (auto last = p_.tasks ? p_.tasks->last_for(*tenant, req.dataset()) : std::nullopt;
      last && (last->state == "queued" || last->state == "running"))
    return fail(errc::conflict, "place " + req.dataset() + ": task " + last->id + " (" + last->kind + ") of it is " +
                                    last->state + "; place it when that ends");
  if (p_.trainer_nodes) {
    auto known = p_.trainer_nodes();
    if (!known) return fail(known.err());
    if (auto st = check_nodes(nodes, *known); !st) return fail(st.err());
  }
  const std::string dir = layout::tenant_dataset_dir(p_.datasets_root, *tenant, req.dataset());
  auto current = shards::read_manifest(dir);
  if (!current) return fail(errc::internal, "place " + req.dataset() + ": " + current.err().message);
  auto plan = replan(*current, nodes, req.load_factor());
  if (!plan) return fail(plan.err());
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(loom::wall_now().time_since_epoch()).count();
  auto st = cat.record_placement(*tenant, req.dataset(), (*row)->import_id, plan->next, now,
                                 [&] { return shards::write_manifest(dir, plan->next); });
  if (!st) return st.code() == errc::not_found ? fail(st.err()) : store_failed(st.err());
  loom::v1::PlaceDatasetReply rep;
  rep.set_shards(plan->shards);
  rep.set_shards_moved(plan->shards_moved);
  rep.set_media(plan->media);
  rep.set_media_moved(plan->media_moved);
  rep.set_bytes_moved(plan->bytes_moved);
  for (const auto& n : plan->nodes) {
    auto* out = rep.add_nodes();
    out->set_node(n.node);
    out->set_shards(n.shards);
    out->set_media(n.media);
    out->set_bytes(n.bytes);
  }
  handled h = reply(rep);
  h.audit_payload = nlohmann::json{{"tenant", *tenant},
                                   {"dataset", req.dataset()},
                                   {"nodes", nodes},
                                   {"shards_moved", plan->shards_moved},
                                   {"media_moved", plan->media_moved},
                                   {"bytes_moved", plan->bytes_moved}}
                        .dump();
  return h;
}

}  // namespace loom::ingest
