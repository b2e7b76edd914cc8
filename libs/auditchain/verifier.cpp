#include "libs/auditchain/verifier.hpp"

#include <algorithm>

namespace loom::auditchain {

std::string_view to_string(fault f) {
  switch (f) {
    case fault::none: return "none";
    case fault::gap: return "gap";
    case fault::prev_mismatch: return "prev_mismatch";
    case fault::hash_mismatch: return "hash_mismatch";
    case fault::malformed: return "malformed";
    case fault::anchor_signature: return "anchor_signature";
    case fault::anchor_mismatch: return "anchor_mismatch";
    case fault::truncated: return "truncated";
    case fault::anchor_missing: return "anchor_missing";
    case fault::archive: return "archive";
  }
  return "unknown";
}

std::string verify_report::summary() const {
  if (ok()) {
    std::string s = "ok: " + std::to_string(rows) + " rows (seq " + std::to_string(from_seq) + ".." +
                    std::to_string(last_seq) + "), " + std::to_string(anchors) + " checkpoints";
    if (anchored_seq != 0) s += ", anchored through seq " + std::to_string(anchored_seq);
    return s;
  }
  return std::string(to_string(kind)) + " at seq " + std::to_string(bad_seq) + ": " + reason;
}

chain_verifier::chain_verifier(std::uint64_t from_seq, const hash32& start_prev, std::vector<anchor> anchors)
    : expect_(from_seq == 0 ? 1 : from_seq), prev_(start_prev) {
  for (auto& a : anchors)
    if (a.seq >= expect_) anchors_.push_back(std::move(a));
  std::stable_sort(anchors_.begin(), anchors_.end(), [](const anchor& a, const anchor& b) { return a.seq < b.seq; });
  proven_ = expect_ - 1;
  report_.from_seq = expect_;
  report_.last_seq = expect_ - 1;
}

void chain_verifier::fail(fault f, std::uint64_t seq, std::string reason) {
  if (failed()) return;
  report_.kind = f;
  report_.bad_seq = seq;
  report_.reason = std::move(reason);
}

bool chain_verifier::check_anchors_at(std::uint64_t seq, const hash32& h) {
  for (; next_anchor_ < anchors_.size() && anchors_[next_anchor_].seq == seq; ++next_anchor_) {
    const anchor& a = anchors_[next_anchor_];
    if (!a.authentic) {
      fail(fault::anchor_signature, seq, "checkpoint at seq " + std::to_string(seq) + " (" + a.origin + ") " + a.problem);
      return false;
    }
    if (a.row_hash != h) {
      report_.anchor_seq = seq;
      fail(fault::anchor_mismatch, proven_ + 1,
           "checkpoint at seq " + std::to_string(seq) + " (" + a.origin + ") signs row hash " + to_hex(a.row_hash) +
               " but the chain has " + to_hex(h) + ": rows " + std::to_string(proven_ + 1) + ".." +
               std::to_string(seq) + " were rewritten with a recomputed chain");
      return false;
    }
    ++report_.anchors;
    proven_ = seq;
    report_.anchored_seq = seq;
  }
  return true;
}

bool chain_verifier::feed(const chain_row& r) {
  if (failed()) return false;
  if (r.seq != expect_) {
    if (r.seq > expect_) {
      fail(fault::gap, expect_,
           "seq " + std::to_string(expect_) + " is missing: the next row is seq " + std::to_string(r.seq));
    } else {
      fail(fault::malformed, r.seq, "rows out of order: seq " + std::to_string(r.seq) + " after " +
                                        std::to_string(expect_ - 1));
    }
    return false;
  }
  // Checkpoints that fall inside a gap or before the walk are caught at
  // their seq; one at a seq we passed without a row cannot exist (gap above).
  if (r.prev_hash != prev_) {
    fail(fault::prev_mismatch, r.seq,
         "prev_hash " + to_hex(r.prev_hash) + " is not the row hash of seq " + std::to_string(r.seq - 1) + " (" +
             to_hex(prev_) + ")");
    return false;
  }
  if (r.version != row_version_v1 && r.version != current_row_version) {
    fail(fault::malformed, r.seq, "unknown row version " + std::to_string(r.version));
    return false;
  }
  if (r.version == row_version_v1 && !r.tenant.empty()) {
    // Version 1 hashes no tenant: one written into an old row would move it into a tenant's trail unseen.
    fail(fault::malformed, r.seq, "a version 1 row carries tenant '" + r.tenant + "': version 1 rows have none");
    return false;
  }
  hash32 h = hasher_.hash(prev_, r);
  if (h != r.row_hash) {
    fail(fault::hash_mismatch, r.seq,
         "stored row_hash " + to_hex(r.row_hash) + " but the row hashes to " + to_hex(h) + ": a column was changed");
    return false;
  }
  ++report_.rows;
  report_.last_seq = r.seq;
  prev_ = h;
  ++expect_;
  return check_anchors_at(r.seq, h);
}

void chain_verifier::malformed(std::uint64_t seq, const std::string& why) {
  if (failed()) return;
  if (seq > expect_) {
    fail(fault::gap, expect_, "seq " + std::to_string(expect_) + " is missing: the next row is seq " +
                                  std::to_string(seq));
    return;
  }
  fail(fault::malformed, seq, why);
}

void chain_verifier::archive_problem(std::uint64_t seq, const std::string& why) {
  if (!failed()) fail(fault::archive, seq, why);
}

verify_report chain_verifier::finish() {
  if (!failed()) {
    // Every anchor left is above the last row. An authentic one proves the
    // log lost its tail; an inauthentic one is a planted checkpoint.
    const anchor* top = nullptr;
    const anchor* planted = nullptr;
    for (std::size_t i = next_anchor_; i < anchors_.size(); ++i) {
      const anchor& a = anchors_[i];
      if (a.authentic && (!top || a.seq > top->seq)) top = &a;
      if (!a.authentic && !planted) planted = &a;
    }
    if (top) {
      report_.anchor_seq = top->seq;
      fail(fault::truncated, report_.last_seq + 1,
           "truncated: anchor at seq " + std::to_string(top->seq) + " but the log ends at " +
               std::to_string(report_.last_seq));
    } else if (planted) {
      fail(fault::anchor_signature, planted->seq,
           "checkpoint at seq " + std::to_string(planted->seq) + " (" + planted->origin + ") " + planted->problem);
    }
  }
  if (!failed() && report_.last_seq > report_.anchored_seq && report_.rows > 0) {
    std::uint64_t first = std::max(report_.anchored_seq + 1, report_.from_seq);
    report_.notes.push_back("rows " + std::to_string(first) + ".." + std::to_string(report_.last_seq) +
                            " follow the last checkpoint: chained but not yet anchored");
  }
  return report_;
}

}  // namespace loom::auditchain
