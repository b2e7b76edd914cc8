// Datasets sealed at rest sync as their plaintext (plain_file.hpp): each side
// seals under its own data keys, so the bytes on disk never match, yet an edit
// still travels as the few chunks it touched, and the roots agree with a plain
// copy's. A sealed file changed on disk is refused naming it.
#include "libs/atrest/object.hpp"
#include "libs/atrest/sealed.hpp"
#include "libs/cdc/sync_fixture.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <vector>

using namespace loom;
using namespace loom::cdc;
using namespace loom::cdc::test;
namespace fs = std::filesystem;

namespace {

// This process's keys at rest for one test (readers find them as the services' do).
struct process_keys_for_test {
  files::temp_dir dir{"loom-cdc-keys"};
  std::shared_ptr<atrest::kek_store> keys;
  process_keys_for_test() {
    auto k = atrest::kek_store::open(dir.path() + "/atrest", {}, std::chrono::system_clock::now());
    REQUIRE_MESSAGE(k.ok(), k.err().to_string());
    keys = std::move(*k);
    atrest::set_process_keys(keys);
  }
  ~process_keys_for_test() { atrest::set_process_keys(nullptr); }
};

void put_sealed(const std::string& dir, const std::string& rel, std::string_view plain, atrest::kek_store& keys) {
  fs::create_directories(fs::path(dir + "/" + rel).parent_path());
  auto st = atrest::write_object(dir + "/" + rel, plain, &keys, std::chrono::system_clock::now());
  REQUIRE_MESSAGE(st.ok(), st.err().to_string());
}

std::string plain_of(const std::string& path) {
  auto r = atrest::read_object(path);
  REQUIRE_MESSAGE(r.ok(), r.err().to_string());
  return *r;
}

seal_policy all_but_manifest(std::shared_ptr<atrest::kek_store> keys) {
  return {std::move(keys), [](const std::string& rel) { return rel != "manifest.json"; }};
}

}  // namespace

TEST_CASE("a sealed dataset syncs as its plaintext: sealed again under the receiver's data keys, a 40-byte edit sends a few chunks") {
  process_keys_for_test pk;
  sync_fixture fx;
  std::string plain = pseudo_random(4u << 20, 7);
  put_sealed(fx.src(), "shard-000000.bin", plain, *pk.keys);
  put_sealed(fx.src(), "records.jsonl", "{\"messages\":[]}\n", *pk.keys);
  put(fx.src(), "manifest.json", "{\"format\":\"test\"}\n");
  auto server = fx.start();
  sync_client_options o;
  o.seal = all_but_manifest(pk.keys);
  // Before it publishes, every chunk is in the receiver's chunk store: none
  // of it lies there (or anywhere under .loom-sync) in the clear.
  int scanned = 0, packs = 0;
  std::vector<std::string> clear;
  o.accept = [&](const staged_version&) {
    for (const auto& e : fs::recursive_directory_iterator(fx.dst() + "/.loom-sync")) {
      if (!e.is_regular_file()) continue;
      ++scanned;
      packs += e.path().filename().string().starts_with("pack-") && e.path().extension() != ".idx";
      const std::string bytes = get("/", e.path().string().substr(1));
      for (std::size_t at : {std::size_t{1000}, std::size_t{2} << 20, (std::size_t{4} << 20) - 100})
        if (bytes.find(plain.substr(at, 64)) != std::string::npos) clear.push_back(e.path().string());
    }
    return ok_status();
  };
  auto client = fx.client(o);

  auto first = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(first.ok(), first.err().to_string());
  CHECK(packs >= 1);
  CHECK(scanned > packs);
  CHECK_MESSAGE(clear.empty(), "in the clear before publishing: " << (clear.empty() ? "" : clear.front()));
  const std::string got = fx.dst() + "/shard-000000.bin";
  CHECK(atrest::is_sealed_file(got));
  CHECK(atrest::is_sealed_file(fx.dst() + "/records.jsonl"));
  CHECK_FALSE(atrest::is_sealed_file(fx.dst() + "/manifest.json"));
  CHECK(plain_of(got) == plain);
  CHECK(get(fx.dst(), "shard-000000.bin") != get(fx.src(), "shard-000000.bin"));  // its own data key
  CHECK(get(fx.dst(), "shard-000000.bin").find(plain.substr(1000, 64)) == std::string::npos);
  CHECK(first->chunk_bytes_fetched <= plain.size() + 64);  // plaintext on the wire, not ciphertext

  // The same root as a plain copy of the plaintext: sealing is not part of a dataset's identity.
  files::temp_dir plain_copy("loom-cdc-plain");
  put(plain_copy.path(), "shard-000000.bin", plain);
  put(plain_copy.path(), "records.jsonl", "{\"messages\":[]}\n");
  put(plain_copy.path(), "manifest.json", "{\"format\":\"test\"}\n");
  auto src_m = build_manifest(fx.src()), dst_m = build_manifest(fx.dst()), plain_m = build_manifest(plain_copy.path());
  REQUIRE(src_m.ok());
  REQUIRE(dst_m.ok());
  REQUIRE(plain_m.ok());
  CHECK(src_m->root == plain_m->root);
  CHECK(dst_m->root == plain_m->root);

  // 40 bytes change in the middle; the sender's file is sealed anew (every
  // ciphertext byte differs), yet only the chunks around the edit travel.
  for (std::size_t i = 0; i < 40; ++i) plain[(2u << 20) + i] ^= 0x5a;
  put_sealed(fx.src(), "shard-000000.bin", plain, *pk.keys);
  auto edit = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(edit.ok(), edit.err().to_string());
  CHECK(edit->files_updated == 1);
  CHECK(edit->chunk_bytes_fetched < (512u << 10));
  CHECK(edit->chunks_reused > 0);  // read back out of the receiver's own sealed copy
  CHECK(plain_of(got) == plain);
  CHECK(atrest::is_sealed_file(got));
  MESSAGE("sealed 4 MiB file, 40-byte edit: " << edit->chunk_bytes_fetched << " chunk bytes fetched");

  auto again = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE(again.ok());
  CHECK(again->chunks_fetched == 0);
  CHECK(again->files_updated == 0);
}

TEST_CASE("a sealed file changed on the serving side is refused naming it, and the receiver keeps what it had") {
  process_keys_for_test pk;
  sync_fixture fx;
  const std::string plain = pseudo_random(1u << 20, 9);
  put_sealed(fx.src(), "shard-000000.bin", plain, *pk.keys);
  auto server = fx.start();
  sync_client_options o;
  o.seal = all_but_manifest(pk.keys);
  auto client = fx.client(o);
  REQUIRE(client.pull(server->endpoint(), fx.dataset, fx.dst()).ok());

  std::string sealed = get(fx.src(), "shard-000000.bin");
  sealed[sealed.size() / 2] ^= 0x01;
  put(fx.src(), "shard-000000.bin", sealed);
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_FALSE(r.ok());
  INFO(r.err().to_string());
  CHECK(r.err().message.find("shard-000000.bin") != std::string::npos);
  CHECK(r.err().message.find("authentication") != std::string::npos);
  CHECK(plain_of(fx.dst() + "/shard-000000.bin") == plain);
}

TEST_CASE("without a seal policy a sealed dataset arrives plain, with the same root") {
  process_keys_for_test pk;
  sync_fixture fx;
  const std::string plain = pseudo_random(300000, 11);
  put_sealed(fx.src(), "shard-000000.bin", plain, *pk.keys);
  auto server = fx.start();
  auto client = fx.client();
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(r.ok(), r.err().to_string());
  CHECK_FALSE(atrest::is_sealed_file(fx.dst() + "/shard-000000.bin"));
  CHECK(get(fx.dst(), "shard-000000.bin") == plain);
}

TEST_CASE("a sealed pull cut off inside a pack leaves that pack sealed in transit, and the next pull resumes it") {
  process_keys_for_test pk;
  sync_fixture fx;
  std::string plain = pseudo_random(12u << 20, 11);
  put_sealed(fx.src(), "shard-000000.bin", plain, *pk.keys);
  sync_client_options o;
  o.seal = all_but_manifest(pk.keys);
  o.pack_bytes = 4u << 20;
  o.reply_timeout = std::chrono::milliseconds(1000);
  auto client = fx.client(o);
  {
    sync_server_options so;
    so.bulk_chunk_bytes = 1u << 20;
    so.test_stop_after_bulk_chunks = 6;  // dies inside the second pack
    so.reply_timeout = std::chrono::milliseconds(1000);
    auto server = fx.start(so);
    CHECK(client.pull(server->endpoint(), fx.dataset, fx.dst()).code() == errc::unavailable);
  }
  // What the cut left behind: a partial pack in .loom-sync/incoming, its
  // received pieces sealed; nothing of the plaintext anywhere under .loom-sync.
  std::uint64_t partial_bytes = 0;
  std::vector<std::string> clear;
  for (const auto& e : fs::recursive_directory_iterator(fx.dst() + "/.loom-sync")) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    if (name.ends_with(".part")) partial_bytes += e.file_size();
    const std::string bytes = get("/", e.path().string().substr(1));
    for (std::size_t at = 0; at + 64 < plain.size(); at += 256u << 10)
      if (bytes.find(plain.substr(at, 64)) != std::string::npos) {
        clear.push_back(e.path().string());
        break;
      }
  }
  CHECK(partial_bytes > (1u << 20));
  CHECK_MESSAGE(clear.empty(), "in the clear after the cut: " << (clear.empty() ? "" : clear.front()));

  sync_server_options so;
  so.bulk_chunk_bytes = 1u << 20;
  auto server = fx.start(so);
  auto r = client.pull(server->endpoint(), fx.dataset, fx.dst());
  REQUIRE_MESSAGE(r.ok(), r.err().to_string());
  CHECK(r->bulk_chunks_skipped > 0);  // the sealed partial was resumed, not fetched again
  CHECK(plain_of(fx.dst() + "/shard-000000.bin") == plain);
  CHECK_FALSE(fs::exists(fx.dst() + "/.loom-sync/incoming"));
}
