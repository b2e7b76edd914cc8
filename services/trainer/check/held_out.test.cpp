#include "services/trainer/check/held_out.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/engine/model.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <vector>

using namespace loom;
using namespace loom::modelcheck;

namespace {
constexpr model::gpt2_config cfg{2, 2, 16, 8, 100, 128};

std::vector<float> random_params() {
  auto m = engine::gpt2::create(cfg, 1, 1);
  REQUIRE(m.ok());
  m->init_random(7);
  return {m->params().begin(), m->params().end()};
}
}  // namespace

TEST_CASE("a freshly initialised model scores about ln(vocab) over the last whole windows of the text") {
  const auto params = random_params();
  std::vector<std::uint32_t> ids(21);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::uint32_t>((i * 37) % 100);
  auto s = mean_loss(cfg, params, ids, 4);  // (21 - 1) / 4 = 5 windows of 4
  REQUIRE(s.ok());
  CHECK(s->windows == 5);
  CHECK(s->tokens == 20);
  CHECK(std::abs(s->loss - std::log(100.0)) < 0.3);
  auto longer = mean_loss(cfg, params, ids, 64);  // T = min(64, maxT 8, 20)
  REQUIRE(longer.ok());
  CHECK(longer->windows == 2);
  CHECK(longer->tokens == 16);
  auto three = mean_loss(cfg, params, std::span(ids).subspan(0, 13), 4);  // 12 targets: 3 windows of 4
  REQUIRE(three.ok());
  CHECK(three->windows == 3);
  CHECK(three->tokens == 12);
}

TEST_CASE("held-out tokens outside the vocabulary or too few of them are refused by name") {
  const auto params = random_params();
  std::vector<std::uint32_t> ids{1, 2, 300, 4};
  auto s = mean_loss(cfg, params, ids, 2);
  REQUIRE_FALSE(s.ok());
  CHECK(s.err().message == "held-out token id 300 is outside the model's vocabulary of 100");
  std::vector<std::uint32_t> one{1};
  CHECK(mean_loss(cfg, params, one, 2).code() == errc::invalid_argument);
}

TEST_CASE("held-out text that is a device or missing is refused by name, never read") {
  auto dev = tokens_of_text_tail("/dev/zero", "gpt2");
  REQUIRE_FALSE(dev.ok());
  CHECK(dev.err().message == "held-out text /dev/zero is not a regular file");
  CHECK(tokens_of_text_tail("/nonexistent/eval.txt", "gpt2").code() == errc::not_found);
}

TEST_CASE("a held-out file is read only inside the given roots, whether it exists or not, and never through a link out") {
  files::temp_dir root{"loom-held-out"}, outside{"loom-held-out-x"};
  REQUIRE(files::write_atomic(root.path() + "/eval.txt", "the quick brown fox jumps over the lazy dog\n").ok());
  REQUIRE(files::write_atomic(outside.path() + "/secret.txt", "not for the check\n").ok());
  const std::vector<std::string> roots{root.path()};
  auto in = tokens_of_text_tail(root.path() + "/eval.txt", "gpt2", roots);
  REQUIRE_MESSAGE(in.ok(), in.err().message);
  CHECK(in->ids.size() > 5);
  auto out = tokens_of_text_tail(outside.path() + "/secret.txt", "gpt2", roots);
  REQUIRE_FALSE(out.ok());
  CHECK(out.code() == errc::permission_denied);
  CHECK(out.err().message.find("outside the allowed roots") != std::string::npos);
  CHECK(tokens_of_text_tail(outside.path() + "/absent.txt", "gpt2", roots).code() == errc::permission_denied);
  std::filesystem::create_symlink(outside.path() + "/secret.txt", root.path() + "/link.txt");
  CHECK(tokens_of_text_tail(root.path() + "/link.txt", "gpt2", roots).code() == errc::permission_denied);
  CHECK(tokens_of_text_tail("/etc/passwd", "gpt2", roots).code() == errc::permission_denied);
}

TEST_CASE("a held-out loss asked to stop ends between windows") {
  const auto params = random_params();
  std::vector<std::uint32_t> ids(64);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::uint32_t>(i % 100);
  std::atomic<bool> stop{true};
  auto s = mean_loss(cfg, params, ids, 8, &stop);
  CHECK(s.code() == errc::unavailable);
  stop = false;
  CHECK(mean_loss(cfg, params, ids, 8, &stop).ok());
}
