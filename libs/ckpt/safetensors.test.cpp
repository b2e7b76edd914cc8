#include "libs/ckpt/safetensors.hpp"
#include "libs/ckpt/testing.hpp"
#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <random>

using namespace loom;
using namespace loom::ckpt;

namespace {

std::string le64(std::uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A hand-made file: length prefix + header text (unpadded) + `data_bytes` bytes.
std::string craft(const std::string& header, std::size_t data_bytes) {
  return le64(header.size()) + header + std::string(data_bytes, '\x5a');
}

std::string as_string(std::span<const std::byte> s) { return {reinterpret_cast<const char*>(s.data()), s.size()}; }

}  // namespace

TEST_CASE("safetensors written by us read back with the same tensors and metadata") {
  testing::temp_dir tmp;
  std::mt19937 rng(42);
  std::vector<float> w(2 * 3);
  for (auto& x : w) x = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<std::uint16_t> bf(5);
  for (auto& x : bf) x = static_cast<std::uint16_t>(rng());
  std::int64_t scalar = -7;
  std::vector<tensor_view> ts = {
      {"h.0.attn.weight", dtype::F32, {2, 3}, w.data(), w.size() * 4},
      {"h.0.ln.bias", dtype::BF16, {5}, bf.data(), bf.size() * 2},
      {"step", dtype::I64, {}, &scalar, 8},
      {"empty", dtype::U8, {0, 4}, nullptr, 0},
  };
  const std::string path = tmp.path() + "/model.safetensors";
  REQUIRE(write_safetensors(path, ts, {{"format", "pt"}, {"run", "r1"}}).ok());

  auto raw = files::read_file(path);
  REQUIRE(raw.ok());
  std::uint64_t n = 0;
  std::memcpy(&n, raw->data(), 8);  // this machine is little-endian, as the format
  CHECK(n % 8 == 0);
  CHECK(raw->size() == 8 + n + 24 + 10 + 8);
  CHECK(raw->substr(8, n).find("\"data_offsets\":[0,24]") != std::string::npos);

  auto f = read_safetensors(path);
  REQUIRE(f.ok());
  CHECK(f->meta() == metadata{{"format", "pt"}, {"run", "r1"}});
  CHECK(f->tensors().size() == 4);
  for (const auto& t : ts) {
    const tensor_info* got = f->find(t.name);
    REQUIRE(got != nullptr);
    CHECK(got->type == t.type);
    CHECK(got->shape == t.shape);
    CHECK(as_string(got->data) == std::string(static_cast<const char*>(t.data), t.bytes));
  }
  CHECK(check_safetensors(path).ok());
  CHECK(f->find("missing") == nullptr);
}

TEST_CASE("the writer refuses a tensor whose byte count does not match its shape") {
  testing::temp_dir tmp;
  float x[3] = {1, 2, 3};
  std::vector<tensor_view> ts = {{"x", dtype::F32, {4}, x, sizeof x}};
  auto s = write_safetensors(tmp.path() + "/bad.safetensors", ts);
  CHECK(s.code() == errc::invalid_argument);
  std::vector<tensor_view> dup = {{"x", dtype::F32, {3}, x, sizeof x}, {"x", dtype::F32, {3}, x, sizeof x}};
  CHECK(write_safetensors(tmp.path() + "/dup.safetensors", dup).code() == errc::invalid_argument);
}

TEST_CASE("dtype names and sizes follow the safetensors spelling") {
  CHECK(to_string(dtype::BF16) == "BF16");
  CHECK(dtype_from_string("F32") == dtype::F32);
  CHECK_FALSE(dtype_from_string("F33").has_value());
  CHECK(dtype_size(dtype::BF16) == 2);
  CHECK(dtype_size(dtype::I64) == 8);
}

TEST_CASE("the strict reader refuses every malformed file with the file name and reason") {
  const std::string a4 = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  struct bad_case {
    const char* what;
    std::string bytes;
    const char* reason;
  };
  std::vector<bad_case> cases = {
      {"shorter than 8 bytes", "abc", "shorter than the 8-byte"},
      {"header length past end of file", le64(1000) + "{}", "runs past the end"},
      {"header length above the cap", le64(200'000'000) + std::string(16, ' '), "exceeds the cap"},
      {"invalid json", craft("{\"a\":", 0), "not valid UTF-8 JSON"},
      {"invalid utf-8", craft("{\"__metadata__\":{\"k\":\"\xff\"}}", 0), "not valid UTF-8 JSON"},
      {"not an object", craft("[1,2]", 0), "not a JSON object"},
      {"unknown dtype", craft(R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4), "unknown dtype 'F33'"},
      {"shape times dtype differs from span", craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4),
       "shape x dtype size is 8 bytes but data_offsets span 4"},
      {"shape overflow", craft(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4),
       "overflows"},
      {"offsets out of range", craft("{" + a4 + "}", 2), "out of range"},
      {"end before begin", craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4), "end < begin"},
      {"overlapping offsets",
       craft("{" + a4 + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", 6), "overlaps"},
      {"hole between tensors",
       craft("{" + a4 + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", 12), "hole of 4 bytes"},
      {"first tensor not at zero", craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
       "hole of 4 bytes"},
      {"duplicate names", craft("{" + a4 + "," + a4 + "}", 4), "duplicate key 'a'"},
      {"trailing garbage", craft("{" + a4 + "}", 5), "1 trailing bytes"},
      {"non-string metadata", craft(R"({"__metadata__":{"k":1}})", 0), "__metadata__ value of 'k'"},
      {"unknown field", craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4),
       "unknown field 'x'"},
      {"negative dimension", craft(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
       "non-integer or negative"},
      {"missing offsets", craft(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "data_offsets must be"},
  };
  testing::temp_dir tmp;
  for (const auto& c : cases) {
    CAPTURE(c.what);
    const std::string path = tmp.path() + "/crafted.safetensors";
    REQUIRE(files::write_atomic(path, c.bytes).ok());
    auto r = read_safetensors(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == errc::corruption);
    CHECK(r.err().message.find(path) != std::string::npos);
    CHECK_MESSAGE(r.err().message.find(c.reason) != std::string::npos, r.err().message);
    auto h = check_safetensors(path);
    CHECK(h.code() == errc::corruption);
    CHECK_MESSAGE(h.err().message.find(c.reason) != std::string::npos, h.err().message);
  }
}

TEST_CASE("a hand-made minimal file with unpadded header and an empty tensor is accepted") {
  auto f = parse_safetensors(
      craft(R"({"z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", 4),
      "mem");
  REQUIRE(f.ok());
  CHECK(f->find("a")->data.size() == 4);
  CHECK(f->find("z")->data.empty());
  CHECK(read_safetensors("/tmp/loom-ckpt-no-such-file.safetensors").code() == errc::not_found);
}
