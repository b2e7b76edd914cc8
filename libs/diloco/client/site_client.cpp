#include "libs/diloco/client/site_client.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/wire/limits.hpp"
#include "libs/wire/shaped_link.hpp"
#include "loom/v1/aggregator.pb.h"
#include "loom/v1/common.pb.h"

#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace loom::diloco {
namespace {

std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

template <class Msg>
std::vector<std::string> frames_of(const Msg& m) {
  return {Msg::descriptor()->full_name(), m.SerializeAsString()};
}

// The answer as a message of type Msg, or the error a loom.v1.Status carries.
template <class Msg>
result<Msg> expect(const std::vector<std::string>& reply) {
  if (reply.size() >= 2 && reply[0] == "loom.v1.Status") {
    loom::v1::Status s;
    if (!s.ParseFromString(reply[1]) || s.code() == loom::v1::OK)
      return make_error(errc::corruption, "the aggregator answered with a malformed status");
    return make_error(static_cast<errc>(s.code()), s.message());
  }
  Msg m;
  if (reply.size() < 2 || reply[0] != Msg::descriptor()->full_name() || !m.ParseFromString(reply[1]))
    return make_error(errc::corruption, "the aggregator answered '" + (reply.empty() ? std::string() : reply[0]) +
                                            "', not a " + Msg::descriptor()->full_name());
  return m;
}

// The reason an aggregator's refusal names (Status.details["reason"]), or "".
std::string refusal_reason(const std::vector<std::string>& reply) {
  loom::v1::Status s;
  if (reply.size() < 2 || reply[0] != "loom.v1.Status" || !s.ParseFromString(reply[1])) return "";
  auto it = s.details().find("reason");
  return it == s.details().end() ? "" : it->second;
}

result<fragment_plan> plan_of(const loom::v1::AggregationSpec& s) {
  if (s.flat_size() > 0) return fragment_plan::flat(s.flat_size(), static_cast<int>(s.fragments()), s.sync_every());
  model::gpt2_config c{static_cast<int>(s.gpt2_layers()),      static_cast<int>(s.gpt2_heads()),
                       static_cast<int>(s.gpt2_channels()),    static_cast<int>(s.gpt2_max_seq_len()),
                       static_cast<int>(s.gpt2_vocab()),       static_cast<int>(s.gpt2_padded_vocab())};
  return fragment_plan::for_gpt2(c, static_cast<int>(s.fragments()), s.sync_every());
}

}  // namespace

site_client::site_client(zmq::context_t& ctx, client_options o) : ctx_(ctx), o_(std::move(o)) {
  if (o_.link && o_.link->shapes()) link_ = std::make_unique<wire::shaped_link>(*o_.link, std::chrono::steady_clock::now());
}
site_client::~site_client() = default;

result<std::unique_ptr<site_client>> site_client::make(zmq::context_t& ctx, client_options o) {
  if (!wire::valid_z85_key(o.keys.public_z85) || !wire::valid_z85_key(o.keys.secret_z85) ||
      !wire::valid_z85_key(o.server_public))
    return make_error(errc::invalid_argument, "site client: want the site's keypair and the aggregator's public key (Z85)");
  if (o.job.empty() || o.site.empty() || o.endpoint.empty())
    return make_error(errc::invalid_argument, "site client: job, site and endpoint are required");
  if (o.attempts < 1 || o.timeout.count() <= 0)
    return make_error(errc::invalid_argument, "site client: attempts and timeout must be positive");
  if (o.link)
    if (auto s = wire::validate(*o.link); !s) return make_error(errc::invalid_argument, "site client: link: " + s.err().message);
  return std::unique_ptr<site_client>(new site_client(ctx, std::move(o)));
}

std::optional<std::vector<std::string>> site_client::exchange(const std::vector<std::string>& frames) {
  using clock = std::chrono::steady_clock;
  wire::multipart msg;
  for (const auto& f : frames) msg.emplace_back(f.data(), f.size());
  if (link_) {
    wire::send_message(*sock_, link_.get(), std::move(msg));
  } else {
    for (std::size_t i = 0; i < msg.size(); ++i)
      if (!sock_->send(msg[i], i + 1 < msg.size() ? zmq::send_flags::sndmore : zmq::send_flags::none)) return std::nullopt;
  }
  // The timeout starts once the request is on the wire (after its serialisation on a shaped uplink).
  auto deadline = clock::now() + o_.timeout;
  if (link_)
    if (auto due = link_->uplink().next_due()) deadline = std::max(deadline, *due + o_.timeout);
  for (;;) {
    if (auto in = wire::recv_message(*sock_, link_.get(), deadline)) {
      std::vector<std::string> out;
      for (auto& m : *in) out.push_back(m.to_string());
      return out;
    }
    // An answer that reached the socket but still crosses the emulated downlink is coming.
    auto due = link_ ? link_->downlink().next_due() : std::nullopt;
    if (!due) return std::nullopt;
    deadline = *due;
  }
}

result<std::vector<std::string>> site_client::request(const std::vector<std::string>& frames) {
  for (int attempt = 0; attempt < o_.attempts; ++attempt) {
    try {
      if (!sock_) {
        sock_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
        wire::apply_common_options(*sock_);
        sock_->set(zmq::sockopt::maxmsgsize, std::int64_t{1} << 30);  // a fragment's fp32 parameters
        wire::make_curve_client(*sock_, o_.keys, o_.server_public);
        sock_->connect(o_.endpoint);
      }
      if (auto in = exchange(frames)) return std::move(*in);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return make_error(errc::unavailable, "site client: the ZeroMQ context was shut down");
    }
    sock_.reset();  // Lazy Pirate: a fresh socket, so a late answer is never read as the next one's
    if (link_) link_->forget();  // what was on the emulated wire went with it
  }
  return make_error(errc::unavailable, "no answer from the aggregator at " + o_.endpoint + " after " +
                                           std::to_string(o_.attempts) + " attempts of " +
                                           std::to_string(o_.timeout.count()) + " ms");
}

result<std::vector<std::string>> site_client::pull_whole(loom::v1::GlobalPull pull) {
  pull.set_max_bytes(o_.chunk_bytes);
  auto first = request(frames_of(pull));
  if (!first || first->size() < 3 || (*first)[0] != "loom.v1.GlobalUpdateHeader") return first;
  loom::v1::GlobalUpdateHeader h;
  if (!h.ParseFromString((*first)[1]) || h.payload_offset() != 0)
    return make_error(errc::corruption, "a malformed GlobalUpdateHeader for fragment " + std::to_string(pull.fragment()));
  std::string whole = std::move((*first)[2]);
  // Bounded: each slice adds at least one byte, or the pull fails.
  while (whole.size() < h.payload_bytes()) {
    pull.set_offset(whole.size());
    auto next = request(frames_of(pull));
    if (!next) return next.err();
    if (!next->empty() && (*next)[0] == "loom.v1.Status") return expect<loom::v1::GlobalUpdateHeader>(*next).err();
    loom::v1::GlobalUpdateHeader n;
    if (next->size() < 3 || (*next)[0] != "loom.v1.GlobalUpdateHeader" || !n.ParseFromString((*next)[1]) ||
        n.payload_offset() != whole.size() || n.version() != h.version() || n.payload_sha256() != h.payload_sha256() ||
        (*next)[2].empty())
      return make_error(errc::corruption, "fragment " + std::to_string(pull.fragment()) + ": slice from " +
                                              std::to_string(whole.size()) + " is not of the payload being pulled");
    whole += (*next)[2];
    ++stats_.chunks_received;
  }
  h.set_payload_offset(0);
  (*first)[1] = h.SerializeAsString();
  (*first)[2] = std::move(whole);
  return first;
}

result<fragment_plan> site_client::enrol() {
  loom::v1::DeltaJoin j;
  j.set_job(o_.job);
  j.set_site(o_.site);
  auto raw = request(frames_of(j));
  if (!raw) return raw.err();
  auto rep = expect<loom::v1::DeltaJoinReply>(*raw);
  if (!rep) return rep.err();
  auto plan = plan_of(rep->spec());
  if (!plan) return make_error(plan.code(), "the job's spec: " + plan.err().message);
  return plan;
}

status site_client::join(std::vector<float>& local) {
  auto plan = enrol();
  if (!plan) return plan.err();
  local.assign(plan->total(), 0.0f);
  std::vector<std::uint64_t> versions(plan->fragments(), 0);
  for (int p = 0; p < plan->fragments(); ++p) {
    loom::v1::GlobalPull pull;
    pull.set_job(o_.job);
    pull.set_site(o_.site);
    pull.set_fragment(static_cast<std::uint32_t>(p));
    pull.set_want_params(true);
    auto got = pull_whole(pull);
    if (!got) return got.err();
    if (!got->empty() && (*got)[0] == "loom.v1.Status") return expect<loom::v1::GlobalUpdateHeader>(*got).err();
    if (got->size() < 3 || (*got)[0] != "loom.v1.GlobalUpdateHeader")
      return make_error(errc::corruption, "join: fragment " + std::to_string(p) + ": not a GlobalUpdateHeader + payload");
    loom::v1::GlobalUpdateHeader h;
    if (!h.ParseFromString((*got)[1]) || h.kind() != loom::v1::GLOBAL_PARAMS)
      return make_error(errc::corruption, "join: fragment " + std::to_string(p) + " did not come as parameters");
    values_.resize(plan->size(p));
    if (crypto::as_view(crypto::sha256((*got)[2])) != h.payload_sha256())
      return make_error(errc::corruption, "join: fragment " + std::to_string(p) + ": payload SHA-256 mismatch");
    if (auto s = codec::decode(bytes_of((*got)[2]), values_); !s) return s;
    plan->scatter(p, values_, local);
    versions[p] = h.version();
    stats_.payload_bytes_received += (*got)[2].size();
    ++stats_.params_applied;
  }
  auto st = site_rounds::make(*plan, local, versions, o_.codec, o_.merge);
  if (!st) return st.err();
  rounds_.emplace(std::move(*st));
  pending_.assign(plan->fragments(), std::nullopt);
  return ok_status();
}

result<std::uint64_t> site_client::send_pieces(const sent& s) {
  loom::v1::DeltaHeader h;
  if (!h.ParseFromString(s.header)) return make_error(errc::internal, "send_pieces: an unreadable DeltaHeader");
  const std::uint64_t total = s.payload.size(), piece = o_.chunk_bytes;
  const std::uint64_t last_at = (total - 1) / piece * piece;  // the last piece goes with the header
  loom::v1::DeltaChunk c;
  c.set_job(h.job());
  c.set_site(h.site());
  c.set_round(h.round());
  c.set_fragment(h.fragment());
  c.set_total_bytes(total);
  c.set_payload_sha256(h.payload_sha256());
  // Bounded: every answer either moves `at` on or sends it back to what the
  // aggregator holds; twice the pieces (and two fresh starts) is plenty.
  int restarts = 0;
  for (std::uint64_t at = 0, turns = 0; at < last_at; ++turns) {
    if (turns > 2 * (last_at / piece) + 4) return make_error(errc::unavailable, "delta upload makes no progress");
    c.set_offset(at);
    auto raw = request({"loom.v1.DeltaChunk", c.SerializeAsString(), s.payload.substr(at, std::min(piece, last_at - at))});
    if (!raw) return raw.err();
    auto rep = expect<loom::v1::DeltaChunkReply>(*raw);
    if (!rep) {
      if (rep.code() == errc::conflict && restarts++ < 2) {  // its pieces are gone (a restart): from the start
        at = 0;
        continue;
      }
      return rep.err();
    }
    at = std::min<std::uint64_t>(rep->received(), last_at);  // resumes from what the aggregator holds
    ++stats_.chunks_sent;
  }
  return last_at;
}

status site_client::rejoin() {
  auto plan = enrol();
  if (!plan) return plan.err();
  if (plan->fragments() != rounds_->plan().fragments() || plan->total() != rounds_->plan().total())
    return make_error(errc::conflict, "job " + o_.job + " has another shape since this site joined");
  ++stats_.rejoins;
  return ok_status();
}

result<delta_ack> site_client::deliver(int p, const sent& s, bool rejoined) {
  result<std::vector<std::string>> raw = make_error(errc::internal, "");
  if (o_.chunk_bytes > 0 && s.payload.size() > o_.chunk_bytes) {
    auto last_at = send_pieces(s);
    if (!last_at) return last_at.err();
    loom::v1::DeltaHeader h;
    h.ParseFromString(s.header);
    h.set_payload_offset(*last_at);
    raw = request({"loom.v1.DeltaHeader", h.SerializeAsString(), s.payload.substr(*last_at)});
  } else {
    raw = request({"loom.v1.DeltaHeader", s.header, s.payload});
  }
  if (!raw) return raw.err();
  auto rep = expect<loom::v1::DeltaReply>(*raw);
  if (!rep && !rejoined) {
    // The aggregator does not know this site as a member: it restarted after
    // our join and before it saved the membership (services/aggregator
    // README, "What is lost"). Join again — membership only; this site's
    // state and its pending delta stay — and deliver the delta once more.
    const std::string why = refusal_reason(*raw);
    if (why == "unknown_site" || why == "not_joined") {
      if (auto st = rejoin(); !st) return make_error(st.code(), "joining again after the aggregator answered " + why +
                                                                    " (" + rep.err().message + "): " + st.err().message);
      return deliver(p, s, true);
    }
  }
  if (!rep) {
    if (rep.code() == errc::already_exists) return delta_ack{s.round, rounds_->version(p), false, false, true};
    if (rep.code() == errc::deadline_exceeded) pending_[p].reset();  // dropped as stale: catch up instead
    return rep.err();
  }
  return delta_ack{rep->round(), rep->version(), rep->late(), rep->closed(), false};
}

result<delta_ack> site_client::send_delta(int p, std::span<const float> local, std::uint64_t tokens) {
  if (!rounds_) return make_error(errc::conflict, "send_delta before join");
  if (p < 0 || p >= plan().fragments()) return make_error(errc::invalid_argument, "fragment out of range");
  sent s;
  std::vector<std::byte> q;
  if (auto e = rounds_->encode_delta(p, local, q); !e) return e.err();
  s.payload.assign(reinterpret_cast<const char*>(q.data()), q.size());
  s.round = rounds_->version(p);
  loom::v1::DeltaHeader h;
  h.set_job(o_.job);
  h.set_site(o_.site);
  h.set_round(s.round);
  h.set_fragment(static_cast<std::uint32_t>(p));
  h.set_base_version(s.round);
  h.set_codec(std::string(codec::to_string(rounds_->uplink(p))));
  h.set_element_count(rounds_->last_delta().size());
  h.set_payload_bytes(s.payload.size());
  h.set_tokens(tokens);
  h.set_payload_sha256(std::string(crypto::as_view(crypto::sha256(s.payload))));
  s.header = h.SerializeAsString();
  pending_[p] = s;
  ++stats_.deltas_sent;
  stats_.payload_bytes_sent += s.payload.size();
  auto ack = deliver(p, *pending_[p]);
  if (ack && ack->duplicate) ++stats_.duplicates;
  return ack;
}

status site_client::apply(const std::vector<std::string>& reply, int p, std::span<float> local) {
  loom::v1::GlobalUpdateHeader h;
  if (reply.size() < 3 || !h.ParseFromString(reply[1]) || h.fragment() != static_cast<std::uint32_t>(p))
    return make_error(errc::corruption, "fragment " + std::to_string(p) + ": a malformed GlobalUpdateHeader");
  if (h.payload_bytes() != reply[2].size() || crypto::as_view(crypto::sha256(reply[2])) != h.payload_sha256())
    return make_error(errc::corruption, "fragment " + std::to_string(p) + ": truncated or altered update payload");
  values_.resize(plan().size(p));
  if (auto s = codec::decode(bytes_of(reply[2]), values_); !s) return s;
  stats_.payload_bytes_received += reply[2].size();
  const bool update = h.kind() == loom::v1::OUTER_UPDATE;
  if (auto s = rounds_->apply(p, h.version(), update, values_, local); !s) return s;
  ++(update ? stats_.updates_applied : stats_.params_applied);
  if (pending_[p] && h.version() > pending_[p]->round) pending_[p].reset();
  return ok_status();
}

result<bool> site_client::poll(int p, std::span<float> local) {
  if (!rounds_) return make_error(errc::conflict, "poll before join");
  if (p < 0 || p >= plan().fragments()) return make_error(errc::invalid_argument, "fragment out of range");
  loom::v1::GlobalPull pull;
  pull.set_job(o_.job);
  pull.set_site(o_.site);
  pull.set_fragment(static_cast<std::uint32_t>(p));
  pull.set_have_version(rounds_->version(p));
  auto raw = pull_whole(pull);
  if (!raw) return raw.err();
  if (!raw->empty() && (*raw)[0] == "loom.v1.GlobalUpdateHeader") {
    if (auto s = apply(*raw, p, local); !s) return s.err();
    return true;
  }
  auto rep = expect<loom::v1::GlobalPullReply>(*raw);
  if (!rep) return rep.err();
  // The aggregator does not hold our delta for the open round: it restarted
  // before saving it, or the first send was lost. Send the same bytes again.
  if (pending_[p] && rep->version() == pending_[p]->round &&
      rep->last_round() < static_cast<std::int64_t>(pending_[p]->round)) {
    ++stats_.resent;
    auto ack = deliver(p, *pending_[p]);
    if (ack && ack->duplicate) ++stats_.duplicates;
    if (!ack && ack.code() != errc::unavailable) return ack.err();
  }
  return false;
}

}  // namespace loom::diloco
