#include "libs/ckpt/gpt2_checkpoint.hpp"
#include "libs/ckpt/testing.hpp"
#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <filesystem>

using namespace loom;
using namespace loom::ckpt;
namespace fs = std::filesystem;

namespace {

constexpr std::string_view key = "test-signing-key";
constexpr std::int64_t t0 = 1'700'000'000;
constexpr model::gpt2_config tiny{2, 2, 8, 16, 50, 64};

// θ with value k * 0.001 at flat index k: every tensor's place is visible.
std::vector<float> ramp(const model::gpt2_config& c) {
  std::vector<float> theta(model::make_param_layout(c).total);
  for (std::size_t k = 0; k < theta.size(); ++k) theta[k] = 0.001f * static_cast<float>(k);
  return theta;
}

// The GPT-2 tensors of `c` written with `meta` to dir/model.safetensors, read back.
safetensors_file written(const std::string& dir, const model::gpt2_config& c, const std::vector<float>& theta,
                         const metadata& meta) {
  REQUIRE(write_safetensors(dir + "/model.safetensors", gpt2_tensors(c, theta), meta).ok());
  auto f = read_safetensors(dir + "/model.safetensors");
  REQUIRE(f.ok());
  return *f;
}

}  // namespace

TEST_CASE("a GPT-2 snapshot written and opened again gives back θ, the shape, the state and the extra files") {
  testing::temp_dir tmp;
  const std::string root = tmp.path() + "/checkpoints";
  const auto theta = ramp(tiny);
  std::vector<float> m(5, 0.5f);
  const std::vector<extra_file> extras = {
      {"optimizer.safetensors", {{"adamw.m", dtype::F32, {5}, m.data(), m.size() * 4}}, {{"steps_taken", "7"}}}};
  const std::string state = "{\n \"step\": 7\n}\n";
  auto dir = write_gpt2_snapshot(root, 7, {tiny, theta, state, extras}, key, t0);
  REQUIRE_MESSAGE(dir.ok(), dir.err().message);
  CHECK(*dir == root + "/step-000007");
  CHECK(*files::read_file(*dir + "/trainer_state.json") == state);

  for (const std::string& path : {root, *dir, *dir + "/"}) {
    auto snap = open_snapshot_at(path, key);
    REQUIRE_MESSAGE(snap.ok(), path);
    CHECK(snap->step == 7);
    CHECK(snap->files.count("model.safetensors") == 1);
    CHECK(snap->files.count("optimizer.safetensors") == 1);
    CHECK(snap->files.count("trainer_state.json") == 1);
    auto model = read_gpt2_model(*snap);
    REQUIRE(model.ok());
    CHECK(model->meta().at("format") == "loom-gpt2");
    auto c = gpt2_config_from(model->meta(), "m");
    REQUIRE(c.ok());
    CHECK(c->layers == 2);
    CHECK(c->channels == 8);
    CHECK(c->padded_vocab == 64);
    CHECK(gpt2_flat_params(*model, *c, "m").value() == theta);
  }
  CHECK(read_gpt2_params(root, key, tiny).value() == theta);
  CHECK(read_gpt2_params(root, "another key", tiny).code() == errc::corruption);
  CHECK(read_gpt2_params(tmp.path() + "/none", key, tiny).code() == errc::not_found);
}

TEST_CASE("the metadata is refused naming the file and the field when a size is missing, malformed or out of bounds") {
  const std::string file = "ckpt/step-000001/model.safetensors";
  CHECK(gpt2_config_from(gpt2_metadata(tiny), file).ok());
  struct bad_case {
    const char* field;
    const char* value;  // nullptr: the field is left out
    const char* message;
  };
  for (const bad_case& b : {
           bad_case{"heads", nullptr, "ckpt/step-000001/model.safetensors: metadata lacks \"heads\""},
           bad_case{"layers", "0", "ckpt/step-000001/model.safetensors: metadata \"layers\" is \"0\", not a size in "
                                   "[1, 16777216]"},
           bad_case{"vocab", "16777217", "ckpt/step-000001/model.safetensors: metadata \"vocab\" is \"16777217\", "
                                         "not a size in [1, 16777216]"},
           bad_case{"channels", "+8", "ckpt/step-000001/model.safetensors: metadata \"channels\" is \"+8\", not a "
                                      "size in [1, 16777216]"},
           bad_case{"channels", " 8", "ckpt/step-000001/model.safetensors: metadata \"channels\" is \" 8\", not a "
                                      "size in [1, 16777216]"},
           bad_case{"max_seq_len", "16x", "ckpt/step-000001/model.safetensors: metadata \"max_seq_len\" is \"16x\", "
                                          "not a size in [1, 16777216]"},
           bad_case{"padded_vocab", "", "ckpt/step-000001/model.safetensors: metadata \"padded_vocab\" is \"\", not "
                                        "a size in [1, 16777216]"},
           bad_case{"layers", "99999999999999999999", "ckpt/step-000001/model.safetensors: metadata \"layers\" is "
                                                      "\"99999999999999999999\", not a size in [1, 16777216]"},
       }) {
    metadata m = gpt2_metadata(tiny);
    if (b.value) m[b.field] = b.value;
    else m.erase(b.field);
    auto c = gpt2_config_from(m, file);
    REQUIRE_FALSE(c.ok());
    CHECK(c.code() == errc::corruption);
    CHECK(c.err().message == b.message);
  }
  // Each size in bounds, the shape still impossible: validate's reason, with the file.
  metadata m = gpt2_metadata(tiny);
  m["padded_vocab"] = "49";
  auto c = gpt2_config_from(m, file);
  REQUIRE_FALSE(c.ok());
  CHECK(c.err().message == file + ": gpt2_config: padded_vocab must be >= vocab");
}

TEST_CASE("flat θ is refused naming the tensor when one is missing or not the model's F32 shape") {
  testing::temp_dir tmp;
  const auto theta = ramp(tiny);
  model::gpt2_config wider = tiny;
  wider.channels = 16;
  auto f = written(tmp.path(), tiny, theta, {});  // no metadata: the caller says the shape
  CHECK(gpt2_flat_params(f, tiny, "x").value() == theta);
  auto other = gpt2_flat_params(f, wider, "x");
  REQUIRE_FALSE(other.ok());
  CHECK(other.code() == errc::invalid_argument);
  CHECK(other.err().message == "x: tensor \"wte\" is F32[64,8], the model needs F32[64,16]");

  auto views = gpt2_tensors(tiny, theta);
  views.erase(views.begin() + 4);  // qkvw
  REQUIRE(write_safetensors(tmp.path() + "/short.safetensors", views).ok());
  auto shorter = gpt2_flat_params(read_safetensors(tmp.path() + "/short.safetensors").value(), tiny, "short");
  CHECK(shorter.code() == errc::corruption);
  CHECK(shorter.err().message == "short: no tensor \"qkvw\"");

  std::vector<float> small(3);
  CHECK(gpt2_copy_params(f, tiny, "x", small).code() == errc::invalid_argument);
}

TEST_CASE("a snapshot that cannot be published, or has the wrong θ size, leaves no temp directory and no LATEST") {
  testing::temp_dir tmp;
  const std::string root = tmp.path() + "/checkpoints";
  const auto theta = ramp(tiny);
  std::vector<float> short_theta(theta.begin(), theta.end() - 1);
  auto wrong = write_gpt2_snapshot(root, 1, {tiny, short_theta, "{}", {}}, key, t0);
  CHECK(wrong.code() == errc::invalid_argument);
  REQUIRE(files::make_dirs(root + "/step-000002/x").ok());  // a step dir in the way: the rename fails
  auto blocked = write_gpt2_snapshot(root, 2, {tiny, theta, "{}", {}}, key, t0);
  CHECK_FALSE(blocked.ok());
  for (const auto& e : fs::directory_iterator(root)) CHECK(e.path().filename().string().rfind(".tmp-", 0) != 0);
  CHECK_FALSE(fs::exists(root + "/LATEST"));
}

TEST_CASE("a step directory that does not verify is refused listing its problems, not replaced by an older one") {
  testing::temp_dir tmp;
  const std::string root = tmp.path() + "/checkpoints";
  const auto theta = ramp(tiny);
  REQUIRE(write_gpt2_snapshot(root, 1, {tiny, theta, "{}", {}}, key, t0).ok());
  REQUIRE(write_gpt2_snapshot(root, 2, {tiny, theta, "{}", {}}, key, t0).ok());
  REQUIRE(files::write_atomic(root + "/step-000002/trainer_state.json", "{ }").ok());
  auto one = open_snapshot_at(root + "/step-000002", key);
  REQUIRE_FALSE(one.ok());
  CHECK(one.code() == errc::corruption);
  CHECK(one.err().message.find("trainer_state.json") != std::string::npos);
  auto newest = open_snapshot_at(root, key);  // the root falls back past it
  REQUIRE(newest.ok());
  CHECK(newest->step == 1);
  CHECK_FALSE(newest->warnings.empty());
}
