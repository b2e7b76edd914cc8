// hpo_search's journal: replaying it gives back the same search — the same
// segments in flight, the same answers to the reports still to come — and a
// journal that is not this search's is refused naming its first bad entry.
#include "services/scheduler/jobs/hpo_search.hpp"

#include "libs/runspec/run_config.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace loom;
using namespace loom::scheduler;

namespace {

constexpr const char* stage_toml = R"([data]
shards = "/data/shards"
[train]
steps = 90
[optim]
min_lr = 1e-5
[hpo]
trials = 8
seed = 3
min_steps = 10
max_steps = 90
eta = 3
[hpo.space]
"optim.lr" = {log_uniform = [1e-4, 1e-2]}
)";

runspec::run_config spec() {
  auto s = runspec::parse_run_config(std::string("kind = \"hpo\"\n") + stage_toml, "search", {"model.init_from=\"/x\""});
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? std::string() : s.err().message));
  return *s;
}

std::string toml() { return std::string("kind = \"hpo\"\n") + stage_toml; }

// A loss that ranks trial ids, with trial 5 failing at its first rung.
double loss_of(int trial, std::int64_t step) {
  if (trial == 5) return std::numeric_limits<double>::quiet_NaN();
  return 2.0 + 0.1 * ((trial * 7) % 8) + 5.0 / double(step);
}

bool same(const std::optional<hpo_segment>& a, const std::optional<hpo_segment>& b) {
  if (!a || !b) return !a && !b;
  return a->trial == b->trial && a->from == b->from && a->to == b->to;
}

}  // namespace

TEST_CASE("a search replayed from its journal at any point goes on exactly as the original") {
  auto original = hpo_search::make(toml(), spec());
  REQUIRE(original.ok());
  // Two workers: take two segments, then report the older one and take more.
  std::vector<hpo_segment> running;
  std::vector<std::vector<hpo_entry>> journals;
  for (int round = 0; round < 200 && !original->done(); ++round) {
    while (running.size() < 2)
      if (auto seg = original->next()) running.push_back(*seg);
      else break;
    journals.push_back(original->journal());
    if (running.empty()) break;
    const hpo_segment seg = running.front();
    running.erase(running.begin());
    auto next = original->report(seg.trial, seg.to, loss_of(seg.trial, seg.to), nullptr);
    REQUIRE(next.ok());
    if (*next) running.push_back(**next);
  }
  REQUIRE(original->done());
  REQUIRE(original->best());
  for (std::size_t k = 0; k < journals.size(); ++k) {
    CAPTURE(k);
    auto again = hpo_search::resume(toml(), spec(), journals[k]);
    REQUIRE(again.ok());
    CHECK(again->journal() == journals[k]);
    // Replay the rest of the original's journal against it: every segment and decision agrees.
    auto& all = original->journal();
    for (std::size_t e = journals[k].size(); e < all.size(); ++e) {
      if (all[e].what == hpo_entry::kind::segment) {
        auto seg = again->next();
        REQUIRE(seg);
        CHECK(seg->trial == all[e].trial);
        CHECK(seg->to == all[e].to);
      } else {
        REQUIRE(again->report(all[e].trial, all[e].to, all[e].loss, nullptr).ok());
      }
    }
    CHECK(again->done());
    CHECK(again->best() == original->best());
    CHECK(again->steps_granted() == original->steps_granted());
  }
}

TEST_CASE("in_flight names the segments handed out and not reported, from their last step") {
  auto s = hpo_search::make(toml(), spec());
  REQUIRE(s.ok());
  auto a = s->next(), b = s->next();
  REQUIRE(a);
  REQUIRE(b);
  auto flying = s->in_flight();
  REQUIRE(flying.size() == 2);
  CHECK(same(flying[0], a));
  CHECK(same(flying[1], b));
  REQUIRE(s->report(a->trial, a->to, 2.5, nullptr).ok());
  auto again = hpo_search::resume(toml(), spec(), s->journal());
  REQUIRE(again.ok());
  flying = again->in_flight();
  REQUIRE(flying.size() == 1);  // a was paused at its rung (1 of 1 there: no quota to promote)
  CHECK(same(flying[0], b));
}

TEST_CASE("a journal that is not this search's is refused naming its first bad entry") {
  auto s = hpo_search::make(toml(), spec());
  REQUIRE(s.ok());
  auto a = s->next();
  REQUIRE(a);
  REQUIRE(s->report(a->trial, a->to, 2.5, nullptr).ok());
  std::vector<hpo_entry> j = s->journal();
  j[0].trial = 6;
  auto r = hpo_search::resume(toml(), spec(), j);
  REQUIRE(!r.ok());
  CHECK(r.err().message.find("journal entry 1 of 2: it recorded trial 6") != std::string::npos);
  j = s->journal();
  j[1].to = a->to + 5;  // a report past its target
  r = hpo_search::resume(toml(), spec(), j);
  REQUIRE(!r.ok());
  CHECK(r.err().message.find("journal entry 2 of 2") != std::string::npos);
  j = s->journal();
  j.push_back(j[1]);  // the same report twice
  r = hpo_search::resume(toml(), spec(), j);
  REQUIRE(!r.ok());
  CHECK(r.err().message.find("journal entry 3 of 3") != std::string::npos);
  CHECK(r.err().message.find("not running") != std::string::npos);
}
