// Residency: a job with files keeps at most spec.resident_fragments fragments
// (θ_p, m_p, e_p, the held update) in memory and reads the others back from
// their files. Nothing a site sees may change: every update, every θ_p pulled
// and the final θ are bit for bit those of the same job held wholly in
// memory, across a reload that reads no tensor; a fragment file that went bad
// while out of memory is named when it is needed, and the rest go on.
#include "services/aggregator/aggregation.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "services/aggregator/aggregator_service.hpp"
#include "services/aggregator/job_store.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <variant>
#include <vector>

using namespace loom;
using namespace loom::aggregator;
namespace fs = std::filesystem;

namespace {

nanos sec(double s) { return nanos(static_cast<std::int64_t>(s * 1e9)); }

constexpr int frags = 4;
constexpr std::size_t values = 64;

aggregation_spec spec(int resident) {
  aggregation_spec s;
  s.job = "res";
  s.flat_size = values;
  s.fragments = frags;
  s.sync_every = 4;
  s.codec = codec::codec_id::int8;  // a residual and a held payload that differ from U
  s.rounds.deadline_min = s.rounds.deadline_initial = s.rounds.deadline_max = sec(3600);
  s.resident_fragments = resident;
  return s;
}

std::vector<float> init() {
  std::vector<float> v(values);
  for (std::size_t i = 0; i < values; ++i) v[i] = 0.01f * static_cast<float>(i) - 0.3f;
  return v;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// Site `site`'s delta for `round` of fragment p (values from a fixed seed).
std::variant<delta_outcome, refusal> send(aggregation& a, const std::string& site, std::uint64_t round,
                                          std::uint32_t p, double t) {
  std::mt19937 rng(static_cast<unsigned>(round * 131 + p * 17 + site.size() + static_cast<unsigned>(site[0])));
  std::normal_distribution<float> n(0.0f, 0.01f);
  std::vector<float> v(values / frags);
  for (auto& x : v) x = n(rng);
  auto q = codec::encode(codec::codec_id::fp32, v).value();
  const std::string payload(reinterpret_cast<const char*>(q.data()), q.size());
  delta_header h;
  h.job = "res";
  h.meta = {site, round, p, round, v.size(), 100};
  h.codec = "fp32";
  h.payload_bytes = payload.size();
  h.payload_sha256 = std::string(crypto::as_view(crypto::sha256(payload)));
  return a.submit(h, payload, site, sec(t));
}

// Both sites' deltas for `round` of fragment p; the second closes it (and
// its save runs at once, as the engine's saver would).
void round_of(aggregation& a, std::uint64_t round, std::uint32_t p, double t) {
  REQUIRE(std::holds_alternative<delta_outcome>(send(a, "a", round, p, t)));
  auto out = send(a, "b", round, p, t + 1);
  REQUIRE(std::holds_alternative<delta_outcome>(out));
  const auto& closed = std::get<delta_outcome>(out).closed;
  REQUIRE(closed);
  REQUIRE(closed->saved.ok());
  if (closed->save) {
    REQUIRE(run_save(*closed->save).ok());
    a.save_done(p);
  }
}

// What a site would see of fragment p: the held update, and θ_p in fp32.
std::pair<std::string, std::string> seen(aggregation& a, std::uint32_t p) {
  auto update = a.pull("a", p, a.versions()[p] - 1, false);
  REQUIRE_MESSAGE(update.ok(), update.err().to_string());
  auto theta = a.pull("a", p, 0, true);
  REQUIRE_MESSAGE(theta.ok(), theta.err().to_string());
  return {*update.value().payload, *theta.value().payload};
}

std::unique_ptr<aggregation> make(const std::string& file, int resident) {
  auto a = aggregation::create(spec(resident), init(), file, sec(0)).value();
  a->defer_saves();
  REQUIRE(a->join("a", "peers/a").ok());
  REQUIRE(a->join("b", "peers/b").ok());
  return a;
}

}  // namespace

TEST_CASE("a job keeping one fragment in memory sends and ends bit for bit as one keeping all four") {
  files::temp_dir dir;
  auto one = make(dir.path() + "/one/state.bin", 1);
  auto all = make(dir.path() + "/all/state.bin", 0);
  CHECK(one->resident_fragments() == 1);  // created one fragment at a time
  CHECK(all->resident_fragments() == frags);
  double t = 1;
  for (std::uint64_t round = 0; round < 3; ++round)
    for (std::uint32_t p = 0; p < frags; ++p, t += 10) {
      for (auto* a : {one.get(), all.get()}) round_of(*a, round, p, t);
      CHECK(one->resident_fragments() == 1);  // after its save, the one just closed
      CAPTURE(round);
      CAPTURE(p);
      CHECK(seen(*one, p) == seen(*all, p));
      // Another fragment's pull: its held update and θ_p read back from its file.
      const std::uint32_t q = (p + 1) % frags;
      if (round > 0 || q < p) CHECK(seen(*one, q) == seen(*all, q));
    }
  CHECK(one->fragment_loads() >= 3 * frags);  // every close read its fragment back
  CHECK(one->fragment_unloads() >= one->fragment_loads());
  CHECK(all->fragment_loads() == 0);
  CHECK(same_bits(one->full_params().value(), all->full_params().value()));
  CHECK(one->resident_fragments() <= 2);  // full_params() reads, it does not load
}

TEST_CASE("a reload reads no tensor, then each fragment when needed, and goes on bit for bit") {
  files::temp_dir dir;
  const std::string file = dir.path() + "/one/state.bin";
  auto ref = make(dir.path() + "/ref/state.bin", 0);
  {
    auto a = make(file, 1);
    for (std::uint32_t p = 0; p < frags; ++p)
      for (auto* x : {a.get(), ref.get()}) round_of(*x, 0, p, 1 + p);
  }
  auto st = load_state(file, /*with_values=*/false);
  REQUIRE_MESSAGE(st.ok(), st.err().to_string());
  CHECK(st->values.empty());
  REQUIRE(st->held.size() == frags);
  for (const auto& h : st->held) CHECK_FALSE(h.payload);
  for (double n : st->theta_norms) CHECK(n > 0);  // kept in each file's header
  st->spec.resident_fragments = 1;
  auto b = aggregation::restore(std::move(*st), file, sec(100)).value();
  b->defer_saves();
  CHECK(b->resident_fragments() == 0);
  // A pull of the update a site missed: read from the file, as the reference sends it.
  for (std::uint32_t p = 0; p < frags; ++p) CHECK(seen(*b, p) == seen(*ref, p));
  for (std::uint32_t p = 0; p < frags; ++p)
    for (auto* x : {b.get(), ref.get()}) round_of(*x, 1, p, 200 + p);
  for (std::uint32_t p = 0; p < frags; ++p) CHECK(seen(*b, p) == seen(*ref, p));
  CHECK(same_bits(b->full_params().value(), ref->full_params().value()));
  CHECK(b->resident_fragments() <= 2);
}

TEST_CASE("a fragment file spoiled while its fragment is out of memory is named at its close, and the others go on") {
  files::temp_dir dir;
  const std::string file = dir.path() + "/one/state.bin";
  auto a = make(file, 1);
  round_of(*a, 0, 0, 1);
  round_of(*a, 0, 1, 2);  // fragment 0 left memory for it
  const std::string spoiled = dir.path() + "/one/fragment-0-v1.bin";
  REQUIRE(fs::exists(spoiled));
  std::string bytes = files::read_file(spoiled).value();
  bytes[bytes.size() - 5] ^= 0x40;
  REQUIRE(files::write_atomic(spoiled, bytes, 0600).ok());

  REQUIRE(std::holds_alternative<delta_outcome>(send(*a, "a", 1, 0, 10)));  // deltas need only ‖θ_0‖
  auto out = send(*a, "b", 1, 0, 11);
  REQUIRE(std::holds_alternative<delta_outcome>(out));
  const auto& closed = std::get<delta_outcome>(out).closed;
  REQUIRE(closed);
  CHECK_FALSE(closed->saved.ok());
  CHECK(closed->saved.code() == errc::corruption);
  CHECK(closed->saved.err().message.find("fragment-0-v1.bin") != std::string::npos);
  CHECK(closed->saved.err().message.find("SHA-256") != std::string::npos);
  CHECK(a->versions()[0] == 1);  // not closed: nothing changed
  auto pulled = a->pull("a", 0, 0, true);
  CHECK_FALSE(pulled.ok());
  CHECK(pulled.code() == errc::corruption);
  round_of(*a, 0, 2, 20);  // the other fragments go on
  CHECK(a->versions()[2] == 1);
}

TEST_CASE("LOOM_AGGREGATOR_RESIDENT_FRAGMENTS: unset is the default of one, 0 keeps every fragment, anything else is named") {
  CHECK(resident_fragments_from(nullptr).value() == 1);
  CHECK(resident_fragments_from("").value() == 1);
  CHECK(resident_fragments_from("0").value() == 0);
  CHECK(resident_fragments_from("3").value() == 3);
  for (const char* bad : {"-1", "two", "1x", "99999999999"}) {
    auto r = resident_fragments_from(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == errc::invalid_argument);
    CHECK(r.err().message.find(std::string("LOOM_AGGREGATOR_RESIDENT_FRAGMENTS=") + bad) == 0);
  }
}
