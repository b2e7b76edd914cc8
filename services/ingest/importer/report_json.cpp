// report.json and the human summary of an import (declared in importer.hpp).
#include "services/ingest/importer/importer.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>

namespace loom::ingest {
namespace {

using json = nlohmann::ordered_json;

// Files per node and their bytes, of token shards or media tars.
struct placed {
  std::map<std::string, std::uint64_t> per_node;
  std::uint64_t bytes = 0;
};
template <class Shards>
placed tally(const Shards& shards) {
  placed p;
  for (const auto& sh : shards) {
    ++p.per_node[sh.node];
    p.bytes += sh.bytes;
  }
  return p;
}

}  // namespace

std::string report_json(const import_summary& s, const import_options& o) {
  const budget_plan plan = plan_budget(o);
  json j;
  j["format"] = "loom-ingest-report";
  j["version"] = 1;
  j["dataset"] = s.dataset;
  j["import_id"] = s.import_id;
  j["source"] = o.source;
  j["options"] = {{"profile", o.profile},
                  {"pii", o.pii},
                  {"dedup", o.dedup},
                  {"near_dedup", o.dedup && o.near_dedup},
                  {"memory_budget_bytes", o.memory_budget},
                  {"dedup_memory_bytes", plan.dedup_bytes},
                  {"shard_target_bytes", plan.shard_target_bytes},
                  {"max_document_bytes", plan.max_document_bytes},
                  {"nodes", o.nodes},
                  {"placement_load_factor", o.placement_load_factor}};

  json pii_types = json::object();
  std::uint64_t pii_total = 0;
  for (auto t : pii::all_types) {
    pii_types[std::string(pii::to_string(t))] = s.pii[static_cast<std::size_t>(t)];
    pii_total += s.pii[static_cast<std::size_t>(t)];
  }
  j["pii"] = {{"enabled", o.pii},
              {"items_redacted", pii_total},
              {"documents_with_pii", s.documents_with_pii},
              {"by_type", std::move(pii_types)}};

  j["dedup"] = {{"enabled", o.dedup},
                {"near", o.dedup && o.near_dedup},
                {"keep_rule", "the first copy in input order (files in byte order of their paths, then record)"},
                {"documents", s.dedup.documents},
                {"exact_duplicates", s.dedup.exact},
                {"near_duplicates", s.dedup.near},
                {"clusters", s.dedup.clusters},
                {"candidate_pairs", s.dedup.candidate_pairs},
                {"confirmed_pairs", s.dedup.confirmed_pairs},
                {"runs_spilled", s.dedup.runs_spilled},
                {"bytes_spilled", s.dedup.bytes_spilled}};

  const import_report& r = s.pipeline;
  std::uint64_t quarantined_licence = 0;
  if (auto it = r.quarantined_by_reason.find("licence_denied"); it != r.quarantined_by_reason.end())
    quarantined_licence = it->second;
  j["licences"] = {{"policy", o.licences.action == licence_policy::mode::deny ? "deny" : "report"},
                   {"deny", o.licences.deny},
                   {"documents_by_licence", r.licences},
                   {"documents_with_copyright", r.documents_with_copyright},
                   {"quarantined", quarantined_licence}};
  j["annotations"] = {{"pass_rate", r.annotations.pass_rate()},
                      {"sft_records", r.annotations.sft_records},
                      {"sft_valid", r.annotations.sft_valid},
                      {"preference_records", r.annotations.preference_records},
                      {"preference_valid", r.annotations.preference_valid}};

  const media_figures& mf = s.media;
  const placed tars = tally(s.manifest.media);
  j["media"] = {{"enabled", o.media},
                {"seen", mf.seen},
                {"images", mf.images},
                {"audio", mf.audio},
                {"rejected", mf.rejected},
                {"rejected_by_reason", mf.rejected_by_reason},
                {"exact_duplicates", mf.exact_duplicates},
                {"near_duplicates", mf.near_duplicates},
                {"semantic_duplicates", mf.semantic_duplicates},
                {"captioned", mf.captioned},
                {"caption_problems", mf.caption_problems},
                {"metadata_stripped", mf.stripped},
                {"source_bytes", mf.source_bytes},
                {"stored_bytes", mf.stored_bytes},
                {"tars", s.manifest.media.size()},
                {"tar_bytes", tars.bytes},
                {"tars_per_node", tars.per_node}};

  const placed shards = tally(s.manifest.shards);
  j["output"] = {{"documents", s.kept},
                 {"text_bytes", s.bytes_kept},
                 {"tokens", s.tokens},
                 {"shards", s.manifest.shards.size()},
                 {"shard_bytes", shards.bytes},
                 {"shards_per_node", shards.per_node},
                 {"records", s.records},
                 {"rejects", s.rejects}};
  j["totals"] = {{"files", s.files},
                 {"bytes_read", s.bytes_read},
                 {"documents", s.documents},
                 {"kept", s.kept},
                 {"rejected", s.rejected},
                 {"quarantined", s.quarantined},
                 {"duplicates", s.dedup.exact + s.dedup.near},
                 {"reader_rejections", s.reader_rejections}};
  j["performance"] = {{"seconds", s.seconds},
                      {"mb_per_s", s.mb_per_s},
                      {"peak_rss_bytes", s.peak_rss_bytes},
                      {"threads", 1}};
  // The pipeline's own report, as pipeline/report.hpp writes it.
  j["pipeline"] = json::parse(r.to_json(-1), nullptr, false);
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {

// "  media     ..." when the import met images or audio; "" otherwise.
std::string media_line(const import_summary& s) {
  const media_figures& m = s.media;
  if (m.seen == 0) return {};
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "  media     %llu seen: %llu images + %llu audio kept in %zu tars (%llu captioned), %llu refused, "
                "%llu exact + %llu near + %llu semantic duplicates\n",
                static_cast<unsigned long long>(m.seen), static_cast<unsigned long long>(m.images),
                static_cast<unsigned long long>(m.audio), s.manifest.media.size(),
                static_cast<unsigned long long>(m.captioned), static_cast<unsigned long long>(m.rejected),
                static_cast<unsigned long long>(m.exact_duplicates), static_cast<unsigned long long>(m.near_duplicates),
                static_cast<unsigned long long>(m.semantic_duplicates));
  return buf;
}

}  // namespace

std::string summary_text(const import_summary& s) {
  char buf[2048];
  std::snprintf(buf, sizeof buf,
                "dataset %s (import %s) -> %s\n"
                "  read      %llu files, %.1f MB, %llu documents\n"
                "  kept      %llu documents, %llu tokens, %zu shards, %llu records\n"
                "  dropped   %llu rejected, %llu quarantined, %llu reader rejections, %llu exact + %llu near duplicates\n"
                "%s"
                "  time      %.2f s, %.1f MB/s, peak RSS %.1f MiB\n"
                "  report    %s\n",
                s.dataset.c_str(), s.import_id.c_str(), s.dir.c_str(), static_cast<unsigned long long>(s.files),
                static_cast<double>(s.bytes_read) / 1e6, static_cast<unsigned long long>(s.documents),
                static_cast<unsigned long long>(s.kept), static_cast<unsigned long long>(s.tokens),
                s.manifest.shards.size(), static_cast<unsigned long long>(s.records),
                static_cast<unsigned long long>(s.rejected), static_cast<unsigned long long>(s.quarantined),
                static_cast<unsigned long long>(s.reader_rejections), static_cast<unsigned long long>(s.dedup.exact),
                static_cast<unsigned long long>(s.dedup.near), media_line(s).c_str(), s.seconds, s.mb_per_s,
                static_cast<double>(s.peak_rss_bytes) / (1 << 20), s.report_path.c_str());
  return buf;
}

}  // namespace loom::ingest
