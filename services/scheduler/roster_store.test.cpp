// The roster survives its actor and its process: the same suite on SQLite
// and PostgreSQL (CTest names end in [sqlite] / [postgres]).
#include "libs/crypto/hash.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"
#include "loom/v1/scheduler.pb.h"
#include "services/scheduler/scheduler_logic.hpp"
#include "services/scheduler/schema.hpp"

#include "libs/runtime/commit_ticket.hpp"
#include "loom/v1/jobs.pb.h"

#include <doctest/doctest.h>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace loom;
using namespace std::chrono_literals;

namespace {
constexpr store::backend engine = store::testing::suite_backend;

// An admin's token over this deployment's trainer key (a node's own requests pass).
runtime::handled call(scheduler::scheduler_logic& l, const google::protobuf::Message& m,
                      const std::string& peer = "trainer", const std::string& role = "admin") {
  return l.handle(m.GetDescriptor()->full_name(), m.SerializeAsString(), {"r", "p", role, "local", "default", peer});
}

v1::RegisterNodeRequest reg(const std::string& id, std::uint32_t pid) {
  v1::RegisterNodeRequest r;
  r.mutable_node()->set_value(id);
  r.set_service("trainer");
  r.set_zone("local");
  r.mutable_resources()->set_cpu_cores(2);
  r.mutable_resources()->set_memory_bytes(1ull << 34);
  r.set_pid(pid);
  return r;
}
// A scratch store on the suite's engine with the scheduler's tables.
struct migrated {
  store::testing::scratch scratch;
  std::unique_ptr<store::database> db;
};
migrated open_migrated(const std::string& name) {
  auto scratch = store::testing::scratch::make(engine, name);
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, scheduler::scheduler_migrations()).ok());
  return migrated{std::move(*scratch), std::move(*db)};
}
}  // namespace

TEST_CASE("a restarted scheduler finds the roster it had, drains and heartbeats included") {
  auto scratch = store::testing::scratch::make(engine, "roster");
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, scheduler::scheduler_migrations()).ok());
  scheduler::time_point now{std::chrono::seconds(1'700'000'000)};
  {
    scheduler::scheduler_logic a(db->get(), [&] { return now; });
    REQUIRE(call(a, reg("t1", 10)).code == errc::ok);
    REQUIRE(call(a, reg("t2", 11)).code == errc::ok);
    REQUIRE(call(a, reg("t1", 12)).code == errc::ok);  // re-registration replaces
    v1::DrainNodeRequest d;
    d.mutable_node()->set_value("t2");
    REQUIRE(call(a, d).code == errc::ok);
    now += 2s;
    v1::NodeHeartbeatRequest hb;
    hb.mutable_node()->set_value("t1");
    REQUIRE(call(a, hb).code == errc::ok);
    a.on_tick();  // flushes last-seen
  }
  scheduler::scheduler_logic b(db->get(), [&] { return now; });
  auto list = runtime::parse_as<v1::ListNodesReply>(call(b, v1::ListNodesRequest{}).body);
  REQUIRE(list.ok());
  REQUIRE(list->nodes_size() == 2);
  CHECK(list->nodes(0).node().value() == "t1");
  CHECK(list->nodes(0).pid() == 12);
  CHECK(list->nodes(0).resources().memory_bytes() == (1ull << 34));
  CHECK(list->nodes(0).state() == "alive");
  CHECK(list->nodes(1).state() == "draining");
  auto last_seen_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  CHECK(list->nodes(0).last_seen_unix_ns() == static_cast<std::uint64_t>(last_seen_ns));
}

TEST_CASE("a scheduler taking over gives nodes seen in the last seconds a fresh liveness window, and not long-silent ones") {
  auto m = open_migrated("takeover");
  auto* db = &m.db;
  scheduler::time_point now{std::chrono::seconds(1'700'000'000)};
  {
    scheduler::scheduler_logic a(db->get(), [&] { return now; });
    REQUIRE(call(a, reg("recent", 1)).code == errc::ok);
    REQUIRE(call(a, reg("silent", 2)).code == errc::ok);
    a.on_tick();
  }
  auto state_of = [&](scheduler::scheduler_logic& l, const std::string& id) {
    auto list = runtime::parse_as<v1::ListNodesReply>(call(l, v1::ListNodesRequest{}).body);
    REQUIRE(list.ok());
    for (const auto& n : list->nodes())
      if (n.node().value() == id) return n.state();
    return std::string("absent");
  };
  // 3.5 s without a heartbeat (three missed intervals: dead to the old
  // leader), then a new leader: the node gets two windows of its own (a
  // registrar in back-off that tries the old leader first may miss one).
  now += 3500ms;
  {
    scheduler::scheduler_logic b(db->get(), [&] { return now; });
    CHECK(state_of(b, "recent") == "alive");
    now += 3500ms;  // one window on: still in its grace
    CHECK(state_of(b, "recent") == "alive");
    now += 3000ms;  // and does not beat again: dead two windows after the takeover
    CHECK(state_of(b, "recent") == "dead");
  }
  // Silent for longer than a takeover explains: dead at once.
  now += 30s;
  scheduler::scheduler_logic c(db->get(), [&] { return now; });
  CHECK(state_of(c, "silent") == "dead");
}

TEST_CASE("under a run of takeovers shorter than a tick, a node's first sign of life to each leader is stored at once") {
  auto m = open_migrated("storm");
  auto* db = &m.db;
  scheduler::time_point now{std::chrono::seconds(1'700'000'000)};
  {
    scheduler::scheduler_logic a(db->get(), [&] { return now; });
    REQUIRE(call(a, reg("t1", 1)).code == errc::ok);
    a.on_tick();
  }
  auto stored_last_seen = [&] {
    std::int64_t ns = 0;
    REQUIRE(db->get()->with_read_transaction([&](store::transaction& tx) -> status {
      auto rows = tx.query("SELECT last_seen_unix_ns FROM nodes WHERE id = $1", {std::string("t1")});
      if (!rows) return rows.err();
      REQUIRE(rows->size() == 1);
      ns = *(*rows)[0].get_i64(0);
      return {};
    }).ok());
    return ns;
  };
  // Twenty leaders of 0.7 s each, none living to its first tick: each hears
  // one heartbeat or one poll from t1, and t1 stays alive throughout.
  for (int k = 0; k < 20; ++k) {
    now += 700ms;
    scheduler::scheduler_logic leader(db->get(), [&] { return now; });
    if (k % 2 == 0) {
      v1::NodeHeartbeatRequest hb;
      hb.mutable_node()->set_value("t1");
      REQUIRE(call(leader, hb).code == errc::ok);
    } else {
      v1::PollWorkRequest poll;
      poll.mutable_node()->set_value("t1");
      poll.set_state("idle");
      REQUIRE(call(leader, poll).code == errc::ok);
    }
    CHECK(stored_last_seen() == std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count());
  }
  now += 700ms;
  scheduler::scheduler_logic last(db->get(), [&] { return now; });
  auto list = runtime::parse_as<v1::ListNodesReply>(call(last, v1::ListNodesRequest{}).body);
  REQUIRE(list.ok());
  REQUIRE(list->nodes_size() == 1);
  CHECK(list->nodes(0).state() == "alive");
}

TEST_CASE("long-dead nodes are removed from the store as well as the roster") {
  auto scratch = store::testing::scratch::make(engine, "reap");
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, scheduler::scheduler_migrations()).ok());
  scheduler::time_point now{std::chrono::seconds(1'700'000'000)};
  {
    scheduler::scheduler_logic a(db->get(), [&] { return now; });
    REQUIRE(call(a, reg("gone", 1)).code == errc::ok);
    now += 5min;
    a.on_tick();
  }
  scheduler::scheduler_logic b(db->get(), [&] { return now; });
  CHECK(b.nodes().list().empty());
}

namespace {
v1::SubmitJobRequest small_job() {
  v1::SubmitJobRequest s;
  s.set_template_name("t");
  s.set_template_toml("[train]\nsteps = 3\n");
  s.add_overrides("text=/data/corpus.txt");
  return s;
}

runtime::handled submit(scheduler::scheduler_logic& l, const std::string& request_id) {
  runtime::call_context ctx{request_id, "alice", "operator", "local"};
  auto s = small_job();
  return l.handle(s.GetDescriptor()->full_name(), s.SerializeAsString(), ctx);
}

std::optional<status> wait_outcome(const runtime::handled& h) {
  for (int i = 0; i < 500 && !h.durable->outcome(); ++i) std::this_thread::sleep_for(10ms);
  return h.durable->outcome();
}
}  // namespace

TEST_CASE("job changes through the group commit: the reply waits for a ticket that resolves once they are stored") {
  auto scratch = store::testing::scratch::make(engine, "group");
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, scheduler::scheduler_migrations()).ok());
  auto writer = store::database::open(scratch->url());
  REQUIRE(writer.ok());
  scheduler::time_point now{std::chrono::seconds(1'700'000'000)};
  scheduler::scheduler_logic a(db->get(), [&] { return now; }, "/tmp/jobs", {}, 60s, std::move(*writer));
  std::vector<runtime::handled> replies;
  for (int i = 0; i < 20; ++i) replies.push_back(submit(a, "req-" + std::to_string(i)));
  for (auto& h : replies) {
    REQUIRE(h.code == errc::ok);
    REQUIRE(h.durable);
    auto outcome = wait_outcome(h);
    REQUIRE(outcome);
    CHECK(outcome->ok());
  }
  // Once every ticket resolved, a fresh connection sees all twenty jobs.
  auto fresh = store::database::open(scratch->url());
  REQUIRE(fresh.ok());
  auto rows = (*fresh)->with_read_transaction([](store::transaction& tx) { return tx.query("SELECT id FROM jobs"); });
  REQUIRE(rows.ok());
  CHECK(rows->size() == 20);
  // A read needs no ticket.
  CHECK(!call(a, v1::ListJobsRequest{}).durable);
}

TEST_CASE("a repeated submit answered while the first is still being committed waits for that same commit") {
  auto m = open_migrated("repeat");
  auto* db = &m.db;
  const auto* scratch = &m.scratch;
  auto writer = store::database::open(scratch->url());
  REQUIRE(writer.ok());
  auto blocker = store::database::open(scratch->url());
  REQUIRE(blocker.ok());
  scheduler::time_point now{std::chrono::seconds(1'700'000'000)};
  scheduler::scheduler_logic a(db->get(), [&] { return now; }, "/tmp/jobs", {}, 60s, std::move(*writer));
  // Another connection holds the tables, so the group commit cannot land yet.
  std::atomic<bool> holding{false}, release{false};
  std::thread hold([&] {
    (void)(*blocker)->with_transaction([&](store::transaction& tx) -> status {
      if (tx.kind() == store::backend::postgres)
        if (auto r = tx.exec("LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE"); !r) return r.err();
      holding = true;
      for (int i = 0; i < 1000 && !release; ++i) std::this_thread::sleep_for(5ms);
      return ok_status();
    });
  });
  for (int i = 0; i < 1000 && !holding; ++i) std::this_thread::sleep_for(1ms);
  REQUIRE(holding);
  auto first = submit(a, "same-request");
  REQUIRE(first.code == errc::ok);
  REQUIRE(first.durable);
  auto again = submit(a, "same-request");  // the client's retry: answered from memory
  REQUIRE(again.code == errc::ok);
  CHECK(!first.durable->outcome());
  CHECK(again.durable == first.durable);  // not a reply that outruns the commit
  release = true;
  hold.join();
  auto outcome = wait_outcome(first);
  REQUIRE(outcome);
  CHECK(outcome->ok());
  // Once it is stored, a repeat needs no ticket.
  a.on_tick();
  CHECK(!submit(a, "same-request").durable);
}

TEST_CASE("a failed group commit fails its reply's ticket and the next call restarts the logic from the store") {
  auto scratch = store::testing::scratch::make(engine, "groupfail");
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, scheduler::scheduler_migrations()).ok());
  // The writer points at a store without the job tables: every unit fails.
  auto other = store::testing::scratch::make(engine, "groupfail_other");
  REQUIRE(other.ok());
  auto writer = store::database::open(other->url());
  REQUIRE(writer.ok());
  scheduler::time_point now{std::chrono::seconds(1'700'000'000)};
  scheduler::scheduler_logic a(db->get(), [&] { return now; }, "/tmp/jobs", {}, 60s, std::move(*writer));
  auto h = submit(a, "req-1");
  REQUIRE(h.durable);
  auto outcome = wait_outcome(h);
  REQUIRE(outcome);
  CHECK(!outcome->ok());
  CHECK_THROWS_AS(call(a, v1::ListJobsRequest{}), std::runtime_error);
  // Restarted from the store: the job that was never stored is not there.
  scheduler::scheduler_logic b(db->get(), [&] { return now; });
  scheduler::caller admin;  // every tenant's jobs
  CHECK(b.jobs().list("", admin).empty());
}

TEST_CASE("a submit's request id outlives a restart on its job row, and one recorded by v4-v6 in job_requests too") {
  auto scratch = store::testing::scratch::make(engine, "requests");
  REQUIRE(scratch.ok());
  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  REQUIRE(store::migrate(**db, scheduler::scheduler_migrations()).ok());
  scheduler::time_point now{std::chrono::seconds(1'700'000'000)};
  auto job_of = [](const runtime::handled& h) {
    v1::SubmitJobReply r;
    REQUIRE(r.ParseFromString(h.body));
    return std::pair{r.job().id(), r.existed()};
  };
  auto other_body = [&](scheduler::scheduler_logic& l, const std::string& request_id) {
    auto s = small_job();
    s.add_overrides("steps=4");
    return l.handle(s.GetDescriptor()->full_name(), s.SerializeAsString(), {request_id, "alice", "operator", "local"});
  };
  {
    scheduler::scheduler_logic a(db->get(), [&] { return now; });
    REQUIRE(submit(a, "req-1").code == errc::ok);
    REQUIRE(submit(a, "req-2").code == errc::ok);
  }
  auto exec = [&](const std::string& sql, const std::vector<store::value>& args) {
    auto st = (*db)->with_transaction([&](store::transaction& tx) -> status {
      auto r = tx.exec(sql, args);
      if (!r) return r.err();
      return ok_status();
    });
    REQUIRE_MESSAGE(st.ok(), st.err().to_string());
  };
  auto count = [&](const std::string& sql) {
    auto rows = (*db)->with_read_transaction([&](store::transaction& tx) { return tx.query(sql); });
    REQUIRE(rows.ok());
    return *(*rows)[0].get_i64(0);
  };
  CHECK(count("SELECT COUNT(*) FROM job_requests") == 0);  // the job row is the submit's record
  // job-000002 as v4-v6 wrote it: the body's hash in a job_requests row.
  exec("UPDATE jobs SET body_sha256 = '' WHERE id = $1", {std::string("job-000002")});
  exec("INSERT INTO job_requests (principal, request_id, kind, body_sha256, job_id, unix_ns) "
       "VALUES ($1, $2, $3, $4, $5, $6)",
       {std::string("alice"), std::string("req-2"), std::string("submit"),
        crypto::sha256_hex(small_job().SerializeAsString()), std::string("job-000002"), std::int64_t{1}});

  scheduler::scheduler_logic b(db->get(), [&] { return now; });
  for (auto [rid, id] : {std::pair{"req-1", "job-000001"}, std::pair{"req-2", "job-000002"}}) {
    INFO(rid);
    auto again = submit(b, rid);
    REQUIRE(again.code == errc::ok);
    CHECK(job_of(again) == std::pair{std::string(id), true});
    auto conflict = other_body(b, rid);
    CHECK(conflict.code == errc::conflict);
    CHECK(conflict.message.find(std::string("request id ") + rid + " was used by alice") != std::string::npos);
  }
  CHECK(count("SELECT COUNT(*) FROM jobs") == 2);
}

namespace {
struct store_fixture {
  std::optional<store::testing::scratch> scratch;
  std::unique_ptr<store::database> db;
  scheduler::time_point now{std::chrono::seconds(1'700'000'000)};
  explicit store_fixture(const char* name, std::size_t migrations = scheduler::scheduler_migrations().size()) {
    auto s = store::testing::scratch::make(engine, name);
    REQUIRE(s.ok());
    scratch.emplace(std::move(*s));
    auto d = store::database::open(scratch->url());
    REQUIRE(d.ok());
    db = std::move(*d);
    REQUIRE(store::migrate(*db, scheduler::scheduler_migrations().first(migrations)).ok());
  }
  std::unique_ptr<scheduler::scheduler_logic> logic() {
    return std::make_unique<scheduler::scheduler_logic>(db.get(), [this] { return now; });
  }
};

v1::DrainNodeRequest drain_of(const std::string& id) {
  v1::DrainNodeRequest d;
  d.mutable_node()->set_value(id);
  return d;
}
v1::UndrainNodeRequest undrain_of(const std::string& id) {
  v1::UndrainNodeRequest d;
  d.mutable_node()->set_value(id);
  return d;
}
}  // namespace

TEST_CASE("a drain outlives a restart, the node's re-registration and its reaping, and an undrain ends it") {
  store_fixture f("drains");
  {
    auto a = f.logic();
    REQUIRE(call(*a, reg("t1", 10)).code == errc::ok);
    CHECK(call(*a, drain_of("t1"), "client", "operator").code == errc::permission_denied);  // a tenant's operator
    REQUIRE(call(*a, drain_of("t1"), "client", "admin").code == errc::ok);
  }
  auto b = f.logic();  // a restarted scheduler
  CHECK(b->nodes().find("t1")->draining);
  REQUIRE(call(*b, reg("t1", 11)).code == errc::ok);  // the trainer restarted and registered again
  CHECK(b->nodes().find("t1")->draining);
  f.now += 5min;  // silent: reaped from the roster (and its row)
  b->on_tick();
  CHECK(b->nodes().find("t1") == nullptr);
  auto c = f.logic();
  CHECK(c->nodes().find("t1") == nullptr);
  REQUIRE(call(*c, reg("t1", 12)).code == errc::ok);
  CHECK(c->nodes().find("t1")->draining);
  REQUIRE(call(*c, undrain_of("t1"), "client", "admin").code == errc::ok);
  auto d = f.logic();
  CHECK_FALSE(d->nodes().find("t1")->draining);
  CHECK(call(*d, undrain_of("nobody"), "client", "admin").code == errc::not_found);
}

TEST_CASE("a node's key binding outlives a restart and its reaping: no other key takes the id over") {
  store_fixture f("bindings");
  auto south = reg("trainer@south.h", 1);
  south.set_zone("local");
  {
    auto a = f.logic();
    REQUIRE(call(*a, south).code == errc::ok);  // bound to this deployment's trainer key
    CHECK(call(*a, south, "ingest").code == errc::permission_denied);  // an ingest key registers ingest nodes only
    f.now += 5min;
    a->on_tick();  // reaped: a minute of silence after its death
    CHECK(a->nodes().find("trainer@south.h") == nullptr);
  }
  auto b = f.logic();
  auto into_north = south;  // north's key, in north's own zone: still not its id
  into_north.set_zone("north");
  auto other = call(*b, into_north, "site:north:trainer");
  CHECK(other.code == errc::permission_denied);
  CHECK(other.message.find("bound to CURVE key trainer") != std::string::npos);
  CHECK(call(*b, south).code == errc::ok);  // its own key, as ever
  v1::NodeHeartbeatRequest hb;
  hb.mutable_node()->set_value("trainer@south.h");
  CHECK(call(*b, hb, "site:north:trainer").code == errc::permission_denied);
  v1::PollWorkRequest poll;
  poll.mutable_node()->set_value("trainer@south.h");
  poll.set_state("idle");
  CHECK(call(*b, poll, "site:north:trainer").code == errc::permission_denied);
  CHECK(call(*b, poll).code == errc::ok);
}

TEST_CASE("nodes stored before bindings keep their zone and drain, and their next request from a fitting key binds them") {
  // A store at v9 with two nodes, one drained; then this binary's migrations.
  store_fixture f("prebind", 9);
  auto st = f.db->with_transaction([](store::transaction& tx) -> status {
    for (auto [id, drained] : {std::pair{"old-1", 1}, std::pair{"old-2", 0}}) {
      auto r = tx.exec("INSERT INTO nodes (id, service, zone, registered_unix_ns, last_seen_unix_ns, draining) "
                       "VALUES ($1, 'trainer', 'local', 1, 1, $2)",
                       {std::string(id), std::int64_t{drained}});
      if (!r) return r.err();
    }
    return ok_status();
  });
  REQUIRE_MESSAGE(st.ok(), st.err().to_string());
  REQUIRE(store::migrate(*f.db, scheduler::scheduler_migrations()).ok());
  auto a = f.logic();
  const auto* b1 = a->nodes().binding("old-1");
  REQUIRE(b1 != nullptr);
  CHECK(b1->peer.empty());
  CHECK(b1->zone == "local");
  CHECK(b1->drained);
  auto r1 = reg("old-1", 5);
  REQUIRE(call(*a, r1).code == errc::ok);  // the trainer key: bound now
  CHECK(a->nodes().find("old-1")->draining);
  CHECK(a->nodes().binding("old-1")->peer == "trainer");
  CHECK(call(*a, r1, "site:x:trainer").code == errc::permission_denied);
  // old-2 is bound by its first heartbeat from a fitting key (a trainer node: the trainer key).
  v1::NodeHeartbeatRequest hb;
  hb.mutable_node()->set_value("old-2");
  CHECK(call(*a, hb, "ingest").code == errc::permission_denied);
  REQUIRE(call(*a, hb).code == errc::ok);
  auto again = f.logic();
  CHECK(again->nodes().binding("old-2")->peer == "trainer");
}
