// Streamed deltas and sliced pulls (issue 26 item 5) through the real delta
// server (tests/diloco_links/harness: the aggregator's engine and delta
// socket in this process, on loopback CURVE) and two site clients: with
// 1,000-byte pieces every join, delta and update crosses in many frames, and
// the sites end bit for bit where whole frames leave them. A piece sent twice
// is taken once; a site's pieces are its own.
#include "libs/crypto/hash.hpp"
#include "libs/diloco/client/site_client.hpp"
#include "loom/v1/aggregator.pb.h"
#include "tests/diloco_links/harness.hpp"

#include <doctest/doctest.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <thread>

using namespace loom;
using namespace loom::test::links;
using namespace std::chrono_literals;

namespace {

struct run_out {
  std::vector<std::vector<float>> local;
  std::vector<diloco::client_stats> stats;
  std::uint64_t version = 0;
};

// Two sites join, each sends one delta of fragment 0 (its own step), both take the update.
run_out run_round(std::uint64_t chunk_bytes) {
  aggregator_options ao;
  ao.sites = 2;
  ao.values = 20000;
  ao.fragments = 2;
  ao.deadline_min = std::chrono::milliseconds(5000);  // = the first round's: it closes by quorum
  auto agg = local_aggregator::start(ao);
  REQUIRE(agg.ok());
  zmq::context_t ctx(1);
  run_out out;
  std::vector<std::unique_ptr<diloco::site_client>> sites;
  for (int s = 0; s < 2; ++s) {
    diloco::client_options o;
    o.endpoint = (*agg)->address().endpoint;
    o.server_public = (*agg)->address().public_key;
    o.keys = (*agg)->site_keys(s);
    o.job = (*agg)->job();
    o.site = site_name(s);
    o.chunk_bytes = chunk_bytes;
    o.timeout = 5000ms;
    sites.push_back(diloco::site_client::make(ctx, o).value());
    out.local.emplace_back();
    REQUIRE(sites[s]->join(out.local[s]).ok());
    REQUIRE(out.local[s].size() == 20000);
  }
  for (int s = 0; s < 2; ++s) {
    for (std::size_t i = 0; i < out.local[s].size(); ++i) out.local[s][i] += 0.001f * static_cast<float>((i % 7) + s);
    auto ack = sites[s]->send_delta(0, out.local[s], 100);
    REQUIRE_MESSAGE(ack.ok(), ack.err().message);
  }
  for (int s = 0; s < 2; ++s) {
    bool got = false;
    for (int i = 0; i < 50 && !got; ++i) {
      auto r = sites[s]->poll(0, out.local[s]);
      REQUIRE_MESSAGE(r.ok(), r.err().message);
      got = *r;
      if (!got) std::this_thread::sleep_for(20ms);
    }
    REQUIRE(got);
    out.stats.push_back(sites[s]->stats());
  }
  out.version = (*agg)->version(0);
  return out;
}

}  // namespace

TEST_CASE("deltas in 1,000-byte pieces and pulls in 1,000-byte slices leave the sites bit for bit where whole frames do") {
  const auto whole = run_round(0);
  const auto streamed = run_round(1000);
  CHECK(whole.version == 1);
  CHECK(streamed.version == 1);
  for (int s = 0; s < 2; ++s) {
    CHECK(whole.stats[s].chunks_sent == 0);
    CHECK(whole.stats[s].chunks_received == 0);
    CHECK(streamed.stats[s].chunks_sent >= 10);       // an int8 delta of 10,000 values: ~10 KB
    CHECK(streamed.stats[s].chunks_received >= 79);   // two fragments of fp32 parameters, then an update
    CHECK(streamed.stats[s].updates_applied == 1);
    CHECK(std::memcmp(whole.local[s].data(), streamed.local[s].data(), whole.local[s].size() * sizeof(float)) == 0);
  }
}

TEST_CASE("a piece sent twice is taken once, and a header claiming pieces its key never sent is refused") {
  aggregator_options ao;
  ao.sites = 2;
  ao.values = 4000;
  ao.fragments = 1;
  auto agg = local_aggregator::start(ao);
  REQUIRE(agg.ok());
  zmq::context_t ctx(1);
  auto client_of = [&](int s) {
    zmq::socket_t sock(ctx, zmq::socket_type::dealer);
    sock.set(zmq::sockopt::curve_serverkey, (*agg)->address().public_key);
    sock.set(zmq::sockopt::curve_publickey, (*agg)->site_keys(s).public_z85);
    sock.set(zmq::sockopt::curve_secretkey, (*agg)->site_keys(s).secret_z85);
    sock.set(zmq::sockopt::rcvtimeo, 5000);
    sock.connect((*agg)->address().endpoint);
    return sock;
  };
  auto ask = [](zmq::socket_t& sock, std::vector<std::string> frames) {
    std::vector<zmq::message_t> msg;
    for (auto& f : frames) msg.emplace_back(f.data(), f.size());
    REQUIRE(zmq::send_multipart(sock, msg));
    std::vector<zmq::message_t> in;
    REQUIRE(zmq::recv_multipart(sock, std::back_inserter(in)));
    std::vector<std::string> out;
    for (auto& m : in) out.push_back(m.to_string());
    return out;
  };
  const std::string payload(3000, 'x');
  loom::v1::DeltaChunk c;
  c.set_job((*agg)->job());
  c.set_site(site_name(0));
  c.set_round(0);
  c.set_fragment(0);
  c.set_total_bytes(payload.size());
  c.set_payload_sha256(std::string(crypto::as_view(crypto::sha256(payload))));
  auto s0 = client_of(0);
  loom::v1::DeltaChunkReply rep;
  for (int i = 0; i < 2; ++i) {  // the same piece twice: 1,000 bytes held
    c.set_offset(0);
    auto r = ask(s0, {"loom.v1.DeltaChunk", c.SerializeAsString(), payload.substr(0, 1000)});
    REQUIRE(r.size() == 2);
    REQUIRE(r[0] == "loom.v1.DeltaChunkReply");
    REQUIRE(rep.ParseFromString(r[1]));
    CHECK(rep.received() == 1000);
  }
  c.set_offset(2000);  // a gap: refused, naming where to go on
  auto gap = ask(s0, {"loom.v1.DeltaChunk", c.SerializeAsString(), payload.substr(2000, 1000)});
  REQUIRE(gap[0] == "loom.v1.Status");
  CHECK(gap[1].find("send from offset 1000") != std::string::npos);
  // Site 1 claims site 0's pieces with a header of its own: nothing is held for its key.
  auto s1 = client_of(1);
  loom::v1::DeltaHeader h;
  h.set_job((*agg)->job());
  h.set_site(site_name(1));
  h.set_round(0);
  h.set_fragment(0);
  h.set_base_version(0);
  h.set_codec("int8");
  h.set_element_count(4000);
  h.set_payload_bytes(payload.size());
  h.set_tokens(1);
  h.set_payload_sha256(c.payload_sha256());
  h.set_payload_offset(1000);
  auto stolen = ask(s1, {"loom.v1.DeltaHeader", h.SerializeAsString(), payload.substr(1000)});
  REQUIRE(stolen[0] == "loom.v1.Status");
  CHECK(stolen[1].find("none are held") != std::string::npos);
}
