#include "libs/tokenizer/bpe.hpp"

#include <doctest/doctest.h>

#include <ctime>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace loom::tokenizer;
using ids = std::vector<std::uint32_t>;

namespace {

const bpe& gpt2() {
  static const bpe b = [] {
    auto r = bpe::load_gpt2();
    if (!r) FAIL(r.err().to_string());
    return std::move(r).value();
  }();
  return b;
}

// CPU time of this thread: the bound holds on a box other jobs share.
double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Restores an environment variable when the test ends.
struct env_guard {
  std::string name, old;
  bool had;
  explicit env_guard(const char* n) : name(n), had(std::getenv(n) != nullptr) {
    if (had) old = std::getenv(n);
  }
  ~env_guard() {
    if (had) ::setenv(name.c_str(), old.c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

}  // namespace

TEST_CASE("ids match tiktoken's gpt2 on known strings") {
  const bpe& b = gpt2();
  CHECK(b.vocab_size() == 50257);
  CHECK(b.encode("Hello world") == ids{15496, 995});
  CHECK(b.encode(" the") == ids{262});
  CHECK(b.encode("I'm here, they're OK; it'S fine.") == ids{40, 1101, 994, 11, 484, 821, 7477, 26, 340, 6, 50, 3734, 13});
  CHECK(b.encode("<|endoftext|>") == ids{27, 91, 437, 1659, 5239, 91, 29});  // ordinary text, not 50256
  CHECK(b.encode(std::string(68, 'a')) == ids(17, 24794));
  CHECK(b.encode("").empty());
  CHECK(b.decode(ids{50256}) == "<|endoftext|>");
  CHECK(b.decode(ids{15496, 995}) == "Hello world");
}

TEST_CASE("decode(encode(x)) == x for random bytes, invalid UTF-8 included") {
  const bpe& b = gpt2();
  std::mt19937_64 rng(0x10AD);
  std::size_t total = 0;
  for (int doc = 0; doc < 3000; ++doc) {
    std::string s(rng() % 2000, '\0');
    const int mode = doc % 3;  // 0: uniform bytes; 1: mostly ASCII; 2: UTF-8 lead/continuation soup
    for (auto& c : s) {
      const auto r = rng();
      c = static_cast<char>(mode == 0 ? r : mode == 1 ? (r % 8 == 0 ? r >> 8 : 32 + (r >> 8) % 95)
                                                      : 0x80 + (r >> 8) % 0x78);
    }
    total += s.size();
    const auto e = b.encode(s);
    for (auto id : e) REQUIRE(id < 50256);
    REQUIRE(b.decode(e) == s);
  }
  CHECK(total > 2'000'000);
}

TEST_CASE("encode_into appends without reallocating once the buffer has room") {
  const bpe& b = gpt2();
  std::vector<std::uint32_t> out{42};
  out.reserve(4096);
  const auto* data = out.data();
  b.encode_into("Hello world", out);
  b.encode_into(" and again, an unusualwordthatneedsmerging", out);
  CHECK(out.data() == data);
  CHECK(out[0] == 42);
  CHECK(ids(out.begin() + 1, out.begin() + 3) == ids{15496, 995});
  CHECK(b.decode(std::span(out).subspan(1)) == "Hello world and again, an unusualwordthatneedsmerging");
}

TEST_CASE("pathological inputs (1 MB runs without a space) encode in under 2 s of CPU each") {
  const bpe& b = gpt2();
  const std::size_t mb = 1 << 20;
  std::mt19937_64 rng(3);
  std::string letters(mb, 'x');
  for (auto& c : letters) c = static_cast<char>('a' + rng() % 26);
  std::string cjk;
  while (cjk.size() < mb) cjk += "\xE4\xB8\xAD";
  std::string emoji;
  while (emoji.size() < mb) emoji += "\xF0\x9F\x91\x8D";
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"a x 1M", std::string(mb, 'a')},  {"digits", std::string(mb, '7')}, {"spaces", std::string(mb, ' ')},
      {"newlines", std::string(mb, '\n')}, {"bang", std::string(mb, '!')},  {"random letters", letters},
      {"one CJK character", cjk},        {"one emoji", emoji},              {"0xFF bytes", std::string(mb, '\xFF')}};
  for (const auto& [name, text] : cases) {
    CAPTURE(name);
    const double t0 = thread_cpu_s();
    const auto e = b.encode(text);
    const double s = thread_cpu_s() - t0;
    MESSAGE(std::string(name) << ": " << text.size() << " bytes -> " << e.size() << " ids in " << s << " s");
    CHECK(s < 2.0);
    CHECK(b.decode(e) == text);
  }
}

TEST_CASE("threads share one bpe and get the same ids") {
  const bpe& b = gpt2();
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "word" + std::to_string(i * 7919 % 1000) + (i % 5 ? " " : ",\n");
  const auto want = b.encode(text);
  std::vector<ids> got(4);
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) ts.emplace_back([&, i] { got[i] = b.encode(text); });
  for (auto& t : ts) t.join();
  for (const auto& g : got) CHECK(g == want);
}

TEST_CASE("two loaded copies used in turn on one thread keep their caches apart") {
  auto b2 = bpe::load_gpt2();
  REQUIRE(b2.ok());
  for (int i = 0; i < 3; ++i) {
    CHECK(gpt2().encode("tokenization caches") == b2->encode("tokenization caches"));
  }
}

TEST_CASE("a missing vocabulary names $LOOM_GPT2_VOCAB and the default path") {
  env_guard g(gpt2_vocab_env);
  ::setenv(gpt2_vocab_env, "/nonexistent/gpt2.json", 1);
  auto r = bpe::load_gpt2();
  REQUIRE(!r.ok());
  CHECK(r.code() == loom::errc::not_found);
  CHECK(r.err().message.find("LOOM_GPT2_VOCAB") != std::string::npos);
  CHECK(r.err().message.find("/nonexistent/gpt2.json") != std::string::npos);
  CHECK(r.err().message.find(gpt2_vocab_default_path) != std::string::npos);
}

TEST_CASE("malformed encoder files are refused by name") {
  CHECK(bpe::parse("{", "x.json").code() == loom::errc::corruption);
  CHECK(bpe::parse(R"({"bpe_ranks": "! 0 ###"})", "x.json").code() == loom::errc::corruption);
  auto r = bpe::parse(R"({"bpe_ranks": "! 0 IQ== Ig=="})", "y.json");  // not byte-level
  CHECK(r.code() == loom::errc::corruption);
  CHECK(r.err().message.find("y.json") != std::string::npos);
  CHECK(bpe::load("/nonexistent/z.json").code() == loom::errc::not_found);
}
