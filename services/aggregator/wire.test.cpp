// The aggregator's wire seam: every header field round-trips, a bad header is
// refused naming the field before its payload is looked at, a payload frame
// must match its header's size and SHA-256, and RoundStatus reports a
// fragment's rounds.
#include "services/aggregator/wire.hpp"

#include "libs/crypto/hash.hpp"
#include "loom/v1/aggregator.pb.h"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::aggregator;

namespace {

delta_header sample_delta() {
  delta_header d;
  d.job = "job-7";
  d.meta = {"site-a", 12, 3, 11, 1000, 65536};
  d.codec = "int8";
  d.payload_bytes = 1032;
  d.payload_sha256 = std::string(crypto::as_view(crypto::sha256("x")));
  return d;
}

}  // namespace

TEST_CASE("every field of a delta header survives the trip through DeltaHeader") {
  v1::DeltaHeader w;
  to_wire(sample_delta(), &w);
  // Every field but payload_offset, which is the delta socket's streaming (delta_streams), not the header's.
  CHECK(v1::DeltaHeader::descriptor()->field_count() == 11);
  auto back = from_wire(w);
  REQUIRE(back.ok());
  CHECK(back->job == "job-7");
  CHECK(back->meta.site == "site-a");
  CHECK(back->meta.round == 12);
  CHECK(back->meta.fragment == 3);
  CHECK(back->meta.base_version == 11);
  CHECK(back->meta.elements == 1000);
  CHECK(back->meta.tokens == 65536);
  CHECK(back->codec == "int8");
  CHECK(back->payload_bytes == 1032);
  CHECK(back->payload_sha256 == sample_delta().payload_sha256);
}

TEST_CASE("a delta header with a missing or impossible field is refused, naming it") {
  auto refused = [](auto change) {
    auto d = sample_delta();
    change(d);
    v1::DeltaHeader w;
    to_wire(d, &w);
    auto r = from_wire(w);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == errc::invalid_argument);
    return r.err().message;
  };
  CHECK(refused([](delta_header& d) { d.job.clear(); }) == "DeltaHeader: job is empty");
  CHECK(refused([](delta_header& d) { d.meta.site.clear(); }) == "DeltaHeader: site is empty");
  CHECK(refused([](delta_header& d) { d.codec = "INT8;rm"; }) == "DeltaHeader: codec 'INT8;rm' is not 1-32 of [a-z0-9_]");
  CHECK(refused([](delta_header& d) { d.meta.elements = 0; }) == "DeltaHeader: element_count is 0");
  CHECK(refused([](delta_header& d) { d.payload_bytes = 0; }) == "DeltaHeader: payload_bytes is 0");
  CHECK(refused([](delta_header& d) { d.payload_bytes = 8097; }) ==
        "DeltaHeader: payload_bytes 8097 exceeds fp32 for 1000 values plus 4096");
  CHECK(refused([](delta_header& d) { d.payload_sha256 = "short"; }) ==
        "DeltaHeader: payload_sha256 has 5 bytes, not 32");
}

TEST_CASE("a global update header round-trips and an outer update must follow its base version") {
  global_update_header g;
  g.job = "job-7";
  g.fragment = 2;
  g.version = 9;
  g.base_version = 8;
  g.kind = update_kind::outer_update;
  g.codec = "fp16";
  g.elements = 500;
  g.payload_bytes = 1000;
  g.payload_sha256 = std::string(32, '\x01');
  g.round = 8;
  g.contributors = 4;
  v1::GlobalUpdateHeader w;
  to_wire(g, &w);
  // Every field but payload_offset, a sliced pull's (the delta server's), not the header's.
  CHECK(v1::GlobalUpdateHeader::descriptor()->field_count() == 12);
  auto back = from_wire(w);
  REQUIRE(back.ok());
  CHECK(back->fragment == 2);
  CHECK(back->version == 9);
  CHECK(back->base_version == 8);
  CHECK(back->kind == update_kind::outer_update);
  CHECK(back->codec == "fp16");
  CHECK(back->elements == 500);
  CHECK(back->payload_bytes == 1000);
  CHECK(back->round == 8);
  CHECK(back->contributors == 4);
  w.set_base_version(5);
  auto gap = from_wire(w);
  REQUIRE_FALSE(gap.ok());
  CHECK(gap.err().message == "GlobalUpdateHeader: an outer update to version 9 must have base_version 8, got 5");
  w.set_kind(v1::GLOBAL_UPDATE_KIND_UNSPECIFIED);
  CHECK(from_wire(w).err().message == "GlobalUpdateHeader: kind is not set");
  w.set_kind(v1::GLOBAL_PARAMS);
  CHECK(from_wire(w).ok());  // parameters stand alone: any base
}

TEST_CASE("a payload frame must have its header's size and SHA-256") {
  const std::string payload(100, 'p');
  const std::string sha(crypto::as_view(crypto::sha256(payload)));
  CHECK(check_payload(100, sha, payload).ok());
  auto cut = check_payload(100, sha, std::string_view(payload).substr(0, 60));
  CHECK(cut.code() == errc::corruption);
  CHECK(cut.err().message == "truncated frame: the header says 100 payload bytes, the frame has 60");
  std::string flipped = payload;
  flipped[7] = 'q';
  auto forged = check_payload(100, sha, flipped);
  CHECK(forged.code() == errc::corruption);
  CHECK(forged.err().message.find("SHA-256 mismatch") != std::string::npos);
}

TEST_CASE("RoundStatus reports a fragment's open round, quorum, arrivals and the counters") {
  auto plan = diloco::fragment_plan::flat(4, 2, 10).value();
  auto opt = diloco::outer_optimizer::make(plan, std::vector<float>(4, 0.0f), {}).value();
  round_options o;
  o.deadline_initial = std::chrono::seconds(30);
  auto j = job_rounds::make(std::move(opt), o, nanos(0)).value();
  for (const char* s : {"a", "b"}) {
    REQUIRE(j.enrol(s, std::string("k") + s).ok());
    REQUIRE(j.join(s).ok());
  }
  const std::vector<float> v{1, 1};
  REQUIRE(j.submit({"a", 0, 1, 0, 2, 10}, v, nanos(5)).ok());
  CHECK_FALSE(j.submit({"zz", 0, 1, 0, 2, 10}, v, nanos(6)).ok());
  v1::RoundStatus w;
  to_wire(j, "job-7", 1, &w);
  CHECK(w.job() == "job-7");
  CHECK(w.fragment() == 1);
  CHECK(w.round() == 0);
  CHECK(w.version() == 0);
  CHECK(w.active_sites() == 2);
  CHECK(w.quorum() == 2);
  CHECK(w.arrived() == 1);
  CHECK(w.deadline_ms() == 30000);
  CHECK(w.rejected_total().at("unknown_site") == 1);
  CHECK(w.rejected_total().size() == 1);
}

TEST_CASE("an aggregation spec takes the defaults for zero fields, round-trips, and is refused naming a bad field") {
  v1::AggregationSpec w;
  w.set_job("tiny");
  w.set_flat_size(100);
  w.set_fragments(2);
  w.set_sync_every(10);
  auto s = from_wire(w);
  REQUIRE(s.ok());
  CHECK(s->codec == codec::codec_id::int8);
  CHECK(s->rounds.quorum_fraction == 1.0);
  CHECK(s->outer.lr == doctest::Approx(0.7f));
  CHECK(s->outer.momentum == doctest::Approx(0.9f));
  CHECK(s->outer.nesterov);
  v1::AggregationSpec back;
  to_wire(*s, &back);
  auto again = from_wire(back);
  REQUIRE(again.ok());
  v1::AggregationSpec twice;
  to_wire(*again, &twice);
  CHECK(twice.SerializeAsString() == back.SerializeAsString());

  w.set_deadline_min_ms(20000);
  w.set_outer_lr(1.0f);  // μ 0: plain averaging
  auto plain = from_wire(w);
  REQUIRE(plain.ok());
  CHECK(plain->rounds.deadline_min == std::chrono::seconds(20));
  CHECK(plain->rounds.deadline_initial >= plain->rounds.deadline_min);
  CHECK(plain->outer.momentum == 0.0f);
  CHECK_FALSE(plain->outer.nesterov);

  auto refused = [&](auto change, const std::string& says) {
    v1::AggregationSpec b = w;
    change(b);
    auto r = from_wire(b);
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == errc::invalid_argument);
    CHECK_MESSAGE(r.err().message.find(says) != std::string::npos, r.err().message);
  };
  refused([](v1::AggregationSpec& b) { b.set_job("../x"); }, "job '../x'");
  refused([](v1::AggregationSpec& b) { b.set_fragments(0); }, "fragments");
  refused([](v1::AggregationSpec& b) { b.set_codec("gzip"); }, "codec 'gzip'");
  refused([](v1::AggregationSpec& b) { b.set_quorum_fraction(1.5); }, "quorum_fraction");
  refused([](v1::AggregationSpec& b) { b.set_init_seed(1), b.set_init_snapshot("s"); }, "not both");
  refused([](v1::AggregationSpec& b) { b.set_sync_every(1); }, "sync_every");
  refused([](v1::AggregationSpec& b) { b.set_flat_size(0); }, "gpt2 shape");
}
