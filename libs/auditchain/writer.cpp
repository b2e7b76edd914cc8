#include "libs/auditchain/writer.hpp"

#include "libs/auditchain/envelope.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/store/database.hpp"

namespace loom::auditchain {
status anchor_genesis(anchor_file& file, const anchor_signer& signer, sys_time now) {
  return file.append(signer.sign(0, genesis_hash, unix_ns(now)));
}

result<std::unique_ptr<chain_writer>> chain_writer::open(store::transaction& tx, writer_parts parts, sys_time now) {
  if (!parts.keys || !parts.signer || !parts.file)
    return make_error(errc::invalid_argument, "chain_writer needs a keyring, a signer and an anchor file");
  std::unique_ptr<chain_writer> w(new chain_writer(std::move(parts)));
  w->anchored_ns_ = unix_ns(now);
  auto note = [&](const checkpoint& c) {
    if (c.seq > w->anchored_seq_) {
      w->anchored_seq_ = c.seq;
      w->anchored_ns_ = c.unix_ns;
    }
  };
  auto tail = read_tail(tx, w->parts_.names);
  if (!tail) return tail.err();
  w->committed_ = w->pending_ = *tail;
  auto cps = read_checkpoints(tx, w->parts_.names);
  if (!cps) return cps.err();
  for (const auto& c : *cps) note(c);
  auto f = read_anchor_file(w->parts_.file->path());
  if (!f && f.code() != errc::not_found) return f.err();
  if (f)
    for (const auto& c : f->checkpoints) note(c);
  w->committed_anchored_seq_ = w->anchored_seq_;
  w->committed_anchored_ns_ = w->anchored_ns_;
  return w;
}

result<std::unique_ptr<chain_writer>> chain_writer::open(store::database& db, writer_parts parts, sys_time now) {
  return db.with_read_transaction([&](store::transaction& tx) { return open(tx, std::move(parts), now); });
}

result<chain_row> chain_writer::append(store::transaction& tx, chain_row r, std::string_view plaintext,
                                       sys_time now) {
  r.seq = pending_.last_seq + 1;
  auto sealed = parts_.keys->seal(plaintext, context_of(r), now);
  if (!sealed) return sealed.err();
  r.payload = std::move(*sealed);
  chain_tail next = pending_;
  link(next, r, hasher_);
  if (auto s = insert_row(tx, r, parts_.names); !s) return s.err();
  pending_ = next;
  if (parts_.policy.every_records > 0 && pending_.last_seq - anchored_seq_ >= parts_.policy.every_records)
    if (auto s = sign(tx, unix_ns(now)); !s) return s.err();
  return r;
}

status chain_writer::sign(store::transaction& tx, std::int64_t now_ns) {
  checkpoint c = parts_.signer->sign(pending_.last_seq, pending_.last_hash, now_ns);
  if (auto s = insert_checkpoint(tx, c, parts_.names); !s) return s;
  anchored_seq_ = c.seq;
  anchored_ns_ = now_ns;
  in_tx_.push_back(std::move(c));
  return ok_status();
}

result<std::optional<checkpoint>> chain_writer::checkpoint_if_due(store::transaction& tx, sys_time now, bool force) {
  const std::int64_t t = unix_ns(now);
  if (pending_.last_seq <= anchored_seq_) return std::optional<checkpoint>();
  if (!force && !parts_.policy.due(anchored_seq_, anchored_ns_, pending_.last_seq, t))
    return std::optional<checkpoint>();
  if (auto s = sign(tx, t); !s) return s.err();
  return std::optional<checkpoint>(in_tx_.back());
}

status chain_writer::committed() {
  committed_ = pending_;
  committed_anchored_seq_ = anchored_seq_;
  committed_anchored_ns_ = anchored_ns_;
  for (auto& c : in_tx_) to_file_.push_back(std::move(c));
  in_tx_.clear();
  if (auto s = parts_.file->append(to_file_); !s) return s;  // kept for the next call
  to_file_.clear();
  return ok_status();
}

void chain_writer::rolled_back() {
  pending_ = committed_;
  anchored_seq_ = committed_anchored_seq_;
  anchored_ns_ = committed_anchored_ns_;
  in_tx_.clear();
}

}  // namespace loom::auditchain
