// Fuzzes the bodies of every request type the services accept: byte 0 picks
// a row of the policy table (libs/auth/policy.cpp: every type any service
// answers, so a new type is fuzzed as soon as it is allowed), the rest is its
// body. The body goes through a runtime::handler_table, the table every
// service logic dispatches with (it parses the body as the type's message),
// to the checks the services make with library code before they act:
//   SubmitJobRequest      tenant name, template size, runspec::template_cache
//                         resolve (the scheduler's own cache), priority class,
//                         every input path against read roots (check_inputs)
//   IssueTokenRequest     role, principal, issuable principal, tenant, then
//                         auth::issue_token and verify_token back (audit)
//   EnrolSiteRequest, IssueSiteTokenRequest, RevokeSiteRequest   site name,
//                         enrolment token (fuzz_enrol goes further)
//   ImportDatasetRequest, SyncInfoRequest, PullDatasetRequest    for_tenant,
//                         import path confined to the import roots, CURVE
//                         keys, sync endpoints (ingest)
//   StartAggregationRequest, ExportGlobalRequest   the spec's from_wire
//                         (services/aggregator/wire.hpp, loom::aggregator_rounds)
//                         and the grant, as sent and as the scheduler would
//                         sign it: diloco::verify_grant (aggregator)
//   InspectCheckpointRequest  the checkpoint path confined to <data>/jobs, its step-N name
// and, for every type, every string field through auth::printable (how
// services quote untrusted text in replies and audit records) and the name
// validators. What the service logics check beyond these lives in service
// object libraries (scheduler_logic, ingest_logic, audit_logic,
// aggregator_logic, the trainer's export table) and is not linked here; the
// process-level tests/fuzz.test.cpp sends mutated frames to every service.
// Checks: every policy type has a handler here (else the target aborts at
// start, naming it); printable output is printable; a site name is a valid
// name; a confined path lies under its root; an issued token verifies with
// the same claims; a grant the target signs is never refused for its MAC.
#include "libs/auth/identity.hpp"
#include "libs/auth/policy.hpp"
#include "libs/auth/site_token.hpp"
#include "libs/auth/token.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/diloco/grant/grant.hpp"
#include "libs/files/confine.hpp"
#include "libs/runspec/input_files.hpp"
#include "libs/runspec/job_template.hpp"
#include "libs/runtime/handler_table.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/endpoint.hpp"
#include "loom/v1/aggregator.pb.h"
#include "loom/v1/audit.pb.h"
#include "loom/v1/bulk.pb.h"
#include "loom/v1/ingest.pb.h"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/models.pb.h"
#include "loom/v1/replica.pb.h"
#include "loom/v1/scheduler.pb.h"
#include "loom/v1/service.pb.h"
#include "loom/v1/sites.pb.h"
#include "loom/v1/trainer.pb.h"
#include "services/aggregator/wire.hpp"
#include "tests/fuzz/fuzz_file.hpp"
#include "tests/fuzz/quiet_protobuf.hpp"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

using namespace loom;
using runtime::call_context;
using runtime::handled;
namespace pb = google::protobuf;

namespace {
const std::string token_key(32, 'k');  // the deployment's token key, as the target's own
constexpr std::int64_t now_s = 1'700'000'000;

void require(bool ok) {
  if (!ok) std::abort();  // a broken promise: libFuzzer saves the input
}

// The scratch data dir: <root>/jobs (the aggregator's and scheduler's job
// outputs) and <root>/import (an import root), made once.
const std::string& root() {
  static const std::string r = [] {
    auto d = fuzz::scratch_dir("request");
    std::filesystem::create_directories(d / "jobs" / "j1" / "checkpoints" / "step-000001");
    std::filesystem::create_directories(d / "import" / "corpus");
    return std::filesystem::canonical(d).string();
  }();
  return r;
}

// A confined path is its root or lies under it on a component boundary.
void check_confined(const std::string& r, const std::string& path) {
  auto c = files::confined({r}, path);
  if (!c) return;
  require(*c == r || (c->size() > r.size() && c->compare(0, r.size(), r) == 0 && (*c)[r.size()] == '/'));
}

void check_tenant(const std::string& t) {
  if (!t.empty()) (void)auth::validate_name("tenant", t);
}

void check_key(const std::string& z85) {
  if (!wire::valid_z85_key(z85)) return;
  auto raw = wire::key_bytes(z85);
  require(raw.ok() && wire::key_z85(*raw).ok() && *wire::key_z85(*raw) == z85);
}

// Every string field, nested messages and maps included: what quoting and
// the name validators make of it.
void walk_strings(const pb::Message& m) {
  const auto* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    const bool repeated = f->is_repeated();
    const int n = repeated ? r->FieldSize(m, f) : 1;
    for (int k = 0; k < n; ++k) {
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        if (!repeated && !r->HasField(m, f)) break;
        walk_strings(repeated ? r->GetRepeatedMessage(m, f, k) : r->GetMessage(m, f));
      } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
        const std::string s = repeated ? r->GetRepeatedString(m, f, k) : r->GetString(m, f);
        for (unsigned char ch : auth::printable(s)) require(ch >= 0x20 && ch < 0x7f);
        // A site name is also a zone, a principal part and a tenant-safe name.
        if (auth::validate_site_name(s)) require(auth::validate_name("zone", s).ok());
      }
    }
  }
}

// The grant as sent, and as the scheduler signs it (only a holder of the key can).
void check_grant(const v1::AggregationGrant& g) {
  (void)diloco::verify_grant(g, token_key, now_s);
  v1::AggregationGrant s = g;
  diloco::sign_grant(&s, token_key);
  auto terms = diloco::verify_grant_mac(s, token_key);
  require(terms.ok() || terms.code() == errc::invalid_argument);
  if (terms) require(terms->job == s.job() && terms->stage == s.stage());
  (void)diloco::verify_grant(s, token_key, now_s);
}

handled submit_job(const v1::SubmitJobRequest& r) {
  static runspec::template_cache templates;  // the scheduler's: parsed texts reused
  static files::root_set read_roots({root() + "/import"});
  check_tenant(r.tenant());
  if (r.template_toml().empty() || r.template_toml().size() > runspec::max_template_bytes) return {};
  const std::vector<std::string> overrides(r.overrides().begin(), r.overrides().end());
  auto plan = templates.resolve(r.template_name(), r.template_toml(), overrides);
  if (!plan) return {};
  require(!plan->stages.empty());
  (void)runspec::priority_of(r.priority_class().empty() ? plan->priority_class : r.priority_class());
  for (const auto& sp : plan->stages) (void)runspec::check_inputs(read_roots, sp.spec.input_paths(), sp.name);
  return {};
}

handled issue_token(const v1::IssueTokenRequest& r) {
  auto role = auth::role_from_string(r.role());
  if (!role || r.zones().empty() || r.ttl_s() == 0 || r.ttl_s() > 366ull * 86400) return {};
  if (!auth::validate_name("principal", r.principal()) || !auth::issuable_principal(r.principal()).ok) return {};
  check_tenant(r.tenant());
  auth::claims c{r.principal(), *role, {r.zones().begin(), r.zones().end()}, now_s + static_cast<std::int64_t>(r.ttl_s()),
                 3, now_s, r.tenant()};
  auto tok = auth::issue_token(c, token_key);
  if (!tok) return {};
  auto back = auth::verify_token(*tok, token_key, {now_s, 3});
  require(back.ok() && back->principal == c.principal && back->r == c.r && back->zones == c.zones &&
          back->expires_unix_s == c.expires_unix_s && back->tenant == auth::tenant_of(c));
  return {};
}

handled site_request(const std::string& site, const std::string& token) {
  if (auth::validate_site_name(site)) require(auth::site_of_token(auth::site_token_principal(site)) == site);
  if (auto t = auth::parse_enrol_token(token)) require(t->secret_hex.size() == 32 && t->cloud_key_raw.size() == 32);
  return {};
}

// Registers `Req` with only the checks every type gets (walk_strings).
template <class Req>
void plain(runtime::handler_table& t) {
  t.on<Req>([](const Req&, const call_context&) { return handled{}; });
}

runtime::handler_table make_table() {
  using namespace loom::v1;
  runtime::handler_table t("fuzz");
  // service.proto, replica.proto: the runtime's built-ins.
  plain<PingRequest>(t), plain<HealthRequest>(t), plain<ReplicaStatusRequest>(t), plain<CrashRequest>(t);
  // scheduler.proto, jobs.proto, models.proto: the scheduler (node ids, states, versions: its logic).
  plain<RegisterNodeRequest>(t), plain<NodeHeartbeatRequest>(t), plain<ListNodesRequest>(t);
  plain<DrainNodeRequest>(t), plain<UndrainNodeRequest>(t), plain<PollWorkRequest>(t);
  plain<ListJobsRequest>(t), plain<GetJobRequest>(t), plain<CancelJobRequest>(t);
  t.on<SubmitJobRequest>([](const SubmitJobRequest& r, const call_context&) { return submit_job(r); });
  plain<ListModelsRequest>(t), plain<GetModelRequest>(t), plain<DiffModelsRequest>(t), plain<RollbackModelRequest>(t);
  plain<ResolveModelVersionRequest>(t), plain<RecordModelExportRequest>(t);
  // sites.proto: the scheduler's sites registry.
  t.on<EnrolSiteRequest>([](const EnrolSiteRequest& r, const call_context&) {
    for (const auto& [service, key] : r.public_keys()) check_key(key);
    return site_request(r.site(), r.token());
  });
  t.on<IssueSiteTokenRequest>(
      [](const IssueSiteTokenRequest& r, const call_context&) { return site_request(r.site(), ""); });
  t.on<RevokeSiteRequest>([](const RevokeSiteRequest& r, const call_context&) { return site_request(r.site(), ""); });
  plain<ListSitesRequest>(t), plain<SiteKeysRequest>(t);
  // ingest.proto: the ingest service.
  plain<ListDatasetsRequest>(t), plain<GetTaskRequest>(t), plain<CancelTaskRequest>(t);
  plain<DatasetStatusRequest>(t), plain<ListRejectsRequest>(t), plain<VerifyDatasetRequest>(t);
  t.on<PlaceDatasetRequest>([](const PlaceDatasetRequest& r, const call_context&) {
    check_tenant(r.for_tenant());
    return handled{};
  });
  t.on<ImportDatasetRequest>([](const ImportDatasetRequest& r, const call_context&) {
    check_tenant(r.for_tenant());
    if (!r.path().empty() && r.path()[0] == '/') check_confined(root() + "/import", r.path());
    return handled{};
  });
  t.on<SyncInfoRequest>([](const SyncInfoRequest& r, const call_context&) {
    check_tenant(r.for_tenant());
    check_key(r.peer_public_key());
    return handled{};
  });
  t.on<PullDatasetRequest>([](const PullDatasetRequest& r, const call_context&) {
    check_tenant(r.for_tenant());
    check_tenant(r.source_tenant());
    check_key(r.public_key());
    (void)wire::valid_tcp_endpoint(r.endpoint(), wire::endpoint_use::connect);
    return handled{};
  });
  // trainer.proto, models.proto: the trainer (its export table).
  plain<TrainerStatusRequest>(t), plain<StartModelExportRequest>(t), plain<GetModelExportRequest>(t);
  plain<FetchModelExportRequest>(t), plain<EndModelExportRequest>(t);
  // aggregator.proto: the aggregator.
  plain<AggregatorStatusRequest>(t);
  t.on<StartAggregationRequest>([](const StartAggregationRequest& r, const call_context&) {
    if (auto spec = aggregator::from_wire(r.spec())) {
      v1::AggregationSpec again;
      aggregator::to_wire(*spec, &again);
      require(aggregator::from_wire(again).ok());  // what was accepted, written back, is accepted again
    }
    if (r.has_grant()) check_grant(r.grant());
    return handled{};
  });
  t.on<ExportGlobalRequest>([](const ExportGlobalRequest& r, const call_context&) {
    if (r.has_grant()) check_grant(r.grant());
    return handled{};
  });
  t.on<InspectCheckpointRequest>([](const InspectCheckpointRequest& r, const call_context&) {
    check_confined(root() + "/jobs", r.checkpoint());
    (void)ckpt::parse_step_dir(std::filesystem::path(r.checkpoint()).filename().string());
    return handled{};
  });
  // audit.proto: the audit service.
  plain<AuditWatermarkRequest>(t), plain<AuditQueryRequest>(t), plain<RotateKeysRequest>(t);
  plain<AuditArchiveRequest>(t);
  t.on<IssueTokenRequest>([](const IssueTokenRequest& r, const call_context&) { return issue_token(r); });
  // bulk.proto: every service's bulk receiver (fuzz_bulk follows the transfer).
  plain<BulkOffer>(t), plain<BulkChunk>(t);

  for (const auto& e : auth::policy_table())
    if (!t.handles(std::string(e.type))) {
      std::fprintf(stderr, "fuzz_request: the policy allows %.*s but this target has no handler for it: add one\n",
                   static_cast<int>(e.type.size()), e.type.data());
      std::abort();
    }
  return t;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const runtime::handler_table table = make_table();
  if (size == 0) return 0;
  const auto policy = auth::policy_table();
  const std::string type(policy[data[0] % policy.size()].type);
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const call_context ctx{"0123456789abcdef", "alice", "admin", "local", "default", "client"};
  const handled h = table.dispatch(type, body, ctx);
  require(h.code == errc::ok || h.code == errc::invalid_argument);  // parsed, or "body is not a valid ..."
  if (h.code != errc::ok) return 0;
  // The same bytes as the generated message, for the fields every type shares.
  const auto* d = pb::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
  require(d != nullptr);
  std::unique_ptr<pb::Message> m(pb::MessageFactory::generated_factory()->GetPrototype(d)->New());
  require(m->ParseFromString(body));
  walk_strings(*m);
  return 0;
}
