// aggregation: one job's uplink checks, downlink and persistence, without a
// socket — the delta server's calls made directly with an injected clock.
#include "services/aggregator/aggregation.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "services/aggregator/job_store.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace loom;
using namespace loom::aggregator;

namespace {

nanos sec(double s) { return nanos(static_cast<std::int64_t>(std::llround(s * 1e9))); }

// 8 values in 2 fragments of 4, plain averaging, fp32 downlink (exact), θ0 = 1.
aggregation_spec spec() {
  aggregation_spec s;
  s.job = "unit";
  s.flat_size = 8;
  s.fragments = 2;
  s.sync_every = 2;
  s.codec = codec::codec_id::fp32;
  s.outer = diloco::outer_options::plain_average();
  s.rounds.deadline_initial = sec(60);
  return s;
}

struct frame {
  delta_header h;
  std::string payload;
};

frame delta(const std::string& site, std::uint64_t round, std::uint32_t p, std::vector<float> v,
            codec::codec_id c = codec::codec_id::fp32) {
  frame f;
  std::vector<float> finite = v;
  for (auto& x : finite) x = std::isfinite(x) ? x : 0.0f;
  auto q = codec::encode(c, finite).value();
  f.payload.assign(reinterpret_cast<const char*>(q.data()), q.size());
  if (c == codec::codec_id::fp32)  // a site that skips the codec's own check: raw values, NaN included
    std::memcpy(f.payload.data() + codec::header_bytes, v.data(), v.size() * sizeof(float));
  f.h.job = "unit";
  f.h.meta = {site, round, p, round, v.size(), 100};
  f.h.codec = std::string(codec::to_string(c));
  f.h.payload_bytes = f.payload.size();
  f.h.payload_sha256 = std::string(crypto::as_view(crypto::sha256(f.payload)));
  return f;
}

std::variant<delta_outcome, refusal> send(aggregation& a, const frame& f, const std::string& principal, double t) {
  return a.submit(f.h, f.payload, principal, sec(t));
}

std::vector<float> decoded(const pull_answer& r) {
  std::vector<float> v(r.header.elements);
  auto st = codec::decode({reinterpret_cast<const std::byte*>(r.payload->data()), r.payload->size()}, v);
  REQUIRE(st.ok());
  return v;
}

std::unique_ptr<aggregation> two_sites(const std::string& file) {
  auto a = aggregation::create(spec(), std::vector<float>(8, 1.0f), file, sec(0)).value();
  REQUIRE(a->join("a", "peers/a").ok());
  REQUIRE(a->join("b", "peers/b").ok());
  return a;
}

}  // namespace

TEST_CASE("two sites' deltas close a round: the outer update is their mean and pulled parameters are θ minus it") {
  files::temp_dir dir;
  auto a = two_sites(dir.path() + "/unit/state.bin");
  auto first = send(*a, delta("a", 0, 0, {0.1f, 0.2f, 0.3f, 0.4f}), "a", 1);
  REQUIRE(std::holds_alternative<delta_outcome>(first));
  CHECK_FALSE(std::get<delta_outcome>(first).closed);
  auto second = send(*a, delta("b", 0, 0, {0.3f, 0.2f, 0.1f, 0.0f}), "b", 2);
  REQUIRE(std::holds_alternative<delta_outcome>(second));
  const auto& out = std::get<delta_outcome>(second);
  REQUIRE(out.closed);
  CHECK(out.closed->round.by_quorum);
  CHECK(out.closed->saved.ok());
  CHECK(out.version == 1);

  auto up = a->pull("a", 0, 0, false).value();
  REQUIRE(up.has_update);
  CHECK(up.header.kind == update_kind::outer_update);
  CHECK(up.header.version == 1);
  CHECK(up.header.contributors == 2);
  const auto u = decoded(up);
  CHECK(u[0] == doctest::Approx(0.2f));
  CHECK(u[3] == doctest::Approx(0.2f));
  auto params = a->pull("b", 0, 0, true).value();
  CHECK(params.header.kind == update_kind::params);
  const auto theta = decoded(params);
  CHECK(theta[0] == doctest::Approx(0.8f));
  CHECK(theta[1] == doctest::Approx(0.8f));
  auto none = a->pull("a", 0, 1, false).value();
  CHECK_FALSE(none.has_update);
  CHECK(none.last_round == 0);
  CHECK(a->bytes_received() == 2 * codec::encoded_bytes(codec::codec_id::fp32, 4));
}

TEST_CASE("a forged name, a truncated frame, a NaN, a wrong size and a stale base are refused and the round goes on") {
  files::temp_dir dir;
  auto a = two_sites(dir.path() + "/unit/state.bin");
  auto reason = [](const std::variant<delta_outcome, refusal>& r) {
    return std::holds_alternative<refusal>(r) ? std::get<refusal>(r).reason : std::string("accepted");
  };
  CHECK(reason(send(*a, delta("b", 0, 0, {1, 1, 1, 1}), "a", 1)) == "forged_site");
  auto cut = delta("a", 0, 0, {1, 1, 1, 1});
  cut.payload.resize(cut.payload.size() - 3);
  auto truncated = send(*a, cut, "a", 1);
  CHECK(reason(truncated) == "truncated_frame");
  CHECK(std::get<refusal>(truncated).err.message.find("truncated frame") != std::string::npos);
  auto nan = send(*a, delta("a", 0, 0, {1, std::numeric_limits<float>::quiet_NaN(), 1, 1}), "a", 1);
  CHECK(reason(nan) == "bad_payload");
  CHECK(std::get<refusal>(nan).err.message.find("value 1 is nan") != std::string::npos);
  CHECK(reason(send(*a, delta("a", 0, 0, {1, 1, 1}), "a", 1)) == "wrong_shape");
  CHECK(reason(send(*a, delta("a", 0, 5, {1, 1, 1, 1}), "a", 1)) == "wrong_fragment");
  CHECK(reason(send(*a, delta("c", 0, 0, {1, 1, 1, 1}), "c", 1)) == "unknown_site");
  CHECK(reason(send(*a, delta("a", 3, 0, {1, 1, 1, 1}), "a", 1)) == "future_round");
  CHECK(a->wire_refusals().at("forged_site") == 1);

  // The round still closes with the two good deltas, at their mean.
  CHECK(reason(send(*a, delta("a", 0, 0, {0.5f, 0.5f, 0.5f, 0.5f}), "a", 2)) == "accepted");
  auto closing = send(*a, delta("b", 0, 0, {0.5f, 0.5f, 0.5f, 0.5f}), "b", 3);
  REQUIRE(std::holds_alternative<delta_outcome>(closing));
  CHECK(std::get<delta_outcome>(closing).closed);
  CHECK(decoded(a->pull("a", 0, 0, true).value())[0] == doctest::Approx(0.5f));
  CHECK(reason(send(*a, delta("a", 0, 0, {1, 1, 1, 1}), "a", 4)) == "duplicate");
}

TEST_CASE("a restarted aggregation keeps every closed round and its update, takes an unsaved delta again once and a saved one never") {
  files::temp_dir dir;
  const std::string file = dir.path() + "/unit/state.bin";
  std::shared_ptr<const std::string> held;
  {
    auto a = two_sites(file);
    REQUIRE(std::holds_alternative<delta_outcome>(send(*a, delta("a", 0, 0, {0.2f, 0.2f, 0.2f, 0.2f}), "a", 1)));
    REQUIRE(std::get<delta_outcome>(send(*a, delta("b", 0, 0, {0.4f, 0.4f, 0.4f, 0.4f}), "b", 2)).closed);
    held = a->pull("a", 0, 0, false).value().payload;
    // Fragment 1: a's delta is summed but no step saved it yet; then the process dies.
    REQUIRE(std::holds_alternative<delta_outcome>(send(*a, delta("a", 0, 1, {1, 1, 1, 1}), "a", 3)));
    CHECK(a->rounds().last_round("a", 1) == 0);
  }
  auto st = load_state(file);
  REQUIRE(st.ok());
  CHECK(st->versions == std::vector<std::uint64_t>{1, 0});
  auto b = aggregation::restore(std::move(*st), file, sec(100)).value();
  CHECK(b->restarts() == 1);
  CHECK(b->rounds().active_sites() == 2);
  CHECK(b->rounds().last_round("a", 0) == 0);
  CHECK(b->rounds().last_round("a", 1) == -1);  // not in the file: its re-send is welcome
  CHECK(decoded(b->pull("a", 0, 0, true).value())[0] == doctest::Approx(0.7f));
  auto update = b->pull("b", 0, 0, false).value();  // the outer update survives, byte for byte
  CHECK(update.header.kind == update_kind::outer_update);
  REQUIRE(held);
  CHECK(*update.payload == *held);
  auto again = send(*b, delta("a", 0, 0, {0.2f, 0.2f, 0.2f, 0.2f}), "a", 101);
  REQUIRE(std::holds_alternative<refusal>(again));
  CHECK(std::get<refusal>(again).reason == "duplicate");
  REQUIRE(std::holds_alternative<delta_outcome>(send(*b, delta("a", 0, 1, {1, 1, 1, 1}), "a", 102)));
  auto closed = send(*b, delta("b", 0, 1, {3, 3, 3, 3}), "b", 103);
  REQUIRE(std::get<delta_outcome>(closed).closed);
  CHECK(decoded(b->pull("a", 1, 0, true).value())[0] == doctest::Approx(-1.0f));  // 1 − mean(1, 3)
}

TEST_CASE("with deferred saves a closed round's version is published once saved, its fragment waits to close again, and the others go on") {
  files::temp_dir dir;
  auto s = spec();
  s.rounds.quorum_sites = 1;  // one delta closes a round
  auto a = aggregation::create(s, std::vector<float>(8, 1.0f), dir.path() + "/unit/state.bin", sec(0)).value();
  REQUIRE(a->join("a", "peers/a").ok());
  REQUIRE(a->join("b", "peers/b").ok());
  a->defer_saves();
  auto first = send(*a, delta("a", 0, 0, {0.2f, 0.2f, 0.2f, 0.2f}), "a", 1);
  REQUIRE(std::holds_alternative<delta_outcome>(first));
  const auto& out = std::get<delta_outcome>(first);
  REQUIRE(out.closed);
  REQUIRE(out.closed->save);  // for the caller to write off its lock
  CHECK(out.closed->saved.ok());
  CHECK(out.version == 0);  // version 1 is not published yet
  CHECK(a->rounds().open_round(0) == 1);
  auto nothing = a->pull("a", 0, 0, false).value();
  CHECK_FALSE(nothing.has_update);
  CHECK(nothing.version == 0);
  CHECK(nothing.last_round == 0);  // held (in memory): not re-sent
  CHECK(a->pull("a", 0, 0, true).code() == errc::unavailable);
  CHECK(a->join("b", "peers/b").value().versions == std::vector<std::uint64_t>{0, 0});

  // Meanwhile: b's delta for round 0 comes late into round 1, whose deadline
  // passes; fragment 1's round closes by its quorum.
  auto late = send(*a, delta("b", 0, 0, {0.4f, 0.4f, 0.4f, 0.4f}), "b", 2);
  REQUIRE(std::holds_alternative<delta_outcome>(late));
  CHECK(std::get<delta_outcome>(late).acc.late);
  CHECK(a->tick(sec(100)).empty());  // closable, but its fragment's save is not done
  auto other = send(*a, delta("a", 0, 1, {0.1f, 0.1f, 0.1f, 0.1f}), "a", 3);
  REQUIRE(std::get<delta_outcome>(other).closed);
  auto save1 = std::get<delta_outcome>(other).closed->save;

  REQUIRE(run_save(*out.closed->save).ok());
  a->save_done(0);
  auto update = a->pull("a", 0, 0, false).value();
  CHECK(update.has_update);
  CHECK(update.header.version == 1);
  CHECK(decoded(update)[0] == doctest::Approx(0.2f));
  auto again = a->tick(sec(100));  // now the late delta's round closes
  REQUIRE(again.size() == 1);
  CHECK(again[0].round.version == 2);
  REQUIRE(run_save(*save1).ok());
  a->save_done(1);
  REQUIRE(run_save(*again[0].save).ok());
  a->save_done(0);
  auto st = load_state(dir.path() + "/unit/state.bin");
  REQUIRE(st.ok());
  CHECK(st->versions == std::vector<std::uint64_t>{2, 1});
  CHECK(st->sites[1].last_round == std::vector<std::int64_t>{0, -1});
}

TEST_CASE("a delta claiming more tokens than the stage trains, or moving a fragment past the norm bound, is refused with its reason and counted") {
  files::temp_dir dir;
  auto s = spec();
  s.max_delta_tokens = 1000;
  auto a = aggregation::create(s, std::vector<float>(8, 1.0f), dir.path() + "/unit/state.bin", sec(0)).value();
  REQUIRE(a->join("a", "peers/a").ok());
  auto reason = [](const std::variant<delta_outcome, refusal>& out) {
    const auto* r = std::get_if<refusal>(&out);
    return r ? r->reason + ": " + r->err.message : std::string();
  };
  auto many = delta("a", 0, 0, {0.1f, 0.1f, 0.1f, 0.1f});
  many.h.meta.tokens = 1001;
  CHECK(reason(send(*a, many, "a", 1)).rfind("too_many_tokens: ", 0) == 0);
  many.h.meta.tokens = UINT64_MAX;  // 2^64 - 1: once accepted, and weighted by it
  CHECK(reason(send(*a, many, "a", 1)).find("claims 18446744073709551615 tokens; the stage trains at most 1000") !=
        std::string::npos);
  // θ_p = (1, 1, 1, 1): ‖θ_p‖ = 2, n = 4, so the bound is 4·2 + 4·2 = 16.
  CHECK(reason(send(*a, delta("a", 0, 0, {1e20f, 0, 0, 0}), "a", 1)).rfind("norm_bound: ", 0) == 0);
  CHECK(reason(send(*a, delta("a", 0, 0, {8.1f, 8.1f, 8.1f, 8.1f}), "a", 1)).find("the bound is 16") !=
        std::string::npos);
  // A non-finite value is the codec's (or job_rounds') to name, not the bound's.
  CHECK(reason(send(*a, delta("a", 0, 0, {1, std::nanf(""), 1, 1}), "a", 1)).rfind("norm_bound", 0) != 0);
  CHECK(reason(send(*a, delta("a", 0, 0, {7.9f, 7.9f, 7.9f, 7.9f}), "a", 1)).empty());  // 15.8: within
  CHECK(a->wire_refusals().at("too_many_tokens") == 2);
  CHECK(a->wire_refusals().at("norm_bound") == 2);
}
