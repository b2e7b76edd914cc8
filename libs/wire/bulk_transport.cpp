#include "libs/wire/bulk_transport.hpp"

#include "libs/auth/token.hpp"
#include "libs/wire/bulk_sender.hpp"

#include "loom/v1/bulk.pb.h"

#include <cstring>
#include <deque>
#include <map>
#include <set>

namespace loom::wire {
namespace {

using clock = std::chrono::steady_clock;

// ---- proto <-> domain ------------------------------------------------------

bool to_digest(const std::string& bytes, crypto::digest& out) {
  if (bytes.size() != out.size()) return false;
  std::memcpy(out.data(), bytes.data(), out.size());
  return true;
}

errc to_errc(int code) {
  return code >= 0 && code <= static_cast<int>(errc::internal) ? static_cast<errc>(code) : errc::internal;
}

template <class Msg>
bool parse(Msg& m, const zmq::message_t& frame) {
  try {
    return frame.size() <= static_cast<std::size_t>(INT32_MAX) &&
           m.ParseFromArray(frame.data(), static_cast<int>(frame.size()));
  } catch (const std::exception&) {
    return false;
  }
}

void status_reply(std::vector<std::string>& reply, errc code, const std::string& message) {
  v1::Status s;
  s.set_code(static_cast<v1::Code>(code));
  s.set_message(message);
  reply = {std::string(bulk_status_type), s.SerializeAsString()};
}

void serve_offer(bulk_receiver& rx, const v1::BulkOffer& m, std::vector<std::string>& reply) {
  bulk_offer o{m.transfer_id(), m.name(), m.total_bytes(), m.chunk_bytes(), m.chunk_count(), {}};
  result<bulk_need> r = to_digest(m.sha256(), o.sha256)
                            ? rx.on_offer(o)
                            : result<bulk_need>(make_error(errc::invalid_argument, "sha256 must be 32 bytes"));
  v1::BulkNeed need;
  need.set_transfer_id(m.transfer_id());
  if (r.ok()) {
    for (auto i : r->missing) need.add_missing(i);
    need.set_complete(r->complete);
  } else {
    need.mutable_status()->set_code(static_cast<v1::Code>(r.code()));
    need.mutable_status()->set_message(r.err().message);
  }
  reply = {std::string(bulk_need_type), need.SerializeAsString()};
}

void serve_chunk(bulk_receiver& rx, const v1::BulkChunk& m, const zmq::message_t& data,
                 std::vector<std::string>& reply) {
  bulk_chunk_header h{m.transfer_id(), m.index(), m.offset(), {}};
  bulk_ack a = to_digest(m.sha256(), h.sha256)
                   ? rx.on_chunk(h, data.to_string_view())
                   : bulk_ack{h.transfer_id, h.index, false, errc::invalid_argument, "sha256 must be 32 bytes"};
  v1::BulkChunkAck ack;
  ack.set_transfer_id(a.transfer_id);
  ack.set_index(a.index);
  ack.set_ok(a.ok);
  ack.set_reason(a.reason);
  ack.set_code(static_cast<v1::Code>(a.code));
  ack.set_fatal(a.fatal);
  ack.set_complete(a.complete);
  reply = {std::string(bulk_ack_type), ack.SerializeAsString()};
}

// ---- sender side -----------------------------------------------------------

// Sends all frames, or nothing when the socket cannot take them before
// `timeout`. Through `link` when set (copies the frames: emulation only).
bool send_frames(zmq::socket_t& s, const std::vector<std::string_view>& frames, std::chrono::milliseconds timeout,
                 shaped_link* link) {
  if (link) {
    multipart m;
    for (auto f : frames) m.emplace_back(f.data(), f.size());
    return send_message(s, link, std::move(m));
  }
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLOUT, 0};
  if (zmq::poll(&item, 1, timeout) == 0) return false;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    auto flags = zmq::send_flags::dontwait | (i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (!s.send(zmq::buffer(frames[i].data(), frames[i].size()), flags)) return false;
  }
  return true;
}

// One reply for our transfer: a need, an ack, or an error.
struct reply {
  bool is_need = false;
  v1::BulkNeed need;
  v1::BulkChunkAck ack;
};

// Waits for the next reply that belongs to `transfer_id`; stale replies of
// earlier transfers on the same socket are skipped.
result<reply> await_reply(zmq::socket_t& s, const std::string& transfer_id, std::chrono::milliseconds timeout,
                          shaped_link* link) {
  auto deadline = clock::now() + timeout;
  for (;;) {
    auto got = recv_message(s, link, deadline);
    if (!got)
      return make_error(errc::unavailable, "bulk: no reply within " + std::to_string(timeout.count()) + " ms");
    const multipart& frames = *got;
    if (frames.size() != 2) continue;
    auto type = frames[0].to_string_view();
    reply r;
    if (type == bulk_status_type) {
      v1::Status st;
      if (!parse(st, frames[1])) continue;
      return make_error(to_errc(st.code()), "bulk receiver: " + st.message());
    }
    if (type == bulk_need_type && parse(r.need, frames[1]) && r.need.transfer_id() == transfer_id) {
      r.is_need = true;
      return r;
    }
    if (type == bulk_ack_type && parse(r.ack, frames[1]) && r.ack.transfer_id() == transfer_id) return r;
  }
}

result<reply> send_offer(zmq::socket_t& s, const bulk_offer& o, const send_options& opt) {
  v1::BulkOffer m;
  m.set_transfer_id(o.transfer_id);
  m.set_name(o.name);
  m.set_total_bytes(o.total_bytes);
  m.set_chunk_bytes(o.chunk_bytes);
  m.set_chunk_count(o.chunk_count);
  m.set_sha256(std::string(crypto::as_view(o.sha256)));
  std::string body = m.SerializeAsString();
  if (!send_frames(s, {bulk_offer_type, body}, opt.reply_timeout, opt.link))
    return make_error(errc::unavailable, "bulk: could not send the offer for \"" + o.name + "\"");
  for (;;) {
    auto r = await_reply(s, o.transfer_id, opt.reply_timeout, opt.link);
    if (!r.ok() || r->is_need) return r;  // an ack before the need is stale: skip it
  }
}

status send_chunk(zmq::socket_t& s, const bulk_sender& tx, std::uint32_t index, std::uint32_t attempt,
                  const send_options& opt, transfer_stats& stats) {
  auto c = tx.chunk(index);
  if (!c.ok()) return c.err();
  if (opt.corrupt_chunk && opt.corrupt_chunk(index, attempt) && !c->data.empty()) c->data[0] ^= 0x5a;
  v1::BulkChunk h;
  h.set_transfer_id(c->header.transfer_id);
  h.set_index(index);
  h.set_offset(c->header.offset);
  h.set_sha256(std::string(crypto::as_view(c->header.sha256)));
  std::string header = h.SerializeAsString();
  if (!send_frames(s, {bulk_chunk_type, header, c->data}, opt.reply_timeout, opt.link))
    return make_error(errc::unavailable, "bulk: could not send chunk " + std::to_string(index));
  stats.chunks_sent++;
  stats.chunks_resent += attempt > 1;
  stats.bytes_sent += c->data.size();
  return {};
}

result<transfer_stats> send_file_impl(zmq::socket_t& s, const std::string& path, const std::string& name,
                                      const send_options& opt) {
  if (opt.window == 0 || opt.max_attempts == 0)
    return make_error(errc::invalid_argument, "bulk: window and max_attempts must be at least 1");
  auto tx = bulk_sender::open(path, name, opt.chunk_bytes, opt.transfer_id, opt.codec);
  if (!tx.ok()) return tx.err();
  const bulk_offer& o = tx->offer();

  auto r = send_offer(s, o, opt);
  if (!r.ok()) return r.err();
  const v1::BulkNeed& need = r->need;
  if (need.has_status() && need.status().code() != v1::OK)
    return make_error(to_errc(need.status().code()), "bulk offer refused: " + need.status().message());
  std::set<std::uint32_t> missing(need.missing().begin(), need.missing().end());
  if (missing.size() != static_cast<std::size_t>(need.missing_size()) ||
      (!missing.empty() && *missing.rbegin() >= o.chunk_count))
    return make_error(errc::corruption, "bulk: receiver asked for chunks that do not exist");

  transfer_stats stats;
  stats.chunks_skipped = o.chunk_count - missing.size();
  if (need.complete()) {
    stats.complete = true;
    return stats;
  }
  std::deque<std::uint32_t> todo(missing.begin(), missing.end());
  std::map<std::uint32_t, std::uint32_t> attempts;  // index -> sends so far
  std::set<std::uint32_t> in_flight;
  std::uint64_t first_sends = 0;
  bool finished = false;
  for (;;) {
    while (in_flight.size() < opt.window && !todo.empty()) {
      std::uint32_t i = todo.front();
      bool first = attempts[i] == 0;
      if (first && opt.max_chunks != 0 && first_sends >= opt.max_chunks) break;
      if (auto st = send_chunk(s, *tx, i, ++attempts[i], opt, stats); !st.ok()) return st.err();
      first_sends += first;
      todo.pop_front();
      in_flight.insert(i);
    }
    if (in_flight.empty()) break;
    auto rep = await_reply(s, o.transfer_id, opt.reply_timeout, opt.link);
    if (!rep.ok()) return rep.err();
    const v1::BulkChunkAck& ack = rep->ack;
    if (rep->is_need || in_flight.erase(ack.index()) == 0) continue;  // stale or duplicate
    if (ack.ok()) {
      finished = finished || ack.complete();
      continue;
    }
    std::string why = "bulk chunk " + std::to_string(ack.index()) + " of \"" + name + "\": " + ack.reason();
    if (ack.fatal()) return make_error(to_errc(ack.code()), why);
    if (attempts[ack.index()] >= opt.max_attempts)
      return make_error(errc::corruption, why + " (after " + std::to_string(opt.max_attempts) + " sends)");
    todo.push_front(ack.index());
  }
  if (!todo.empty()) return stats;  // stopped by max_chunks: complete stays false
  if (!finished) return make_error(errc::corruption, "bulk: every chunk acked but \"" + name + "\" not completed");
  stats.complete = true;
  return stats;
}

}  // namespace

result<transfer_stats> send_file(zmq::socket_t& dealer, const std::string& path, const std::string& name,
                                 const send_options& options) {
  try {
    return send_file_impl(dealer, path, name, options);
  } catch (const zmq::error_t& e) {
    return make_error(errc::unavailable, std::string("bulk: socket error: ") + e.what());
  }
}

bool is_bulk_request(const std::vector<zmq::message_t>& frames) {
  if (frames.empty()) return false;
  auto type = frames[0].to_string_view();
  return type == bulk_offer_type || type == bulk_chunk_type;
}

void serve_bulk_message(bulk_receiver& receiver, const std::vector<zmq::message_t>& frames,
                        std::vector<std::string>& reply) {
  reply.clear();
  std::string_view type = frames.empty() ? std::string_view{} : frames[0].to_string_view();
  if (type == bulk_offer_type) {
    v1::BulkOffer m;
    if (frames.size() != 2 || !parse(m, frames[1]))
      return status_reply(reply, errc::invalid_argument, "bulk: malformed BulkOffer (want 2 frames)");
    return serve_offer(receiver, m, reply);
  }
  if (type == bulk_chunk_type) {
    v1::BulkChunk m;
    if (frames.size() != 3 || !parse(m, frames[1]))
      return status_reply(reply, errc::invalid_argument, "bulk: malformed BulkChunk (want 3 frames)");
    return serve_chunk(receiver, m, frames[2], reply);
  }
  status_reply(reply, errc::unimplemented, "bulk: unknown message type \"" + auth::printable(type.substr(0, 64)) + "\"");
}

}  // namespace loom::wire
