#include "libs/export/hf_dir.hpp"
#include "libs/export/testing.hpp"
#include "libs/ckpt/safetensors.hpp"
#include "libs/files/files.hpp"
#include "libs/model/hf_names.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstring>

using namespace loom;
using namespace loom::exporter;
using exporter::testing::temp_dir;
using json = nlohmann::json;

namespace {

json read_json(const std::filesystem::path& p) {
  auto text = files::read_file(p.string());
  REQUIRE_MESSAGE(text.ok(), p.string());
  return json::parse(*text);
}

const std::set<std::string> hf_files = {"config.json", "generation_config.json", "model.safetensors",
                                        "tokenizer.json", "tokenizer_config.json"};

}  // namespace

TEST_CASE("an HF export's config.json describes a GPT2LMHeadModel of the model's shape") {
  const auto cfg = exporter::testing::tiny_config();
  temp_dir tmp;
  REQUIRE(write_hf_dir(cfg, exporter::testing::tiny_params(cfg, 1), exporter::testing::tiny_tokenizer(), tmp / "hf").ok());
  std::set<std::string> got;
  for (const auto& e : std::filesystem::directory_iterator(tmp / "hf")) got.insert(e.path().filename().string());
  CHECK(got == hf_files);

  const json c = read_json(tmp / "hf" / "config.json");
  CHECK(c["architectures"] == json::array({"GPT2LMHeadModel"}));
  CHECK(c["model_type"] == "gpt2");
  CHECK(c["vocab_size"] == 260);  // the real vocabulary, not the padded 320
  CHECK(c["n_positions"] == 16);
  CHECK(c["n_embd"] == 64);
  CHECK(c["n_layer"] == 2);
  CHECK(c["n_head"] == 2);
  CHECK(c["n_inner"].is_null());
  CHECK(c["activation_function"] == "gelu_new");
  CHECK(c["layer_norm_epsilon"] == 1e-5);
  CHECK(c["tie_word_embeddings"] == true);
  CHECK(c["bos_token_id"] == 259);
  CHECK(c["eos_token_id"] == 259);
  CHECK(c["torch_dtype"] == "float32");
  const json g = read_json(tmp / "hf" / "generation_config.json");
  CHECK(g["bos_token_id"] == 259);
  CHECK(g["eos_token_id"] == 259);
  const json t = read_json(tmp / "hf" / "tokenizer_config.json");
  CHECK(t["eos_token"] == "<|endoftext|>");
  CHECK(t["model_max_length"] == 16);
}

TEST_CASE("an HF export's model.safetensors holds HF's names, shapes and Conv1D layouts") {
  const auto cfg = exporter::testing::tiny_config();
  const auto params = exporter::testing::tiny_params(cfg, 2);
  temp_dir tmp;
  REQUIRE(write_hf_dir(cfg, params, exporter::testing::tiny_tokenizer(), tmp / "hf").ok());
  auto f = ckpt::read_safetensors((tmp / "hf" / "model.safetensors").string());
  REQUIRE_MESSAGE(f.ok(), f.err().to_string());
  CHECK(f->meta() == ckpt::metadata{{"format", "pt"}});
  const auto want = model::hf_gpt2_tensors(cfg);
  CHECK(f->tensors().size() == want.size());
  CHECK(f->find("lm_head.weight") == nullptr);  // tied
  CHECK(f->find("transformer.wte.weight")->shape == std::vector<std::uint64_t>{260, 64});
  CHECK(f->find("transformer.h.1.attn.c_attn.weight")->shape == std::vector<std::uint64_t>{64, 192});
  CHECK(f->find("transformer.h.1.mlp.c_proj.weight")->shape == std::vector<std::uint64_t>{256, 64});
  for (const auto& t : want) {
    CAPTURE(t.name);
    const ckpt::tensor_info* got = f->find(t.name);
    REQUIRE(got);
    CHECK(got->type == ckpt::dtype::F32);
    CHECK(got->shape == t.shape);
    std::vector<float> expect(t.count());
    model::copy_to_hf(cfg, t, params, expect);
    REQUIRE(got->data.size() == expect.size() * 4);
    CHECK(std::memcmp(got->data.data(), expect.data(), got->data.size()) == 0);
  }
  // Conv1D is (in, out): c_attn.weight[i][j] is our qkvw[layer][j][i].
  const auto lay = model::make_param_layout(cfg);
  const float* qkvw1 = params.data() + lay.offset(model::tensor_id::qkvw) + 192 * 64;
  const auto* c_attn = reinterpret_cast<const float*>(f->find("transformer.h.1.attn.c_attn.weight")->data.data());
  for (int i : {0, 5, 63})
    for (int j : {0, 70, 191}) CHECK(c_attn[i * 192 + j] == qkvw1[j * 64 + i]);
}

TEST_CASE("an HF export's tokenizer.json reads back as the same byte-level BPE with GPT-2's pipeline") {
  const auto cfg = exporter::testing::tiny_config();
  const auto tok = exporter::testing::tiny_tokenizer();
  temp_dir tmp;
  REQUIRE(write_hf_dir(cfg, exporter::testing::tiny_params(cfg, 1), tok, tmp / "hf").ok());
  auto text = files::read_file((tmp / "hf" / "tokenizer.json").string());
  REQUIRE(text.ok());
  auto back = tokenizer::parse_hf_json(*text, "tokenizer.json");
  REQUIRE_MESSAGE(back.ok(), back.err().to_string());
  CHECK(back->tokens == tok.tokens);
  CHECK(back->specials == tok.specials);
  REQUIRE(back->merges.size() == tok.merges.size());
  for (std::size_t i = 0; i < tok.merges.size(); ++i) {
    CHECK(back->merges[i].left == tok.merges[i].left);
    CHECK(back->merges[i].right == tok.merges[i].right);
  }
  const json j = json::parse(*text);
  CHECK(j["pre_tokenizer"]["type"] == "ByteLevel");
  CHECK(j["pre_tokenizer"]["add_prefix_space"] == false);
  CHECK(j["post_processor"]["type"] == "ByteLevel");
  CHECK(j["decoder"]["type"] == "ByteLevel");
  CHECK(j["model"]["type"] == "BPE");
  CHECK(j["model"]["vocab"]["\xC4\xA0the"] == 258);
  CHECK(j["added_tokens"][0]["content"] == "<|endoftext|>");
  CHECK(j["added_tokens"][0]["id"] == 259);
  CHECK(j["added_tokens"][0]["special"] == true);
}

TEST_CASE("an HF export refuses a non-empty output directory and fills an empty one") {
  const auto cfg = exporter::testing::tiny_config();
  const auto params = exporter::testing::tiny_params(cfg, 1);
  const auto tok = exporter::testing::tiny_tokenizer();
  temp_dir tmp;
  std::filesystem::create_directory(tmp / "full");
  REQUIRE(files::write_atomic((tmp / "full" / "notes.txt").string(), "keep me").ok());
  auto st = write_hf_dir(cfg, params, tok, tmp / "full");
  REQUIRE(!st.ok());
  CHECK(st.code() == errc::already_exists);
  CHECK(st.err().message.find((tmp / "full").string() + " is a directory that is not empty") != std::string::npos);
  CHECK(files::read_file((tmp / "full" / "notes.txt").string()).value() == "keep me");

  REQUIRE(files::write_atomic((tmp / "plain").string(), "x").ok());
  CHECK(write_hf_dir(cfg, params, tok, tmp / "plain").code() == errc::already_exists);

  std::filesystem::create_directory(tmp / "empty");
  REQUIRE(write_hf_dir(cfg, params, tok, tmp / "empty").ok());
  CHECK(std::filesystem::exists(tmp / "empty" / "model.safetensors"));
  REQUIRE(write_hf_dir(cfg, params, tok, tmp / "a" / "b" / "new").ok());  // parents made
  REQUIRE(write_hf_dir(cfg, params, tok, (tmp / "slash").string() + "/").ok());
  CHECK(std::filesystem::exists(tmp / "slash" / "config.json"));
  CHECK(tmp.entries() == std::set<std::string>{"full", "plain", "empty", "a", "slash"});  // no temp dirs left
}

TEST_CASE("an HF export that fails at any file leaves nothing in or beside the output directory") {
  const auto cfg = exporter::testing::tiny_config();
  const auto params = exporter::testing::tiny_params(cfg, 1);
  const auto tok = exporter::testing::tiny_tokenizer();
  for (const auto& failing : hf_files) {
    CAPTURE(failing);
    temp_dir tmp;
    hf_options o;
    std::vector<std::string> seen;
    o.fault = [&](std::string_view file) {
      seen.emplace_back(file);
      return file == failing ? status(make_error(errc::resource_exhausted, "injected: disk full")) : ok_status();
    };
    auto st = write_hf_dir(cfg, params, tok, tmp / "out", o);
    CHECK(st.code() == errc::resource_exhausted);
    CHECK(seen.back() == failing);
    CHECK(tmp.entries().empty());  // neither out nor a temp directory
    // Into an existing empty directory: it stays empty.
    std::filesystem::create_directory(tmp / "out");
    CHECK(write_hf_dir(cfg, params, tok, tmp / "out", o).code() == errc::resource_exhausted);
    CHECK(std::filesystem::is_empty(tmp / "out"));
    CHECK(tmp.entries() == std::set<std::string>{"out"});
  }
}

TEST_CASE("an HF export refuses inputs that do not fit and creates nothing") {
  const auto cfg = exporter::testing::tiny_config();
  const auto params = exporter::testing::tiny_params(cfg, 1);
  auto tok = exporter::testing::tiny_tokenizer();
  temp_dir tmp;
  auto st = write_hf_dir(cfg, std::span<const float>(params).first(10), tok, tmp / "out");
  CHECK(st.code() == errc::invalid_argument);
  tok.tokens.pop_back();
  st = write_hf_dir(cfg, params, tok, tmp / "out");
  CHECK(st.code() == errc::invalid_argument);
  CHECK(st.err().message.find("model's vocab is 260") != std::string::npos);
  model::gpt2_config bad = cfg;
  bad.heads = 3;
  CHECK(write_hf_dir(bad, params, exporter::testing::tiny_tokenizer(), tmp / "out").code() == errc::invalid_argument);
  CHECK(tmp.entries().empty());
}
