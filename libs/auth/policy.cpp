#include "libs/auth/policy.hpp"

#include <array>

namespace loom::auth {
namespace {

// THE single place to add a request type. A new message that services accept
// needs a row here, or every call to it is denied ("no policy for request type").
// `site` marks a site's business (policy_entry::site_business): the types an
// edge site's token may send over its own keys.
constexpr bool site = true;
constexpr std::array<policy_entry, 51> table{{
    // type                             min role         mutating  what   service  [site business]
    {"loom.v1.PingRequest",             role::viewer,    false, "echo a payload; liveness and latency probe", "*", site},
    {"loom.v1.HealthRequest",           role::viewer,    false, "service health, restarts and sub-checks", "*", site},
    {"loom.v1.ReplicaStatusRequest",    role::viewer,    false, "which replica of a replicated service leads, its epoch and lease", "*", site},
    {"loom.v1.CrashRequest",            role::admin,     true,  "crash the service actor (test/ops hook for supervision)", "*"},
    {"loom.v1.RegisterNodeRequest",     role::operator_, true,  "register a node with the scheduler", "scheduler", site},
    {"loom.v1.NodeHeartbeatRequest",    role::operator_, false, "node liveness heartbeat to the scheduler", "scheduler", site},
    {"loom.v1.ListNodesRequest",        role::viewer,    false, "list registered nodes", "scheduler"},
    // Drain/undrain: the scheduler also requires the admin, or the node's own site's token over its key.
    {"loom.v1.DrainNodeRequest",        role::operator_, true,  "drain a node: no new work is placed on it (kept until undrained)", "scheduler", site},
    {"loom.v1.SubmitJobRequest",        role::operator_, true,  "submit a training job (idempotent by request id)", "scheduler"},
    {"loom.v1.ListJobsRequest",         role::viewer,    false, "list training jobs", "scheduler"},
    {"loom.v1.GetJobRequest",           role::viewer,    false, "a job's state, stages and events", "scheduler"},
    {"loom.v1.CancelJobRequest",        role::operator_, true,  "cancel a training job", "scheduler"},
    {"loom.v1.PollWorkRequest",         role::operator_, false, "a trainer's progress report and request for work", "scheduler", site},
    {"loom.v1.ListDatasetsRequest",     role::viewer,    false, "list ingested datasets", "ingest"},
    {"loom.v1.ImportDatasetRequest",    role::operator_, true,  "import a corpus into a dataset (runs as a task)", "ingest"},
    {"loom.v1.GetTaskRequest",          role::viewer,    false, "an import or pull task's progress and outcome", "ingest"},
    {"loom.v1.CancelTaskRequest",       role::operator_, true,  "cancel an import or pull task", "ingest"},
    {"loom.v1.DatasetStatusRequest",    role::viewer,    false, "a dataset's counts, shard placement and last task", "ingest"},
    {"loom.v1.ListRejectsRequest",      role::viewer,    false, "a dataset's rejected files and documents (reason, file, line)", "ingest"},
    {"loom.v1.VerifyDatasetRequest",    role::operator_, true,  "hash every shard of a dataset against its manifest (runs as a task)", "ingest"},
    {"loom.v1.SyncInfoRequest",         role::operator_, false, "where this site's dataset sync server listens", "ingest"},
    {"loom.v1.PullDatasetRequest",      role::operator_, true,  "pull a dataset from another site (incremental, runs as a task)", "ingest"},
    {"loom.v1.TrainerStatusRequest",    role::viewer,    false, "trainer progress and state", "trainer"},
    {"loom.v1.AggregatorStatusRequest", role::viewer,    false, "aggregator rounds and state", "aggregator"},
    {"loom.v1.StartAggregationRequest", role::operator_, true,  "start a cross-site DiLoCo aggregation (idempotent for the same spec)", "aggregator", site},
    {"loom.v1.ExportGlobalRequest",     role::operator_, true,  "write an aggregation's global model as the cloud's signed stage checkpoint", "aggregator", site},
    // From this deployment's scheduler key only (the aggregator refuses any other key,
    // whatever the token): a split cloud's scheduler judging a checkpoint on the aggregator's host.
    {"loom.v1.InspectCheckpointRequest", role::operator_, false, "verify and describe a checkpoint under the aggregator's jobs dir, for the scheduler", "aggregator"},
    {"loom.v1.AuditWatermarkRequest",   role::operator_, false, "highest audit seq stored for a source", "audit"},
    {"loom.v1.AuditQueryRequest",       role::operator_, false, "read stored audit events", "audit"},
    {"loom.v1.BulkOffer",               role::operator_, true,  "announce a chunked bulk transfer", "*"},
    {"loom.v1.RotateKeysRequest",       role::admin,     true,  "rotate the audit key-encryption key now", "audit"},
    {"loom.v1.AuditArchiveRequest",     role::admin,     true,  "move audit records older than the retention to an archive file", "audit"},
    {"loom.v1.IssueTokenRequest",       role::admin,     true,  "issue a bearer token (audited; the token itself is never stored)", "audit"},
    {"loom.v1.BulkChunk",               role::operator_, true,  "one chunk of a bulk transfer", "*"},
    {"loom.v1.IssueSiteTokenRequest",   role::admin,     true,  "a one-time enrolment token for an edge site", "scheduler"},
    {"loom.v1.RevokeSiteRequest",       role::admin,     true,  "revoke an edge site: its keys are no longer admitted", "scheduler"},
    {"loom.v1.ListSitesRequest",        role::viewer,    false, "edge sites, their trainers, link and datasets", "scheduler"},
    // From this deployment's own service keys only (the scheduler refuses any other):
    // a cloud split over hosts learns which site keys to admit (key_follower).
    {"loom.v1.SiteKeysRequest",         role::operator_, false, "the enrolled sites' public keys, for a cloud service on another host", "scheduler"},
    {"loom.v1.ListModelsRequest",       role::viewer,    false, "model versions in the registry", "scheduler"},
    {"loom.v1.GetModelRequest",         role::viewer,    false, "one model version with its lineage", "scheduler"},
    {"loom.v1.DiffModelsRequest",       role::viewer,    false, "what differs between two model versions", "scheduler"},
    {"loom.v1.RollbackModelRequest",    role::operator_, true,  "make an earlier model version current again (hash-checked)", "scheduler"},
    // From this deployment's trainer key only, for the caller of its StartModelExport
    // (the scheduler refuses any other key, and a compliance override of a non-admin caller).
    {"loom.v1.RecordModelExportRequest", role::operator_, true, "a trainer records the check or export it ran, with every check's outcome", "scheduler"},
    // Token-free (token_free below): the enrolment token in the body is the credential.
    {"loom.v1.EnrolSiteRequest",        role::viewer,    true,  "an edge site enrols with a one-time token and its CURVE keys", "scheduler"},
    // The scheduler also requires the admin, or the node's own site's token over its key (like DrainNode).
    {"loom.v1.UndrainNodeRequest",      role::operator_, true,  "undo a node's drain: it takes work again", "scheduler", site},
    // Model checks and exports run in a cloud trainer (issue 25 item 3). Resolve:
    // from this deployment's trainer key only (the scheduler refuses any other).
    {"loom.v1.ResolveModelVersionRequest", role::operator_, false, "a trainer reads a version and its lineage for the caller it checks or exports for", "scheduler"},
    // Admin when it asks for a compliance override (the trainer checks that).
    {"loom.v1.StartModelExportRequest", role::operator_, true,  "run a model version's pre-export checks and, for an export, write its artefact", "trainer"},
    {"loom.v1.GetModelExportRequest",   role::operator_, false, "a model check's or export's state, checks and files", "trainer"},
    {"loom.v1.FetchModelExportRequest", role::operator_, false, "a chunk of a done export's artefact", "trainer"},
    {"loom.v1.EndModelExportRequest",   role::operator_, true,  "cancel a model check or export, or delete its fetched artefact", "trainer"},
    // Appended (the fuzz corpus names types by their index in this table).
    {"loom.v1.PlaceDatasetRequest",     role::operator_, true,  "place a dataset's shards anew on roster nodes (only files whose owner changes move)", "ingest"},
}};

// Types whose credential travels in the body and which the logic checks: the
// gateway lets them through without a bearer token (their min_role is moot).
constexpr std::array<std::string_view, 1> token_free_types{{"loom.v1.EnrolSiteRequest"}};

}  // namespace

std::span<const policy_entry> policy_table() { return table; }

bool token_free(std::string_view type) {
  for (auto t : token_free_types)
    if (t == type) return true;
  return false;
}

const policy_entry* find_policy(std::string_view type) {
  for (const auto& e : table)
    if (e.type == type) return &e;
  return nullptr;
}

}  // namespace loom::auth
