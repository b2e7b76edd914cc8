#include "libs/export/gguf_gpt2.hpp"
#include "libs/export/quant.hpp"
#include "libs/export/testing.hpp"
#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>

using namespace loom;
using namespace loom::exporter;
using exporter::testing::temp_dir;

namespace {

// The value written for x in a tensor of type t, as the reader must return it
// (q8_0 is checked against its bound instead).
float encoded(float x, gguf_type t) { return t == gguf_type::f16 ? f16_to_f32(f32_to_f16(x)) : x; }

}  // namespace

TEST_CASE("a GPT-2 GGUF has llama.cpp's gpt2 tensor names, shapes and types") {
  const auto cfg = exporter::testing::tiny_config();
  const auto f32 = gguf_gpt2_tensors(cfg, gguf_type::f32);
  REQUIRE(f32.size() == 2 + 12 * 2 + 2);
  CHECK(f32[0].name == "token_embd.weight");
  CHECK(f32[0].ne == std::vector<std::uint64_t>{64, 260});  // real vocabulary rows only
  CHECK(f32[1].name == "position_embd.weight");
  CHECK(f32[1].ne == std::vector<std::uint64_t>{64, 16});
  CHECK(f32[2].name == "blk.0.attn_norm.weight");
  CHECK(f32[4].name == "blk.0.attn_qkv.weight");
  CHECK(f32[4].ne == std::vector<std::uint64_t>{64, 192});  // {n_embd, 3 n_embd}
  CHECK(f32[5].ne == std::vector<std::uint64_t>{192});
  CHECK(f32[6].name == "blk.0.attn_output.weight");
  CHECK(f32[8].name == "blk.0.ffn_norm.weight");
  CHECK(f32[10].name == "blk.0.ffn_up.weight");
  CHECK(f32[10].ne == std::vector<std::uint64_t>{64, 256});  // {n_embd, n_ff}
  CHECK(f32[12].name == "blk.0.ffn_down.weight");
  CHECK(f32[12].ne == std::vector<std::uint64_t>{256, 64});  // {n_ff, n_embd}
  CHECK(f32[13].name == "blk.0.ffn_down.bias");
  CHECK(f32[14].name == "blk.1.attn_norm.weight");
  CHECK(f32[26].name == "output_norm.weight");
  CHECK(f32[27].name == "output_norm.bias");
  for (const auto& t : f32) CHECK(t.name != "output.weight");  // tied to token_embd

  for (auto type : {gguf_type::f16, gguf_type::q8_0}) {
    for (const auto& t : gguf_gpt2_tensors(cfg, type)) {
      CAPTURE(t.name);
      const bool stays_f32 = t.ne.size() == 1 || t.name == "position_embd.weight";
      CHECK(t.type == (stays_f32 ? gguf_type::f32 : type));
    }
  }
  // Rows of 48 are not whole q8_0 blocks: those matrices fall back to f16.
  for (const auto& t : gguf_gpt2_tensors(exporter::testing::tiny_config(48), gguf_type::q8_0))
    if (t.ne.size() == 2 && t.name != "position_embd.weight")
      CHECK(t.type == (t.ne[0] % 32 == 0 ? gguf_type::q8_0 : gguf_type::f16));
}

TEST_CASE("a GPT-2 GGUF round-trips through our reader: f32 and f16 bit-exact, q8_0 within half a scale") {
  const auto cfg = exporter::testing::tiny_config();
  const auto tok = exporter::testing::tiny_tokenizer();
  const auto params = exporter::testing::tiny_params(cfg, 3);
  temp_dir tmp;
  for (auto type : {gguf_type::f32, gguf_type::f16, gguf_type::q8_0}) {
    CAPTURE(to_string(type));
    const auto path = tmp / ("model-" + std::string(to_string(type)) + ".gguf");
    REQUIRE(write_gguf(cfg, params, tok, type, path).ok());
    auto f = read_gguf(path);
    REQUIRE_MESSAGE(f.ok(), f.err().to_string());
    CHECK(f->version() == 3);
    CHECK(f->alignment() == 32);
    CHECK(f->data_start() % 32 == 0);

    const auto plan = gguf_gpt2_tensors(cfg, type);
    REQUIRE(f->tensors().size() == plan.size());
    double worst_ratio = 0;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const auto& t = f->tensors()[i];
      CAPTURE(plan[i].name);
      CHECK(t.name == plan[i].name);
      CHECK(t.ne == plan[i].ne);
      CHECK(t.type == plan[i].type);
      CHECK(t.offset % 32 == 0);
      const auto want = tensor_slice(cfg, params, plan[i].id, plan[i].layer);
      const auto got = dequantize(*f, t);
      REQUIRE(got.size() == want.size());
      if (t.type != gguf_type::q8_0) {
        std::size_t differ = 0;
        for (std::size_t k = 0; k < got.size(); ++k)
          differ += std::bit_cast<std::uint32_t>(got[k]) != std::bit_cast<std::uint32_t>(encoded(want[k], t.type));
        CHECK(differ == 0);
        continue;
      }
      const auto raw = f->data(t);
      for (std::size_t b = 0; b < got.size() / 32; ++b) {
        std::uint16_t d16;
        std::memcpy(&d16, raw.data() + b * q8_0_block_bytes, 2);
        const double d = f16_to_f32(d16);
        for (std::size_t k = b * 32; k < b * 32 + 32; ++k)
          if (d > 0) worst_ratio = std::max(worst_ratio, std::fabs(double(got[k]) - want[k]) / d);
          else REQUIRE(want[k] == 0.0f);
      }
    }
    if (type == gguf_type::q8_0) {
      CHECK(worst_ratio <= 0.5 + 1e-6);
      CHECK(worst_ratio > 0.4);  // the bound is nearly reached: quantisation happened
    }
    // f32 data is the parameters' own bytes: one f32 tensor's bytes, compared raw.
    const auto* lnf = f->find_tensor("output_norm.bias");
    REQUIRE(lnf);
    const auto want = tensor_slice(cfg, params, model::tensor_id::lnfb, -1);
    CHECK(std::memcmp(f->data(*lnf).data(), want.data(), want.size_bytes()) == 0);
  }
}

TEST_CASE("a GPT-2 GGUF carries llama.cpp's gpt2 metadata and the tokenizer") {
  const auto cfg = exporter::testing::tiny_config();
  const auto tok = exporter::testing::tiny_tokenizer();
  temp_dir tmp;
  REQUIRE(write_gguf(cfg, exporter::testing::tiny_params(cfg, 4), tok, gguf_type::q8_0, tmp / "m.gguf").ok());
  auto f = read_gguf(tmp / "m.gguf");
  REQUIRE(f.ok());
  const auto u32 = [&](const char* key) -> std::int64_t {
    const gguf_value* v = f->find(key);
    REQUIRE_MESSAGE(v, key);
    REQUIRE_MESSAGE(v->type == gguf_value_type::u32, key);
    return v->ints.at(0);
  };
  const auto str = [&](const char* key) -> std::string {
    const gguf_value* v = f->find(key);
    REQUIRE_MESSAGE(v, key);
    REQUIRE_MESSAGE(v->type == gguf_value_type::string, key);
    return v->strings.at(0);
  };
  CHECK(f->kv().front().key == "general.architecture");
  CHECK(str("general.architecture") == "gpt2");
  CHECK(str("general.name") == "edgeloom-gpt2");
  CHECK(u32("general.file_type") == 7);
  CHECK(u32("general.alignment") == 32);
  CHECK(u32("gpt2.context_length") == 16);
  CHECK(u32("gpt2.embedding_length") == 64);
  CHECK(u32("gpt2.feed_forward_length") == 256);
  CHECK(u32("gpt2.block_count") == 2);
  CHECK(u32("gpt2.attention.head_count") == 2);
  const gguf_value* eps = f->find("gpt2.attention.layer_norm_epsilon");
  REQUIRE(eps);
  CHECK(eps->type == gguf_value_type::f32);
  CHECK(eps->floats.at(0) == doctest::Approx(1e-5).epsilon(1e-6));
  CHECK(str("tokenizer.ggml.model") == "gpt2");
  CHECK(str("tokenizer.ggml.pre") == "gpt-2");
  CHECK(u32("tokenizer.ggml.bos_token_id") == 259);
  CHECK(u32("tokenizer.ggml.eos_token_id") == 259);

  const gguf_value* tokens = f->find("tokenizer.ggml.tokens");
  REQUIRE(tokens);
  CHECK(tokens->elem == gguf_value_type::string);
  REQUIRE(tokens->strings.size() == 260);
  CHECK(tokens->strings['a'] == "a");
  CHECK(tokens->strings[' '] == "\xC4\xA0");  // byte-level: space is U+0120
  CHECK(tokens->strings[258] == "\xC4\xA0the");
  CHECK(tokens->strings[259] == "<|endoftext|>");
  const gguf_value* types = f->find("tokenizer.ggml.token_type");
  REQUIRE(types);
  CHECK(types->elem == gguf_value_type::i32);
  REQUIRE(types->ints.size() == 260);
  CHECK(types->ints[0] == 1);
  CHECK(types->ints[259] == 3);  // control
  const gguf_value* merges = f->find("tokenizer.ggml.merges");
  REQUIRE(merges);
  CHECK(merges->strings == std::vector<std::string>{"t h", "th e", "\xC4\xA0 the"});
}

TEST_CASE("GGUF metadata of every value type round-trips through the writer and reader") {
  std::vector<gguf_kv> kv;
  const auto scalar = [](gguf_value_type t, std::int64_t i) {
    gguf_value v;
    v.type = v.elem = t;
    v.ints = {i};
    return v;
  };
  kv.push_back({"a.u8", scalar(gguf_value_type::u8, 250)});
  kv.push_back({"a.i8", scalar(gguf_value_type::i8, -100)});
  kv.push_back({"a.u16", scalar(gguf_value_type::u16, 65000)});
  kv.push_back({"a.i16", scalar(gguf_value_type::i16, -32000)});
  kv.push_back({"a.u32", gguf_value::u32(4000000000u)});
  kv.push_back({"a.i32", scalar(gguf_value_type::i32, -2000000000)});
  kv.push_back({"a.u64", scalar(gguf_value_type::u64, std::int64_t(1) << 60)});
  kv.push_back({"a.i64", scalar(gguf_value_type::i64, -(std::int64_t(1) << 60))});
  kv.push_back({"a.bool", scalar(gguf_value_type::boolean, 1)});
  kv.push_back({"a.f32", gguf_value::f32(0.25f)});
  gguf_value f64;
  f64.type = f64.elem = gguf_value_type::f64;
  f64.floats = {1.0 / 3};
  kv.push_back({"a.f64", f64});
  kv.push_back({"a.str", gguf_value::string("h\xC3\xA9llo")});
  kv.push_back({"a.strs", gguf_value::string_array({"x", "", "z z"})});
  kv.push_back({"a.i32s", gguf_value::i32_array({1, -2, 3})});
  kv.push_back({"a.empty", gguf_value::string_array({})});
  const std::vector<float> v = {1.5f, -2.0f, 3.25f};
  const std::vector<gguf_tensor_in> tensors = {{"t", {3}, gguf_type::f32, v}};
  temp_dir tmp;
  REQUIRE(write_gguf_file(tmp / "kv.gguf", kv, tensors).ok());
  auto f = read_gguf(tmp / "kv.gguf");
  REQUIRE_MESSAGE(f.ok(), f.err().to_string());
  REQUIRE(f->kv().size() == kv.size());
  for (std::size_t i = 0; i < kv.size(); ++i) {
    CAPTURE(kv[i].key);
    CHECK(f->kv()[i].key == kv[i].key);
    CHECK(f->kv()[i].value == kv[i].value);
  }
  CHECK(dequantize(*f, f->tensors()[0]) == v);
}

TEST_CASE("GGUF export refuses an existing file and leaves nothing when a tensor fails") {
  const auto cfg = exporter::testing::tiny_config();
  const auto tok = exporter::testing::tiny_tokenizer();
  auto params = exporter::testing::tiny_params(cfg, 5);
  temp_dir tmp;
  REQUIRE(files::write_atomic((tmp / "taken.gguf").string(), "mine").ok());
  auto st = write_gguf(cfg, params, tok, gguf_type::f16, tmp / "taken.gguf");
  REQUIRE(!st.ok());
  CHECK(st.code() == errc::already_exists);
  CHECK(st.err().message.find("taken.gguf") != std::string::npos);
  CHECK(files::read_file((tmp / "taken.gguf").string()).value() == "mine");

  gguf_options o;
  o.fault = [](std::string_view t) {
    return t == "blk.1.ffn_up.weight" ? status(make_error(errc::resource_exhausted, "injected: disk full")) : ok_status();
  };
  st = write_gguf(cfg, params, tok, gguf_type::q8_0, tmp / "new.gguf", o);
  CHECK(st.code() == errc::resource_exhausted);
  CHECK(tmp.entries() == std::set<std::string>{"taken.gguf"});  // no file, no temp file

  // A value f16 cannot hold, and a NaN: refused, naming the tensor and the index.
  const auto lay = model::make_param_layout(cfg);
  params[lay.offset(model::tensor_id::fcw) + 5] = 1e6f;
  st = write_gguf(cfg, params, tok, gguf_type::f16, tmp / "big.gguf");
  CHECK(st.code() == errc::invalid_argument);
  CHECK(st.err().message.find("blk.0.ffn_up.weight' value 5") != std::string::npos);
  params[lay.offset(model::tensor_id::fcw) + 5] = NAN;
  st = write_gguf(cfg, params, tok, gguf_type::f32, tmp / "nan.gguf");
  CHECK(st.code() == errc::invalid_argument);
  CHECK(st.err().message.find("not finite") != std::string::npos);
  CHECK(tmp.entries() == std::set<std::string>{"taken.gguf"});
}

TEST_CASE("GGUF export refuses parameters or a tokenizer that do not fit the config") {
  const auto cfg = exporter::testing::tiny_config();
  auto tok = exporter::testing::tiny_tokenizer();
  auto params = exporter::testing::tiny_params(cfg, 6);
  temp_dir tmp;
  auto short_params = std::span<const float>(params).first(params.size() - 1);
  auto st = write_gguf(cfg, short_params, tok, gguf_type::f32, tmp / "a.gguf");
  CHECK(st.code() == errc::invalid_argument);
  CHECK(st.err().message.find("parameter buffer") != std::string::npos);
  tok.specials = {"<|pad|>"};
  st = write_gguf(cfg, params, tok, gguf_type::f32, tmp / "a.gguf");
  CHECK(st.code() == errc::invalid_argument);
  CHECK(st.err().message.find("<|endoftext|>") != std::string::npos);
  tok.specials.clear();
  st = write_gguf(cfg, params, tok, gguf_type::f32, tmp / "a.gguf");
  CHECK(st.code() == errc::invalid_argument);
  CHECK(st.err().message.find("259 ordinary, 0 special") != std::string::npos);
  CHECK(tmp.entries().empty());
}
