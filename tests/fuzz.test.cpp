// Robustness: at every service's ROUTER, ≥ 10,000 random and mutated frames
// from a fixed seed — truncated protobuf, wrong types, bad bodies, empty
// frames, multipart garbage, oversized frames. No crash (same pid, no actor
// restart), every frame answered with an error Status or dropped by the
// transport, and the service still answers Ping afterwards.
#include "tests/support/cluster.hpp"

#include "libs/wire/curve.hpp"
#include "libs/wire/envelope.hpp"
#include "loom/v1/service.pb.h"

#include <doctest/doctest.h>

#include <random>
#include <zmq_addon.hpp>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;

namespace {

constexpr int frames_per_service = 10000;
// In flight at once: enough to keep the service busy, far below the HWM.
constexpr int window = 64;

struct fuzzer {
  std::mt19937_64 rng;
  std::string valid;  // a well-formed, authorized Ping envelope

  std::string random_bytes(std::size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  }
  std::size_t pick(std::size_t n) { return static_cast<std::size_t>(rng() % n); }

  // One multipart message of a randomly chosen kind.
  std::vector<std::string> next() {
    switch (pick(8)) {
      case 0: return {random_bytes(pick(512))};                       // random bytes
      case 1: return {valid.substr(0, pick(valid.size()))};           // truncated protobuf
      case 2: {                                                       // flipped bytes
        auto s = valid;
        for (std::size_t k = 0, n = 1 + pick(4); k < n; ++k) s[pick(s.size())] ^= static_cast<char>(1 + pick(255));
        return {s};
      }
      case 3: {                                                       // wrong or unknown type
        wire::request r;
        r.request_id = wire::new_request_id();
        r.type = pick(2) ? "loom.v1.NoSuchRequest" : "loom.v1.ListNodesRequest";
        r.body = random_bytes(pick(64));
        r.token = pick(2) ? "" : "lt1.x.y";
        return {wire::encode(r)};
      }
      case 4: {                                                       // right type, garbage body
        wire::request r;
        r.request_id = wire::new_request_id();
        r.type = "loom.v1.PingRequest";
        r.body = random_bytes(1 + pick(64));
        return {wire::encode(r)};
      }
      case 5: return {std::string()};                                 // empty frame
      case 6: {                                                       // multipart garbage
        std::vector<std::string> parts;
        for (std::size_t k = 0, n = 2 + pick(4); k < n; ++k) parts.push_back(random_bytes(pick(128)));
        return parts;
      }
      default: return {valid + random_bytes(1 + pick(32))};           // trailing garbage
    }
  }
};

}  // namespace

TEST_CASE("every ROUTER survives 10,000 random and mutated frames and still answers Ping") {
  cluster c;
  REQUIRE(c.up);
  auto mine = *wire::load_keypair(c.paths.curve_dir(), "client");
  for (auto name : layout::service_names) {
    std::string svc(name);
    INFO("service " << svc);
    auto server_key = *wire::load_public_key(c.paths.curve_dir(), svc);
    long pid_before = c.ep(svc).pid;
    fuzzer f{std::mt19937_64(0x10057 + svc.size()), ""};
    wire::request ping;
    ping.request_id = wire::new_request_id();
    ping.type = "loom.v1.PingRequest";
    ping.token = c.admin();
    f.valid = wire::encode(ping);

    zmq::socket_t s(c.ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, 5000);
    wire::make_curve_client(s, mine, server_key);
    s.connect(c.ep(svc).rpc);

    int sent = 0, answered = 0, errors = 0;
    auto receive_one = [&] {
      std::vector<zmq::message_t> parts;
      if (!zmq::recv_multipart(s, std::back_inserter(parts))) return false;
      ++answered;
      auto r = wire::decode_reply(parts.back().data(), parts.back().size());
      if (r && !r->ok()) ++errors;
      return true;
    };
    auto t0 = std::chrono::steady_clock::now();
    while (sent < frames_per_service) {
      auto parts = f.next();
      std::vector<zmq::const_buffer> bufs;
      for (auto& p : parts) bufs.push_back(zmq::buffer(p));
      REQUIRE(zmq::send_multipart(s, bufs));
      ++sent;
      if (sent - answered >= window) REQUIRE(receive_one());
    }
    while (answered < sent && receive_one()) {}
    auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(svc << ": " << sent << " frames, " << answered << " answered (" << errors << " errors) in " << secs << " s");
    CHECK(answered == sent);
    CHECK(errors > sent / 2);

    // An oversized frame (over the 64 MiB cap) is dropped by the transport,
    // which closes that connection; the service is unaffected.
    {
      zmq::socket_t big(c.ctx, zmq::socket_type::dealer);
      big.set(zmq::sockopt::linger, 0);
      big.set(zmq::sockopt::rcvtimeo, 1500);
      wire::make_curve_client(big, mine, server_key);
      big.connect(c.ep(svc).rpc);
      std::string huge((64u << 20) + 1, 'x');
      REQUIRE(big.send(zmq::buffer(huge), zmq::send_flags::none));
      zmq::message_t none;
      CHECK_FALSE(big.recv(none).has_value());
    }

    auto cli = c.client(svc);
    ping.request_id = wire::new_request_id();
    auto rep = cli->call(ping);
    REQUIRE(rep.ok());
    CHECK(rep->ok());
    wire::request health{wire::new_request_id(), "loom.v1.HealthRequest", "", c.admin()};
    auto h = cli->call(health);
    REQUIRE(h.ok());
    v1::HealthReply hr;
    REQUIRE(hr.ParseFromString(h->body));
    CHECK(hr.pid() == static_cast<std::uint32_t>(pid_before));
    CHECK(hr.restarts() == 0);
  }
}
