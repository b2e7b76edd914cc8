// wire_bench: request/reply cost of loom::wire over tcp loopback, without and
// with CURVE. An echo server (router_server answering PingRequest with
// PingReply) runs on its own thread; one client measures
//   (a) latency: sequential round trips (call()), p50/p99 in microseconds;
//   (b) throughput: one DEALER pipelining `window` requests, requests/s.
// Last lines, one per case (curve last), for scripts:
//   case=<plain|curve> p50_us=<..> p99_us=<..> rps=<..>
#include "bench/bench_util.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "libs/wire/server.hpp"
#include "loom/v1/service.pb.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using loom::bench::loadavg;

namespace {

using namespace loom;
using namespace loom::wire;
using clk = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int warmup_calls = 1'000;
constexpr int latency_calls = 20'000;
constexpr int pipelined_requests = 200'000;
constexpr int window = 256;           // requests in flight: deep enough to hide the round trip
constexpr auto phase_budget = 20s;    // per phase; keeps the whole run under 60 s on a busy box
constexpr std::size_t payload_bytes = 64;

struct outcome {
  double p50_us = 0, p99_us = 0, rps = 0;
};

// Echo server: owns `srv` on its own thread until stopped.
void serve(router_server& srv, const std::atomic<bool>& stop) {
  while (!stop) {
    auto in = srv.poll(20ms);
    if (!in) continue;
    if (!in->req) {
      srv.send(in->identity, error_reply(in->request_id, in->req.code(), in->req.err().message));
      continue;
    }
    auto ping = parse_body<v1::PingRequest>(*in->req);
    if (!ping) {
      srv.send(in->identity, error_reply(in->req->request_id, ping.code(), ping.err().message));
      continue;
    }
    v1::PingReply pong;
    pong.set_payload(ping->payload());
    pong.set_service("wire_bench");
    srv.send(in->identity, ok_reply(*in->req, pong));
  }
}

request make_ping() {
  v1::PingRequest p;
  p.set_payload(std::string(payload_bytes, 'x'));
  return make_request(p, "bench-token");
}

std::optional<outcome> measure(client& c) {
  outcome out;
  for (int i = 0; i < warmup_calls; ++i) {
    if (!c.call(make_ping())) return std::nullopt;
  }
  std::vector<double> us;
  us.reserve(latency_calls);
  const auto lat_start = clk::now();
  for (int i = 0; i < latency_calls && clk::now() - lat_start < phase_budget; ++i) {
    request req = make_ping();
    const auto t0 = clk::now();
    auto rep = c.call(std::move(req));
    const auto t1 = clk::now();
    if (!rep || !rep->ok()) return std::nullopt;
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  out.p50_us = us[us.size() / 2];
  out.p99_us = us[us.size() * 99 / 100];
  std::printf("  latency: %zu sequential round trips, p50 %.1f us, p99 %.1f us, max %.1f us\n", us.size(),
              out.p50_us, out.p99_us, us.back());

  const request tmpl = make_ping();
  int sent = 0, done = 0, inflight = 0;
  const auto thr_start = clk::now();
  while (done < pipelined_requests && clk::now() - thr_start < phase_budget) {
    while (inflight < window && sent < pipelined_requests && c.send_async(tmpl)) {
      ++sent;
      ++inflight;
    }
    auto rep = c.recv(2000ms);
    if (!rep || !rep->ok()) return std::nullopt;
    ++done;
    --inflight;
  }
  const double secs = std::chrono::duration<double>(clk::now() - thr_start).count();
  out.rps = done / secs;
  std::printf("  throughput: %d requests, window %d, %.2f s, %.0f req/s\n", done, window, secs, out.rps);
  for (; inflight > 0; --inflight) (void)c.recv(2000ms);  // drain before closing
  return out;
}

std::optional<outcome> run_case(bool curve) {
  zmq::context_t ctx;
  std::unique_ptr<zap_handler> zap;  // first: bound before any CURVE socket
  std::unique_ptr<router_server> srv;
  std::unique_ptr<client> cli;
  const client_options opts{2000ms, 0};
  if (curve) {
    auto server_key = generate_keypair(), client_key = generate_keypair();
    zap = std::make_unique<zap_handler>(ctx, allow_list{{client_key.public_z85, "bench"}}, "bench");
    srv = std::make_unique<router_server>(ctx, server_key, "bench", "tcp://127.0.0.1:*");
    cli = std::make_unique<client>(ctx, srv->endpoint(), server_key.public_z85, client_key, opts);
  } else {
    srv = std::make_unique<router_server>(ctx, bench_plaintext, "tcp://127.0.0.1:*");
    cli = std::make_unique<client>(ctx, bench_plaintext, srv->endpoint(), opts);
  }
  std::printf("case %s: echo server at %s\n", curve ? "curve" : "plain", srv->endpoint().c_str());
  std::atomic<bool> stop{false};
  std::thread server_thread(serve, std::ref(*srv), std::cref(stop));
  auto out = measure(*cli);
  stop = true;
  server_thread.join();
  if (zap) std::printf("  zap: %llu accepted, %llu rejected\n", static_cast<unsigned long long>(zap->accepted()),
                       static_cast<unsigned long long>(zap->rejected()));
  return out;
}

}  // namespace

int main() {
  std::printf("wire_bench: %zu-byte PingRequest over tcp://127.0.0.1, %u hardware threads, loadavg %s\n",
              payload_bytes, std::thread::hardware_concurrency(), loadavg().c_str());
  const auto start = clk::now();
  auto plain = run_case(false);
  auto curve = run_case(true);
  std::printf("total %.1f s, loadavg %s\n", std::chrono::duration<double>(clk::now() - start).count(),
              loadavg().c_str());
  if (!plain || !curve) {
    std::fprintf(stderr, "wire_bench: a request failed or timed out (server not answering?)\n");
    return 1;
  }
  std::printf("case=plain p50_us=%.1f p99_us=%.1f rps=%.0f\n", plain->p50_us, plain->p99_us, plain->rps);
  std::printf("case=curve p50_us=%.1f p99_us=%.1f rps=%.0f\n", curve->p50_us, curve->p99_us, curve->rps);
  return 0;
}
