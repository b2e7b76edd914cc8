#include "services/ingest/importer/importer.hpp"

#include "libs/atrest/object.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/dedup/index.hpp"
#include "libs/files/files.hpp"
#include "libs/shards/placement.hpp"
#include "libs/textq/policy.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/vision/filter.hpp"
#include "services/ingest/importer/captions.hpp"
#include "services/ingest/importer/media_items.hpp"
#include "services/ingest/importer/media_output.hpp"
#include "services/ingest/importer/output.hpp"
#include "services/ingest/importer/rejects.hpp"
#include "services/ingest/importer/spill.hpp"
#include "services/ingest/importer/staging.hpp"
#include "services/ingest/pipeline/pipeline.hpp"

#include <chrono>
#include <filesystem>
#include <optional>
#include <sys/resource.h>

namespace loom::ingest {
namespace {

using steady = std::chrono::steady_clock;

constexpr std::uint32_t gpt2_eot = 50256;  // <|endoftext|>, before every document (text_data.hpp)

std::uint64_t peak_rss_bytes() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;  // Linux: KiB
}

result<tokenizer::bpe> load_tokenizer(const std::string& path) {
  auto b = path.empty() ? tokenizer::bpe::load_gpt2() : tokenizer::bpe::load(path);
  if (!b) return b.err();
  if (!b->valid_id(gpt2_eot) || b->token_bytes(gpt2_eot) != "<|endoftext|>")
    return make_error(errc::invalid_argument, "import: the vocabulary has no <|endoftext|> at id 50256 (want GPT-2's)");
  return b;
}

pipeline_options pipeline_opts(const import_options& o, const profile& prof) {
  pipeline_options p;
  p.prof = prof;
  p.licences = o.licences;
  return p;
}

// One import in progress: the pipeline with its hook stages, the dedup index,
// the spill, the outputs. Lives on the importing thread for one call.
class import_run {
 public:
  import_run(const import_options& o, std::string id, staging& st, tokenizer::bpe bpe, pii::detector det,
             const profile& prof)
      : o_(o),
        st_(st),
        plan_(plan_budget(o)),
        bpe_(std::move(bpe)),
        det_(std::move(det)),
        pipe_(pipeline_opts(o, prof)),
        media_policy_(media_policy_for(prof.name, plan_)),
        media_dedup_(media_policy_),
        caption_cleaner_(prof.clean),
        start_(steady::now()) {
    sum_.import_id = std::move(id);
  }

  status setup();
  status pass1();
  status pass2();
  result<import_summary> finish();

 private:
  bool stopped() const { return o_.stop && o_.stop->load(std::memory_order_relaxed); }
  error stop_error() const {
    return make_error(errc::unavailable,
                      "import of " + o_.dataset + " stopped: nothing published, the previous version is unchanged");
  }
  verdict redact(document& d);
  bool redact_text(std::string& s);  // true when it found PII (counted into sum_.pii)
  status add_text_filter();
  status on_kept(document& d);
  status on_media(media_file& f);
  std::string caption_for(const std::string& name);
  void note_file(const std::string& source);
  void tick(const char* phase, bool force);

  const import_options& o_;
  staging& st_;
  budget_plan plan_;
  tokenizer::bpe bpe_;
  pii::detector det_;
  pipeline pipe_;
  media_policy media_policy_;
  media_dedup media_dedup_;
  cleaner caption_cleaner_;
  caption_index captions_;
  std::optional<media_output> media_out_;
  std::optional<vision::image_filter_model> image_filter_;
  std::optional<textq::learned_filter> text_filter_;
  steady::time_point start_, last_tick_{};
  std::optional<dedup::index> index_;
  std::optional<spill_writer> spill_;
  std::shared_ptr<atrest::kek_store> spill_keys_;  // what the spill is sealed under (null: plain)
  std::optional<output> out_;
  std::optional<rejects_writer> rejects_;
  std::vector<std::string> sources_;  // sources with kept documents, in input order
  std::string last_seen_;
  import_summary sum_;
  std::vector<std::uint32_t> ids_;
  std::vector<pii::span> spans_;
  std::string rendered_, json_;
  status failure_;
};

status import_run::setup() {
  if (o_.pii)
    pipe_.add_stage(hook_point::after_clean, "pii", [this](document& d) { return redact(d); });
  const shards::dtype type = shards::dtype_for_vocab(bpe_.vocab_size());
  // The dataset's shards, records and rejects are sealed at rest unless
  // LOOM_AT_REST=off (the process's sealing keys; none in a process without a data dir).
  const auto seal = atrest::sealing_keys();
  auto out = output::create(st_.dir(), type, plan_.shard_target_bytes, seal);
  if (!out) return out.err();
  out_.emplace(std::move(*out));
  auto rj = rejects_writer::create(st_.dir() + "/" + std::string(rejects_file_name), seal);
  if (!rj) return rj.err();
  rejects_.emplace(std::move(*rj));
  if (!o_.text_filter.empty()) {
    if (auto st = add_text_filter(); !st) return st;
  }
  if (o_.media) {
    caption_options co;
    co.roots = o_.reader.roots;
    co.skip_hidden = o_.reader.skip_hidden;
    co.max_total_bytes = std::max<std::uint64_t>(plan_.max_document_bytes, 1 << 20);
    auto caps = find_captions(o_.source, co);
    if (!caps) return caps.err();
    captions_ = std::move(*caps);
    for (const auto& p : captions_.problems) {
      ++sum_.media.caption_problems;
      if (auto st = rejects_->add("caption", p.rule, p.file, p.line, p.detail); !st) return st;
    }
    media_out_.emplace(st_.dir(), plan_.media_tar_bytes, seal);
    if (!o_.image_filter.empty()) {
      auto f = vision::load(o_.image_filter);
      if (!f) return make_error(f.code(), "import: the image filter: " + f.err().message);
      image_filter_.emplace(std::move(*f));
    }
  }
  if (o_.dedup) {
    dedup::options d;
    d.memory_budget = plan_.dedup_bytes;
    d.work_dir = st_.work_dir();
    d.fuzzy = o_.near_dedup;
    auto idx = dedup::index::create(d);
    if (!idx) return idx.err();
    index_.emplace(std::move(*idx));
    spill_keys_ = seal;
    auto sp = spill_writer::create(st_.work_dir() + "/pass1.spill", type, seal);  // sealed as the dataset is
    if (!sp) return sp.err();
    spill_.emplace(std::move(*sp));
  }
  return ok_status();
}

// The learned text filter: an after_checks stage, so it judges only what the
// rules kept, and its semantic index holds only documents kept so far (the
// first in input order stays, as for MinHash). Records (chat, preference
// pairs) are not judged: the model scores prose.
status import_run::add_text_filter() {
  auto m = textq::load(o_.text_filter);
  if (!m) return make_error(m.code(), "import: the text filter: " + m.err().message);
  auto model = std::make_shared<const textq::filter_model>(std::move(*m));
  const textq::filter_policy policy = text_filter_policy_for(o_.profile);
  auto index = policy.semantic_dedup
                   ? std::make_shared<textq::semantic_index>(model->config.channels, policy.dedup_cosine)
                   : nullptr;
  auto f = textq::learned_filter::create(model, policy, index);
  if (!f) return make_error(f.code(), "import: the text filter " + o_.text_filter + ": " + f.err().message);
  text_filter_.emplace(std::move(*f));
  pipe_.add_stage(hook_point::after_checks, "learned", [this](document& d) {
    if (d.kind != doc_kind::text) return verdict::keep();
    const textq::learned_verdict v = text_filter_->check(d.text);
    return v.keep() ? verdict::keep() : verdict::reject(std::string(v.rule), v.detail);
  });
  return ok_status();
}

bool import_run::redact_text(std::string& s) {
  det_.find_into(s, spans_);
  if (spans_.empty()) return false;
  pii::redaction r = pii::redact(s, spans_);
  s = std::move(r.text);
  for (std::size_t t = 0; t < pii::type_count; ++t) sum_.pii[t] += r.counts[t];
  return true;
}

verdict import_run::redact(document& d) {
  bool any = false;
  for_each_field(d, [&](std::string& s) { any |= redact_text(s); });
  sum_.documents_with_pii += any;
  return verdict::keep();
}

void import_run::note_file(const std::string& source) {
  if (source == last_seen_) return;
  last_seen_ = source;
  ++sum_.files;
}

void import_run::tick(const char* phase, bool force) {
  if (!o_.progress) return;
  const auto now = steady::now();
  if (!force && now - last_tick_ < std::chrono::milliseconds(o_.progress_interval_ms)) return;
  last_tick_ = now;
  const import_report& r = pipe_.report();
  import_progress p;
  p.phase = phase;
  p.files = sum_.files;
  p.bytes_read = sum_.bytes_read;
  p.documents = r.documents;
  p.kept = r.kept - sum_.dedup.exact - sum_.dedup.near;
  p.rejected = r.rejected;
  p.quarantined = r.quarantined;
  p.duplicates = sum_.dedup.exact + sum_.dedup.near;
  p.elapsed_s = std::chrono::duration<double>(now - start_).count();
  o_.progress(p);
}

status import_run::on_kept(document& d) {
  const std::string* text = &d.text;
  json_.clear();
  if (d.kind != doc_kind::text) {
    render_chat(d, rendered_);
    text = &rendered_;
    record_json(d, json_);
  }
  if (sources_.empty() || sources_.back() != d.source) sources_.push_back(d.source);
  const spill_meta meta{sources_.size() - 1, d.record, d.line, text_bytes(d), d.kind};
  ids_.clear();
  ids_.push_back(gpt2_eot);
  bpe_.encode_into(*text, ids_);
  if (!index_) return out_->emit(ids_, json_, meta.text_bytes);
  if (auto st = index_->add({meta.file, meta.record}, *text); !st) return st;
  return spill_->write(meta, ids_, json_);
}

std::string import_run::caption_for(const std::string& name) {
  auto it = captions_.by_media.find(media_key(name));
  if (it == captions_.by_media.end()) return {};
  std::string text = std::move(it->second.text);
  captions_.by_media.erase(it);
  caption_cleaner_.clean(text);
  if (o_.pii) (void)redact_text(text);  // a caption is text a person wrote: redacted as a document is
  return text;
}

status import_run::on_media(media_file& f) {
  media_figures& mf = sum_.media;
  ++mf.seen;
  note_file(f.name);
  mf.source_bytes += f.bytes.size();
  auto m = f.kind == source_format::audio ? process_audio(f.name, f.bytes, media_policy_)
                                          : process_image(f.name, f.bytes, media_policy_,
                                                          image_filter_ ? &*image_filter_ : nullptr);
  if (!m) {
    const std::string why = media_reason(m.err());
    ++mf.rejected;
    ++mf.rejected_by_reason[why];
    return rejects_->add("rejected", why, f.name, 0, m.err().message);
  }
  if (o_.dedup) {
    if (auto dup = media_dedup_.check(*m, f.name)) {
      if (dup->semantic) {
        ++mf.semantic_duplicates;
        char cos[16];
        std::snprintf(cos, sizeof cos, "%.3f", double(dup->cosine));
        return rejects_->add("duplicate", "duplicate_semantic", f.name, 0,
                             "semantic duplicate of " + dup->kept + " (embedding cosine " + cos +
                                 "; pHash saw no copy) (kept: first in input order)");
      }
      ++(dup->exact ? mf.exact_duplicates : mf.near_duplicates);
      const std::string detail = std::string(dup->exact ? "exact" : "near") + " duplicate of " + dup->kept +
                                 (dup->exact ? "" : " (pHash distance " + std::to_string(dup->distance) + ")") +
                                 " (kept: first in input order)";
      return rejects_->add("duplicate", dup->exact ? "duplicate_exact" : "duplicate_near", f.name, 0, detail);
    }
  }
  for (const auto& s : m->stripped) ++mf.stripped[s];
  m->record.caption = caption_for(f.name);
  mf.captioned += !m->record.caption.empty();
  ++(m->record.kind == "audio" ? mf.audio : mf.images);
  mf.stored_bytes += m->record.bytes.size();
  return media_out_->add(m->record);
}

status import_run::pass1() {
  reader_options ropt = o_.reader;
  ropt.max_line_bytes = ropt.max_document_bytes = plan_.max_document_bytes;
  if (o_.media) ropt.claimed = [this](const std::string& p) { return captions_.claimed.count(p) > 0; };
  ropt.max_media_bytes = plan_.media_file_bytes;
  read_callbacks cb;
  if (o_.media)
    cb.on_media = [&](media_file& f) {
      if (!failure_ || stopped()) return false;
      if (auto st = on_media(f); !st) failure_ = st;
      tick("read", false);
      return failure_.ok();
    };
  cb.on_document = [&](document& d) {
    if (!failure_ || stopped()) return false;
    note_file(d.source);
    sum_.bytes_read += text_bytes(d);
    document_result r = pipe_.process(d);
    status st;
    switch (r.v.kind) {
      case outcome::keep: st = on_kept(d); break;
      case outcome::reject: st = rejects_->add("rejected", r.v.rule, d.source, d.line, r.v.detail); break;
      case outcome::quarantine: st = rejects_->add("quarantined", r.v.rule, d.source, d.line, r.v.detail); break;
    }
    if (!st) failure_ = st;
    tick("read", false);
    return failure_.ok();
  };
  cb.on_reject = [&](const rejection& r) {
    note_file(r.file);
    pipe_.record(r);
    if (r.reason == reject_reason::media_too_large) {  // a media file after all: counted with the others
      ++sum_.media.seen;
      ++sum_.media.rejected;
      ++sum_.media.rejected_by_reason["media_too_large"];
    }
    if (!failure_) return;
    if (auto st = rejects_->add("reader", to_string(r.reason), r.file, r.line, r.message); !st) failure_ = st;
  };
  const read_stats s = read_path(o_.source, ropt, cb);
  pipe_.record(s);
  if (!failure_) return failure_;
  if (stopped()) return stop_error();
  sum_.files = s.files;
  sum_.bytes_read = s.bytes_decoded;
  return ok_status();
}

status import_run::pass2() {
  if (!index_) return ok_status();
  tick("write", true);
  auto v = index_->finish();
  if (!v) return v.err();
  const dedup::summary& ds = v->stats();
  sum_.dedup = {ds.documents, 0, 0, ds.clusters, ds.candidate_pairs, ds.confirmed_pairs, ds.runs_written,
                ds.bytes_spilled};
  auto drops = v->reader();
  if (!drops) return drops.err();
  if (auto st = spill_->finish(); !st) return st;
  auto in = spill_reader::open(spill_->path(), out_->type(), spill_keys_.get());
  if (!in) return in.err();
  spilled_doc d;
  for (std::uint64_t n = 0;; ++n) {
    if ((n & 255) == 0) {
      if (stopped()) return stop_error();
      tick("write", false);
    }
    auto more = in->next(d);
    if (!more) return more.err();
    if (!*more) break;
    auto drop = drops->lookup({d.meta.file, d.meta.record});
    if (!drop) return drop.err();
    if (*drop) {
      const dedup::drop& x = **drop;
      const bool exact = x.why == dedup::reason::exact;
      ++(exact ? sum_.dedup.exact : sum_.dedup.near);
      const std::string detail = std::string(exact ? "exact" : "near") + " duplicate of " + sources_[x.kept_by.source] +
                                 " record " + std::to_string(x.kept_by.record) + " (kept: first in input order)";
      if (auto st = rejects_->add("duplicate", exact ? "duplicate_exact" : "duplicate_near", sources_[d.meta.file],
                                  d.meta.line, detail);
          !st)
        return st;
      continue;
    }
    if (auto st = out_->emit(d.tokens, d.record_json, d.meta.text_bytes); !st) return st;
  }
  index_.reset();
  return ok_status();
}

result<import_summary> import_run::finish() {
  tick("publish", true);
  auto m = out_->finish();
  if (!m) return m.err();
  if (media_out_) {
    if (auto st = media_out_->finish(); !st) return st.err();
    m->media = media_out_->shards();
  }
  if (auto st = shards::place_manifest(*m, o_.nodes, {.load_factor = o_.placement_load_factor}); !st) return st.err();
  if (auto st = shards::write_manifest(st_.dir(), *m); !st) return st.err();
  if (auto st = rejects_->close(); !st) return st.err();
  const import_report& r = pipe_.report();
  sum_.dataset = o_.dataset;
  sum_.documents = r.documents;
  sum_.rejected = r.rejected;
  sum_.quarantined = r.quarantined;
  for (const auto& [reason, n] : r.reader_rejections) sum_.reader_rejections += n;
  sum_.kept = out_->documents();
  sum_.bytes_kept = out_->text_bytes();
  sum_.tokens = m->total_tokens();
  sum_.records = out_->records();
  sum_.rejects = rejects_->count();
  sum_.manifest = std::move(*m);
  sum_.pipeline = r;
  sum_.dir = st_.final_dir();
  sum_.report_path = sum_.dir + "/" + std::string(report_file_name);
  sum_.seconds = std::chrono::duration<double>(steady::now() - start_).count();
  sum_.mb_per_s = sum_.seconds > 0 ? static_cast<double>(sum_.bytes_read) / 1e6 / sum_.seconds : 0;
  sum_.peak_rss_bytes = peak_rss_bytes();
  if (auto st = files::write_atomic(st_.dir() + "/" + std::string(report_file_name), report_json(sum_, o_)); !st)
    return st.err();
  if (stopped()) return stop_error();
  if (auto st = st_.publish(); !st) return st.err();
  tick("done", true);
  return std::move(sum_);
}

}  // namespace

result<import_summary> import_dataset(const import_options& o) {
  if (auto st = validate(o); !st) return st.err();
  std::error_code ec;
  if (!std::filesystem::exists(o.source, ec))
    return make_error(errc::not_found, "import: source " + o.source + " does not exist");
  {  // An import must not read datasets it is about to write.
    const auto src = std::filesystem::weakly_canonical(o.source, ec).string() + "/";
    const auto root = std::filesystem::weakly_canonical(o.datasets_root, ec).string() + "/";
    if (root.starts_with(src))
      return make_error(errc::invalid_argument,
                        "import: datasets root " + o.datasets_root + " lies inside the source " + o.source);
  }
  auto prof = profile_by_name(o.profile);
  if (!prof) return prof.err();
  auto bpe = load_tokenizer(o.vocab_path);
  if (!bpe) return bpe.err();
  pii::options po;
  po.phone_region = o.pii_phone_region;
  auto det = pii::detector::make(po);
  if (!det) return det.err();
  if (auto st = files::make_dirs(o.datasets_root); !st) return st.err();
  const std::string id = crypto::to_hex(crypto::random_bytes(8));
  auto st = staging::begin(o.datasets_root, o.dataset, id);
  if (!st) return st.err();
  import_run run(o, id, *st, std::move(*bpe), std::move(*det), *prof);
  if (auto s = run.setup(); !s) return s.err();
  if (auto s = run.pass1(); !s) return s.err();
  if (auto s = run.pass2(); !s) return s.err();
  return run.finish();
}

}  // namespace loom::ingest
