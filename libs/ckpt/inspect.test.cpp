// inspect_snapshot and check_manifest over real signed snapshots: the facts
// of a good one, every refusal (tampered, foreign key, missing, no step-N
// name, no model.safetensors), and the eval figures beside a stage's snapshots.
#include "libs/ckpt/inspect.hpp"
#include "libs/ckpt/safetensors.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/ckpt/testing.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <vector>

using namespace loom;
using namespace loom::ckpt;

namespace {

constexpr std::string_view key = "inspect-test-key";

// Publishes <root>/step-<step> with a real safetensors file `name` holding
// `value` repeated (verify_snapshot parses every .safetensors it lists).
std::string publish(const std::string& root, std::uint64_t step, float value, std::string_view with_key = key,
                    const std::string& name = "model.safetensors") {
  snapshot_writer w;
  REQUIRE(w.begin(root, step).ok());
  std::vector<float> p(64, value);
  std::vector<tensor_view> t = {{"wte", dtype::F32, {8, 8}, p.data(), p.size() * sizeof(float)}};
  REQUIRE(write_safetensors(w.dir() + "/" + name, t).ok());
  REQUIRE(w.add_existing(name).ok());
  REQUIRE(w.add_file("trainer_state.json", "{}").ok());
  auto d = w.publish(with_key, 1'700'000'000);
  REQUIRE(d.ok());
  return *d;
}

}  // namespace

TEST_CASE("a verified snapshot's facts are its step, its manifest's hash and its parameters' hash") {
  testing::temp_dir dir;
  const auto d = publish(dir.path() + "/stage/checkpoints", 12, 0.5f);
  auto f = inspect_snapshot(d, key);
  REQUIRE_MESSAGE(f.ok(), f.err().message);
  CHECK(f->step == 12);
  CHECK(f->params_sha256 == crypto::sha256_hex(files::read_file(d + "/model.safetensors").value()));
  CHECK(f->manifest_sha256 == crypto::sha256_hex(files::read_file(d + "/MANIFEST.json").value()));
  CHECK(f->eval.empty());
  CHECK(check_manifest(d, key).ok());
}

TEST_CASE("a tampered, foreign-signed, missing or misnamed snapshot is refused naming the directory") {
  testing::temp_dir dir;
  const auto d = publish(dir.path() + "/a", 3, 0.5f);
  {
    std::fstream io(d + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-4, std::ios::end);
    io.write("\x01\x02\x03\x04", 4);
  }
  auto tampered = inspect_snapshot(d, key);
  CHECK(tampered.code() == errc::corruption);
  CHECK(tampered.err().message.find("checkpoint " + d + " does not verify") != std::string::npos);
  CHECK(tampered.err().message.find("model.safetensors: sha256 mismatch") != std::string::npos);
  CHECK(check_manifest(d, key).ok());  // the manifest alone still verifies: no file is hashed

  const auto foreign = publish(dir.path() + "/b", 3, 1.0f, "another-key");
  CHECK(inspect_snapshot(foreign, key).code() == errc::corruption);
  auto foreign_manifest = check_manifest(foreign, key);
  CHECK(foreign_manifest.code() == errc::corruption);
  CHECK(foreign_manifest.err().message.find("signature mismatch") != std::string::npos);

  auto missing = inspect_snapshot(dir.path() + "/none/step-000003", key);
  CHECK(missing.code() == errc::not_found);
  CHECK(missing.err().message == "checkpoint " + dir.path() + "/none/step-000003 is not there");
  CHECK(check_manifest(dir.path() + "/none/step-000003", key).code() == errc::corruption);
  CHECK(inspect_snapshot(dir.path() + "/a", key).code() == errc::invalid_argument);
  CHECK(check_manifest(dir.path() + "/a", key).code() == errc::invalid_argument);

  const auto no_model = publish(dir.path() + "/c", 4, 1.0f, key, "weights.safetensors");
  auto none = inspect_snapshot(no_model, key);
  CHECK(none.code() == errc::corruption);
  CHECK(none.err().message.find("lists no model.safetensors") != std::string::npos);
}

TEST_CASE("the eval figures beside a stage's snapshots join its facts, and a torn eval.json gives none") {
  testing::temp_dir dir;
  const std::string stage = dir.path() + "/j1/dpo";
  const auto d = publish(stage + "/checkpoints", 30, 2.0f);
  REQUIRE(files::write_atomic(stage + "/eval.json", R"({"before":{"accuracy":0.5},"after":{"accuracy":0.9,"note":"x"}})")
              .ok());
  auto f = inspect_snapshot(d, key);
  REQUIRE(f.ok());
  CHECK(f->eval == std::map<std::string, double>{{"eval_after_accuracy", 0.9}, {"eval_before_accuracy", 0.5}});
  REQUIRE(files::write_atomic(stage + "/eval.json", "{\"before\": {\"accuracy\": 0.").ok());
  CHECK(stage_eval_beside(d).empty());
}
