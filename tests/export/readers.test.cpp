// Exported files read by outside implementations, each in its own process:
// tokenizer.json by Hugging Face's tokenizers.js (npm @huggingface/tokenizers)
// and GGUF files by Hugging Face's GGUF parser (npm @huggingface/gguf, via
// gguf_oracle.js). Both come from scripts/install-vocab; without them the
// tests fail. The model is a tiny GPT-2 over GPT-2's real 50,257-token
// vocabulary. Each comparison lists what disagrees, and a negative control
// shows that a damaged file is reported.
#include "libs/export/gguf_gpt2.hpp"
#include "libs/export/hf_dir.hpp"
#include "libs/export/quant.hpp"
#include "libs/export/testing.hpp"
#include "libs/files/files.hpp"
#include "tests/support/harness.hpp"
#include "tests/tokenizer/corpus.hpp"
#include "tests/tokenizer_train/common.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <bit>
#include <cmath>
#include <cstring>

using namespace loom;
using namespace loom::exporter;
using json = nlohmann::json;

namespace {

constexpr const char* npm_modules = "/usr/local/lib/edgeloom/npm/node_modules";
// L = 2, NH = 2, C = 32 (one q8_0 block per row), maxT = 32, GPT-2's vocabulary padded to 50304.
constexpr model::gpt2_config cfg{2, 2, 32, 32, 50257, 50304};

struct gpt2_tokenizer {
  tokenizer::bpe bpe;
  tokenizer::bpe_spec spec;
};

const gpt2_tokenizer& gpt2() {
  static const gpt2_tokenizer t = [] {
    auto b = tokenizer::bpe::load_gpt2();
    REQUIRE_MESSAGE(b.ok(), b.err().to_string() << " (scripts/install-vocab installs it)");
    auto s = tokenizer::spec_from_ranks(*b);
    REQUIRE(s.ok());
    return gpt2_tokenizer{*b, *s};
  }();
  return t;
}

test::run_result node(const std::vector<std::string>& args) {
  ::setenv("NODE_PATH", npm_modules, 1);
  std::vector<std::string> argv = {"/usr/bin/env", "node"};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::run(argv, std::chrono::seconds(120));
}

// ---- tokenizer.json under tokenizers.js ----------------------------------

std::vector<std::string> documents() {
  std::vector<std::string> docs = {
      "Hello world",
      "The quick brown fox jumps over the lazy dog.",
      "I'm sure they'll say it's the dog's, we've seen what you'd do",
      "   leading spaces and trailing   ",
      "tabs\tand\nnewlines\r\n\n\nand  double  spaces",
      "numbers 1234567890 3.14159 -42 1e-5 0x7FFF",
      "Ünïcödé naïve café — €12,50; 日本語のテキスト; Ελληνικά; русский текст",
      "emoji 🚀🚀👍🏽 and symbols ©®™ ∑∫√",
      "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n",
      "",
  };
  std::mt19937_64 rng(0xE7);
  for (int i = 0; i < 300; ++i) docs.push_back(test::tok_train::random_text(rng, 200));
  return docs;
}

// Documents whose ids from tokenizers.js (reading `tokenizer_json`) differ
// from our GPT-2 encoder's, as "document N: ..." lines.
std::vector<std::string> tokenizer_disagreements(const std::string& tokenizer_json, const std::vector<std::string>& docs) {
  files::temp_dir dir("loom-export-tok");
  std::string in;
  for (const auto& d : docs) test::tok::append_frame(in, d);
  REQUIRE(files::write_atomic(dir.path() + "/in.bin", in).ok());
  auto r = node({std::string(LOOM_TOKENIZER_TRAIN_TEST_DIR) + "/hf_oracle.js", tokenizer_json, dir.path() + "/in.bin",
                 dir.path() + "/out.bin"});
  REQUIRE_MESSAGE(r.code == 0, "hf_oracle.js failed (node and " << npm_modules
                                   << "/@huggingface/tokenizers come from scripts/install-vocab): " << r.err);
  auto theirs = test::tok::parse_ids(files::read_file(dir.path() + "/out.bin").value());
  REQUIRE(theirs.has_value());
  REQUIRE(theirs->size() == docs.size());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < docs.size(); ++i)
    if (gpt2().bpe.encode(docs[i]) != (*theirs)[i])
      out.push_back("document " + std::to_string(i) + ": " + docs[i].substr(0, 60));
  return out;
}

std::string export_tokenizer(const files::temp_dir& tmp) {
  const auto params = exporter::testing::tiny_params(cfg, 1);
  const auto out = std::filesystem::path(tmp.path()) / "hf";
  REQUIRE(write_hf_dir(cfg, params, gpt2().spec, out).ok());
  return (out / "tokenizer.json").string();
}

// ---- GGUF under @huggingface/gguf ----------------------------------------

struct oracle_view {
  json info;
  std::vector<float> values;  // every tensor, in the parser's table order
};

oracle_view read_with_oracle(const std::filesystem::path& file) {
  files::temp_dir dir("loom-export-gguf");
  auto r = node({std::string(LOOM_EXPORT_TEST_DIR) + "/gguf_oracle.js", file.string(), dir.path() + "/out.json",
                 dir.path() + "/out.bin"});
  REQUIRE_MESSAGE(r.code == 0, "gguf_oracle.js failed (node and " << npm_modules
                                   << "/@huggingface/gguf come from scripts/install-vocab): " << r.err);
  oracle_view v;
  v.info = json::parse(files::read_file(dir.path() + "/out.json").value());
  const std::string bin = files::read_file(dir.path() + "/out.bin").value();
  v.values.resize(bin.size() / 4);
  std::memcpy(v.values.data(), bin.data(), v.values.size() * 4);
  return v;
}

// The parser's metadata entry against ours: type, element type and values.
std::optional<std::string> metadata_disagreement(const gguf_kv& e, const json& m) {
  if (!m.contains(e.key)) return "metadata " + e.key + ": absent";
  const json& o = m[e.key];
  if (o["type"] != static_cast<int>(e.value.type)) return "metadata " + e.key + ": type " + o["type"].dump();
  const gguf_value& v = e.value;
  if (v.is_array() && o["subType"] != static_cast<int>(v.elem)) return "metadata " + e.key + ": element type";
  const json values = v.is_array() ? o["value"] : json::array({o["value"]});
  if (values.size() != v.size()) return "metadata " + e.key + ": " + std::to_string(values.size()) + " values";
  for (std::size_t i = 0; i < v.size(); ++i) {
    bool same = false;
    if (!v.strings.empty()) same = values[i] == v.strings[i];
    else if (!v.floats.empty()) same = values[i].is_number() && values[i].get<double>() == v.floats[i];
    else same = values[i].is_number() && values[i].get<std::int64_t>() == v.ints[i];
    if (!same) return "metadata " + e.key + "[" + std::to_string(i) + "]: " + values[i].dump().substr(0, 40);
  }
  return std::nullopt;
}

// Everything the outside parser reads differently from what we wrote: the
// metadata and tensor table against our reader's, its decoded values against
// ours bit for bit, and against the exported parameters (exact for f32, f16's
// rounding for f16, half a block scale for q8_0).
std::vector<std::string> gguf_disagreements(const std::filesystem::path& file, std::span<const float> params) {
  const auto ours = read_gguf(file);
  REQUIRE_MESSAGE(ours.ok(), ours.err().to_string());
  const oracle_view o = read_with_oracle(file);
  std::vector<std::string> out;
  const json& m = o.info["metadata"];
  if (m["version"]["value"] != 3) out.push_back("version");
  if (m["tensor_count"]["value"] != std::to_string(ours->tensors().size())) out.push_back("tensor_count");
  if (m["kv_count"]["value"] != std::to_string(ours->kv().size())) out.push_back("kv_count");
  if (m.size() != ours->kv().size() + 3) out.push_back("metadata has " + std::to_string(m.size()) + " entries");
  for (const auto& e : ours->kv())
    if (auto d = metadata_disagreement(e, m)) out.push_back(*d);
  if (o.info["tensorDataOffset"] != std::to_string(ours->data_start())) out.push_back("tensorDataOffset");

  const json& infos = o.info["tensorInfos"];
  if (infos.size() != ours->tensors().size()) return out.push_back("tensor count"), out;
  const auto plan = gguf_gpt2_tensors(cfg, gguf_type::f32);  // where each tensor's values come from
  std::size_t at = 0;
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const gguf_tensor_info& t = ours->tensors()[i];
    const json& j = infos[i];
    std::vector<std::uint64_t> shape;
    for (const auto& d : j["shape"]) shape.push_back(std::stoull(d.get<std::string>()));
    if (j["name"] != t.name || shape != t.ne || j["dtype"] != static_cast<int>(t.type) ||
        j["offset"] != std::to_string(t.offset)) {
      out.push_back("table entry " + std::to_string(i) + " (" + t.name + ")");
      continue;
    }
    const auto mine = dequantize(*ours, t);
    const std::span<const float> theirs(o.values.data() + at, mine.size());
    at += mine.size();
    const auto& p = plan.at(i);
    const auto want = tensor_slice(cfg, params, p.id, p.layer);
    const auto raw = ours->data(t);
    std::size_t differ = 0, off_bound = 0;
    for (std::size_t k = 0; k < mine.size(); ++k) {
      differ += std::bit_cast<std::uint32_t>(mine[k]) != std::bit_cast<std::uint32_t>(theirs[k]);
      float bound = 0, expect = want[k];
      if (t.type == gguf_type::f16) expect = f16_to_f32(f32_to_f16(want[k]));
      if (t.type == gguf_type::q8_0) {
        std::uint16_t d16;
        std::memcpy(&d16, raw.data() + k / 32 * q8_0_block_bytes, 2);
        bound = f16_to_f32(d16) / 2 * (1 + 1e-6f);
      }
      off_bound += !(std::fabs(theirs[k] - expect) <= bound);
    }
    if (differ) out.push_back("tensor " + t.name + ": " + std::to_string(differ) + " values differ from our reader's");
    if (off_bound)
      out.push_back("tensor " + t.name + ": " + std::to_string(off_bound) + " values differ from the exported parameters");
  }
  return out;
}

}  // namespace

TEST_CASE("GPT-2's exported tokenizer.json encodes fixed and random texts exactly as our encoder under tokenizers.js") {
  files::temp_dir tmp("loom-export-readers");
  const auto docs = documents();
  const auto bad = tokenizer_disagreements(export_tokenizer(tmp), docs);
  for (std::size_t i = 0; i < bad.size() && i < 5; ++i) FAIL_CHECK(bad[i]);
  CHECK(bad.empty());
}

TEST_CASE("a tokenizer.json missing one merge is reported by the tokenizers.js comparison") {
  files::temp_dir tmp("loom-export-readers");
  const std::string path = export_tokenizer(tmp);
  std::string text = files::read_file(path).value();
  const std::string merge = "\"\xC4\xA0 t\",\n      ";  // GPT-2's first merge: " t"
  const auto at = text.find(merge);
  REQUIRE(at != std::string::npos);
  text.erase(at, merge.size());
  REQUIRE(files::write_atomic(path, text).ok());
  const auto bad = tokenizer_disagreements(path, documents());
  CHECK(bad.size() >= 5);  // every document with " t" in it
  MESSAGE("negative control: " << bad.size() << " documents reported, e.g. " << (bad.empty() ? "" : bad[0]));
}

TEST_CASE("GGUF exports in f32, f16 and q8_0 read the same under Hugging Face's GGUF parser: metadata, tensor table, values") {
  files::temp_dir tmp("loom-export-readers");
  const auto params = exporter::testing::tiny_params(cfg, 2);
  for (auto type : {gguf_type::f32, gguf_type::f16, gguf_type::q8_0}) {
    CAPTURE(to_string(type));
    const auto file = std::filesystem::path(tmp.path()) / ("m-" + std::string(to_string(type)) + ".gguf");
    REQUIRE(write_gguf(cfg, params, gpt2().spec, type, file).ok());
    const auto bad = gguf_disagreements(file, params);
    for (std::size_t i = 0; i < bad.size() && i < 5; ++i) FAIL_CHECK(bad[i]);
    CHECK(bad.empty());
  }
}

TEST_CASE("a GGUF tensor changed after export is reported by the GGUF parser comparison, and only it") {
  files::temp_dir tmp("loom-export-readers");
  const auto params = exporter::testing::tiny_params(cfg, 3);
  const auto file = std::filesystem::path(tmp.path()) / "m.gguf";
  REQUIRE(write_gguf(cfg, params, gpt2().spec, gguf_type::q8_0, file).ok());
  const auto f = read_gguf(file).value();
  const gguf_tensor_info* pos = f.find_tensor("position_embd.weight");  // f32 in every file type
  REQUIRE(pos);
  std::string bytes = files::read_file(file.string()).value();
  const std::size_t at = f.data_start() + pos->offset + 4 * 100;
  float x;
  std::memcpy(&x, bytes.data() + at, 4);
  x += 1e-3f;
  std::memcpy(bytes.data() + at, &x, 4);
  std::filesystem::remove(file);
  REQUIRE(files::write_atomic(file.string(), bytes).ok());
  const auto bad = gguf_disagreements(file, params);
  CHECK(bad == std::vector<std::string>{"tensor position_embd.weight: 1 values differ from the exported parameters"});
}
