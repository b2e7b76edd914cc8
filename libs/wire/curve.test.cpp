#include "libs/wire/client.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/server.hpp"
#include "libs/wire/test_util.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <thread>
#include <vector>

using namespace loom;
using namespace loom::wire;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
mode_t mode_of(const std::string& path) {
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 0777;
}
}  // namespace

TEST_CASE("a saved keypair loads back with its files at 0644 and 0600") {
  auto dir = test::temp_dir() + "/keys";
  auto kp = generate_keypair();
  CHECK(valid_z85_key(kp.public_z85));
  CHECK(valid_z85_key(kp.secret_z85));
  REQUIRE(save_keypair(dir, "scheduler", kp).ok());
  CHECK(mode_of(dir + "/scheduler.pub") == 0644);
  CHECK(mode_of(dir + "/scheduler.key") == 0600);
  auto back = load_keypair(dir, "scheduler");
  REQUIRE(back.ok());
  CHECK(back->public_z85 == kp.public_z85);
  CHECK(back->secret_z85 == kp.secret_z85);
  auto pub = load_public_key(dir, "scheduler");
  REQUIRE(pub.ok());
  CHECK(*pub == kp.public_z85);
  fs::remove_all(fs::path(dir).parent_path());
}

TEST_CASE("a secret key file readable by others is refused and the error names it") {
  auto dir = test::temp_dir();
  REQUIRE(save_keypair(dir, "n1", generate_keypair()).ok());
  REQUIRE(::chmod((dir + "/n1.key").c_str(), 0640) == 0);
  auto r = load_keypair(dir, "n1");
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::permission_denied);
  CHECK(r.err().message.find(dir + "/n1.key") != std::string::npos);
  CHECK(r.err().message.find("0640") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a key file that is not 40 Z85 characters is refused naming the path") {
  auto dir = test::temp_dir();
  std::ofstream(dir + "/bad.pub") << "not-a-key\n";
  auto r = load_public_key(dir, "bad");
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.err().message.find(dir + "/bad.pub") != std::string::npos);
  CHECK_FALSE(valid_z85_key(std::string(40, '"')));  // right length, not Z85
  fs::remove_all(dir);
}

// Found by fuzz_enrol (tests/fuzz): libzmq's decoder stops at a NUL, so 15
// Z85 characters and 25 NULs passed as a key (a site could enrol one, a cloud
// answer one) and key_bytes made 12 decoded bytes and 20 zeros of it.
TEST_CASE("a 40-byte key with a NUL among its characters is not a CURVE key") {
  const std::string key = generate_keypair().public_z85;
  for (std::size_t at : {std::size_t{0}, std::size_t{15}, std::size_t{39}}) {
    INFO("NUL at " << at);
    std::string bad = key;
    bad[at] = '\0';
    CHECK_FALSE(valid_z85_key(bad));
    CHECK(key_bytes(bad).code() == errc::invalid_argument);
  }
  CHECK_FALSE(valid_z85_key(std::string("w[CT!w[CT!w[CTr") + std::string(25, '\0')));
  auto raw = key_bytes(key);
  REQUIRE(raw.ok());
  CHECK(*key_z85(*raw) == key);
}

TEST_CASE("a public key file that does not match its secret key is reported as corruption") {
  auto dir = test::temp_dir();
  auto kp = generate_keypair();
  kp.public_z85 = generate_keypair().public_z85;
  REQUIRE(save_keypair(dir, "mixed", kp).ok());
  auto r = load_keypair(dir, "mixed");
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::corruption);
  fs::remove_all(dir);
}

TEST_CASE("a missing key and a key name with a slash are refused") {
  auto dir = test::temp_dir();
  CHECK(load_keypair(dir, "ghost").code() == errc::not_found);
  CHECK(save_keypair(dir, "../evil", generate_keypair()).code() == errc::invalid_argument);
  fs::remove_all(dir);
}

TEST_CASE("the allow list maps every .pub in a directory to its file stem") {
  auto dir = test::temp_dir();
  auto a = generate_keypair(), b = generate_keypair();
  REQUIRE(save_keypair(dir, "edge-node-1", a).ok());
  REQUIRE(save_keypair(dir, "trainer", b).ok());
  std::ofstream(dir + "/README") << "not a key";
  auto list = load_allow_list(dir);
  REQUIRE(list.ok());
  CHECK(list->size() == 2);
  CHECK(list->at(a.public_z85) == "edge-node-1");
  CHECK(list->at(b.public_z85) == "trainer");

  std::ofstream(dir + "/copy.pub") << a.public_z85 << "\n";
  auto dup = load_allow_list(dir);
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.code() == errc::conflict);
  CHECK(load_allow_list(dir + "/nope").code() == errc::not_found);
  fs::remove_all(dir);
}

TEST_CASE("curve: 1,000 connection attempts with unregistered keys are all refused") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  constexpr int total = 1000;
  constexpr int batch = 50;  // concurrent handshakes per round
  int refused = 0, succeeded = 0, other = 0;
  const auto start = std::chrono::steady_clock::now();

  for (int round = 0; round < total / batch; ++round) {
    std::vector<std::unique_ptr<zmq::socket_t>> dealers, monitors;
    for (int i = 0; i < batch; ++i) {
      auto d = std::make_unique<zmq::socket_t>(f.ctx, zmq::socket_type::dealer);
      test::bounded(*d);
      d->set(zmq::sockopt::reconnect_ivl, -1);  // one handshake per socket, so ZAP counts stay exact
      make_curve_client(*d, generate_keypair(), f.server.public_z85);
      monitors.push_back(test::monitor(f.ctx, *d, std::to_string(round * batch + i)));
      d->connect(srv.endpoint());
      dealers.push_back(std::move(d));
    }
    std::vector<bool> done(batch, false);
    int pending = batch;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (pending > 0 && std::chrono::steady_clock::now() < deadline) {
      std::vector<zmq::pollitem_t> items;
      for (auto& m : monitors) items.push_back({m->handle(), 0, ZMQ_POLLIN, 0});
      zmq::poll(items.data(), items.size(), 100ms);
      for (int i = 0; i < batch; ++i) {
        if (done[i] || !(items[i].revents & ZMQ_POLLIN)) continue;
        auto ev = test::read_event(*monitors[i]);
        if (!ev) continue;
        done[i] = true;
        --pending;
        if (ev->event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && ev->value == 400) ++refused;
        else if (ev->event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) ++succeeded;
        else ++other;
      }
    }
    REQUIRE(pending == 0);
    for (auto& d : dealers) zmq_socket_monitor(d->handle(), nullptr, 0);
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  MESSAGE("1000 refused handshakes took "
          << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms");
  CHECK(refused == total);
  CHECK(succeeded == 0);
  CHECK(other == 0);
  CHECK(f.zap->rejected() == total);
  CHECK(f.zap->accepted() == 0);
  CHECK(elapsed < 60s);
  // Nothing got through to the router.
  CHECK_FALSE(srv.poll(0ms).has_value());
  CHECK(srv.received() == 0);
}

TEST_CASE("a plaintext client cannot talk to a CURVE socket") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  zmq::socket_t d(f.ctx, zmq::socket_type::dealer);
  test::bounded(d, 500);
  d.connect(srv.endpoint());
  d.send(zmq::str_buffer("hello"), zmq::send_flags::dontwait);
  CHECK_FALSE(srv.poll(500ms).has_value());
  CHECK(srv.received() == 0);
  CHECK(f.zap->accepted() == 0);
}

TEST_CASE("a key registered but presented on the wrong ZAP domain is refused") {
  test::curve_fixture f;  // the handler serves domain "loom"
  router_server srv(f.ctx, f.server, "other-domain", "tcp://127.0.0.1:*");
  zmq::socket_t d(f.ctx, zmq::socket_type::dealer);
  test::bounded(d);
  d.set(zmq::sockopt::reconnect_ivl, -1);
  make_curve_client(d, f.alice, f.server.public_z85);
  auto mon = test::monitor(f.ctx, d, "wrong-domain");
  d.connect(srv.endpoint());
  auto ev = test::wait_event(*mon, 5s);
  REQUIRE(ev.has_value());
  CHECK(ev->event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
  CHECK(ev->value == 400);
  CHECK(f.zap->rejected() == 1);
  CHECK(f.zap->accepted() == 0);
  zmq_socket_monitor(d.handle(), nullptr, 0);
}

TEST_CASE("a CURVE socket in a context without a ZAP handler refuses even a valid key") {
  zmq::context_t ctx;  // no zap_handler: the enforced domain must fail closed
  auto server = generate_keypair();
  router_server srv(ctx, server, "loom", "tcp://127.0.0.1:*");
  client c(ctx, srv.endpoint(), server.public_z85, generate_keypair(), {300ms, 0});
  request req;
  req.type = "loom.v1.PingRequest";
  auto r = c.call(req);
  CHECK(r.code() == errc::unavailable);
  CHECK_FALSE(srv.poll(0ms).has_value());
  CHECK(srv.received() == 0);
}

TEST_CASE("a key removed from the allow list is refused on its next connection") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  test::served s(srv, [](router_server& r, const router_server::incoming& in) {
    if (!in.req) return;
    reply rep;
    rep.request_id = in.req->request_id;
    rep.body = in.peer_principal;
    r.send(in.identity, rep);
  });
  request req;
  req.type = "loom.v1.PingRequest";
  client before(f.ctx, srv.endpoint(), f.server.public_z85, f.alice, {2000ms, 0});
  auto r1 = before.call(req);
  REQUIRE(r1.ok());
  CHECK(r1->body == "alice");

  f.zap->set_allow_list({});
  client after(f.ctx, srv.endpoint(), f.server.public_z85, f.alice, {300ms, 0});
  CHECK(after.call(req).code() == errc::unavailable);
  CHECK(f.zap->rejected() >= 1);
  // The connection made before the change stays up.
  CHECK(before.call(req).ok());
}

TEST_CASE("on the open domain an unknown key is admitted as unenrolled and a known key keeps its principal") {
  test::curve_fixture f;
  f.zap->admit_unknown_on("loom-enrol");
  router_server open(f.ctx, f.server, "loom-enrol", "tcp://127.0.0.1:*");
  router_server closed(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  auto echo_principal = [](router_server& r, const router_server::incoming& in) {
    if (!in.req) return;
    reply rep;
    rep.request_id = in.req->request_id;
    rep.body = in.peer_principal;
    r.send(in.identity, rep);
  };
  test::served s1(open, echo_principal), s2(closed, echo_principal);
  request req;
  req.type = "loom.v1.PingRequest";
  const auto stranger = generate_keypair();
  client unknown_open(f.ctx, open.endpoint(), f.server.public_z85, stranger, {2000ms, 0});
  auto r1 = unknown_open.call(req);
  REQUIRE(r1.ok());
  CHECK(r1->body == std::string(unenrolled_principal));
  client known_open(f.ctx, open.endpoint(), f.server.public_z85, f.alice, {2000ms, 0});
  auto r2 = known_open.call(req);
  REQUIRE(r2.ok());
  CHECK(r2->body == "alice");
  // The allow-list domain stays closed to the same unknown key.
  client unknown_closed(f.ctx, closed.endpoint(), f.server.public_z85, stranger, {300ms, 0});
  CHECK(unknown_closed.call(req).code() == errc::unavailable);
  CHECK(f.zap->admits_principal("alice"));
  CHECK_FALSE(f.zap->admits_principal(unenrolled_principal));
}

TEST_CASE("a public key survives the trip to raw bytes and back, and a non-key is refused") {
  auto kp = generate_keypair();
  auto raw = key_bytes(kp.public_z85);
  REQUIRE(raw.ok());
  CHECK(raw->size() == 32);
  auto back = key_z85(*raw);
  REQUIRE(back.ok());
  CHECK(*back == kp.public_z85);
  CHECK(key_bytes("short").code() == errc::invalid_argument);
  CHECK(key_z85(std::string(31, 'x')).code() == errc::invalid_argument);
}

TEST_CASE("a socket on the own-only ZAP domain admits this deployment's keys and refuses an edge site's") {
  zmq::context_t ctx;
  auto server = generate_keypair(), own = generate_keypair(), site = generate_keypair();
  zap_handler zap(ctx, allow_list{{own.public_z85, "console"}, {site.public_z85, "site:north:trainer"}}, "loom");
  zap.admit_own_only_on("loom-own");
  auto handshake = [&](const curve_keypair& who, const char* name) {
    router_server srv(ctx, server, "loom-own", "tcp://127.0.0.1:*");
    zmq::socket_t d(ctx, zmq::socket_type::dealer);
    test::bounded(d);
    d.set(zmq::sockopt::reconnect_ivl, -1);
    make_curve_client(d, who, server.public_z85);
    auto mon = test::monitor(ctx, d, name);
    d.connect(srv.endpoint());
    int result = 0;
    for (auto until = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < until;) {
      auto ev = test::wait_event(*mon, 1s);
      if (!ev) continue;
      if (ev->event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) result = 200;
      if (ev->event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) result = static_cast<int>(ev->value);
      if (result) break;
    }
    zmq_socket_monitor(d.handle(), nullptr, 0);
    return result;
  };
  CHECK(handshake(own, "own-key") == 200);
  CHECK(handshake(site, "site-key") == 400);
  CHECK(zap.rejected() == 1);
  // On the deployment's main domain the site's key is admitted as before.
  router_server main_srv(ctx, server, "loom", "tcp://127.0.0.1:*");
  client c(ctx, main_srv.endpoint(), server.public_z85, site, {2000ms, 0});
  wire::request req;
  req.type = "loom.v1.PingRequest";
  std::thread answer([&] {
    if (auto in = main_srv.poll(3000ms)) {
      CHECK(in->peer_principal == "site:north:trainer");
      wire::reply rep;
      rep.request_id = in->request_id;
      main_srv.send(in->identity, rep);
    }
  });
  CHECK(c.call(req).ok());
  answer.join();
}
