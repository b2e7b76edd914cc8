#include "libs/cdc/sync_server.hpp"

#include "libs/cdc/protocol.hpp"
#include "libs/cdc/sync_session.hpp"
#include "libs/wire/bulk_types.hpp"
#include "libs/wire/limits.hpp"

#include <atomic>
#include <filesystem>
#include <map>
#include <sys/stat.h>
#include <thread>
#include <vector>
#include <zmq_addon.hpp>

namespace loom::cdc {
namespace {

// How often the broker checks for stop and reaps finished sessions: bounds
// the destructor's latency.
constexpr std::chrono::milliseconds broker_poll{50};

// One client's session: the broker's end of its PAIR and its thread.
struct session_slot {
  zmq::socket_t pair;
  std::thread thread;
  std::atomic<bool> done{false};
};

}  // namespace

struct sync_server::impl {
  impl(zmq::context_t& c, sync_server_options o, std::string scratch_dir, bool own)
      : ctx(c), opt(std::move(o)), shared(opt, scratch_dir), scratch(std::move(scratch_dir)), own_scratch(own) {}

  zmq::context_t& ctx;           // the caller's: carries the ZAP handler for the ROUTER
  zmq::context_t inner{1};       // ours: session PAIRs; shut down to abort sessions at once
  const sync_server_options opt;
  server_shared shared;
  const std::string scratch;
  const bool own_scratch;
  zmq::socket_t frontend;        // broker thread only, once started
  std::string endpoint;
  std::atomic<bool> stop{false};
  std::thread broker;
  std::map<std::string, std::unique_ptr<session_slot>> sessions;  // broker thread only; by routing id
  std::uint64_t next_session = 0;

  void run();
  void from_client(std::vector<zmq::message_t>& frames);
  void reap();
  void forward(zmq::socket_t& to, std::vector<zmq::message_t>& frames, const zmq::message_t* prefix);
};

void sync_server::impl::forward(zmq::socket_t& to, std::vector<zmq::message_t>& frames,
                                const zmq::message_t* prefix) {
  // dontwait: a peer over its HWM loses the message and its request times
  // out; the broker never blocks on one client.
  if (prefix && !to.send(zmq::buffer(prefix->data(), prefix->size()), zmq::send_flags::sndmore | zmq::send_flags::dontwait))
    return;
  for (std::size_t i = 0; i < frames.size(); ++i)
    (void)to.send(frames[i], (i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none) |
                                 zmq::send_flags::dontwait);
}

void sync_server::impl::from_client(std::vector<zmq::message_t>& frames) {
  if (frames.size() < 2) return;
  std::string id = frames[0].to_string();
  auto it = sessions.find(id);
  if (it == sessions.end()) {
    if (sessions.size() >= opt.max_sessions) {
      std::string busy = encode_status(make_error(errc::unavailable, "sync server busy: too many sessions"));
      std::vector<zmq::message_t> reply;
      reply.emplace_back(error_reply_type.data(), error_reply_type.size());
      reply.emplace_back(busy.data(), busy.size());
      return forward(frontend, reply, &frames[0]);
    }
    auto slot = std::make_unique<session_slot>();
    const std::string ep = "inproc://loom-cdc-session-" + std::to_string(next_session);
    slot->pair = zmq::socket_t(inner, zmq::socket_type::pair);
    slot->pair.set(zmq::sockopt::linger, 0);
    slot->pair.bind(ep);
    zmq::socket_t theirs(inner, zmq::socket_type::pair);
    theirs.set(zmq::sockopt::linger, 0);
    theirs.connect(ep);
    std::string principal = wire::peer_user_id(frames[1]);
    std::string tag = "s" + std::to_string(next_session++);
    shared.counters.sessions++;
    slot->thread = std::thread([this, s = std::move(theirs), principal, tag, done = &slot->done]() mutable {
      run_session(shared, s, principal, tag);
      s.close();
      *done = true;
    });
    it = sessions.emplace(id, std::move(slot)).first;
  }
  frames.erase(frames.begin());
  forward(it->second->pair, frames, nullptr);
}

void sync_server::impl::reap() {
  for (auto it = sessions.begin(); it != sessions.end();) {
    if (!it->second->done) {
      ++it;
      continue;
    }
    it->second->thread.join();
    it = sessions.erase(it);
  }
}

void sync_server::impl::run() {
  std::vector<zmq_pollitem_t> items;
  std::vector<session_slot*> slots;
  std::vector<const std::string*> ids;
  while (!stop) {
    items.assign(1, zmq_pollitem_t{frontend.handle(), 0, ZMQ_POLLIN, 0});
    slots.clear();
    ids.clear();
    for (auto& [id, slot] : sessions) {
      items.push_back({slot->pair.handle(), 0, ZMQ_POLLIN, 0});
      slots.push_back(slot.get());
      ids.push_back(&id);
    }
    try {
      zmq::poll(items.data(), items.size(), broker_poll);
      const bool frozen = shared.frozen;  // TEST ONLY: play dead, drop everything
      if (items[0].revents & ZMQ_POLLIN) {
        std::vector<zmq::message_t> frames;
        if (zmq::recv_multipart(frontend, std::back_inserter(frames), zmq::recv_flags::dontwait) && !frozen)
          from_client(frames);
      }
      for (std::size_t i = 0; i < slots.size(); ++i) {
        if (!(items[i + 1].revents & ZMQ_POLLIN)) continue;
        std::vector<zmq::message_t> frames;
        if (!zmq::recv_multipart(slots[i]->pair, std::back_inserter(frames), zmq::recv_flags::dontwait) || frozen)
          continue;
        zmq::message_t id(ids[i]->data(), ids[i]->size());
        forward(frontend, frames, &id);
      }
    } catch (const zmq::error_t&) {
      break;  // a context was shut down under us: stop serving
    }
    reap();
  }
  frontend.close();
}

namespace {

result<std::unique_ptr<sync_server::impl>> make_impl(zmq::context_t& ctx, sync_server_options o) {
  struct stat st {};
  if (o.root.empty() || ::stat(o.root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return make_error(errc::invalid_argument, "sync server root \"" + o.root + "\" is not a directory");
  if (auto s = validate(o.chunking); !s.ok()) return s.err();
  if (o.max_sessions == 0) return make_error(errc::invalid_argument, "max_sessions must be at least 1");
  if (o.bulk_chunk_bytes == 0 || o.bulk_chunk_bytes > wire::max_chunk_bytes)
    return make_error(errc::invalid_argument, "bulk_chunk_bytes must be in 1..64 MiB");
  std::string scratch = o.scratch_dir;
  bool own = scratch.empty();
  if (own) {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/loom-cdc-packs-XXXXXX";
    if (!::mkdtemp(tmpl.data())) return make_error(errc::internal, "cannot create a scratch dir under " + tmpl);
    scratch = tmpl;
  }
  return std::make_unique<sync_server::impl>(ctx, std::move(o), scratch, own);
}

result<std::unique_ptr<sync_server::impl>> bind_frontend(std::unique_ptr<sync_server::impl> p,
                                                         const wire::curve_keypair* key, const std::string& zap_domain) {
  try {
    p->frontend = zmq::socket_t(p->ctx, zmq::socket_type::router);
    wire::apply_common_options(p->frontend);
    if (key) wire::make_curve_server(p->frontend, *key, zap_domain);
    p->frontend.bind(p->opt.bind);
    p->endpoint = p->frontend.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    if (p->own_scratch) std::filesystem::remove_all(p->scratch);
    return make_error(errc::unavailable, "sync server cannot bind " + p->opt.bind + ": " + e.what());
  }
  return p;
}

}  // namespace

sync_server::sync_server(std::unique_ptr<impl> p) : impl_(std::move(p)) {
  impl_->broker = std::thread([this] { impl_->run(); });  // the ROUTER belongs to the broker from here on
}

result<std::unique_ptr<sync_server>> sync_server::start(zmq::context_t& ctx, const wire::curve_keypair& key,
                                                        std::string zap_domain, sync_server_options options) {
  if (zap_domain.empty()) return make_error(errc::invalid_argument, "a CURVE sync server needs a ZAP domain");
  auto p = make_impl(ctx, std::move(options));
  if (!p.ok()) return p.err();
  auto b = bind_frontend(std::move(*p), &key, zap_domain);
  if (!b.ok()) return b.err();
  return std::unique_ptr<sync_server>(new sync_server(std::move(*b)));
}

result<std::unique_ptr<sync_server>> sync_server::start(zmq::context_t& ctx, wire::bench_plaintext_t,
                                                        sync_server_options options) {
  auto p = make_impl(ctx, std::move(options));
  if (!p.ok()) return p.err();
  auto b = bind_frontend(std::move(*p), nullptr, {});
  if (!b.ok()) return b.err();
  return std::unique_ptr<sync_server>(new sync_server(std::move(*b)));
}

sync_server::~sync_server() {
  impl_->stop = true;
  impl_->broker.join();
  impl_->inner.shutdown();  // sessions blocked in a transfer get ETERM and end
  for (auto& [id, slot] : impl_->sessions) {
    slot->thread.join();
    slot->pair.close();
  }
  impl_->sessions.clear();
  impl_->inner.close();
  if (impl_->own_scratch) {
    std::error_code ec;
    std::filesystem::remove_all(impl_->scratch, ec);
  }
}

const std::string& sync_server::endpoint() const { return impl_->endpoint; }

sync_server_stats sync_server::stats() const {
  const auto& c = impl_->shared.counters;
  return {c.sessions.load(),         c.manifests.load(),          c.packs.load(),
          c.pack_bytes.load(),       c.bulk_chunks_sent.load(),   c.bulk_chunks_resent.load(),
          c.bulk_bytes_sent.load(),  c.errors.load()};
}

}  // namespace loom::cdc
