#include "libs/ckpt/safetensors.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/ckpt/testing.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

using namespace loom;
using namespace loom::ckpt;
namespace fs = std::filesystem;

namespace {

constexpr std::string_view key = "test-signing-key";
constexpr std::int64_t t0 = 1'700'000'000;

// Publishes a snapshot shaped like the trainer's: two safetensors files written
// in place by the caller plus a JSON state file. Data depends on the step only.
std::string publish_step(const std::string& root, std::uint64_t step) {
  std::mt19937 rng(static_cast<unsigned>(1000 + step));
  std::vector<float> w(64), m(64);
  for (auto& x : w) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  for (auto& x : m) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  snapshot_writer sw;
  REQUIRE(sw.begin(root, step).ok());
  std::vector<tensor_view> model = {{"wte", dtype::F32, {8, 8}, w.data(), w.size() * 4}};
  std::vector<tensor_view> opt = {{"wte.m", dtype::F32, {64}, m.data(), m.size() * 4}};
  REQUIRE(write_safetensors(sw.dir() + "/model.safetensors", model, {{"format", "pt"}}).ok());
  REQUIRE(write_safetensors(sw.dir() + "/optimizer.safetensors", opt).ok());
  REQUIRE(sw.add_existing("model.safetensors").ok());
  REQUIRE(sw.add_existing("optimizer.safetensors").ok());
  REQUIRE(sw.add_file("trainer_state.json", "{\"step\":" + std::to_string(step) + "}").ok());
  auto dir = sw.publish(key, t0 + static_cast<std::int64_t>(step));
  REQUIRE(dir.ok());
  return *dir;
}

std::string read(const std::string& p) {
  auto r = files::read_file(p);
  REQUIRE(r.ok());
  return *r;
}

void write(const std::string& p, const std::string& data) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << data;
}

std::set<std::string> entries(const std::string& root) {
  std::set<std::string> out;
  for (const auto& d : fs::directory_iterator(root)) out.insert(d.path().filename().string());
  return out;
}

bool any_warning_has(const loaded_snapshot& s, const std::string& a, const std::string& b = "",
                     const std::string& c = "") {
  for (const auto& w : s.warnings)
    if (w.find(a) != std::string::npos && w.find(b) != std::string::npos && w.find(c) != std::string::npos) return true;
  return false;
}

std::string all_warnings(const loaded_snapshot& s) {
  std::string out;
  for (const auto& w : s.warnings) out += w + "\n";
  return out;
}

}  // namespace

TEST_CASE("a published snapshot loads back verified with every file hashed") {
  testing::temp_dir tmp;
  const std::string root = tmp.path() + "/ckpt";
  publish_step(root, 1);
  auto dir = publish_step(root, 123);
  CHECK(dir == root + "/step-000123");
  CHECK(read(root + "/LATEST") == "step-000123\n");
  CHECK(entries(root) == std::set<std::string>{"LATEST", "step-000001", "step-000123"});

  auto s = load_latest(root, key);
  REQUIRE(s.ok());
  CHECK(s->step == 123);
  CHECK(s->dir == dir);
  CHECK(s->warnings.empty());
  REQUIRE(s->files.size() == 3);
  for (const auto& [name, e] : s->files) {
    const std::string data = read(dir + "/" + name);
    CHECK(e.bytes == data.size());
    CHECK(e.sha256_hex == crypto::sha256_hex(data));
  }
  CHECK(read(dir + "/trainer_state.json") == "{\"step\":123}");
  auto model = read_safetensors(dir + "/model.safetensors");
  REQUIRE(model.ok());
  CHECK(model->find("wte")->shape == std::vector<std::uint64_t>{8, 8});
}

TEST_CASE("a corrupted newest snapshot is refused with file and hashes named and the previous one is loaded") {
  struct corruption {
    const char* what;
    const char* file;
    void (*apply)(const std::string& dir);
  };
  const std::vector<corruption> cases = {
      {"flipped byte", "model.safetensors",
       [](const std::string& d) {
         std::string b = read(d + "/model.safetensors");
         b[b.size() - 5] = static_cast<char>(b[b.size() - 5] ^ 0x01);
         write(d + "/model.safetensors", b);
       }},
      {"truncated file", "optimizer.safetensors",
       [](const std::string& d) {
         std::string b = read(d + "/optimizer.safetensors");
         write(d + "/optimizer.safetensors", b.substr(0, b.size() - 1));
       }},
      {"edited safetensors header", "model.safetensors",
       [](const std::string& d) {
         std::string b = read(d + "/model.safetensors");
         auto at = b.find("\"F32\"");
         REQUIRE(at != std::string::npos);
         b.replace(at, 5, "\"I32\"");
         write(d + "/model.safetensors", b);
       }},
      {"missing file", "trainer_state.json", [](const std::string& d) { fs::remove(d + "/trainer_state.json"); }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    testing::temp_dir tmp;
    const std::string root = tmp.path();
    publish_step(root, 10);
    auto dir = publish_step(root, 20);
    auto before = load_latest(root, key);
    REQUIRE(before.ok());
    const std::string expected = before->files.at(c.file).sha256_hex;
    c.apply(dir);

    auto s = load_latest(root, key);
    REQUIRE(s.ok());
    CHECK(s->step == 10);
    CHECK(any_warning_has(*s, "REFUSED snapshot step-000020"));
    std::error_code ec;
    if (fs::exists(dir + "/" + c.file, ec)) {
      const std::string actual = crypto::sha256_hex(read(dir + "/" + c.file));
      CHECK_MESSAGE(any_warning_has(*s, std::string("step-000020/") + c.file, "expected " + expected, "actual " + actual),
                    all_warnings(*s));
    } else {
      CHECK_MESSAGE(any_warning_has(*s, std::string("step-000020/") + c.file, "missing", "expected sha256 " + expected),
                    all_warnings(*s));
    }
  }
}

TEST_CASE("an edited manifest fails its signature and the previous snapshot is loaded") {
  testing::temp_dir tmp;
  publish_step(tmp.path(), 1);
  auto dir = publish_step(tmp.path(), 2);
  std::string m = read(dir + "/MANIFEST.json");
  auto at = m.find("\"bytes\": ");
  REQUIRE(at != std::string::npos);
  m.insert(at + 9, "1");  // a larger size, as if to cover a swapped file
  write(dir + "/MANIFEST.json", m);

  auto s = load_latest(tmp.path(), key);
  REQUIRE(s.ok());
  CHECK(s->step == 1);
  CHECK(any_warning_has(*s, "step-000002: MANIFEST.json signature mismatch", "expected hmac-sha256 ", " actual "));
}

// Found by fuzz_snapshot (tests/fuzz): a signed manifest whose "format" was
// not a string made json::value throw out of verify_manifest, verify_snapshot
// and load_latest (a writer of another version, or a key holder's mistake,
// took down the trainer or the scheduler reading it).
TEST_CASE("a signed manifest whose format is not a string is refused as an unknown format") {
  testing::temp_dir tmp;
  publish_step(tmp.path(), 1);
  auto dir = publish_step(tmp.path(), 2);
  auto m = nlohmann::json::parse(read(dir + "/MANIFEST.json"));
  m["format"] = 3.25;
  m.erase("signature");
  m["signature"] = crypto::to_hex(crypto::as_view(crypto::hmac_sha256(key, m.dump())));  // as the writer signs
  write(dir + "/MANIFEST.json", m.dump(2) + "\n");

  CHECK(verify_manifest(dir, 2, key) == "step-000002: MANIFEST.json has an unknown format");
  auto problems = verify_snapshot(dir, 2, key);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "step-000002: MANIFEST.json has an unknown format");
  auto s = load_latest(tmp.path(), key);
  REQUIRE(s.ok());
  CHECK(s->step == 1);
  CHECK(any_warning_has(*s, "step-000002: MANIFEST.json has an unknown format"));
}

TEST_CASE("with the wrong key no snapshot verifies and load reports corruption") {
  testing::temp_dir tmp;
  publish_step(tmp.path(), 1);
  publish_step(tmp.path(), 2);
  auto s = load_latest(tmp.path(), "another-key");
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == errc::corruption);
  CHECK(s.err().message.find("step-000001: MANIFEST.json signature mismatch") != std::string::npos);
  CHECK(s.err().message.find("step-000002: MANIFEST.json signature mismatch") != std::string::npos);
  CHECK(load_latest(tmp.path() + "/nothing-here", key).code() == errc::not_found);
}

TEST_CASE("a snapshot left half-written in its temp directory is ignored and a retry replaces it") {
  testing::temp_dir tmp;
  publish_step(tmp.path(), 1);
  snapshot_writer crashed;
  REQUIRE(crashed.begin(tmp.path(), 2).ok());
  REQUIRE(crashed.add_file("model.safetensors", "half").ok());  // then the process dies

  auto s = load_latest(tmp.path(), key);
  REQUIRE(s.ok());
  CHECK(s->step == 1);
  CHECK(s->warnings.empty());
  CHECK(read(tmp.path() + "/LATEST") == "step-000001\n");

  publish_step(tmp.path(), 2);
  CHECK(entries(tmp.path()) == std::set<std::string>{"LATEST", "step-000001", "step-000002"});
  CHECK(load_latest(tmp.path(), key)->step == 2);
}

TEST_CASE("a snapshot renamed into place but never committed by LATEST is ignored and republished") {
  testing::temp_dir tmp;
  publish_step(tmp.path(), 1);
  publish_step(tmp.path(), 2);
  REQUIRE(files::write_atomic(tmp.path() + "/LATEST", "step-000001\n").ok());  // crash before LATEST moved

  auto s = load_latest(tmp.path(), key);
  REQUIRE(s.ok());
  CHECK(s->step == 1);
  CHECK(any_warning_has(*s, "step-000002 is newer than LATEST"));
  publish_step(tmp.path(), 2);
  CHECK(load_latest(tmp.path(), key)->step == 2);
}

TEST_CASE("publishing a step that is already committed fails and leaves LATEST alone") {
  testing::temp_dir tmp;
  publish_step(tmp.path(), 1);
  publish_step(tmp.path(), 2);
  snapshot_writer again;
  REQUIRE(again.begin(tmp.path(), 1).ok());
  REQUIRE(again.add_file("trainer_state.json", "{}").ok());
  auto r = again.publish(key, t0);
  CHECK(r.code() == errc::already_exists);
  CHECK(read(tmp.path() + "/LATEST") == "step-000002\n");
  CHECK(snapshot_writer().add_file("x", "y").code() == errc::invalid_argument);
  CHECK(again.add_file("../escape", "y").code() == errc::invalid_argument);
}

TEST_CASE("retention keeps exactly the last K verified snapshots and removes temp directories") {
  testing::temp_dir tmp;
  for (std::uint64_t step = 1; step <= 5; ++step) publish_step(tmp.path(), step);
  snapshot_writer stale;
  REQUIRE(stale.begin(tmp.path(), 6).ok());

  REQUIRE(retain(tmp.path(), 3, key).ok());
  CHECK(entries(tmp.path()) == std::set<std::string>{"LATEST", "step-000003", "step-000004", "step-000005"});
  CHECK(load_latest(tmp.path(), key)->step == 5);
  CHECK(retain(tmp.path(), 0, key).code() == errc::invalid_argument);
}

TEST_CASE("retention counts only verified snapshots and never deletes the one LATEST names") {
  testing::temp_dir tmp;
  for (std::uint64_t step = 1; step <= 4; ++step) publish_step(tmp.path(), step);
  fs::remove(tmp.path() + "/step-000004/trainer_state.json");

  REQUIRE(retain(tmp.path(), 2, key).ok());
  CHECK(entries(tmp.path()) == std::set<std::string>{"LATEST", "step-000002", "step-000003", "step-000004"});
  auto s = load_latest(tmp.path(), key);
  REQUIRE(s.ok());
  CHECK(s->step == 3);
}
