#include "libs/cdc/sync_client.hpp"

#include "libs/cdc/chunk_store.hpp"
#include "libs/cdc/manifest.hpp"
#include "libs/cdc/protocol.hpp"
#include "libs/cdc/rebuild.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/files/files.hpp"
#include "libs/cdc/piece_codecs.hpp"
#include "libs/wire/bulk_receiver.hpp"
#include "libs/wire/bulk_transport.hpp"
#include "libs/wire/limits.hpp"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq_addon.hpp>

namespace loom::cdc {
namespace {

// How packs in transit lie in .loom-sync/incoming: sealed piece by piece
// under the deployment's keys when this pull seals what it rebuilds.
std::shared_ptr<const wire::bulk_piece_codec> incoming_codec(const sync_client_options& o) {
  if (!o.seal.keys) return nullptr;
  return std::make_shared<kek_pieces>(o.seal.keys);
}

using clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

// A dataset that changes while it is pulled: start over this many times.
constexpr int max_restarts = 3;
// Chunk-list entries per ChunksRequest (~40 bytes each in the reply).
constexpr std::uint64_t max_chunks_per_list_request = 65536;

// The DEALER side of the protocol: requests out, replies in, and the bulk
// transfer's requests answered by our bulk_receiver while we wait.
class conversation {
 public:
  conversation(zmq::socket_t& s, wire::bulk_receiver& rx, sync_stats& st, std::chrono::milliseconds timeout,
               std::string endpoint)
      : s_(s), rx_(rx), st_(st), timeout_(timeout), endpoint_(std::move(endpoint)) {}

  status send(std::string_view type, const std::string& body) {
    try {
      if (!s_.send(zmq::buffer(type), zmq::send_flags::sndmore) || !s_.send(zmq::buffer(body), zmq::send_flags::none))
        return make_error(errc::unavailable, "cannot send to " + endpoint_);
    } catch (const zmq::error_t& e) {
      return make_error(errc::unavailable, "send to " + endpoint_ + ": " + e.what());
    }
    st_.wire_bytes_out += type.size() + body.size();
    return {};
  }

  // The body of the next reply of `type` (its status is the decoder's to
  // check), or the error an error_reply_type frame carries. Bulk requests
  // that arrive meanwhile are served; each restarts the timeout.
  result<zmq::message_t> await(std::string_view type) {
    try {
      return await_impl(type);
    } catch (const zmq::error_t& e) {
      return make_error(errc::unavailable, "receive from " + endpoint_ + ": " + e.what());
    }
  }

 private:
  result<zmq::message_t> await_impl(std::string_view type) {
    auto deadline = clock::now() + timeout_;
    std::vector<std::string> reply;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
      zmq_pollitem_t item{s_.handle(), 0, ZMQ_POLLIN, 0};
      if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0)
        return make_error(errc::unavailable, "no reply from " + endpoint_ + " within " +
                                                 std::to_string(timeout_.count()) + " ms");
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(s_, std::back_inserter(frames), zmq::recv_flags::dontwait)) continue;
      for (const auto& f : frames) st_.wire_bytes_in += f.size();
      deadline = clock::now() + timeout_;
      std::string_view got = frames[0].to_string_view();
      if (wire::is_bulk_request(frames)) {
        if (got == wire::bulk_chunk_type && frames.size() == 3) {
          st_.bulk_chunks_received++;
          st_.bulk_bytes_received += frames[2].size();
        }
        wire::serve_bulk_message(rx_, frames, reply);
        s_.send(zmq::buffer(reply[0]), zmq::send_flags::sndmore);
        s_.send(zmq::buffer(reply[1]), zmq::send_flags::none);
        st_.wire_bytes_out += reply[0].size() + reply[1].size();
        continue;
      }
      if (got != type && got != error_reply_type) continue;  // stale
      if (frames.size() != 2)
        return make_error(errc::invalid_argument, std::string(got) + " reply: want 2 frames, got " +
                                                      std::to_string(frames.size()));
      if (got == error_reply_type) {
        if (auto s = decode_status(frames[1].to_string_view()); !s.ok()) return s.err();
        return make_error(errc::invalid_argument, "error reply without an error");
      }
      return std::move(frames[1]);
    }
  }

  zmq::socket_t& s_;
  wire::bulk_receiver& rx_;
  sync_stats& st_;
  const std::chrono::milliseconds timeout_;
  const std::string endpoint_;
};

// One pull: the plan, the fetch rounds, the rebuild.
class puller {
 public:
  puller(conversation& c, const sync_client_options& opt, sync_stats& st, std::string tenant, std::string dataset,
         std::string into)
      : c_(c), opt_(opt), st_(st), tenant_(std::move(tenant)), dataset_(std::move(dataset)), into_(std::move(into)),
        sync_dir_(into_ + "/" + std::string(sync_dir_name)),
        store_(sync_dir_ + "/chunks", opt_.seal.keys) {}  // sealed as what it rebuilds is

  status run() {
    const auto t0 = clock::now();
    auto remote = fetch_manifest();
    if (!remote.ok()) return remote.err();
    std::optional<manifest> cached;
    if (auto text = files::read_file(sync_dir_ + "/manifest.json"); text.ok()) {
      if (auto m = parse_manifest(*text, "local manifest cache"); m.ok()) cached = std::move(*m);
    }
    auto local = build_manifest(into_, remote->chunking, cached ? &*cached : nullptr);
    if (!local.ok()) return local.err();
    st_.files = remote->files.size();
    st_.root = crypto::to_hex(crypto::as_view(remote->root));
    file_diff diff = diff_files(*local, *remote);
    if (opt_.want) drop_unwanted(*remote, *local, diff);
    if (!opt_.remove_extraneous) diff.removed.clear();
    if (diff.changed.empty() && diff.removed.empty()) {
      st_.plan_seconds += since(t0);
      return finish(*remote, *local, {});
    }

    auto targets = fetch_chunk_lists(*remote, diff.changed);
    if (!targets.ok()) return targets.err();
    st_.plan_seconds += since(t0);
    rebuilder rb(into_, store_, *local, opt_.seal);
    if (auto s = fetch_and_build(*targets, rb); !s.ok()) return s;
    if (auto s = accept(*remote, *local, rb); !s.ok()) return s;
    auto t1 = clock::now();
    if (auto s = rb.publish(diff.removed); !s.ok()) return s;
    st_.rebuild_seconds += since(t1);
    st_.files_updated = targets->size();
    st_.files_removed = diff.removed.size();
    return finish(*remote, *local, *targets);
  }

 private:
  // options.want: unwanted files are not fetched, and those the directory
  // holds go as extraneous ones do (removed when remove_extraneous).
  void drop_unwanted(const manifest& remote, const manifest& local, file_diff& diff) {
    for (const auto& f : remote.files)
      if (!opt_.want(f.path)) not_wanted_.insert(f.path);
    st_.files_not_wanted = not_wanted_.size();
    std::erase_if(diff.changed, [&](const std::string& p) { return not_wanted_.count(p) > 0; });
    for (const auto& f : local.files)
      if (not_wanted_.count(f.path)) diff.removed.push_back(f.path);
  }

  result<manifest> fetch_manifest() {
    if (auto s = c_.send(manifest_request_type, encode(manifest_request{dataset_, tenant_})); !s.ok()) return s.err();
    auto r = c_.await(manifest_reply_type);
    if (!r.ok()) return r.err();
    return decode_manifest(r->to_string_view(), "manifest of \"" + dataset_ + "\" from the server", tenant_);
  }

  // Chunk lists of `paths`, each checked against the root the summary gave.
  result<std::vector<file_entry>> fetch_chunk_lists(const manifest& remote, const std::vector<std::string>& paths) {
    std::vector<file_entry> out;
    for (std::size_t i = 0; i < paths.size();) {
      chunks_request req{dataset_, remote.root, {}, tenant_};
      std::uint64_t chunks = 0;
      while (i < paths.size() && req.paths.size() < max_paths_per_request &&
             (req.paths.empty() || chunks + remote.find(paths[i])->chunk_count <= max_chunks_per_list_request)) {
        chunks += remote.find(paths[i])->chunk_count;
        req.paths.push_back(paths[i++]);
      }
      if (auto s = c_.send(chunks_request_type, encode(req)); !s.ok()) return s.err();
      auto r = c_.await(chunks_reply_type);
      if (!r.ok()) return r.err();
      auto lists =
          decode_chunks(r->to_string_view(), req.paths, "chunk lists of \"" + dataset_ + "\" from the server");
      if (!lists.ok()) return lists.err();
      for (std::size_t k = 0; k < req.paths.size(); ++k) {
        file_entry& f = (*lists)[k];
        const file_entry* want = remote.find(req.paths[k]);
        if (f.root != want->root || f.size != want->size)
          return make_error(errc::corruption, "chunk list of " + req.paths[k] + " does not match the manifest");
        out.push_back(std::move(f));
      }
    }
    return out;
  }

  // Rounds of: fetch what is missing, rebuild what is pending. A round
  // repeats only for chunks whose copies failed their hash.
  status fetch_and_build(const std::vector<file_entry>& targets, rebuilder& rb) {
    std::vector<const file_entry*> pending;
    for (const auto& t : targets) pending.push_back(&t);
    for (int round = 0; round < opt_.max_rounds; ++round) {
      std::vector<chunk> need = missing(pending, rb, round == 0);
      if (!need.empty()) {
        if (round > 0) st_.chunks_refetched += need.size();
        auto t = clock::now();
        status s = fetch(need);
        st_.fetch_seconds += since(t);
        if (!s.ok()) return s;
        if (!missing(pending, rb, false).empty()) continue;  // a pack came up short: ask again
      }
      std::vector<const file_entry*> failed;
      auto t = clock::now();
      for (const file_entry* f : pending) {
        status s = rb.build(*f);
        if (s.code() == errc::corruption) failed.push_back(f);
        else if (!s.ok()) return s;
      }
      st_.rebuild_seconds += since(t);
      if (failed.empty()) return {};
      pending = std::move(failed);
    }
    return make_error(errc::corruption, "chunks of \"" + dataset_ + "\" kept failing their hash after " +
                                            std::to_string(opt_.max_rounds) + " rounds");
  }

  std::vector<chunk> missing(const std::vector<const file_entry*>& files, const rebuilder& rb, bool count) {
    std::vector<chunk> out;
    chunk_set seen;
    for (const file_entry* f : files)
      for (const auto& c : f->chunks) {
        if (!seen.insert(c.sha256).second) continue;
        if (!rb.have(c.sha256)) out.push_back(c);
      }
    if (count) {
      st_.chunks_needed = seen.size();
      st_.chunks_reused = seen.size() - out.size();
    }
    return out;
  }

  // Fetches `need` in packs into the chunk store.
  status fetch(const std::vector<chunk>& need) {
    for (std::size_t i = 0; i < need.size();) {
      std::vector<crypto::digest> ids;
      std::vector<std::uint32_t> lengths;
      std::uint64_t bytes = 0;
      while (i < need.size() && ids.size() < max_pack_chunks &&
             (ids.empty() || bytes + need[i].length <= opt_.pack_bytes)) {
        ids.push_back(need[i].sha256);
        lengths.push_back(need[i].length);
        bytes += need[i++].length;
      }
      if (auto s = fetch_pack(ids, lengths); !s.ok()) return s;
    }
    return {};
  }

  // One pack: requested (unless a cut-off pull received it whole already),
  // then adopted by the chunk store.
  status fetch_pack(const std::vector<crypto::digest>& ids, const std::vector<std::uint32_t>& lengths) {
    const std::string name = pack_name(ids);
    const std::string path = sync_dir_ + "/incoming/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {  // else: received whole before an interruption
      if (auto s = c_.send(pack_request_type, encode(pack_request{dataset_, name, ids, tenant_})); !s.ok()) return s;
      auto r = c_.await(pack_done_type);
      if (!r.ok()) return r.err();
      auto done = decode_pack_done(r->to_string_view());
      if (!done.ok()) return done.err();
      st_.bulk_chunks_resent += done->bulk.chunks_resent;
      st_.bulk_chunks_skipped += done->bulk.chunks_skipped;
    }
    auto added = store_.add_pack(name, path, ids, lengths, incoming_.get());
    if (!added.ok()) {
      ::unlink(path.c_str());  // a short pack: its chunks stay missing and are asked for again
      if (added.code() == errc::corruption) return {};
      return added.err();
    }
    for (std::size_t k = 0; k < ids.size(); ++k)
      if (store_.contains(ids[k])) {
        st_.chunks_fetched++;
        st_.chunk_bytes_fetched += lengths[k];
      }
    st_.packs++;
    return {};
  }

  // The version about to be published, shown to the accept hook: rebuilt
  // files from their temps, the rest from the directory.
  status accept(const manifest& remote, const manifest& local, const rebuilder& rb) {
    if (!opt_.accept) return {};
    staged_version v;
    v.not_wanted = not_wanted_;
    for (const auto& f : remote.files)
      if (!not_wanted_.count(f.path)) v.files[f.path] = into_ + "/" + f.path;
    if (!opt_.remove_extraneous)
      for (const auto& f : local.files)
        if (!not_wanted_.count(f.path)) v.files.try_emplace(f.path, into_ + "/" + f.path);
    for (const auto& [tmp, rel] : rb.built()) v.files[rel] = tmp;
    return opt_.accept(v);
  }

  // Records what the directory now holds (the stat cache for the next pull)
  // and empties the staging areas.
  status finish(const manifest& remote, const manifest& local, const std::vector<file_entry>& updated) {
    manifest now;
    now.chunking = remote.chunking;
    std::unordered_map<std::string_view, const file_entry*> by_path;
    for (const auto& u : updated) by_path.emplace(u.path, &u);
    for (const auto& f : remote.files) {
      if (not_wanted_.count(f.path) && opt_.remove_extraneous) continue;  // removed, or never here
      if (auto it = by_path.find(f.path); it != by_path.end()) {
        // Just written and verified by us: its stamp is trusted, so the next
        // pull does not read it again. (Only a foreign write in the same
        // timestamp tick as our rename, with the same size, would go unseen.)
        now.files.push_back(*it->second);
        auto stamp = stamp_of_path(into_ + "/" + f.path);
        now.files.back().stamp = stamp.ok() ? *stamp : file_stamp{};
      } else if (const file_entry* l = local.find(f.path)) {
        now.files.push_back(*l);
      }
    }
    if (!opt_.remove_extraneous)
      for (const auto& f : local.files)
        if (!remote.find(f.path)) now.files.push_back(f);
    std::sort(now.files.begin(), now.files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    now.root = dataset_root(now.files);
    if (auto s = files::write_atomic(sync_dir_ + "/manifest.json", to_json(now, json_form::cache)); !s.ok()) return s;
    if (auto s = store_.clear(); !s.ok()) return s;
    std::error_code ec;
    fs::remove_all(sync_dir_ + "/incoming", ec);
    fs::remove_all(sync_dir_ + "/tmp", ec);
    return {};
  }

  conversation& c_;
  const sync_client_options& opt_;
  sync_stats& st_;
  const std::string tenant_, dataset_, into_, sync_dir_;
  chunk_store store_;
  const std::shared_ptr<const wire::bulk_piece_codec> incoming_ = incoming_codec(opt_);
  std::set<std::string> not_wanted_;  // of the server's files (options.want)
};

}  // namespace

sync_client::sync_client(zmq::context_t& ctx, wire::curve_keypair mine, std::string server_public_z85,
                         sync_client_options options)
    : ctx_(ctx), mine_(std::move(mine)), server_public_(std::move(server_public_z85)), opt_(options) {}

sync_client::sync_client(zmq::context_t& ctx, wire::bench_plaintext_t, sync_client_options options)
    : ctx_(ctx), opt_(options) {}

result<sync_stats> sync_client::pull(const std::string& endpoint, const std::string& tenant,
                                     const std::string& dataset, const std::string& into_dir) {
  const auto t0 = clock::now();
  stats_ = {};
  if (auto s = valid_dataset_name(dataset); !s.ok()) return s.err();
  if (auto s = valid_tenant_name(tenant); !s.ok()) return s.err();
  if (opt_.pack_bytes == 0 || opt_.max_rounds < 1)
    return make_error(errc::invalid_argument, "pack_bytes and max_rounds must be positive");
  const std::string sync_dir = into_dir + "/" + std::string(sync_dir_name);
  for (const char* sub : {"/chunks", "/incoming", "/tmp"})
    if (auto s = files::make_dirs(sync_dir + sub); !s.ok()) return s.err();

  status outcome;
  try {
    zmq::socket_t socket(ctx_, zmq::socket_type::dealer);
    wire::apply_common_options(socket);
    socket.set(zmq::sockopt::sndtimeo, static_cast<int>(opt_.reply_timeout.count()));
    if (mine_) wire::make_curve_client(socket, *mine_, server_public_);
    socket.connect(endpoint);
    wire::bulk_receiver receiver(sync_dir + "/incoming", incoming_codec(opt_));
    conversation conv(socket, receiver, stats_, opt_.reply_timeout, endpoint);
    for (int attempt = 0; attempt < max_restarts; ++attempt) {  // transfer counters add up
      outcome = puller(conv, opt_, stats_, tenant, dataset, into_dir).run();
      if (outcome.code() != errc::conflict) break;
    }
    // Let the Bye leave before close (linger is 0 otherwise) so the server
    // ends the session now instead of after its idle limit.
    socket.set(zmq::sockopt::linger, 200);
    (void)conv.send(bye_type, encode_bye());
  } catch (const zmq::error_t& e) {
    outcome = make_error(errc::unavailable, "sync with " + endpoint + ": " + e.what());
  }
  stats_.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  if (!outcome.ok()) return outcome.err();
  return stats_;
}

}  // namespace loom::cdc
