// job_store / fragment_store: an aggregation's state saved per fragment —
// a close writes its fragment's file and the manifest only, the files load
// back bit for bit, a crash between the two writes resolves to the manifest's
// state, a corrupt or missing file is named, and a format-1 state.bin (the
// whole job in one file, as saved before) still loads and is upgraded.
#include "services/aggregator/job_store.hpp"

#include "libs/atrest/kek_store.hpp"
#include "libs/atrest/object.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/wire.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <variant>

using namespace loom;
using namespace loom::aggregator;
namespace fs = std::filesystem;

namespace {

nanos sec(double s) { return nanos(static_cast<std::int64_t>(s * 1e9)); }

// 8 values in 2 fragments of 4, Nesterov (so a momentum), int8 downlink (so a
// residual). Rounds close by quorum only: a reloaded job's deadlines start
// afresh, so deadlines would close another job's rounds at other times.
aggregation_spec spec() {
  aggregation_spec s;
  s.job = "unit";
  s.flat_size = 8;
  s.fragments = 2;
  s.sync_every = 2;
  s.codec = codec::codec_id::int8;
  s.rounds.deadline_min = s.rounds.deadline_initial = s.rounds.deadline_max = sec(3600);
  return s;
}

std::variant<delta_outcome, refusal> send(aggregation& a, const std::string& site, std::uint64_t round,
                                          std::uint32_t p, const std::vector<float>& v, double t) {
  auto q = codec::encode(codec::codec_id::fp32, v).value();
  const std::string payload(reinterpret_cast<const char*>(q.data()), q.size());
  delta_header h;
  h.job = "unit";
  h.meta = {site, round, p, round, v.size(), 100};
  h.codec = "fp32";
  h.payload_bytes = payload.size();
  h.payload_sha256 = std::string(crypto::as_view(crypto::sha256(payload)));
  return a.submit(h, payload, site, sec(t));
}

std::unique_ptr<aggregation> two_sites(const std::string& file) {
  auto a = aggregation::create(spec(), {1, 2, 3, 4, 5, 6, 7, 8}, file, sec(0)).value();
  REQUIRE(a->join("a", "peers/a").ok());
  REQUIRE(a->join("b", "peers/b").ok());
  return a;
}

// Round 0 of fragment 0: a's and b's deltas; b's closes it.
std::optional<close_report> first_round(aggregation& a) {
  REQUIRE(std::holds_alternative<delta_outcome>(send(a, "a", 0, 0, {0.11f, -0.2f, 0.3f, 0.05f}, 1)));
  auto out = send(a, "b", 0, 0, {0.3f, 0.21f, -0.1f, 0.02f}, 2);
  REQUIRE(std::holds_alternative<delta_outcome>(out));
  return std::get<delta_outcome>(out).closed;
}

// The rounds after it, sent to a job and to a reference: what each pulls must match bit for bit.
void same_next_rounds(aggregation& a, aggregation& ref) {
  for (auto* x : {&a, &ref}) {
    REQUIRE(std::holds_alternative<delta_outcome>(send(*x, "a", 1, 0, {0.01f, 0.02f, -0.03f, 0.04f}, 200)));
    REQUIRE(std::holds_alternative<delta_outcome>(send(*x, "b", 1, 0, {0.05f, -0.06f, 0.07f, 0.08f}, 201)));
    REQUIRE(std::holds_alternative<delta_outcome>(send(*x, "a", 0, 1, {0.5f, 0.25f, -0.125f, 1}, 202)));
    REQUIRE(std::holds_alternative<delta_outcome>(send(*x, "b", 0, 1, {-0.5f, 0.75f, 0.125f, 2}, 203)));
  }
  for (std::uint32_t p = 0; p < 2; ++p) {
    auto mine = a.pull("a", p, p == 0 ? 1 : 0, false).value(), theirs = ref.pull("a", p, p == 0 ? 1 : 0, false).value();
    REQUIRE(mine.has_update);
    CHECK(mine.header.version == theirs.header.version);
    CHECK(*mine.payload == *theirs.payload);  // the update: θ, m and e_p all enter it
  }
  const auto x = a.rounds().optimizer().full_params(), y = ref.rounds().optimizer().full_params();
  REQUIRE(x.size() == y.size());
  CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
}

std::set<std::string> names(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

bool same_bits(std::span<const float> x, std::span<const float> y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size_bytes()) == 0;
}

// A saved state's tensors in the model's layout (the residual: every
// fragment's, in fragment order), as format 1 kept them.
struct whole {
  std::vector<float> params, momentum, residual;
};
whole assembled(const saved_state& s) {
  const auto plan = make_plan(s.spec).value();
  whole w;
  w.params.resize(plan.total());
  if (s.spec.outer.momentum != 0) w.momentum.resize(plan.total());
  for (int p = 0; p < plan.fragments(); ++p) {
    const auto& v = s.values.at(static_cast<std::size_t>(p));
    plan.scatter(p, v.params, w.params);
    if (!w.momentum.empty()) plan.scatter(p, v.momentum, w.momentum);
    w.residual.insert(w.residual.end(), v.residual.begin(), v.residual.end());
  }
  return w;
}

// Format 1 as the aggregator wrote it before per-fragment saves (its save_state,
// kept here to make such a file): the whole job in one state.bin.
void write_format1(const std::string& path, const saved_state& s) {
  loom::v1::AggregationState h;
  to_wire(s.spec, h.mutable_spec());
  for (auto v : s.versions) h.add_versions(v);
  for (const auto& site : s.sites) {
    auto* w = h.add_sites();
    w->set_id(site.id);
    w->set_key_id(site.key_id);
    w->set_phase(static_cast<std::uint32_t>(site.phase));
    w->set_accepted(site.accepted);
    for (auto r : site.last_round) w->add_last_round(r);
  }
  const whole t = assembled(s);
  h.set_params(t.params.size());
  h.set_momentum(t.momentum.size());
  h.set_residual(t.residual.size());
  std::string tensors;
  for (const auto* v : {&t.params, &t.momentum, &t.residual})
    tensors.append(reinterpret_cast<const char*>(v->data()), v->size() * sizeof(float));
  for (const auto& held : s.held) {
    auto* w = h.add_held();
    w->set_fragment(held.header.fragment);
    w->set_version(held.header.version);
    w->set_round(held.header.round);
    w->set_contributors(held.header.contributors);
    w->set_codec(held.header.codec);
    w->set_payload_bytes(held.payload->size());
    tensors += *held.payload;
  }
  h.set_tensors_sha256(std::string(crypto::as_view(crypto::sha256(tensors))));
  h.set_restarts(s.restarts);
  h.set_rounds_closed(s.stats.rounds_closed);
  h.set_arrivals(s.stats.arrivals);
  for (auto r : s.stats.rejected) h.add_rejected(r);
  const std::string header = h.SerializeAsString();
  std::string file("LOOMAGG1");
  const std::uint64_t len = header.size();
  file.append(reinterpret_cast<const char*>(&len), sizeof len);
  file += header + tensors;
  REQUIRE(files::make_dirs(fs::path(path).parent_path().string()).ok());
  REQUIRE(files::write_atomic(path, file, 0600).ok());
}

}  // namespace

TEST_CASE("a fragment's close writes only its own file and the manifest, and the files load back bit for bit") {
  files::temp_dir dir;
  const std::string job_dir = dir.path() + "/unit", file = job_dir + "/state.bin";
  auto a = two_sites(file);
  CHECK(names(job_dir) == std::set<std::string>{"fragment-0-v0.bin", "fragment-1-v0.bin", "state.bin"});
  const std::string untouched = files::read_file(job_dir + "/fragment-1-v0.bin").value();
  auto closed = first_round(*a);
  REQUIRE(closed);
  CHECK(closed->saved.ok());
  CHECK_FALSE(closed->save);  // not deferred: written in close()
  // Fragment 0's new version in a new file (the old one gone); fragment 1's file as it was.
  CHECK(names(job_dir) == std::set<std::string>{"fragment-0-v1.bin", "fragment-1-v0.bin", "state.bin"});
  CHECK(files::read_file(job_dir + "/fragment-1-v0.bin").value() == untouched);
  CHECK(files::read_file(file).value().size() < 1024);  // the manifest: no tensors

  auto st = load_state(file);
  REQUIRE_MESSAGE(st.ok(), st.err().to_string());
  CHECK(st->versions == std::vector<std::uint64_t>{1, 0});
  REQUIRE(st->files.size() == 2);
  CHECK(st->files[0].name == "fragment-0-v1.bin");
  const auto& opt = a->rounds().optimizer();
  const whole t = assembled(*st);
  CHECK(same_bits(t.params, opt.full_params()));
  CHECK(same_bits(t.momentum, opt.full_momentum()));
  CHECK(std::any_of(t.residual.begin(), t.residual.begin() + 4, [](float e) { return e != 0; }));  // int8 left some
  REQUIRE(st->sites.size() == 2);
  CHECK(st->sites[1].last_round == std::vector<std::int64_t>{0, -1});
  REQUIRE(st->held.size() == 1);
  CHECK(*st->held[0].payload == *a->pull("a", 0, 0, false).value().payload);
  CHECK(st->stats.rounds_closed == 1);

  // Reloaded, it goes on exactly as a job that never stopped.
  auto ref = aggregation::create(spec(), {1, 2, 3, 4, 5, 6, 7, 8}, "", sec(0)).value();
  REQUIRE(ref->join("a", "peers/a").ok());
  REQUIRE(ref->join("b", "peers/b").ok());
  REQUIRE(first_round(*ref));
  a.reset();
  auto b = aggregation::restore(std::move(*st), file, sec(100)).value();
  CHECK(b->restarts() == 1);
  same_next_rounds(*b, *ref);
}

TEST_CASE("a crash between a fragment's file and the manifest resolves to the manifest's state, either way round") {
  files::temp_dir dir;
  const std::string job_dir = dir.path() + "/unit", file = job_dir + "/state.bin";
  auto ref = aggregation::create(spec(), {1, 2, 3, 4, 5, 6, 7, 8}, "", sec(0)).value();
  REQUIRE(ref->join("a", "peers/a").ok());
  REQUIRE(ref->join("b", "peers/b").ok());
  REQUIRE(first_round(*ref));

  SUBCASE("the new fragment file is written, the manifest is not: the close is lost, its deltas are taken again") {
    auto a = two_sites(file);
    a->defer_saves();
    auto closed = first_round(*a);
    REQUIRE(closed);
    REQUIRE(closed->save);
    REQUIRE(save_fragment(job_dir, closed->save->fragment).ok());  // ... and the process dies here
    closed.reset();
    a.reset();
    CHECK(names(job_dir).count("fragment-0-v1.bin") == 1);
    auto st = load_state(file);
    REQUIRE(st.ok());
    CHECK(st->versions == std::vector<std::uint64_t>{0, 0});  // the manifest names fragment-0-v0
    // The manifest is the job as made: the sites' joins go to disk with a close's save, as before.
    CHECK(st->sites.empty());
    auto b = aggregation::restore(std::move(*st), file, sec(100)).value();
    CHECK(names(job_dir) == std::set<std::string>{"fragment-0-v0.bin", "fragment-1-v0.bin", "state.bin"});
    REQUIRE(b->join("a", "peers/a").ok());
    REQUIRE(b->join("b", "peers/b").ok());
    auto again = first_round(*b);  // the sites were never told of version 1: they send the same deltas
    REQUIRE(again);
    same_next_rounds(*b, *ref);
  }
  SUBCASE("the manifest is written, the file it replaced is not yet removed: the manifest's version, the old file goes") {
    auto a = two_sites(file);
    const std::string old_bytes = files::read_file(job_dir + "/fragment-0-v0.bin").value();
    REQUIRE(first_round(*a));
    REQUIRE(files::write_atomic(job_dir + "/fragment-0-v0.bin", old_bytes).ok());  // the removal never happened
    a.reset();
    auto st = load_state(file);
    REQUIRE(st.ok());
    CHECK(st->versions == std::vector<std::uint64_t>{1, 0});
    auto b = aggregation::restore(std::move(*st), file, sec(100)).value();
    CHECK(names(job_dir) == std::set<std::string>{"fragment-0-v1.bin", "fragment-1-v0.bin", "state.bin"});
    same_next_rounds(*b, *ref);
  }
}

TEST_CASE("a corrupt or missing fragment file, or a manifest cut short, is refused as corrupt naming the file and the job") {
  files::temp_dir dir;
  const std::string job_dir = dir.path() + "/unit", file = job_dir + "/state.bin";
  { REQUIRE(first_round(*two_sites(file))); }
  const std::string frag = job_dir + "/fragment-1-v0.bin";
  std::string bytes = files::read_file(frag).value();
  bytes[bytes.size() - 3] ^= 0x40;
  REQUIRE(files::write_atomic(frag, bytes).ok());
  auto flipped = load_state(file);
  REQUIRE_FALSE(flipped.ok());
  CHECK(flipped.code() == errc::corruption);
  CHECK(flipped.err().message == "aggregation unit: fragment file " + frag + ": SHA-256 differs from the manifest's");

  fs::remove(frag);
  auto missing = load_state(file);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.code() == errc::corruption);
  CHECK(missing.err().message == "aggregation unit: fragment file " + frag + ": missing (the manifest names it)");

  const std::string manifest = files::read_file(file).value();
  REQUIRE(files::write_atomic(file, manifest.substr(0, manifest.size() - 4)).ok());
  auto cut = load_state(file);
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.code() == errc::corruption);
  CHECK(cut.err().message.find("aggregation state " + file + ": ") == 0);
}

TEST_CASE("with the process's keys at rest the fragment files are sealed, load back bit for bit, and a flipped byte is named") {
  files::temp_dir dir;
  auto opened = atrest::kek_store::open(dir.path() + "/keys", {}, std::chrono::system_clock::now());
  REQUIRE(opened.ok());
  struct keys_for_scope {
    explicit keys_for_scope(std::shared_ptr<atrest::kek_store> k) { atrest::set_process_keys(std::move(k)); }
    ~keys_for_scope() { atrest::set_process_keys(nullptr); }
  } scope(std::shared_ptr<atrest::kek_store>(std::move(*opened)));
  const std::string job_dir = dir.path() + "/unit", file = job_dir + "/state.bin";
  auto a = two_sites(file);
  const std::string v0 = job_dir + "/fragment-1-v0.bin";
  CHECK(atrest::is_sealed_file(v0));
  // θ of fragment 1 (5, 6, 7, 8 in fp32) is not in the file in the clear.
  const std::vector<float> theta1{5, 6, 7, 8};
  const std::string clear(reinterpret_cast<const char*>(theta1.data()), theta1.size() * sizeof(float));
  CHECK(files::read_file(v0).value().find(clear) == std::string::npos);
  REQUIRE(first_round(*a));
  CHECK(atrest::is_sealed_file(job_dir + "/fragment-0-v1.bin"));
  auto st = load_state(file);
  REQUIRE_MESSAGE(st.ok(), st.err().to_string());
  const whole t = assembled(*st);
  CHECK(same_bits(t.params, a->rounds().optimizer().full_params()));
  CHECK(same_bits(t.momentum, a->rounds().optimizer().full_momentum()));

  std::string bytes = files::read_file(v0).value();
  bytes[bytes.size() - 40] ^= 0x40;
  REQUIRE(files::write_atomic(v0, bytes).ok());
  auto flipped = load_state(file);
  REQUIRE_FALSE(flipped.ok());
  CHECK(flipped.code() == errc::corruption);
  CHECK_MESSAGE(flipped.err().message.find("fragment file " + v0 + ": ") != std::string::npos, flipped.err().message);
  CHECK_MESSAGE(flipped.err().message.find("authentication") != std::string::npos, flipped.err().message);
  // Without keys it cannot be read, and says so.
  atrest::set_process_keys(nullptr);
  auto keyless = load_state(file);
  REQUIRE_FALSE(keyless.ok());
  CHECK_MESSAGE(keyless.err().message.find("no keys at rest") != std::string::npos, keyless.err().message);
}

TEST_CASE("a format-1 state.bin (the whole job in one file) loads as it was saved and is written as format 2 on reload") {
  files::temp_dir dir;
  const std::string job_dir = dir.path() + "/unit", file = job_dir + "/state.bin";
  { REQUIRE(first_round(*two_sites(file))); }
  const saved_state saved = load_state(file).value();
  fs::remove_all(job_dir);  // an old aggregator's directory: state.bin alone
  write_format1(file, saved);
  REQUIRE(names(job_dir) == std::set<std::string>{"state.bin"});

  auto old = load_state(file);
  REQUIRE_MESSAGE(old.ok(), old.err().to_string());
  CHECK(old->files.empty());
  const whole was = assembled(saved), got = assembled(*old);
  CHECK(same_bits(got.params, was.params));
  CHECK(same_bits(got.momentum, was.momentum));
  CHECK(same_bits(got.residual, was.residual));
  CHECK(old->versions == saved.versions);
  CHECK(old->sites[1].last_round == saved.sites[1].last_round);
  REQUIRE(old->held.size() == 1);
  CHECK(*old->held[0].payload == *saved.held[0].payload);
  CHECK(old->held[0].header.payload_sha256 == saved.held[0].header.payload_sha256);
  CHECK(old->stats.rounds_closed == 1);

  auto b = aggregation::restore(std::move(*old), file, sec(100)).value();
  CHECK(files::read_file(file).value().rfind("LOOMAGG2", 0) == 0);
  CHECK(names(job_dir) == std::set<std::string>{"fragment-0-v1.bin", "fragment-1-v0.bin", "state.bin"});
  const whole now = assembled(load_state(file).value());
  CHECK(same_bits(now.params, was.params));
  CHECK(same_bits(now.momentum, was.momentum));
  CHECK(same_bits(now.residual, was.residual));
  CHECK(load_state(file).value().restarts == 1);
}
