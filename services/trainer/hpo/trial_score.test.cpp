// An hpo trial's held-out score: the same windows every call, a random
// byte-level model scores about ln(256), bad inputs are named.
#include "services/trainer/hpo/trial_score.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/engine/model.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace loom;
using namespace loom::trainer;

namespace {

runspec::run_config byte_model() {
  runspec::run_config c;
  c.model = model::gpt2_config{2, 2, 32, 32, 256, 256};
  c.seq_len = 16;
  c.tokenizer = "bytes";
  return c;
}

}  // namespace

TEST_CASE("a trial's score is the mean loss over fixed held-out windows: about ln 256 for a random byte model") {
  files::temp_dir dir;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  REQUIRE(files::write_atomic(dir.path() + "/held.txt", text).ok());
  const auto c = byte_model();
  auto s = trial_scorer::make(c, dir.path() + "/held.txt");
  REQUIRE(s.ok());
  CHECK(s->tokens() == text.size());
  auto net = engine::gpt2::create(c.model, 1, c.seq_len);
  REQUIRE(net.ok());
  net->init_random(5);
  auto a = s->score(net->params());
  auto b = s->score(net->params());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == *b);  // the same windows each time
  CHECK(std::fabs(*a - std::log(256.0)) < 0.5);
  net->init_random(6);
  auto other = s->score(net->params());
  REQUIRE(other.ok());
  CHECK(*other != *a);  // it reads the parameters it is given
}

TEST_CASE("a trial without a held-out text, a missing file or one shorter than a window is refused by name") {
  files::temp_dir dir;
  const auto c = byte_model();
  auto none = trial_scorer::make(c, "");
  REQUIRE(!none.ok());
  CHECK(none.err().message.find("hpo.validation") != std::string::npos);
  auto missing = trial_scorer::make(c, dir.path() + "/nope.txt");
  REQUIRE(!missing.ok());
  CHECK(missing.err().message.find("nope.txt") != std::string::npos);
  REQUIRE(files::write_atomic(dir.path() + "/short.txt", "tiny").ok());
  auto short_text = trial_scorer::make(c, dir.path() + "/short.txt");
  REQUIRE(!short_text.ok());
  CHECK(short_text.err().message.find("fewer than one window") != std::string::npos);
}
