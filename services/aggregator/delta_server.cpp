#include "services/aggregator/delta_server.hpp"

#include "libs/auth/token.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "libs/wire/limits.hpp"
#include "loom/v1/aggregator.pb.h"
#include "loom/v1/common.pb.h"
#include "services/aggregator/delta_streams.hpp"
#include "services/aggregator/engine.hpp"
#include "services/aggregator/wire.hpp"

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace loom::aggregator {
namespace {

using clock = std::chrono::steady_clock;

// The socket's poll: bounds how late a deadline closes a round and how long
// the destructor waits for the thread.
constexpr std::chrono::milliseconds poll_every{100};
// Keys are re-read this often: a new site is admitted within it.
constexpr std::chrono::milliseconds keys_every{1000};
// A fragment's fp32 parameters travel in one frame (GPT-2 124M, P = 1: 500 MB).
constexpr std::int64_t max_frame = std::int64_t{1} << 30;

nanos now_ns() { return std::chrono::duration_cast<nanos>(clock::now().time_since_epoch()); }

std::string endpoint_file(const std::string& data_dir) { return data_dir + "/aggregator/delta_endpoint"; }

// One answer: frames after the routing id.
using frames = std::vector<std::string>;

frames fail(const error& e, const std::string& reason = "") {
  loom::v1::Status s;
  s.set_code(static_cast<loom::v1::Code>(e.code));
  s.set_message(e.message);
  // A delta's refusal names its reason (rounds' and the wire's: unknown_site,
  // not_joined, duplicate, stale, ...): a site tells "this aggregator forgot
  // my join" (a restart before its membership was saved: join again) from a
  // refusal that stands.
  if (!reason.empty()) (*s.mutable_details())["reason"] = reason;
  return {"loom.v1.Status", s.SerializeAsString()};
}

template <class Msg>
frames answer(const Msg& m) {
  return {Msg::descriptor()->full_name(), m.SerializeAsString()};
}

}  // namespace

struct delta_server::impl {
  delta_server_options o;
  zmq::context_t ctx{1};
  std::unique_ptr<wire::zap_handler> zap;
  zmq::socket_t router;
  std::string endpoint;
  std::set<std::string> admitted;  // every principal of the allow-list now (thread only)
  std::atomic<bool> stop{false};
  std::thread thread;
  // Streamed deltas (their pieces spooled in <data>/aggregator/.incoming) and
  // sliced pulls, per sending key (thread only).
  std::unique_ptr<delta_streams> streams;

  status reload_keys();
  void run();
  frames handle(const std::string& type, std::vector<zmq::message_t>& in, const std::string& principal);
  frames join(const loom::v1::DeltaJoin& r, const std::string& principal);
  frames delta(std::vector<zmq::message_t>& in, const std::string& principal);
  frames pull(const loom::v1::GlobalPull& r, const std::string& principal);
  frames chunk(const loom::v1::DeltaChunk& c, std::string_view bytes, const std::string& principal);
};

namespace {
// A ZAP principal as reload_keys names it back as the key it is: "peers/S",
// "diloco/S", "sites/S" (a site's key and where it came from), else one of
// this deployment's own service keys.
site_key key_of(const std::string& principal) {
  for (auto [prefix, source] : {std::pair{"peers/", key_source::peer}, std::pair{"diloco/", key_source::diloco},
                                std::pair{"sites/", key_source::enrolled}})
    if (principal.rfind(prefix, 0) == 0) return site_key{principal.substr(std::strlen(prefix)), source};
  return site_key{principal, key_source::own};
}
}  // namespace

status delta_server::impl::reload_keys() {
  const layout::paths paths{o.data_dir};
  wire::allow_list keys;
  auto own = wire::load_allow_list(paths.curve_dir());
  if (!own) return own.err();
  keys = *own;
  // Sites, each principal named by where its key came from (key_of): other
  // deployments' keys (keys/peers) and this deployment's diloco stages' site
  // keys (keys/diloco, which the dataset sync server does not trust) speak
  // for a stage of this deployment's trainers; an enrolled edge site's
  // trainer key (keys/sites/<site>.trainer.pub, written by the scheduler from
  // its registry; a revoked site's files are gone) speaks for that edge site.
  // So a site named "site-0" that enrolled is never taken for this
  // deployment's site-0, nor the other way round.
  for (auto [dir, prefix] : {std::pair{paths.peers_dir(), "peers/"}, std::pair{paths.diloco_sites_dir(), "diloco/"}}) {
    auto theirs = wire::load_allow_list(dir);
    if (!theirs && theirs.code() != errc::not_found) return theirs.err();
    if (theirs)
      for (auto& [key, stem] : *theirs) keys.emplace(key, prefix + stem);
  }
  auto enrolled = wire::load_allow_list(paths.sites_dir());
  if (!enrolled && enrolled.code() != errc::not_found) return enrolled.err();
  if (enrolled)
    for (auto& [key, stem] : *enrolled) {
      const auto dot = stem.rfind('.');
      if (dot == std::string::npos || stem.substr(dot + 1) != "trainer") continue;
      keys.emplace(key, "sites/" + stem.substr(0, dot));
    }
  admitted.clear();
  for (const auto& [key, principal] : keys) admitted.insert(principal);
  zap->set_allow_list(std::move(keys));
  return ok_status();
}

frames delta_server::impl::join(const loom::v1::DeltaJoin& r, const std::string& principal) {
  auto a = o.jobs->join(r.job(), r.site(), key_of(principal));
  if (!a) return fail(a.err());
  auto spec = o.jobs->spec(r.job());
  if (!spec) return fail(spec.err());
  loom::v1::DeltaJoinReply rep;
  to_wire(*spec, rep.mutable_spec());
  for (auto v : a->versions) rep.add_versions(v);
  for (auto v : a->last_round) rep.add_last_round(v);
  return answer(rep);
}

frames delta_server::impl::delta(std::vector<zmq::message_t>& in, const std::string& principal) {
  loom::v1::DeltaHeader w;
  if (in.size() < 3 || !w.ParseFromArray(in[2].data(), static_cast<int>(in[2].size()))) {
    auto e = make_error(errc::invalid_argument, "DeltaHeader frame missing or not a loom.v1.DeltaHeader");
    o.jobs->refuse_header(principal, e);
    return fail(e);
  }
  auto h = from_wire(w);
  if (!h) {
    o.jobs->refuse_header(principal, h.err());
    return fail(h.err());
  }
  std::string_view payload = in.size() > 3 ? in[3].to_string_view() : std::string_view{};
  std::string whole;  // a streamed payload: the pieces held before this header, then its frame
  if (w.payload_offset() > 0) {
    auto all = streams->complete(principal, w, payload);
    if (!all) {
      o.jobs->refuse_header(principal, all.err());
      return fail(all.err());
    }
    whole = std::move(*all);
    payload = whole;
  }
  auto out = o.jobs->submit(*h, payload, key_of(principal), now_ns());
  if (auto* r = std::get_if<refusal>(&out)) return fail(r->err, r->reason);
  const auto& d = std::get<delta_outcome>(out);
  loom::v1::DeltaReply rep;
  rep.set_round(d.acc.round);
  rep.set_late(d.acc.late);
  rep.set_staleness(d.acc.staleness);
  rep.set_weight(d.acc.weight);
  rep.set_closed(d.closed.has_value());
  rep.set_version(d.version);
  return answer(rep);
}

namespace {
// The header of the whole payload, and the slice [offset, offset + max_bytes) of it (max_bytes 0: the rest).
frames slice(const global_update_header& header, const std::string& payload, std::uint64_t offset,
             std::uint64_t max_bytes) {
  if (offset >= payload.size() && offset > 0)
    return fail(make_error(errc::invalid_argument, "pull from offset " + std::to_string(offset) + " of a payload of " +
                                                       std::to_string(payload.size()) + " bytes"));
  const std::uint64_t n = max_bytes == 0 ? payload.size() - offset : std::min<std::uint64_t>(max_bytes, payload.size() - offset);
  loom::v1::GlobalUpdateHeader h;
  to_wire(header, &h);
  h.set_payload_offset(offset);
  return {"loom.v1.GlobalUpdateHeader", h.SerializeAsString(), payload.substr(offset, n)};
}
}  // namespace

frames delta_server::impl::pull(const loom::v1::GlobalPull& r, const std::string& principal) {
  if (r.offset() > 0) {  // a later slice: from the payload its first slice was cut from
    auto k = streams->kept_pull(principal, r.job(), r.fragment());
    if (!k) return fail(k.err());
    return slice(k->header, *k->payload, r.offset(), r.max_bytes());
  }
  auto a = o.jobs->pull(r.job(), r.site(), r.fragment(), r.have_version(), r.want_params(), key_of(principal));
  if (!a) return fail(a.err());
  if (!a->has_update) {
    loom::v1::GlobalPullReply rep;
    rep.set_version(a->version);
    rep.set_last_round(a->last_round);
    return answer(rep);
  }
  if (r.max_bytes() > 0 && a->payload->size() > r.max_bytes())
    streams->keep_pull(principal, r.job(), r.fragment(), a->header, a->payload);
  return slice(a->header, *a->payload, 0, r.max_bytes());
}

frames delta_server::impl::chunk(const loom::v1::DeltaChunk& c, std::string_view bytes, const std::string& principal) {
  // Held only for a key placed on the job as the site it names, and no more than the fragment can need.
  auto limit = o.jobs->stream_limit(c.job(), c.fragment(), c.site(), key_of(principal));
  if (!limit) return fail(limit.err());
  auto held = streams->chunk(principal, c, bytes, *limit, clock::now());
  if (!held) return fail(held.err());
  loom::v1::DeltaChunkReply rep;
  rep.set_received(*held);
  return answer(rep);
}

frames delta_server::impl::handle(const std::string& type, std::vector<zmq::message_t>& in,
                                  const std::string& principal) {
  // ZAP vets a connection once, at its handshake: a key that left the
  // allow-list since (a revoked site) is refused here, on its open connection.
  const bool revoked_site = principal.rfind("sites/", 0) == 0 && o.site_admitted &&
                            !o.site_admitted(std::string_view(principal).substr(6));
  if (!admitted.count(principal) || revoked_site) {
    o.jobs->refuse_unadmitted(principal, type);
    return fail(make_error(errc::permission_denied, "key '" + principal + "' is no longer admitted (a revoked site?)"));
  }
  if (type == "loom.v1.DeltaHeader") return delta(in, principal);
  auto parse = [&](auto& msg) { return in.size() >= 3 && msg.ParseFromArray(in[2].data(), static_cast<int>(in[2].size())); };
  if (type == "loom.v1.DeltaChunk") {
    loom::v1::DeltaChunk c;
    if (!parse(c)) return fail(make_error(errc::invalid_argument, "bad loom.v1.DeltaChunk"));
    return chunk(c, in.size() > 3 ? in[3].to_string_view() : std::string_view{}, principal);
  }
  if (type == "loom.v1.DeltaJoin") {
    loom::v1::DeltaJoin r;
    return parse(r) ? join(r, principal) : fail(make_error(errc::invalid_argument, "bad loom.v1.DeltaJoin"));
  }
  if (type == "loom.v1.GlobalPull") {
    loom::v1::GlobalPull r;
    return parse(r) ? pull(r, principal) : fail(make_error(errc::invalid_argument, "bad loom.v1.GlobalPull"));
  }
  if (type == "loom.v1.RoundStatusQuery") {
    loom::v1::RoundStatusQuery r;
    if (!parse(r)) return fail(make_error(errc::invalid_argument, "bad loom.v1.RoundStatusQuery"));
    loom::v1::RoundStatusList list;
    if (auto s = o.jobs->round_status(r.job(), key_of(principal), &list); !s) return fail(s.err());
    return answer(list);
  }
  return fail(make_error(errc::unimplemented, "the aggregator's delta socket does not handle '" + auth::printable(type.substr(0, 128)) + "'"));
}

void delta_server::impl::run() {
  auto last_keys = clock::now();
  std::uint64_t refused_seen = zap->rejected();
  while (!stop) {
    try {
      zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, poll_every);
      if (item.revents & ZMQ_POLLIN) {
        std::vector<zmq::message_t> in;
        const bool got = zmq::recv_multipart(router, std::back_inserter(in), zmq::recv_flags::dontwait).has_value();
        const std::string principal = got && in.size() >= 2 ? wire::peer_user_id(in[1]) : std::string();
        if (got) {
          std::size_t bytes = 0;
          for (std::size_t i = 1; i < in.size(); ++i) bytes += in[i].size();
          o.jobs->frame_received(in.size() >= 2 ? in[1].to_string_view() : std::string_view{}, principal, bytes);
        }
        if (got && in.size() >= 2) {
          frames out = handle(in[1].to_string(), in, principal);
          std::size_t out_bytes = 0;
          for (const auto& f : out) out_bytes += f.size();
          o.jobs->frame_answered(in[1].to_string_view(), principal, out_bytes);
          // dontwait: a peer over its HWM loses this answer and retries; the thread never blocks on one site.
          bool ok = router.send(in[0], zmq::send_flags::sndmore | zmq::send_flags::dontwait).has_value();
          for (std::size_t i = 0; ok && i < out.size(); ++i)
            ok = router.send(zmq::buffer(out[i]), (i + 1 < out.size() ? zmq::send_flags::sndmore : zmq::send_flags::none) |
                                                      zmq::send_flags::dontwait).has_value();
        }
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      std::fprintf(stderr, "loom-aggregator: delta socket: %s\n", e.what());
    }
    o.jobs->tick(now_ns());
    streams->expire(clock::now());
    if (const auto r = zap->rejected(); r != refused_seen) {
      o.jobs->refused_connections(r - refused_seen);
      refused_seen = r;
    }
    if (clock::now() - last_keys >= keys_every) {
      last_keys = clock::now();
      if (auto s = reload_keys(); !s)
        std::fprintf(stderr, "loom-aggregator: delta socket keys: %s\n", s.err().to_string().c_str());
    }
  }
  router.close();
}

result<std::unique_ptr<delta_server>> delta_server::start(delta_server_options o) {
  if (!o.jobs) return make_error(errc::invalid_argument, "delta server: no engine");
  if (!wire::valid_z85_key(o.keys.public_z85) || !wire::valid_z85_key(o.keys.secret_z85))
    return make_error(errc::invalid_argument, "delta server: the aggregator's CURVE keypair is not valid");
  auto p = std::make_unique<impl>();
  p->o = std::move(o);
  p->streams = std::make_unique<delta_streams>(p->o.data_dir + "/aggregator/.incoming");
  p->zap = std::make_unique<wire::zap_handler>(p->ctx, wire::allow_list{}, "loom");
  if (auto s = p->reload_keys(); !s) return make_error(s.code(), "delta server keys: " + s.err().message);
  std::vector<std::string> tries;
  if (!p->o.fixed && p->o.bind.ends_with(":*"))
    if (auto last = files::read_file(endpoint_file(p->o.data_dir)); last && !last->empty()) tries.push_back(*last);
  tries.push_back(p->o.bind);
  std::string why;
  for (const auto& ep : tries) {
    try {
      p->router = zmq::socket_t(p->ctx, zmq::socket_type::router);
      wire::apply_common_options(p->router);
      p->router.set(zmq::sockopt::maxmsgsize, max_frame);
      wire::make_curve_server(p->router, p->o.keys, "loom");
      p->router.bind(ep);
      p->endpoint = p->router.get(zmq::sockopt::last_endpoint);
      break;
    } catch (const zmq::error_t& e) {
      why += (why.empty() ? "" : "; ") + ep + ": " + e.what();
      p->router.close();
    }
  }
  if (p->endpoint.empty()) return make_error(errc::unavailable, "delta server cannot bind: " + why);
  (void)files::make_dirs(p->o.data_dir + "/aggregator");
  if (auto s = files::write_atomic(endpoint_file(p->o.data_dir), p->endpoint, 0600); !s)
    std::fprintf(stderr, "loom-aggregator: %s\n", s.err().to_string().c_str());
  return std::unique_ptr<delta_server>(new delta_server(std::move(p)));
}

delta_server::delta_server(std::unique_ptr<impl> p) : impl_(std::move(p)) {
  impl_->thread = std::thread([this] { impl_->run(); });  // the ROUTER belongs to the thread from here on
}

delta_server::~delta_server() {
  impl_->stop = true;
  impl_->thread.join();
  impl_->zap.reset();
}

const std::string& delta_server::endpoint() const { return impl_->endpoint; }
const std::string& delta_server::public_key() const { return impl_->o.keys.public_z85; }

}  // namespace loom::aggregator
