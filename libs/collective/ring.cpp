#include "libs/collective/ring.hpp"

#include "libs/collective/frame.hpp"
#include "libs/collective/schedule.hpp"
#include "libs/wire/limits.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <zmq.hpp>

namespace loom::collective {
namespace {

using clock = std::chrono::steady_clock;

// Largest frame payload, 1 Mi floats = 4 MiB: per-frame costs (header, CURVE
// nonce and MAC, a malloc, a poll round) vanish against the bytes, yet a
// 500 MB gradient (W = 4) moves as ~30 frames per chunk, so the ring pipelines
// (segment k of step t+1 leaves as soon as segment k of step t is in) and a
// link never holds more than a few frames.
constexpr std::size_t segment_floats = std::size_t{1} << 20;

// Frames queued per link: SNDHWM of the PUSH and RCVHWM of the inbox. Four
// keeps the link busy while a frame is encrypted or decrypted and bounds what
// a link holds to ~2 x 4 x 4 MiB plus the kernel's socket buffers.
constexpr int link_hwm = 4;

// Longest single zmq_poll: `stop` and the timeouts are checked this often at
// worst (ring.hpp promises 100 ms).
constexpr std::chrono::milliseconds poll_slice{50};

// Frames read in a row before sends get a turn, so neither direction starves.
constexpr int recv_burst = 16;

// How long a destroyed group's PUSH keeps delivering what its last successful
// call queued. The last all-gather frames can never be acknowledged on a
// one-way ring (any acknowledgement would itself be a last frame), so the
// call returns with up to link_hwm frames still queued; the next rank needs
// them. A live peer takes them in milliseconds; ZeroMQ flushes a closed
// socket in the background, so this bounds only context termination.
constexpr std::chrono::milliseconds flush_linger_cap{10'000};
// The same after a failed call, shorter: its frames still let a next rank in
// the same call see the same conflict at once instead of timing out (a next
// rank already in a newer generation drops them), but nobody waits for them.
constexpr std::chrono::milliseconds failed_linger_cap{1'000};

// Newer-generation frames an inbox keeps for its next group; beyond this they
// are dropped (only a caller that keeps forming stale groups gets there).
constexpr std::size_t max_held_frames = 16;

struct cursor {
  std::uint32_t step = 0;
  std::uint32_t seg = 0;
};

}  // namespace

struct inbox::impl {
  explicit impl(zmq::context_t& ctx) : pull(ctx, zmq::socket_type::pull) {}
  zmq::socket_t pull;
  std::string endpoint;
  std::string public_key;
  std::deque<zmq::message_t> held;  // newer-generation frames read by an older group
};

inbox::inbox(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
inbox::~inbox() = default;
const std::string& inbox::endpoint() const { return impl_->endpoint; }
const std::string& inbox::public_key() const { return impl_->public_key; }

result<std::unique_ptr<inbox>> inbox::bind(zmq::context_t& ctx, const wire::curve_keypair& keys,
                                           const std::string& zap_domain, const std::string& bind) {
  if (!wire::valid_z85_key(keys.public_z85) || !wire::valid_z85_key(keys.secret_z85))
    return make_error(errc::invalid_argument,
                      "collective inbox " + bind + ": the keypair is not 2 x 40 Z85 characters");
  if (zap_domain.empty())
    return make_error(errc::invalid_argument, "collective inbox " + bind + ": empty ZAP domain");
  try {
    auto p = std::make_unique<impl>(ctx);
    wire::apply_common_options(p->pull);
    p->pull.set(zmq::sockopt::rcvhwm, link_hwm);
    wire::make_curve_server(p->pull, keys, zap_domain);
    p->pull.bind(bind);
    p->endpoint = p->pull.get(zmq::sockopt::last_endpoint);
    p->public_key = keys.public_z85;
    return std::unique_ptr<inbox>(new inbox(std::move(p)));
  } catch (const zmq::error_t& e) {
    return make_error(errc::unavailable, "collective inbox: cannot bind " + bind + ": " + e.what());
  }
}

struct group::impl {
  impl(inbox::impl& i, group_options opts) : in(i), o(std::move(opts)) {}

  inbox::impl& in;
  group_options o;
  std::optional<zmq::socket_t> push;  // to the next rank; absent when world == 1
  std::uint64_t calls = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t stale = 0;
  std::optional<error> broken;  // the first error; the group is unusable after it

  // One all_reduce_sum in progress.
  struct call {
    call(ring_schedule p, std::span<float> d, std::uint64_t n)
        : plan(p), data(d), number(n), last_frame(clock::now()) {}
    ring_schedule plan;
    std::span<float> data;
    std::uint64_t number;
    cursor send, recv;
    std::optional<zmq::message_t> pending;  // built, not yet taken by the socket
    clock::time_point last_frame;           // from the previous rank, or the call's start
    std::optional<clock::time_point> send_blocked_since;
  };
  enum class got { nothing, accepted, dropped };

  std::uint32_t prev() const { return (o.rank + o.world - 1) % o.world; }
  std::uint32_t next() const { return (o.rank + 1) % o.world; }
  std::string who(std::uint32_t r) const {
    return "rank " + std::to_string(r) + " (" + o.members[r].endpoint + ")";
  }
  std::string here(const call& c) const {
    return "rank " + std::to_string(o.rank) + " of " + std::to_string(o.world) + ", generation " +
           std::to_string(o.generation) + ", call " + std::to_string(c.number);
  }
  static bool send_ready(const call& c) {
    // Step t forwards the chunk received at step t-1: its segment k waits for that one.
    if (c.send.step == 0) return true;
    const std::uint32_t need = c.send.step - 1;
    return c.recv.step > need || (c.recv.step == need && c.recv.seg > c.send.seg);
  }
  frame_header expected(const call& c, std::uint32_t sender, std::uint32_t step, std::uint32_t chunk,
                        float_range r) const {
    frame_header h;
    h.sender = sender;
    h.world = o.world;
    h.ph = c.plan.reduces(step) ? phase::reduce_scatter : phase::all_gather;
    h.generation = o.generation;
    h.call = c.number;
    h.step = c.plan.step_in_phase(step);
    h.chunk = chunk;
    h.offset = r.offset;
    h.count = r.count;
    h.total = c.data.size();
    return h;
  }

  status run(std::span<float> data);
  result<got> receive_one(call& c);
  result<bool> send_one(call& c);
  status check_waiting(const call& c) const;
  error fail(error e) {
    broken = e;
    return e;
  }
};

namespace {

// The next frame: one an older group held back first, then the socket.
bool next_frame(zmq::socket_t& pull, std::deque<zmq::message_t>& held, zmq::message_t& msg, bool& from_held) {
  from_held = !held.empty();
  if (from_held) {
    msg = std::move(held.front());
    held.pop_front();
    return true;
  }
  return pull.recv(msg, zmq::recv_flags::dontwait).has_value();
}

void advance(cursor& k, std::uint32_t segments) {
  if (++k.seg == segments) {
    ++k.step;
    k.seg = 0;
  }
}

// Floats in frames are unaligned (after a 64-byte header in a ZeroMQ buffer):
// memcpy loads, which compile to plain unaligned vector loads.
void add_into(float* dst, const unsigned char* src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, src + 4 * i, 4);
    dst[i] += v;
  }
}

}  // namespace

result<group::impl::got> group::impl::receive_one(call& c) {
  zmq::message_t msg;
  bool from_held = false;
  if (!next_frame(in.pull, in.held, msg, from_held)) return got::nothing;
  auto h = decode_header(msg.data(), msg.size());
  if (!h)
    return make_error(h.code(), "collective inbox " + in.endpoint + " (" + here(c) + "): " + h.err().message);
  if (h->generation < o.generation) {
    ++stale;
    return got::dropped;
  }
  if (h->generation > o.generation) {
    // The gang re-formed with this process in it: keep the frame for that group.
    if (from_held) {
      in.held.push_front(std::move(msg));
    } else if (in.held.size() < max_held_frames) {
      in.held.push_back(std::move(msg));
    }
    return make_error(errc::conflict, "rank " + std::to_string(h->sender) + " of generation " +
                                          std::to_string(h->generation) + " is sending to this inbox; " +
                                          here(c) + " is superseded (form the new group)");
  }
  const std::uint32_t chunk = c.plan.recv_chunk(c.recv.step);
  const float_range r = c.plan.segment(chunk, c.recv.seg);
  const frame_header want = expected(c, prev(), c.recv.step, chunk, r);
  if (h->sender != want.sender || h->world != want.world)
    return make_error(errc::conflict, "rank " + std::to_string(h->sender) + " of world " +
                                          std::to_string(h->world) + " sent to " + here(c) +
                                          ", which expects frames from " + who(prev()) + " only");
  if (h->call != want.call || h->total != want.total)
    return make_error(errc::conflict, who(h->sender) + " sent call " + std::to_string(h->call) + " of " +
                                          with_commas(h->total) + " floats; this rank (" +
                                          std::to_string(o.rank) + ") is at call " +
                                          std::to_string(want.call) + " of " + with_commas(want.total) +
                                          " floats (generation " + std::to_string(o.generation) + ")");
  if (h->ph != want.ph || h->step != want.step || h->chunk != want.chunk || h->offset != want.offset ||
      h->count != want.count)
    return make_error(errc::conflict, who(h->sender) + " sent " + describe_position(*h) + " (" +
                                          with_commas(h->count) + " floats at " + with_commas(h->offset) +
                                          "); " + here(c) + " expected " + describe_position(want) + " (" +
                                          with_commas(want.count) + " floats at " + with_commas(want.offset) +
                                          ")");
  const auto* payload = static_cast<const unsigned char*>(msg.data()) + frame_header_bytes;
  float* dst = c.data.data() + r.offset;
  if (c.plan.reduces(c.recv.step)) {
    add_into(dst, payload, r.count);
  } else if (r.count > 0) {
    std::memcpy(dst, payload, r.count * sizeof(float));
  }
  advance(c.recv, c.plan.segments(chunk));
  c.last_frame = clock::now();
  return got::accepted;
}

result<bool> group::impl::send_one(call& c) {
  const std::uint32_t chunk = c.plan.send_chunk(c.send.step);
  const float_range r = c.plan.segment(chunk, c.send.seg);
  if (!c.pending) {
    // A copy, not a zero-copy view of `data`: CURVE reads every byte anyway
    // (the copy costs a fraction of the encryption), and no frame queued in
    // ZeroMQ ever points into the caller's buffer, which the caller may free
    // as soon as an error returns.
    c.pending.emplace(frame_header_bytes + r.count * sizeof(float));
    auto* p = static_cast<unsigned char*>(c.pending->data());
    encode_header(expected(c, o.rank, c.send.step, chunk, r), p);
    if (r.count > 0) std::memcpy(p + frame_header_bytes, c.data.data() + r.offset, r.count * sizeof(float));
  }
  auto sent = push->send(*c.pending, zmq::send_flags::dontwait);
  if (!sent) {
    if (!c.send_blocked_since) c.send_blocked_since = clock::now();
    return false;
  }
  bytes_sent += *sent;
  c.pending.reset();
  c.send_blocked_since.reset();
  advance(c.send, c.plan.segments(chunk));
  return true;
}

status group::impl::check_waiting(const call& c) const {
  if (o.stop && o.stop->load())
    return make_error(errc::unavailable, "collective: stopped during all_reduce_sum (" + here(c) + ")");
  const auto now = clock::now();
  const auto ms = std::to_string(o.timeout.count());
  if (c.recv.step < c.plan.steps() && now - c.last_frame >= o.timeout)
    return make_error(errc::deadline_exceeded, "collective: no frame from " + who(prev()) + " for " + ms +
                                                   " ms (" + here(c) +
                                                   "); it is dead, stalled or not in the group");
  if (c.send_blocked_since && now - *c.send_blocked_since >= o.timeout)
    return make_error(errc::deadline_exceeded, "collective: " + who(next()) + " has taken no frame for " +
                                                   ms + " ms (" + here(c) +
                                                   "); it is dead, stalled or refuses this key");
  return ok_status();
}

status group::impl::run(std::span<float> data) {
  if (broken)
    return make_error(broken->code, "collective: group unusable after an earlier error: " + broken->message);
  call c(ring_schedule(data.size(), o.world, o.rank, segment_floats), data, ++calls);
  const std::uint32_t steps = c.plan.steps();
  try {
    while (c.send.step < steps || c.recv.step < steps) {
      bool moved = false;
      for (int i = 0; i < recv_burst && c.recv.step < steps; ++i) {
        auto g = receive_one(c);
        if (!g) return fail(g.err());
        if (*g == got::nothing) break;
        moved = moved || *g == got::accepted;
      }
      while (c.send.step < steps && send_ready(c)) {
        auto s = send_one(c);
        if (!s) return fail(s.err());
        if (!*s) break;
        moved = true;
      }
      if (!moved) {
        // Nothing to do until the previous rank sends or the next one takes a frame.
        zmq::pollitem_t items[2];
        int n = 0;
        if (c.recv.step < steps) items[n++] = {in.pull.handle(), 0, ZMQ_POLLIN, 0};
        if (c.send.step < steps && send_ready(c)) items[n++] = {push->handle(), 0, ZMQ_POLLOUT, 0};
        zmq::poll(items, static_cast<std::size_t>(n), poll_slice);
      }
      if (auto st = check_waiting(c); !st) return fail(st.err());
    }
  } catch (const zmq::error_t& e) {
    return fail(make_error(errc::unavailable, "collective: ZeroMQ failed (" + here(c) + "): " + e.what()));
  }
  return ok_status();
}

result<std::unique_ptr<group>> group::join(zmq::context_t& ctx, const wire::curve_keypair& mine, inbox& in,
                                           group_options o) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, "collective group (rank " + std::to_string(o.rank) + " of " +
                                                  std::to_string(o.world) + ", generation " +
                                                  std::to_string(o.generation) + "): " + why);
  };
  if (o.world == 0) return bad("world 0");
  if (o.rank >= o.world) return bad("rank outside the world");
  if (o.members.size() != o.world)
    return bad(std::to_string(o.members.size()) + " members for a world of " + std::to_string(o.world));
  if (o.timeout.count() <= 0) return bad("timeout must be positive");
  for (std::size_t r = 0; r < o.members.size(); ++r) {
    if (!wire::valid_z85_key(o.members[r].public_key))
      return bad("member " + std::to_string(r) + "'s public key is not a CURVE key");
    if (o.members[r].endpoint.empty()) return bad("member " + std::to_string(r) + " has no endpoint");
  }
  if (o.members[o.rank].public_key != in.public_key())
    return bad("members[" + std::to_string(o.rank) + "] holds another key than this inbox's");
  if (!wire::valid_z85_key(mine.public_z85) || !wire::valid_z85_key(mine.secret_z85))
    return bad("this process's keypair is not 2 x 40 Z85 characters");

  auto p = std::make_unique<impl>(*in.impl_, std::move(o));
  if (p->o.world > 1) {
    const member& next = p->o.members[p->next()];
    try {
      p->push.emplace(ctx, zmq::socket_type::push);
      wire::apply_common_options(*p->push);  // linger: set by ~group
      p->push->set(zmq::sockopt::sndhwm, link_hwm);
      // Frames queue only on a connection that finished its CURVE handshake:
      // libzmq drops what a closed socket queued before it ever connected,
      // linger or not, so this makes every frame the socket took one that
      // linger can still deliver; and a next rank that is down or refuses
      // this key shows as a send that waits (deadline naming it).
      p->push->set(zmq::sockopt::immediate, 1);
      wire::make_curve_client(*p->push, mine, next.public_key);
      p->push->connect(next.endpoint);
    } catch (const zmq::error_t& e) {
      return bad("cannot connect to " + p->who(p->next()) + ": " + e.what());
    }
  }
  return std::unique_ptr<group>(new group(std::move(p)));
}

group::group(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

group::~group() {
  if (!impl_->push) return;
  const auto cap = impl_->calls == 0 ? std::chrono::milliseconds(0)
                   : impl_->broken   ? failed_linger_cap
                                     : flush_linger_cap;
  const auto linger = std::min(impl_->o.timeout, cap);
  try {
    impl_->push->set(zmq::sockopt::linger, static_cast<int>(linger.count()));
  } catch (const zmq::error_t&) {
    // The context is shutting down: nothing left to deliver to.
  }
}

status group::all_reduce_sum(std::span<float> data) {
  if (impl_->o.world == 1) return ok_status();
  return impl_->run(data);
}

std::uint32_t group::rank() const { return impl_->o.rank; }
std::uint32_t group::world() const { return impl_->o.world; }
std::uint64_t group::bytes_sent() const { return impl_->bytes_sent; }
std::uint64_t group::stale_frames_dropped() const { return impl_->stale; }

}  // namespace loom::collective
