// The model file: round trip, and every kind of damage refused with an error
// that names the file and what was wrong. Training determinism.
#include <cstring>
#include <fstream>

#include <doctest/doctest.h>

#include "libs/files/temp_dir.hpp"
#include "libs/textq/filter_model.hpp"
#include "libs/textq/fixture.test.hpp"
#include "libs/textq/scorer.hpp"
#include "libs/textq/train.hpp"

using namespace loom::textq;

namespace {

void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// A small model trained in well under a second: the file tests need a real one, not a good one.
filter_model tiny_model(std::uint64_t seed) {
  train_options o;
  o.config = {1, 2, 16, 32, byte_vocab, byte_padded_vocab};
  o.window = 32;
  o.steps = 20;
  o.seed = seed;
  std::vector<std::string> docs;
  for (int i = 0; i < 12; ++i) docs.push_back(testing::clean_prose(std::uint64_t(i), 60));
  std::vector<std::string_view> ref(docs.begin(), docs.end());
  const std::string good = testing::clean_prose(99, 60), bad = testing::spam(99, 60);
  const labelled_text lab[] = {{good, true}, {bad, false}};
  auto m = train_filter(o, ref, lab);
  if (!m) FAIL(m.err().to_string());
  return std::move(*m);
}

}  // namespace

TEST_CASE("a saved filter model loads back identical and scores the same") {
  loom::files::temp_dir dir("textq");
  const std::string path = dir.path() + "/f.tqf";
  const filter_model m = tiny_model(7);
  REQUIRE(save(m, path).ok());
  auto back = load(path);
  REQUIRE(back.ok());
  CHECK(serialize(*back) == serialize(m));
  CHECK(back->params == m.params);
  CHECK(back->has_quality_head);
  auto a = scorer::create(std::make_shared<const filter_model>(m));
  auto b = scorer::create(std::make_shared<const filter_model>(*back));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const std::string t = testing::clean_prose(5, 80);
  const auto sa = a->score(t), sb = b->score(t);
  CHECK(sa.perplexity == sb.perplexity);
  CHECK(sa.quality == sb.quality);
  CHECK(sa.embedding == sb.embedding);
}

TEST_CASE("the same seed and thread count train the same model bytes, another seed does not") {
  const std::string a = serialize(tiny_model(3)), b = serialize(tiny_model(3)), c = serialize(tiny_model(4));
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("corrupt, truncated and foreign model files are refused with the file named") {
  loom::files::temp_dir dir("textq");
  const std::string good = serialize(tiny_model(7));
  auto refused = [&](const std::string& bytes, loom::errc code, const std::string& what) {
    const std::string path = dir.path() + "/bad.tqf";
    write(path, bytes);
    auto r = load(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == code);
    CHECK_MESSAGE(contains(r.err().message, path), r.err().message);
    CHECK_MESSAGE(contains(r.err().message, what), r.err().message);
  };
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x01;  // a weight's bit
  refused(flipped, loom::errc::corruption, "checksum mismatch");
  refused(good.substr(0, good.size() - 100), loom::errc::corruption, "truncated");
  refused(good.substr(0, 20), loom::errc::corruption, "truncated");
  refused(good + "x", loom::errc::corruption, "trailing bytes");
  refused("GGUF\x03\0\0\0 this is some other model format", loom::errc::invalid_argument, "not a textq filter model");
  refused("", loom::errc::invalid_argument, "not a textq filter model");
  std::string v2 = good;
  v2[8] = 2;  // the version field
  refused(v2, loom::errc::invalid_argument, "format version 2");
  std::string huge = good;  // n_params claims more than the file holds
  const std::size_t n_at = 8 + 4 + 4 + 7 * 4 + 4 + 4 * 4;
  const std::uint64_t big = std::uint64_t(1) << 40;
  std::memcpy(huge.data() + n_at, &big, sizeof big);
  refused(huge, loom::errc::corruption, "sizes exceed the file");

  auto missing = load(dir.path() + "/none.tqf");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.code() == loom::errc::not_found);
  CHECK(contains(missing.err().message, "none.tqf"));
}

TEST_CASE("train_filter refuses inputs it cannot learn from") {
  train_options o;
  const std::string_view one[] = {"just one document"};
  CHECK(train_filter(o, one).code() == loom::errc::invalid_argument);
  const std::string_view two_short[] = {"a", "b", "c"};
  CHECK(train_filter(o, two_short).code() == loom::errc::invalid_argument);  // fewer tokens than a window
  std::vector<std::string> docs;
  for (int i = 0; i < 4; ++i) docs.push_back(testing::clean_prose(std::uint64_t(i), 80));
  std::vector<std::string_view> ref(docs.begin(), docs.end());
  const labelled_text only_good[] = {{docs[0], true}, {docs[1], true}};
  CHECK(train_filter(o, ref, only_good).code() == loom::errc::invalid_argument);
  train_options bad_window = o;
  bad_window.window = o.config.max_seq_len + 1;
  CHECK(train_filter(bad_window, ref).code() == loom::errc::invalid_argument);
}
