// The GGUF reader on damaged files: each is refused with an error naming the
// file, the byte offset and what is wrong; none crashes or reads out of bounds.
#include "libs/export/gguf_gpt2.hpp"
#include "libs/export/testing.hpp"
#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <cstring>

using namespace loom;
using namespace loom::exporter;

namespace {

// A small valid file: a tiny GPT-2 in q8_0.
const std::string& valid_file() {
  static const std::string bytes = [] {
    exporter::testing::temp_dir tmp;
    const auto cfg = exporter::testing::tiny_config();
    REQUIRE(write_gguf(cfg, exporter::testing::tiny_params(cfg, 9), exporter::testing::tiny_tokenizer(),
                       gguf_type::q8_0, tmp / "m.gguf")
                .ok());
    return files::read_file((tmp / "m.gguf").string()).value();
  }();
  return bytes;
}

// Where the table entry of tensor `name` continues after its name: n_dims.
std::size_t after_name(const std::string& b, const std::string& name) {
  std::string key(8, '\0');
  const std::uint64_t n = name.size();
  std::memcpy(key.data(), &n, 8);
  key += name;
  const std::size_t at = b.find(key);
  REQUIRE(at != std::string::npos);
  return at + key.size();
}

template <class T>
void poke(std::string& b, std::size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

std::string refused(std::string bytes, errc want = errc::corruption) {
  auto f = parse_gguf(std::move(bytes), "m.gguf");
  REQUIRE(!f.ok());
  CHECK(f.code() == want);
  CHECK(f.err().message.rfind("m.gguf: at byte ", 0) == 0);
  return f.err().message;
}

}  // namespace

TEST_CASE("a GGUF file with a bad magic or version is refused") {
  std::string b = valid_file();
  b[0] = 'X';
  CHECK(refused(b).find("bad magic") != std::string::npos);
  b = valid_file();
  poke<std::uint32_t>(b, 4, 7);
  CHECK(refused(b).find("version 7") != std::string::npos);
  CHECK(refused("GG").find("bad magic") != std::string::npos);
}

TEST_CASE("a GGUF file cut off anywhere is refused, naming where") {
  const std::string& full = valid_file();
  REQUIRE(parse_gguf(full, "m.gguf").ok());
  // Every length inside the header and table, then a stride through the data.
  auto f = parse_gguf(full, "m.gguf");
  const std::size_t data_start = f->data_start();
  for (std::size_t n = 0; n < full.size(); n += (n < data_start + 64 ? 1 : 997)) {
    CAPTURE(n);
    auto r = parse_gguf(full.substr(0, n), "m.gguf");
    REQUIRE(!r.ok());
    REQUIRE(r.code() == errc::corruption);
    const auto& m = r.err().message;
    CAPTURE(m);
    REQUIRE((m.find("cut off") != std::string::npos || m.find("left") != std::string::npos ||
             m.find("could hold") != std::string::npos || m.find("past the end") != std::string::npos ||
             m.find("ends before its data") != std::string::npos || m.find("bad magic") != std::string::npos));
  }
  // The last tensor ends the file (256 bytes: no padding after it).
  CHECK(refused(full.substr(0, full.size() - 1)).find("tensor 'output_norm.bias' (256 bytes") != std::string::npos);
}

TEST_CASE("a GGUF tensor whose offset is misaligned, past the end or overlapping is refused by name") {
  const std::string& full = valid_file();
  const auto f = parse_gguf(full, "m.gguf").value();
  // blk.0.attn_qkv.weight: 2 dims, then type, then offset.
  const std::size_t at = after_name(full, "blk.0.attn_qkv.weight");
  const std::size_t offset_at = at + 4 + 2 * 8 + 4;
  std::string b = full;
  poke<std::uint64_t>(b, offset_at, f.find_tensor("blk.0.attn_qkv.weight")->offset + 8);
  CHECK(refused(b).find("'blk.0.attn_qkv.weight' has data offset") != std::string::npos);
  b = full;
  poke<std::uint64_t>(b, offset_at, std::uint64_t(1) << 40);
  CHECK(refused(b).find("'blk.0.attn_qkv.weight' (") != std::string::npos);
  CHECK(refused(b).find("runs past the end") != std::string::npos);
  b = full;
  poke<std::uint64_t>(b, offset_at, f.find_tensor("blk.0.attn_norm.bias")->offset);
  CHECK(refused(b).find("overlaps") != std::string::npos);
}

TEST_CASE("a GGUF tensor with an unknown type or a bad shape is refused by name") {
  const std::string& full = valid_file();
  const std::size_t at = after_name(full, "blk.1.ffn_up.weight");
  std::string b = full;
  poke<std::uint32_t>(b, at + 4 + 2 * 8, 2);  // q4_0
  CHECK(refused(b, errc::unimplemented).find("'blk.1.ffn_up.weight' has ggml type 2") != std::string::npos);
  b = full;
  poke<std::uint32_t>(b, at, 9);
  CHECK(refused(b).find("'blk.1.ffn_up.weight' has 9 dimensions") != std::string::npos);
  b = full;
  poke<std::uint64_t>(b, at + 4, 48);  // rows of 48: not whole q8_0 blocks
  CHECK(refused(b).find("not whole blocks of 32") != std::string::npos);
  b = full;
  poke<std::uint64_t>(b, at + 4, 0);
  CHECK(refused(b).find("bad shape") != std::string::npos);
}

TEST_CASE("GGUF metadata with an absurd length, a bad type or a repeated key is refused") {
  const std::string& full = valid_file();
  // The tokens array: key, type (array), element type (string), then its length.
  const std::string key = "tokenizer.ggml.tokens";
  const std::size_t at = full.find(key) + key.size();
  std::string b = full;
  poke<std::uint64_t>(b, at + 8, std::uint64_t(1) << 50);
  CHECK(refused(b).find("length of array 'tokenizer.ggml.tokens' is 1125899906842624") != std::string::npos);
  b = full;
  poke<std::uint32_t>(b, at, 13);
  CHECK(refused(b).find("type of 'tokenizer.ggml.tokens' 13 is not a GGUF value type") != std::string::npos);
  b = full;
  poke<std::uint32_t>(b, at + 4, 9);  // array of arrays
  CHECK(refused(b, errc::unimplemented).find("array of arrays") != std::string::npos);
  b = full;
  const std::string arch = "general.architecture";
  const std::size_t a = b.find(arch);
  const std::size_t t = b.find("tokenizer.ggml.model");
  b.replace(t, arch.size(), arch);  // same length (20): the key repeats
  CHECK(refused(b).find("'general.architecture' appears twice") != std::string::npos);
  CHECK(a < t);
  b = full;
  poke<std::uint64_t>(b, 8, std::uint64_t(1) << 40);
  CHECK(refused(b).find("tensor count") != std::string::npos);
}
