#include "services/trainer/check/tensor_checks.hpp"

#include "libs/ckpt/gpt2_checkpoint.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

using namespace loom;
using namespace loom::modelcheck;

namespace {

constexpr model::gpt2_config cfg{2, 2, 8, 16, 50, 64};

// A model.safetensors as snapshot_io writes it (values k * 0.001), with
// `edit` applied to the tensors (and their buffers) before writing.
struct fixture {
  std::string dir;
  std::vector<std::vector<float>> data;
  std::vector<ckpt::tensor_view> views;
  ckpt::metadata meta{{"format", "loom-gpt2"}, {"layers", "2"}, {"heads", "2"}, {"channels", "8"},
                      {"max_seq_len", "16"}, {"vocab", "50"}, {"padded_vocab", "64"}};
  fixture() {
    char tmpl[] = "/tmp/modelcheck-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    for (int i = 0; i < model::num_tensors; ++i) {
      const auto id = static_cast<model::tensor_id>(i);
      auto shape = model::tensor_shape(cfg, id);
      std::size_t n = 1;
      for (auto d : shape) n *= d;
      data.emplace_back(n);
      for (std::size_t k = 0; k < n; ++k) data.back()[k] = 0.001f * static_cast<float>(k);
      views.push_back({std::string(model::tensor_name(id)), ckpt::dtype::F32, shape, nullptr, n * 4});
    }
  }
  ~fixture() { std::filesystem::remove_all(dir); }
  ckpt::safetensors_file write() {
    for (std::size_t i = 0; i < views.size(); ++i) views[i].data = data[i].data(), views[i].bytes = data[i].size() * 4;
    const std::string path = dir + "/model.safetensors";
    std::filesystem::remove(path);
    REQUIRE(ckpt::write_safetensors(path, views, meta).ok());
    auto f = ckpt::read_safetensors(path);
    REQUIRE(f.ok());
    return *f;
  }
  std::vector<float>& tensor(model::tensor_id id) { return data[static_cast<int>(id)]; }
};

}  // namespace

TEST_CASE("a checkpoint with every value finite and every shape as configured has no problems") {
  fixture fx;
  auto f = fx.write();
  auto c = ckpt::gpt2_config_from(f.meta(), "model.safetensors");
  REQUIRE(c.ok());
  CHECK(c->layers == 2);
  CHECK(c->padded_vocab == 64);
  CHECK(non_finite(f).empty());
  CHECK(shape_problems(f, cfg).empty());
  auto flat = ckpt::gpt2_flat_params(f, cfg, "model.safetensors").value();
  const auto lay = model::make_param_layout(cfg);
  REQUIRE(flat.size() == lay.total);
  CHECK(flat[lay.offset(model::tensor_id::qkvw) + 3] == doctest::Approx(0.003f));
}

TEST_CASE("the NaN scan names each tensor holding a NaN or an infinity, its first bad index and how many") {
  fixture fx;
  fx.tensor(model::tensor_id::qkvw)[117] = std::numeric_limits<float>::quiet_NaN();
  fx.tensor(model::tensor_id::qkvw)[200] = std::numeric_limits<float>::infinity();
  fx.tensor(model::tensor_id::lnfb)[2] = -std::numeric_limits<float>::infinity();
  auto problems = non_finite(fx.write());
  REQUIRE(problems.size() == 2);
  CHECK(problems[0] == "tensor lnfb: -Inf at index 2 (1 non-finite value)");
  CHECK(problems[1] == "tensor qkvw: NaN at index 117 (2 non-finite values)");
}

TEST_CASE("the shape check names a tensor of the wrong shape, a missing one and a foreign one") {
  fixture fx;
  fx.views[static_cast<int>(model::tensor_id::fcw)].shape = {2, 16, 8};  // [L, 4C, C] is [2, 32, 8]
  fx.tensor(model::tensor_id::fcw).resize(2 * 16 * 8);
  fx.views.erase(fx.views.begin() + static_cast<int>(model::tensor_id::lnfb));
  fx.data.erase(fx.data.begin() + static_cast<int>(model::tensor_id::lnfb));
  fx.views.push_back({"lm_head", ckpt::dtype::F32, {4}, nullptr, 16});
  fx.data.push_back(std::vector<float>(4));
  auto problems = shape_problems(fx.write(), cfg);
  REQUIRE(problems.size() == 3);
  CHECK(problems[0] == "tensor fcw has shape [2,16,8], the config says [2,32,8]");
  CHECK(problems[1] == "tensor lnfb is missing (want F32 [8])");
  CHECK(problems[2] == "tensor lm_head [4] is not a GPT-2 tensor");
}

TEST_CASE("a checkpoint whose metadata disagrees with the version's config is named field by field") {
  model::gpt2_config other = cfg;
  other.layers = 4;
  other.vocab = 60;
  auto d = config_differences(cfg, other);
  REQUIRE(d.size() == 2);
  CHECK(d[0] == "model.layers 2 (checkpoint) vs 4 (the version's config)");
  CHECK(d[1] == "model.vocab 50 (checkpoint) vs 60 (the version's config)");
  fixture fx;
  fx.meta.erase("heads");
  auto c = ckpt::gpt2_config_from(fx.write().meta(), "x/model.safetensors");
  REQUIRE_FALSE(c.ok());
  CHECK(c.err().message == "x/model.safetensors: metadata lacks \"heads\"");
}
