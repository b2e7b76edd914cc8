#include "libs/cdc/sync_session.hpp"

#include "libs/cdc/protocol.hpp"
#include "libs/wire/bulk_transport.hpp"
#include "loom/v1/sync.pb.h"

#include <chrono>
#include <unistd.h>
#include <vector>
#include <zmq_addon.hpp>

namespace loom::cdc {
namespace {

using clock = std::chrono::steady_clock;

// How often a waiting session looks at the clock for its idle limit.
constexpr std::chrono::milliseconds poll_interval{100};

class session {
 public:
  session(server_shared& sh, zmq::socket_t& s, std::string principal, std::string tag)
      : sh_(sh), socket_(s), principal_(std::move(principal)), tag_(std::move(tag)) {}

  void run() {
    auto last = clock::now();
    while (!sh_.frozen) {
      zmq_pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, poll_interval) == 0) {
        if (clock::now() - last > sh_.opt.session_idle) return;
        continue;
      }
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(socket_, std::back_inserter(frames), zmq::recv_flags::dontwait)) continue;
      last = clock::now();
      if (!handle(frames)) return;
    }
  }

 private:
  // false = the session is over.
  bool handle(const std::vector<zmq::message_t>& frames) {
    std::string_view type = frames[0].to_string_view();
    std::string_view body = frames.size() > 1 ? frames[1].to_string_view() : std::string_view{};
    if (type == manifest_request_type) on_manifest(body);
    else if (type == chunks_request_type) on_chunks(body);
    else if (type == pack_request_type) on_pack(body);
    else if (type == bye_type) return false;
    else if (type == wire::bulk_need_type || type == wire::bulk_ack_type || type == wire::bulk_status_type)
      return true;  // a stale bulk reply (a Status: the client's bulk_receiver refused a bulk request)
    else fail(error_reply_type, make_error(errc::unimplemented, "unknown message \"" + std::string(type.substr(0, 64)) + "\""));
    return true;
  }

  void on_manifest(std::string_view body) {
    auto req = decode_manifest_request(body);
    if (!req.ok()) return fail(manifest_reply_type, req.err());
    auto snap = load(req->tenant, req->dataset);
    if (!snap.ok()) return fail(manifest_reply_type, snap.err());
    sh_.counters.manifests++;
    send(manifest_reply_type, encode_summary(snap_->m, req->tenant));
  }

  // Authorization before validation: a key that may not read the dataset a
  // request names is refused as such, whatever else is wrong with the request.
  template <class Msg>
  status may_read_named(std::string_view body) const {
    Msg m;
    if (!m.ParseFromArray(body.data(), static_cast<int>(body.size()))) return {};  // malformed: said by the decoder
    return allowed(m.tenant(), m.dataset());
  }

  void on_chunks(std::string_view body) {
    if (auto s = may_read_named<v1::SyncChunksRequest>(body); !s.ok()) return fail(chunks_reply_type, s.err());
    auto req = decode_chunks_request(body);
    if (!req.ok()) return fail(chunks_reply_type, req.err());
    if (!current(req->tenant, req->dataset) || snap_->m.root != req->root) {
      auto snap = load(req->tenant, req->dataset);
      if (!snap.ok()) return fail(chunks_reply_type, snap.err());
      if (snap_->m.root != req->root)
        return fail(chunks_reply_type, make_error(errc::conflict, "dataset changed: ask for its manifest again"));
    }
    std::vector<const file_entry*> files;
    for (const auto& p : req->paths) {
      const file_entry* f = snap_->m.find(p);
      if (!f) return fail(chunks_reply_type, make_error(errc::not_found, "no file \"" + p + "\""));
      files.push_back(f);
    }
    send(chunks_reply_type, encode_chunks(files));
  }

  void on_pack(std::string_view body) {
    if (auto s = may_read_named<v1::SyncPackRequest>(body); !s.ok()) return fail(pack_done_type, s.err());
    auto req = decode_pack_request(body);
    if (!req.ok()) return fail(pack_done_type, req.err());
    if (!current(req->tenant, req->dataset)) {
      auto snap = load(req->tenant, req->dataset);
      if (!snap.ok()) return fail(pack_done_type, snap.err());
    } else if (auto s = allowed(req->tenant, req->dataset); !s.ok()) {
      return fail(pack_done_type, s.err());
    }
    wire::send_options so;
    so.reply_timeout = sh_.opt.reply_timeout;
    so.chunk_bytes = sh_.opt.bulk_chunk_bytes;
    so.corrupt_chunk = sh_.opt.test_corrupt_bulk_chunk;
    if (sh_.opt.test_stop_after_bulk_chunks != 0) {
      std::uint64_t left = sh_.bulk_budget.load();
      if (left == 0) return freeze();
      so.max_chunks = static_cast<std::uint32_t>(std::min<std::uint64_t>(left, UINT32_MAX));
    }
    bool corrupt = false;
    for (auto n = sh_.corrupt_packs_left.load(); n > 0 && !corrupt;)
      corrupt = sh_.corrupt_packs_left.compare_exchange_weak(n, n - 1);

    const std::string path = sh_.scratch + "/" + tag_ + "-" + req->name;
    auto bytes = build_pack(*snap_, req->chunks, path, corrupt, &sh_.scratch_key, so.chunk_bytes);
    so.codec = &sh_.scratch_key;
    if (!bytes.ok()) return fail(pack_done_type, bytes.err());
    auto sent = wire::send_file(socket_, path, req->name, so);
    ::unlink(path.c_str());
    if (!sent.ok()) return fail(pack_done_type, sent.err());
    auto& c = sh_.counters;
    c.bulk_chunks_sent += sent->chunks_sent;
    c.bulk_chunks_resent += sent->chunks_resent;
    c.bulk_bytes_sent += sent->bytes_sent;
    if (sh_.opt.test_stop_after_bulk_chunks != 0) sh_.bulk_budget -= sent->chunks_sent - sent->chunks_resent;
    if (!sent->complete) return freeze();
    c.packs++;
    c.pack_bytes += *bytes;
    send(pack_done_type, encode({}, pack_done{req->name, *sent}));
  }

  // Whether snap_ is of `dataset` of `tenant`.
  bool current(const std::string& tenant, const std::string& dataset) const {
    return snap_ && dataset_ == dataset && tenant_ == tenant;
  }

  // Refreshes the snapshot of `dataset` of `tenant` for this session.
  result<bool> load(const std::string& tenant, const std::string& dataset) {
    if (auto s = allowed(tenant, dataset); !s.ok()) return s.err();
    auto dir = locate(tenant, dataset);
    if (!dir.ok()) return dir.err();
    if (sh_.opt.check)
      if (auto s = sh_.opt.check(tenant, dataset); !s.ok()) return s.err();
    auto snap = sh_.cache.refresh(*dir, dataset);
    if (!snap.ok()) return snap.err();
    snap_ = *snap;
    dataset_ = dataset;
    tenant_ = tenant;
    return true;
  }

  result<std::string> locate(const std::string& tenant, const std::string& dataset) const {
    if (sh_.opt.locate) return sh_.opt.locate(tenant, dataset);
    if (!tenant.empty()) return make_error(errc::not_found, "no dataset \"" + dataset + "\" of tenant " + tenant);
    return sh_.opt.root + "/" + dataset;
  }

  status allowed(const std::string& tenant, const std::string& dataset) const {
    if (!sh_.opt.authorize || sh_.opt.authorize(principal_, tenant, dataset)) return {};
    return make_error(errc::permission_denied, "\"" + principal_ + "\" may not read dataset \"" + dataset +
                                                   "\" of tenant " + (tenant.empty() ? "default" : tenant));
  }

  void freeze() { sh_.frozen = true; }

  void fail(std::string_view type, const error& e) {
    sh_.counters.errors++;
    send(type, encode_failure(type, e));
  }

  // [type][message]
  void send(std::string_view type, const std::string& body) {
    socket_.send(zmq::buffer(type), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(body), zmq::send_flags::none);
  }

  server_shared& sh_;
  zmq::socket_t& socket_;
  const std::string principal_, tag_;
  std::string dataset_, tenant_;          // what snap_ describes
  std::shared_ptr<const snapshot> snap_;  // this session's view, from its last ManifestRequest
};

}  // namespace

void run_session(server_shared& shared, zmq::socket_t& socket, const std::string& principal, const std::string& tag) {
  try {
    session(shared, socket, principal, tag).run();
  } catch (const zmq::error_t&) {
    // the server is shutting down its inproc context
  }
}

}  // namespace loom::cdc
