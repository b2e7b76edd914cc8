#include "services/ingest/wire.hpp"

#include "loom/v1/ingest.pb.h"

namespace loom::ingest {

import_options import_options_from_wire(const loom::v1::ImportDatasetRequest& r) {
  import_options o;
  o.source = r.path();
  o.dataset = r.dataset();
  if (!r.profile().empty()) o.profile = r.profile();
  if (r.memory_bytes() > 0) o.memory_budget = r.memory_bytes();
  if (!r.nodes().empty()) o.nodes.assign(r.nodes().begin(), r.nodes().end());
  if (!r.deny_licences().empty()) {
    o.licences.action = licence_policy::mode::deny;
    o.licences.deny.assign(r.deny_licences().begin(), r.deny_licences().end());
  }
  o.pii = !r.no_pii();
  o.dedup = !r.no_dedup();
  if (!r.text_field().empty()) o.reader.jsonl_text_field = r.text_field();
  o.media = !r.no_media();
  o.image_filter = r.image_filter();
  o.text_filter = r.text_filter();
  return o;
}

void to_wire(const task_info& t, loom::v1::TaskInfo* out) {
  out->set_id(t.id);
  out->set_kind(t.kind);
  out->set_tenant(t.tenant);
  out->set_dataset(t.dataset);
  out->set_state(t.state);
  out->set_phase(t.phase);
  out->set_files(t.files);
  out->set_bytes_read(t.bytes_read);
  out->set_documents(t.documents);
  out->set_kept(t.kept);
  out->set_rejected(t.rejected);
  out->set_duplicates(t.duplicates);
  out->set_elapsed_s(t.elapsed_s);
  out->set_mb_per_s(t.mb_per_s);
  out->set_message(t.message);
  out->set_source(t.source);
  out->set_report_json(t.report_json);
  out->set_tokens(t.tokens);
  out->set_shards(t.shards);
  out->set_bytes_sent(t.bytes_sent);
  out->set_started_unix_ns(t.started_unix_ns);
  out->set_finished_unix_ns(t.finished_unix_ns);
}

readiness readiness_of(const dataset_row& d, const std::string& damage) {
  if (!damage.empty()) return {"damaged", damage};
  if (d.tokens <= 0) {
    std::string why = "it has no tokens: ";
    const std::string version = "version " + std::to_string(d.version) + " (" + d.import_id + ")";
    if (d.documents > 0)
      why += "the " + std::to_string(d.documents) + " documents of " + version + " are empty";
    else if (d.rejects > 0)
      why += version + " kept no document: all " + std::to_string(d.rejects) + " were rejected (`loom data rejects " +
             d.name + "` says why)";
    else
      why += version + " kept no document: its source held none";
    return {"empty", why};
  }
  return {d.state, ""};
}

void to_wire(const dataset_row& d, const std::string& dir, const std::string& damage, loom::v1::DatasetInfo* out) {
  out->mutable_id()->set_value(d.name);
  out->set_name(d.name);
  out->set_documents(static_cast<std::uint64_t>(d.documents));
  out->set_tokens(static_cast<std::uint64_t>(d.tokens));
  out->set_shards(static_cast<std::uint32_t>(d.shards));
  out->set_bytes(static_cast<std::uint64_t>(d.bytes));
  out->set_version(d.version);
  out->set_import_id(d.import_id);
  const readiness r = readiness_of(d, damage);
  out->set_state(r.state);
  out->set_reason(r.reason);
  out->set_tenant(d.tenant);
  out->set_updated_unix_ns(static_cast<std::uint64_t>(d.updated_ns));
  out->set_dir(dir);
  out->set_report_path(d.report_path);
  out->set_damage(damage);
  out->set_rejects(static_cast<std::uint64_t>(d.rejects));
  out->set_verified_unix_ns(static_cast<std::uint64_t>(d.verified_ns));
}

void to_wire(const shard_row& s, const std::string& problem, loom::v1::ShardPlacement* out) {
  out->set_name(s.name);
  out->set_node(s.node);
  out->set_bytes(static_cast<std::uint64_t>(s.bytes));
  out->set_tokens(static_cast<std::uint64_t>(s.tokens));
  out->set_sha256(s.sha256);
  out->set_problem(problem);
}

void to_wire(const reject_row& r, loom::v1::Reject* out) {
  out->set_file(r.file);
  out->set_line(r.line);
  out->set_rule(r.rule);
  out->set_detail(r.detail);
  out->set_stage(r.stage);
}

void to_wire(const sync_endpoint& e, const std::string& granted_tenant, loom::v1::SyncInfoReply* out) {
  out->set_endpoint(e.endpoint);
  out->set_public_key(e.public_key);
  out->set_tenant(granted_tenant);
}

}  // namespace loom::ingest
