// Sync over CURVE on tcp loopback, small datasets (a few MiB): correctness,
// refusals, corruption on the wire and in the chunk store, interruption.
#include "libs/cdc/protocol.hpp"
#include "libs/cdc/sync_fixture.hpp"

#include <doctest/doctest.h>

#include <set>
#include <filesystem>
#include <thread>
#include <zmq_addon.hpp>

using namespace loom;
using namespace loom::cdc;
using namespace loom::cdc::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// ~6.3 MiB: nested dirs, an empty file, a duplicate file, a file under max chunk size.
void make_dataset(const std::string& dir) {
  put(dir, "docs/a.txt", pseudo_random(3u << 20, 1));
  put(dir, "docs/nested/b.bin", pseudo_random(2u << 20, 2));
  put(dir, "copy-of-b.bin", pseudo_random(2u << 20, 2));
  put(dir, "small.json", "{\"k\": 1}\n");
  put(dir, "empty", "");
  put(dir, "c.bin", pseudo_random((1u << 20) + 4321, 3));
}

std::uint64_t distinct_chunks(const std::string& dir) {
  auto m = build_manifest(dir);
  REQUIRE(m.ok());
  return missing_chunks(*m, {}).size();
}

}  // namespace

TEST_CASE("a dataset pulled over CURVE on loopback arrives byte-identical and an unchanged second pull fetches nothing") {
  sync_fixture fx;
  make_dataset(fx.src());
  auto server = fx.start();
  auto client = fx.client();

  auto first = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(first.ok(), first.err().to_string());
  CHECK(tree(fx.dst()) == tree(fx.src()));
  CHECK(first->files == 6);
  CHECK(first->files_updated == 6);
  CHECK(first->chunks_fetched == distinct_chunks(fx.src()));  // the duplicate file travels once
  CHECK(first->chunks_reused == 0);
  CHECK(first->bulk_chunks_resent == 0);
  CHECK(count_files(fx.dst() + "/.loom-sync/chunks") == 0);  // staging emptied after publish
  MESSAGE("full pull: " << first->chunk_bytes_fetched << " chunk bytes, " << first->wire_bytes_in
                        << " bytes in, " << first->seconds << " s");

  auto again = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE(again.ok());
  CHECK(again->files_updated == 0);
  CHECK(again->chunks_fetched == 0);
  CHECK(again->root == first->root);
  CHECK(again->wire_bytes_in + again->wire_bytes_out < 4096);
}

TEST_CASE("renamed, removed and added files sync with only the added bytes on the wire") {
  sync_fixture fx;
  make_dataset(fx.src());
  auto server = fx.start();
  auto client = fx.client();
  REQUIRE(client.pull(server->endpoint(), fx.dataset, fx.dst()).ok());

  fs::create_directories(fx.src() + "/renamed");
  fs::rename(fx.src() + "/c.bin", fx.src() + "/renamed/c.bin");
  fs::remove(fx.src() + "/docs/nested/b.bin");
  put(fx.src(), "new.bin", pseudo_random(300000, 4));
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(r.ok(), r.err().to_string());
  CHECK(tree(fx.dst()) == tree(fx.src()));
  CHECK_FALSE(fs::exists(fx.dst() + "/docs/nested"));  // left empty by the removal
  CHECK(r->files_removed == 2);                         // c.bin (moved) and b.bin
  CHECK(r->files_updated == 2);                         // renamed/c.bin and new.bin
  auto m = build_manifest(fx.src());
  REQUIRE(m.ok());
  CHECK(r->chunks_fetched == m->find("new.bin")->chunk_count);
  CHECK(r->chunk_bytes_fetched == 300000);
}

TEST_CASE("a session answers an unknown type and an unparseable request with errors and ignores a stale bulk status") {
  sync_fixture fx;
  make_dataset(fx.src());
  auto server = fx.start();
  zmq::socket_t s(fx.curve.ctx, zmq::socket_type::dealer);
  wire::test::bounded(s, 5000);
  wire::make_curve_client(s, fx.curve.alice, fx.curve.server.public_z85);
  s.connect(server->endpoint());
  auto ask = [&](std::string_view type, const std::string& body) {
    s.send(zmq::buffer(type), zmq::send_flags::sndmore);
    s.send(zmq::buffer(body), zmq::send_flags::none);
  };
  auto reply = [&] {
    std::vector<zmq::message_t> f;
    REQUIRE(zmq::recv_multipart(s, std::back_inserter(f)));
    REQUIRE(f.size() == 2);
    return f;
  };

  ask("loom.v1.Nonsense", "x");
  auto r = reply();
  CHECK(r[0].to_string_view() == error_reply_type);
  auto st = decode_status(r[1].to_string_view());
  CHECK(st.code() == errc::unimplemented);
  CHECK(st.err().message == "unknown message \"loom.v1.Nonsense\"");

  ask(manifest_request_type, "\xff\xff\xff");
  r = reply();
  CHECK(r[0].to_string_view() == manifest_reply_type);
  CHECK(decode_manifest(r[1].to_string_view(), "t").code() == errc::invalid_argument);

  // What our bulk_receiver sends for a bulk request it refused, arriving
  // after the transfer: not answered, so the next reply is the next request's.
  ask(wire::bulk_status_type, encode_status(make_error(errc::invalid_argument, "late")));
  ask(manifest_request_type, encode(manifest_request{fx.dataset}));
  r = reply();
  CHECK(r[0].to_string_view() == manifest_reply_type);
  auto m = decode_manifest(r[1].to_string_view(), "t");
  REQUIRE_MESSAGE(m.ok(), m.err().to_string());
  CHECK(m->files.size() == 6);
  CHECK(server->stats().errors == 2);
}

TEST_CASE("a client whose key is not on the allow list gets no data and an unavailable error") {
  sync_fixture fx;
  make_dataset(fx.src());
  auto server = fx.start();
  sync_client_options o;
  o.reply_timeout = 500ms;
  sync_client mallory(fx.curve.ctx, wire::generate_keypair(), fx.curve.server.public_z85, o);
  auto r = mallory.pull(server->endpoint(), fx.dataset, fx.dst());
  CHECK(r.code() == errc::unavailable);
  CHECK(tree(fx.dst()).empty());
  CHECK(server->stats().sessions == 0);
  CHECK(fx.curve.zap->rejected() >= 1);
}

TEST_CASE("an unknown dataset is not found and a dataset the principal may not read is permission denied") {
  sync_fixture fx;
  make_dataset(fx.src());
  sync_server_options o;
  o.authorize = [](const std::string& principal, const std::string&, const std::string& dataset) {
    return principal == "alice" && dataset != "secret";
  };
  fs::create_directories(fx.served.path() + "/secret");
  auto server = fx.start(o);
  auto client = fx.client();
  CHECK(client.pull(server->endpoint(), "nope", fx.dst()).code() == errc::not_found);
  CHECK(client.pull(server->endpoint(), "secret", fx.dst()).code() == errc::permission_denied);
  CHECK(client.pull(server->endpoint(), "../etc", fx.dst()).code() == errc::invalid_argument);
  auto ok = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE(ok.ok());
  CHECK(tree(fx.dst()) == tree(fx.src()));
}

TEST_CASE("a dataset the server's check refuses is answered with the check's own error and nothing is written") {
  sync_fixture fx;
  make_dataset(fx.src());
  sync_server_options o;
  o.check = [](const std::string&, const std::string& dataset) -> status {
    return make_error(errc::corruption, "dataset " + dataset + " is damaged: shard-000002.bin is missing");
  };
  auto server = fx.start(o);
  auto client = fx.client();
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  CHECK(r.code() == errc::corruption);
  if (!r.ok()) CHECK(r.err().message.find("shard-000002.bin is missing") != std::string::npos);
  CHECK(tree(fx.dst()).empty());
}

TEST_CASE("a tenant's dataset is found where the server's locate hook puts it, and authorize sees the tenant") {
  sync_fixture fx;
  make_dataset(fx.src());
  // Tenant acme's `corpus` lives elsewhere and holds other bytes.
  files::temp_dir acme_root{"loom-cdc-acme"};
  put(acme_root.path() + "/corpus", "only-acme.txt", pseudo_random(100000, 9));
  sync_server_options o;
  o.locate = [&](const std::string& tenant, const std::string& dataset) -> result<std::string> {
    if (tenant.empty()) return fx.served.path() + "/" + dataset;
    if (tenant == "acme") return acme_root.path() + "/" + dataset;
    return make_error(errc::not_found, "no tenant " + tenant);
  };
  o.authorize = [](const std::string&, const std::string& tenant, const std::string&) { return tenant != "globex"; };
  auto server = fx.start(o);
  auto client = fx.client();

  auto acme = client.pull(server->endpoint(), "acme", fx.dataset, fx.dst());
  REQUIRE_MESSAGE(acme.ok(), acme.err().to_string());
  CHECK(tree(fx.dst()) == tree(acme_root.path() + "/corpus"));
  auto plain = client.pull(server->endpoint(), fx.dataset, fx.dst());  // the default namespace
  REQUIRE_MESSAGE(plain.ok(), plain.err().to_string());
  CHECK(tree(fx.dst()) == tree(fx.src()));
  auto denied = client.pull(server->endpoint(), "globex", fx.dataset, fx.dst());
  CHECK(denied.code() == errc::permission_denied);
  if (!denied.ok()) CHECK(denied.err().message.find("of tenant globex") != std::string::npos);
  CHECK(client.pull(server->endpoint(), "initech", fx.dataset, fx.dst()).code() == errc::not_found);
  CHECK(client.pull(server->endpoint(), "a/b", fx.dataset, fx.dst()).code() == errc::invalid_argument);
  CHECK(tree(fx.dst()) == tree(fx.src()));  // refusals changed nothing
}

TEST_CASE("without a locate hook only the default namespace is served") {
  sync_fixture fx;
  make_dataset(fx.src());
  auto server = fx.start();
  auto client = fx.client();
  CHECK(client.pull(server->endpoint(), "acme", fx.dataset, fx.dst()).code() == errc::not_found);
  CHECK(tree(fx.dst()).empty());
}

TEST_CASE("a version the accept hook refuses publishes nothing: the previous copy stays, and a later good version lands") {
  sync_fixture fx;
  make_dataset(fx.src());
  auto server = fx.start();
  std::string refuse;  // the path whose staged bytes make the hook refuse
  std::map<std::string, std::string> seen;
  sync_client_options o;
  o.accept = [&](const staged_version& v) -> status {
    seen.clear();
    for (const auto& [rel, path] : v.files) {
      auto bytes = files::read_file(path);
      seen[rel] = bytes.ok() ? *bytes : "?";
    }
    if (!refuse.empty() && seen.count(refuse) && seen[refuse].starts_with("tampered"))
      return make_error(errc::corruption, refuse + ": tampered");
    return {};
  };
  auto client = fx.client(o);
  REQUIRE(client.pull(server->endpoint(), fx.dataset, fx.dst()).ok());
  const auto good = tree(fx.dst());
  CHECK(seen.size() == 6);  // the hook saw every file of the new version with its bytes
  CHECK(seen["small.json"] == "{\"k\": 1}\n");

  refuse = "small.json";
  put(fx.src(), "small.json", "tampered");
  put(fx.src(), "added.txt", "new");
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  CHECK(r.code() == errc::corruption);
  CHECK(tree(fx.dst()) == good);  // nothing published, nothing removed
  CHECK(count_files(fx.dst() + "/.loom-sync/tmp") == 0);  // the temps are gone
  CHECK(seen.count("added.txt") == 1);

  put(fx.src(), "small.json", "fixed");
  auto fixed = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(fixed.ok(), fixed.err().to_string());
  CHECK(tree(fx.dst()) == tree(fx.src()));
}

TEST_CASE("a bulk chunk corrupted on the wire is caught by its hash and sent again") {
  sync_fixture fx;
  make_dataset(fx.src());
  sync_server_options o;
  o.test_corrupt_bulk_chunk = [](std::uint32_t index, std::uint32_t attempt) { return index == 1 && attempt == 1; };
  auto server = fx.start(o);
  auto client = fx.client();
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(r.ok(), r.err().to_string());
  CHECK(tree(fx.dst()) == tree(fx.src()));
  CHECK(r->bulk_chunks_resent >= 1);
  CHECK(server->stats().bulk_chunks_resent == r->bulk_chunks_resent);
  CHECK(r->chunks_refetched == 0);
}

TEST_CASE("a chunk corrupted inside a pack is caught by its own SHA-256 and fetched again") {
  sync_fixture fx;
  make_dataset(fx.src());
  sync_server_options o;
  o.test_corrupt_packs = 1;  // bulk hashes are computed over the damaged pack, so only the chunk id can tell
  auto server = fx.start(o);
  auto client = fx.client();
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(r.ok(), r.err().to_string());
  CHECK(tree(fx.dst()) == tree(fx.src()));
  CHECK(r->chunks_refetched == 1);
  CHECK(r->chunks_fetched == distinct_chunks(fx.src()) + 1);
  CHECK(r->packs == 2);
}

TEST_CASE("a corrupt chunk in the receiver's chunk store is caught by its hash and fetched again") {
  sync_fixture fx;
  make_dataset(fx.src());
  sync_client_options co;
  co.pack_bytes = 1u << 20;
  co.reply_timeout = 1000ms;
  auto client = fx.client(co);
  {
    sync_server_options so;
    so.bulk_chunk_bytes = 1u << 20;
    so.test_stop_after_bulk_chunks = 3;  // a cut-off pull leaves packs in the store
    so.reply_timeout = 1000ms;
    auto server = fx.start(so);
    CHECK(client.pull(server->endpoint(), fx.dataset, fx.dst()).code() == errc::unavailable);
  }
  const std::uint64_t stored = client.last_stats().chunks_fetched;
  REQUIRE(stored > 0);
  // Damage the first chunk of one stored pack (bit rot while the sync was paused).
  std::string pack;
  for (const auto& e : fs::directory_iterator(fx.dst() + "/.loom-sync/chunks"))
    if (e.path().extension() != ".idx") pack = e.path().string();
  REQUIRE_FALSE(pack.empty());
  patch("/", pack.substr(1), 100, "ZZZZ");

  auto server = fx.start();
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(r.ok(), r.err().to_string());
  CHECK(tree(fx.dst()) == tree(fx.src()));
  CHECK(r->chunks_reused == stored);  // believed good at plan time...
  CHECK(r->chunks_refetched == 1);    // ...one failed its hash when used and was fetched again
  CHECK(r->chunks_fetched + stored == distinct_chunks(fx.src()) + 1);
}

TEST_CASE("a local file damaged since the last sync is repaired from the server") {
  sync_fixture fx;
  make_dataset(fx.src());
  auto server = fx.start();
  auto client = fx.client();
  REQUIRE(client.pull(server->endpoint(), fx.dataset, fx.dst()).ok());
  patch(fx.dst(), "docs/a.txt", 1000000, "ZZZZ");
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE(r.ok());
  CHECK(tree(fx.dst()) == tree(fx.src()));
  CHECK(r->files_updated == 1);
  CHECK(r->chunks_fetched == 1);
}

TEST_CASE("an interrupted sync resumes without resending finished chunks") {
  sync_fixture fx;
  for (int i = 0; i < 3; ++i) put(fx.src(), "part-" + std::to_string(i), pseudo_random(8u << 20, 20 + i));
  const std::uint64_t total_bytes = 24u << 20;
  const std::uint64_t total_chunks = distinct_chunks(fx.src());
  sync_client_options co;
  co.pack_bytes = 4u << 20;  // ~6 packs of ~4-5 bulk chunks
  co.reply_timeout = 1000ms;
  auto client = fx.client(co);

  sync_stats cut;
  {
    sync_server_options so;
    so.bulk_chunk_bytes = 1u << 20;
    so.test_stop_after_bulk_chunks = 11;  // dies inside the third pack
    so.reply_timeout = 1000ms;
    auto server = fx.start(so);
    auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
    CHECK(r.code() == errc::unavailable);
    cut = client.last_stats();
  }
  MESSAGE("cut off: packs=" << cut.packs << " chunks stored=" << cut.chunks_fetched << " bulk chunks received="
                            << cut.bulk_chunks_received << " bulk bytes=" << cut.bulk_bytes_received);
  CHECK(cut.bulk_chunks_received == 11);
  CHECK(cut.packs >= 1);
  CHECK(cut.chunks_fetched > 0);
  CHECK(cut.chunks_fetched < total_chunks);
  CHECK(count_files(fx.dst() + "/.loom-sync/chunks") == 2 * cut.packs);  // packs and their indexes
  CHECK(tree(fx.dst()).empty());  // nothing published from a half sync

  sync_server_options so;
  so.bulk_chunk_bytes = 1u << 20;
  auto server = fx.start(so);  // "restarted": a fresh server on a new port
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(r.ok(), r.err().to_string());
  CHECK(tree(fx.dst()) == tree(fx.src()));
  MESSAGE("resumed: chunks reused=" << r->chunks_reused << " fetched=" << r->chunks_fetched << " bulk chunks skipped="
                                    << r->bulk_chunks_skipped << " bulk bytes=" << r->bulk_bytes_received);
  // Chunks stored before the cut are not asked for again...
  CHECK(r->chunks_reused == cut.chunks_fetched);
  CHECK(r->chunks_fetched + cut.chunks_fetched == total_chunks);
  // ...the pack cut off mid-way resumes where it stopped...
  CHECK(r->bulk_chunks_skipped > 0);
  CHECK(r->bulk_chunks_resent == 0);
  // ...so over both pulls every byte crossed the wire exactly once.
  CHECK(cut.bulk_bytes_received + r->bulk_bytes_received == total_bytes);
}

TEST_CASE("two clients pulling the same dataset at once both get identical copies") {
  sync_fixture fx;
  make_dataset(fx.src());
  files::temp_dir other("loom-cdc-dst2");
  auto server = fx.start();
  auto a = fx.client(), b = fx.client();
  result<sync_stats> ra = make_error(errc::internal, "not run"), rb = ra;
  std::thread ta([&] { ra = a.pull(server->endpoint(), fx.dataset, fx.dst()); });
  std::thread tb([&] { rb = b.pull(server->endpoint(), fx.dataset, other.path()); });
  ta.join();
  tb.join();
  REQUIRE_MESSAGE(ra.ok(), ra.err().to_string());
  REQUIRE_MESSAGE(rb.ok(), rb.err().to_string());
  CHECK(tree(fx.dst()) == tree(fx.src()));
  CHECK(tree(other.path()) == tree(fx.src()));
  CHECK(server->stats().sessions == 2);
}

TEST_CASE("a symlink planted in the receiving directory cannot redirect a published file") {
  sync_fixture fx;
  make_dataset(fx.src());
  files::temp_dir elsewhere("loom-cdc-elsewhere");
  fs::create_directory_symlink(elsewhere.path(), fx.dst() + "/docs");
  auto server = fx.start();
  auto client = fx.client();
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  CHECK(r.code() == errc::permission_denied);
  CHECK(fs::is_empty(elsewhere.path()));
}

TEST_CASE("a pull that wants only some files fetches just those, keeps them current and drops what it stops wanting") {
  sync_fixture fx;
  make_dataset(fx.src());
  auto server = fx.start();
  std::set<std::string> wanted = {"docs/a.txt", "small.json"};
  sync_client_options co;
  std::vector<std::string> not_wanted_seen;
  co.want = [&](const std::string& rel) { return wanted.count(rel) > 0; };
  co.accept = [&](const staged_version& v) {
    not_wanted_seen.assign(v.not_wanted.begin(), v.not_wanted.end());
    for (const char* f : {"docs/a.txt", "c.bin", "small.json", "empty"})
      CHECK(v.files.count(f) == wanted.count(f));  // the staged version holds what is wanted, no more
    return status{};
  };
  auto client = fx.client(co);
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(r.ok(), r.err().to_string());
  auto got = tree(fx.dst());
  CHECK(got.size() == 2);
  CHECK(got["docs/a.txt"] == crypto::sha256_hex(get(fx.src(), "docs/a.txt")));
  CHECK(r->files == 6);
  CHECK(r->files_not_wanted == 4);
  CHECK(not_wanted_seen.size() == 4);
  // Only a.txt's 3 MiB (and the tiny json) crossed the wire, not the 6.3 MiB dataset.
  CHECK(r->chunk_bytes_fetched < (3u << 20) + 4096);
  CHECK(r->chunk_bytes_fetched >= (3u << 20));

  // Unchanged: nothing moves. Then the wanted set changes: c.bin comes, a.txt goes.
  auto again = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE(again.ok());
  CHECK(again->files_updated == 0);
  CHECK(again->chunk_bytes_fetched == 0);
  wanted = {"c.bin", "small.json"};
  auto moved = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(moved.ok(), moved.err().to_string());
  got = tree(fx.dst());
  CHECK(got.size() == 2);
  CHECK(got.count("c.bin") == 1);
  CHECK(got.count("docs/a.txt") == 0);
  CHECK(moved->files_updated == 1);
  CHECK(moved->files_removed == 1);
  CHECK(moved->chunk_bytes_fetched < (1u << 20) + 4321 + 1);

  // The stat cache remembers only what is here: a later full pull fetches the rest.
  auto full = fx.client();
  auto all = full.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE(all.ok());
  CHECK(tree(fx.dst()) == tree(fx.src()));
  CHECK(all->files_updated == 4);
}
