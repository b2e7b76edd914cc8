#include "services/ingest/pipeline/pipeline.hpp"

namespace loom::ingest {

std::string_view to_string(outcome o) {
  switch (o) {
    case outcome::keep: return "keep";
    case outcome::reject: return "reject";
    case outcome::quarantine: return "quarantine";
  }
  return "unknown";
}

pipeline::pipeline(pipeline_options opt)
    : opt_(std::move(opt)), cleaner_(opt_.prof.clean), quality_(opt_.prof.quality) {
  report_.max_listed = opt_.max_listed;
}

void pipeline::add_stage(hook_point at, std::string name, stage_fn fn) {
  hooks_.push_back({at, std::move(name), std::move(fn)});
}

licence_findings pipeline::scan_licences(const document& d) {
  return d.kind == doc_kind::text ? licence_.scan(d.text) : licence_.scan(joined_text(d));
}

bool pipeline::run_hooks(hook_point at, document& d, document_result& r) {
  for (auto& h : hooks_) {
    if (h.at != at) continue;
    verdict v = h.fn(d);
    if (v.kind == outcome::keep) continue;
    if (v.rule.empty()) v.rule = h.name;
    r.v = std::move(v);
    return false;
  }
  return true;
}

document_result& pipeline::finish(document& d, document_result& r) {
  switch (r.v.kind) {
    case outcome::keep:
      ++report_.kept;
      report_.bytes_kept += text_bytes(d);
      break;
    case outcome::reject:
      ++report_.rejected;
      ++report_.rejected_by_rule[r.v.rule];
      report_.add_problem({"rejected", d.source, d.line, r.v.rule, r.v.detail});
      break;
    case outcome::quarantine:
      ++report_.quarantined;
      ++report_.quarantined_by_reason[r.v.rule];
      report_.add_problem({"quarantined", d.source, d.line, r.v.rule, r.v.detail});
      break;
  }
  return r;
}

document_result pipeline::process(document& d) {
  document_result r;
  ++report_.documents;

  // 1. Clean.
  const std::size_t in_bytes = text_bytes(d);
  for_each_field(d, [&](std::string& s) { r.clean += cleaner_.clean(s); });
  report_.cleaning += r.clean;
  if (in_bytes > 0 && static_cast<double>(r.clean.utf8_replacements) >
                          opt_.prof.clean.max_replacement_ratio * static_cast<double>(in_bytes)) {
    r.v = verdict::reject("invalid_utf8", std::to_string(r.clean.utf8_replacements) + " invalid UTF-8 sequences in " +
                                              std::to_string(in_bytes) + " bytes");
    return finish(d, r);
  }
  if (d.kind == doc_kind::text && d.text.empty()) {
    r.v = verdict::reject("empty", "no text after cleaning");
    return finish(d, r);
  }
  if (!run_hooks(hook_point::after_clean, d, r)) return finish(d, r);

  // 2. Quality. C4 line filters edit the text (a licence's title line has no
  // full stop): then the licence scan of step 3 looks at the text before them.
  const auto& q_rules = opt_.prof.quality;
  const bool edits = q_rules.c4_drop_javascript_lines || q_rules.c4_drop_policy_lines ||
                     q_rules.c4_drop_unpunctuated_lines || q_rules.c4_min_words_per_line > 0;
  const bool judged = d.kind == doc_kind::text || opt_.quality_on_annotations;
  bool scanned = false;
  if (judged && edits) {
    r.licences = scan_licences(d);
    scanned = true;
  }
  if (judged) {
    std::string joined;
    std::string& text = d.kind == doc_kind::text ? d.text : (joined = joined_text(d));
    quality_verdict q = quality_.check(text);
    for (const auto& [rule, n] : q.lines_removed) report_.lines_removed_by_rule[std::string(rule)] += n;
    if (!q.pass) {
      r.v = verdict::reject(std::string(q.rule), std::move(q.detail));
      return finish(d, r);
    }
  }

  // 3. Licence and copyright.
  if (!scanned) r.licences = scan_licences(d);
  for (const auto& m : r.licences.licences) ++report_.licences[m.id];
  if (r.licences.copyright_lines > 0) ++report_.documents_with_copyright;
  if (auto why = denied_licence(r.licences, opt_.licences)) {
    r.v = verdict::quarantine("licence_denied", *why);
    return finish(d, r);
  }

  // 4. Annotation validation.
  if (d.kind != doc_kind::text) {
    auto& st = report_.annotations;
    const bool sft = d.kind == doc_kind::sft;
    ++(sft ? st.sft_records : st.preference_records);
    r.annotation_errors = validate_annotation(d, opt_.annotations);
    if (r.annotation_errors.empty()) {
      ++(sft ? st.sft_valid : st.preference_valid);
    } else {
      for (const auto& e : r.annotation_errors) {
        ++st.errors_by_code[e.code];
        report_.add_problem({"annotation", d.source, d.line, e.code, e.field + ": " + e.message});
      }
      const auto& first = r.annotation_errors.front();
      r.v = verdict::reject("annotation_" + first.code, first.field + ": " + first.message);
      return finish(d, r);
    }
  }

  // 5. Hooks that want only documents that passed (dedup).
  run_hooks(hook_point::after_checks, d, r);
  return finish(d, r);
}

void pipeline::record(const rejection& r) {
  ++report_.reader_rejections[std::string(to_string(r.reason))];
  if (r.kind != doc_kind::text) {
    auto& st = report_.annotations;
    ++(r.kind == doc_kind::sft ? st.sft_records : st.preference_records);
    ++st.errors_by_code[std::string(to_string(r.reason))];
  }
  report_.add_problem({"reader", r.file, r.line, std::string(to_string(r.reason)), r.message});
}

void pipeline::record(const read_stats& s) {
  report_.files += s.files;
  report_.bytes_decoded += s.bytes_decoded;
}

read_stats run_import(const std::string& path, const reader_options& ropt, pipeline& p, const import_sinks& sinks) {
  read_callbacks cb;
  cb.on_document = [&](document& d) {
    document_result r = p.process(d);
    switch (r.v.kind) {
      case outcome::keep: return sinks.kept ? sinks.kept(d, r) : true;
      case outcome::quarantine:
        if (sinks.quarantined) sinks.quarantined(d, r);
        return true;
      case outcome::reject:
        if (sinks.rejected) sinks.rejected(d, r);
        return true;
    }
    return true;
  };
  cb.on_reject = [&](const rejection& r) { p.record(r); };
  read_stats s = read_path(path, ropt, cb);
  p.record(s);
  return s;
}

}  // namespace loom::ingest
