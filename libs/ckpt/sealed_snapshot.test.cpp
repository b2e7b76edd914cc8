// Checkpoints sealed at rest (issue 32 item 3): every file of a sealed GPT-2
// snapshot is sealed, its manifest lists the plaintext's hashes (those of a
// plain snapshot of the same numbers) marked "sealed", and it reads back
// bit-identical; a changed byte is refused naming the file and the chunk,
// and loading falls back to the previous snapshot; a plain file put in a
// sealed one's place is refused though its hash matches; a process without
// keys is told which file needs them; a 30-day rotation by the manifests'
// dates seals new snapshots under a new KEK and leaves old ones untouched.
#include "libs/atrest/kek_store.hpp"
#include "libs/atrest/object.hpp"
#include "libs/atrest/sealed.hpp"
#include "libs/ckpt/gpt2_checkpoint.hpp"
#include "libs/ckpt/testing.hpp"
#include "libs/files/files.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace loom;
using namespace loom::ckpt;

namespace {

constexpr std::string_view key = "test-signing-key";
constexpr std::int64_t t0 = 1'700'000'000;
constexpr model::gpt2_config tiny{2, 2, 8, 16, 50, 64};
constexpr std::int64_t day = 86400;

std::vector<float> ramp(const model::gpt2_config& c, float scale) {
  std::vector<float> theta(model::make_param_layout(c).total);
  for (std::size_t k = 0; k < theta.size(); ++k) theta[k] = scale * static_cast<float>(k);
  return theta;
}

// The process's keys for one test: `keys`, cleared again at scope exit.
struct process_keys_scope {
  explicit process_keys_scope(atrest::kek_store* k) {
    atrest::set_process_keys(std::shared_ptr<atrest::kek_store>(k, [](atrest::kek_store*) {}));
  }
  ~process_keys_scope() { atrest::set_process_keys(nullptr); }
};

struct fixture {
  testing::temp_dir tmp;
  std::unique_ptr<atrest::kek_store> keys;
  std::string root;
  std::vector<float> m = std::vector<float>(5, 0.25f);
  std::vector<extra_file> extras;
  fixture() : root(tmp.path() + "/checkpoints") {
    auto k = atrest::kek_store::open(tmp.path() + "/keys", {}, atrest::sys_time{} + std::chrono::seconds(t0));
    REQUIRE(k.ok());
    keys = std::move(*k);
    extras = {{"optimizer.safetensors", {{"adamw.m", dtype::F32, {5}, m.data(), m.size() * 4}}, {{"steps_taken", "3"}}}};
  }
  std::string write(const std::string& at, std::uint64_t step, const std::vector<float>& theta, atrest::kek_store* seal,
                    std::int64_t when = t0) {
    auto dir = write_gpt2_snapshot(at, step, {tiny, theta, "{\"step\": " + std::to_string(step) + "}\n", extras, seal},
                                   key, when);
    REQUIRE_MESSAGE(dir.ok(), dir.err().message);
    return *dir;
  }
};

nlohmann::json manifest_of(const std::string& dir) {
  return nlohmann::json::parse(files::read_file(dir + "/MANIFEST.json").value());
}

std::uint32_t kek_version_of(const std::string& path) {
  auto b = files::read_file(path).value();
  const auto* h = reinterpret_cast<const unsigned char*>(b.data());
  return (std::uint32_t{h[12]} << 24) | (std::uint32_t{h[13]} << 16) | (std::uint32_t{h[14]} << 8) | h[15];
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

}  // namespace

TEST_CASE("a sealed GPT-2 snapshot lists the plain one's hashes, marked sealed, and reads back bit-identical") {
  fixture f;
  const auto theta = ramp(tiny, 0.001f);
  const std::string plain = f.write(f.tmp.path() + "/plain", 3, theta, nullptr);
  const std::string sealed = f.write(f.root, 3, theta, f.keys.get());
  const auto mp = manifest_of(plain), ms = manifest_of(sealed);
  for (const char* name : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"}) {
    CAPTURE(name);
    CHECK(atrest::is_sealed_file(sealed + "/" + name));
    CHECK_FALSE(atrest::is_sealed_file(plain + "/" + name));
    CHECK(ms["files"][name]["sha256"] == mp["files"][name]["sha256"]);
    CHECK(ms["files"][name]["bytes"] == mp["files"][name]["bytes"]);
    CHECK(ms["files"][name]["sealed"] == true);
    CHECK_FALSE(mp["files"][name].contains("sealed"));
  }
  process_keys_scope scope(f.keys.get());
  CHECK_MESSAGE(verify_snapshot(sealed, 3, key).empty(), joined(verify_snapshot(sealed, 3, key)));
  auto back = read_gpt2_params(f.root, key, tiny);
  REQUIRE_MESSAGE(back.ok(), back.err().message);
  CHECK(std::memcmp(back->data(), theta.data(), theta.size() * sizeof(float)) == 0);
  auto state = atrest::read_object(sealed + "/trainer_state.json");
  REQUIRE(state.ok());
  CHECK(*state == "{\"step\": 3}\n");
}

TEST_CASE("a changed, swapped or keyless sealed checkpoint file is refused naming the file") {
  fixture f;
  f.write(f.root, 2, ramp(tiny, 0.002f), f.keys.get());
  const std::string dir = f.write(f.root, 3, ramp(tiny, 0.003f), f.keys.get());
  const std::string model = dir + "/model.safetensors";
  process_keys_scope scope(f.keys.get());

  SUBCASE("a flipped ciphertext byte: refused, and loading falls back to step 2") {
    std::string bytes = files::read_file(model).value();
    bytes[atrest::sealed_header_size + 40] ^= 0x20;
    REQUIRE(files::write_atomic(model, bytes).ok());
    const auto problems = joined(verify_snapshot(dir, 3, key));
    CHECK(contains(problems, "step-000003/model.safetensors: "));
    CHECK(contains(problems, "chunk 0"));
    auto snap = load_latest(f.root, key);
    REQUIRE(snap.ok());
    CHECK(snap->step == 2);
    CHECK(contains(joined(snap->warnings), "REFUSED snapshot step-000003"));
  }
  SUBCASE("the plain bytes put in place of the sealed file: same hash, still refused") {
    auto plain = atrest::read_object(model);
    REQUIRE(plain.ok());
    REQUIRE(files::write_atomic(model, *plain).ok());
    const auto problems = joined(verify_snapshot(dir, 3, key));
    CHECK(contains(problems, "step-000003/model.safetensors: is not sealed at rest, but the signed manifest says"));
  }
  SUBCASE("no keys in this process") {
    atrest::set_process_keys(nullptr);
    const auto problems = joined(verify_snapshot(dir, 3, key));
    CHECK(contains(problems, model + " is sealed at rest, and this process has no at-rest key directory"));
  }
  SUBCASE("another deployment's keys") {
    auto other = atrest::kek_store::open(f.tmp.path() + "/other", {}, atrest::sys_time{} + std::chrono::seconds(t0));
    REQUIRE(other.ok());
    atrest::set_process_keys(std::move(*other));
    const auto problems = joined(verify_snapshot(dir, 3, key));
    CHECK(contains(problems, "does not unwrap"));
  }
}

TEST_CASE("snapshots 31 days apart are sealed under two KEKs and the older stays untouched and readable") {
  fixture f;
  const std::string a = f.write(f.root, 1, ramp(tiny, 0.001f), f.keys.get(), t0);
  const std::string a_model = files::read_file(a + "/model.safetensors").value();
  const std::string b = f.write(f.root, 2, ramp(tiny, 0.002f), f.keys.get(), t0 + 29 * day);
  const std::string c = f.write(f.root, 3, ramp(tiny, 0.003f), f.keys.get(), t0 + 31 * day);
  CHECK(kek_version_of(a + "/model.safetensors") == 1);
  CHECK(kek_version_of(b + "/model.safetensors") == 1);
  CHECK(kek_version_of(c + "/model.safetensors") == 2);
  CHECK(files::read_file(a + "/model.safetensors").value() == a_model);
  // A reader opening the key directory afresh, as another process would.
  atrest::kek_options reader;
  reader.create = false;
  auto fresh = atrest::kek_store::open(f.tmp.path() + "/keys", reader, atrest::sys_time{} + std::chrono::seconds(t0));
  REQUIRE(fresh.ok());
  atrest::set_process_keys(std::move(*fresh));
  CHECK(verify_snapshot(a, 1, key).empty());
  CHECK(verify_snapshot(c, 3, key).empty());
  atrest::set_process_keys(nullptr);
}
