// Cross-process, on loopback (issue 24 items 1, 2, 7, 12, 13, 14): who may
// speak for a node, drain it, and where a job runs.
//  - cloud only: the client key, with a tenant's operator token or the admin's,
//    sends PollWork, RegisterNode and NodeHeartbeat as the cloud's real
//    trainer while it runs another tenant's job: refused, the RegisterNode
//    refusal audited under the real caller, the job untouched (it succeeds and
//    its poll-caused events name the trainer's key); a tenant operator's drain
//    is refused, the admin's is kept through kill -9 of the scheduler and of
//    the trainer until `loom node undrain`; a diloco job naming an unknown or
//    a pending site is refused at submit.
//  - a cloud and sites north and south: north's keys cannot register, poll or
//    heartbeat as south's trainer; north drains its own trainer (its token over
//    its key), not south's, and not over the cloud's key; a job naming no zone
//    waits for the cloud's (drained) trainer rather than run on an idle site
//    trainer, then runs there; a diloco job on both sites fails naming south
//    once south is revoked, and north's trainer is told to stop.
#include "tests/support/audit_events.hpp"
#include "tests/support/edge_sites.hpp"
#include "tests/support/job_watch.hpp"

#include "libs/wire/curve.hpp"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/scheduler.pb.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <csignal>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

const char* corpus = "/usr/share/common-licenses/GPL-3";

// A token of `tenant` with `role`, named `principal`, signed with the cloud's token key.
std::string tenant_token(cluster& c, auth::role role, const std::string& tenant, const std::string& principal) {
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto epoch = auth::read_epoch(c.paths.epoch());
  auth::claims cl{principal, role, {"*"}, now + 600, epoch ? *epoch : 0, now, tenant};
  auto t = auth::issue_token(cl, c.token_key);
  REQUIRE(t.ok());
  return *t;
}

// A client of the cloud's scheduler presenting `mine`.
std::unique_ptr<wire::client> scheduler_as(cluster& c, const wire::curve_keypair& mine) {
  auto server = wire::load_public_key(c.paths.curve_dir(), "scheduler");
  REQUIRE(server.ok());
  return std::make_unique<wire::client>(c.ctx, c.ep("scheduler").rpc, *server, mine,
                                        wire::client_options{std::chrono::milliseconds(5000), 1});
}

wire::reply send_msg(wire::client& cli, const google::protobuf::Message& m, const std::string& token,
                     const std::string& rid = wire::new_request_id()) {
  return send(cli, m.GetDescriptor()->full_name(), m.SerializeAsString(), token, rid);
}

// The roster's nodes: id -> {zone, state}.
std::map<std::string, std::pair<std::string, std::string>> roster(cluster& c) {
  auto cli = c.client("scheduler", 2, 5000ms);
  REQUIRE(cli);
  auto rep = send_msg(*cli, v1::ListNodesRequest{}, c.admin());
  REQUIRE(rep.ok());
  v1::ListNodesReply l;
  REQUIRE(l.ParseFromString(rep.body));
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const auto& n : l.nodes())
    if (n.service() == "trainer") out[n.node().value()] = {n.zone(), n.state()};
  return out;
}

// The trainer node of `zone` (waits for it to register).
std::string trainer_in(cluster& c, const std::string& zone) {
  std::string id;
  eventually(
      [&] {
        for (const auto& [n, zs] : roster(c))
          if (zs.first == zone) id = n;
        return !id.empty();
      },
      60s);
  REQUIRE_MESSAGE(!id.empty(), "no trainer of zone " << zone << " registered");
  return id;
}

v1::PollWorkRequest poll_as(const std::string& node, const std::string& state, const std::string& job = "") {
  v1::PollWorkRequest p;
  p.mutable_node()->set_value(node);
  p.set_state(state);
  p.set_job(job);
  p.set_stage(job.empty() ? "" : "pretrain");
  p.set_message("sabotage");
  return p;
}

v1::RegisterNodeRequest register_as(const std::string& node, const std::string& zone) {
  v1::RegisterNodeRequest r;
  r.mutable_node()->set_value(node);
  r.set_service("trainer");
  r.set_zone(zone);
  r.mutable_resources()->set_cpu_cores(64);
  r.mutable_resources()->set_memory_bytes(1ull << 40);
  r.set_pid(4242);
  return r;
}

v1::NodeHeartbeatRequest heartbeat_as(const std::string& node) {
  v1::NodeHeartbeatRequest h;
  h.mutable_node()->set_value(node);
  return h;
}

template <class Req>
Req for_node(const std::string& node) {
  Req r;
  r.mutable_node()->set_value(node);
  return r;
}

// The audit record of request `rid`, once stored (or an empty event after 30 s).
v1::AuditEvent record_of(cluster& c, const std::string& rid) {
  v1::AuditEvent found;
  eventually(
      [&] {
        for (auto& e : all_events(c))
          if (e.request_id() == rid) found = e;
        return !found.request_id().empty();
      },
      30s, 500ms);
  return found;
}

// Kills `service` of the cloud with -9 and waits for its watcher's replacement to be healthy.
void kill9(cluster& c, const std::string& service) {
  const long old = pid_of(c.home.path(), service);
  REQUIRE(old > 0);
  REQUIRE(::kill(static_cast<pid_t>(old), SIGKILL) == 0);
  REQUIRE(eventually(
      [&] {
        const long now = pid_of(c.home.path(), service);
        return now != 0 && now != old;
      },
      60s));
}

}  // namespace

TEST_CASE("the client key speaks for no node whatever its token, a drain is the admin's and outlives restarts, "
          "and a diloco job naming an unknown site is refused at submit") {
  cluster c({"--import-root", "/usr/share/common-licenses"});  // the jobs' text
  REQUIRE(c.up);
  const std::string trainer = trainer_in(c, "local");
  // Tenant blue's job runs on the cloud's trainer.
  auto sub = loom_json(c.home.path(), {"job", "submit", "--template", "pipeline-test", "--tenant", "blue", "--set",
                                       std::string("text=") + corpus, "--set", "pretrain.steps=300"});
  REQUIRE_MESSAGE(sub.contains("id"), sub.dump());
  const std::string id = sub["id"].get<std::string>();
  json j;
  REQUIRE(eventually(
      [&] {
        j = loom_json(c.home.path(), {"job", "show", id});
        return j.contains("stages") && j["stages"][0].value("step", 0) >= 1;
      },
      120s));
  CHECK(j.value("zone", "") == "local");  // no zone named: the cloud's own

  // Tenant red's operator, and the admin, with the client key: never a node's word.
  auto cli = c.client("scheduler", 0, 5000ms);
  REQUIRE(cli);
  const std::string red = tenant_token(c, auth::role::operator_, "red", "op-red");
  std::string register_rid;
  for (const std::string& tok : {red, c.admin()}) {
    const auto failed = send_msg(*cli, poll_as(trainer, "failed", id), tok);
    CHECK(failed.code == errc::permission_denied);
    CHECK_MESSAGE(failed.message.find("client key") != std::string::npos, failed.message);
    auto succeeded = poll_as(trainer, "succeeded", id);
    succeeded.set_checkpoint(c.home.path() + "/jobs/" + id + "/pretrain/checkpoints/step-000010");
    CHECK(send_msg(*cli, succeeded, tok).code == errc::permission_denied);
    const std::string rid = wire::new_request_id();
    if (tok == red) register_rid = rid;
    CHECK(send_msg(*cli, register_as("fake@nowhere", "local"), tok, rid).code == errc::permission_denied);
    CHECK(send_msg(*cli, register_as(trainer, "local"), tok).code == errc::permission_denied);
    CHECK(send_msg(*cli, heartbeat_as(trainer), tok).code == errc::permission_denied);
  }
  CHECK(roster(c).count("fake@nowhere") == 0);
  // The refused registration is audited under the real caller: red's token over the client key.
  auto rec = record_of(c, register_rid);
  CHECK(rec.action() == "loom.v1.RegisterNodeRequest");
  CHECK(rec.principal() == "op-red");
  CHECK(rec.peer_key() == "client");
  CHECK(rec.decision() != v1::ALLOW);
  // The job is untouched: it succeeds, and the events its trainer's polls
  // caused name the trainer's key and its token's principal.
  j = wait_job_done(c.home.path(), id, 240s);
  REQUIRE_MESSAGE(j.value("state", "") == "succeeded", j.dump());
  bool named = false;
  std::string seen;
  for (auto& e : all_events(c)) {
    if (e.job_id() != id || e.action() != "job.stage_succeeded") continue;
    seen += e.peer_key() + " " + e.payload() + "\n";
    const auto p = json::parse(e.payload(), nullptr, false);
    // The trainer's key, and the principal of the token it polled with (its service token's).
    named |= e.peer_key() == "trainer" && p.is_object() && p.contains("caller") &&
             p["caller"].value("peer", "") == "trainer" && !p["caller"].value("principal", "").empty() &&
             p["caller"].value("principal", "") != "op-red";
  }
  CHECK_MESSAGE(named, seen);

  // Drain: not a tenant's operator's; the admin's, kept through kill -9 of the scheduler and of the trainer.
  const auto refused = send_msg(*cli, for_node<v1::DrainNodeRequest>(trainer), red);
  CHECK(refused.code == errc::permission_denied);
  CHECK(refused.message.find("the admin's, or its own site's") != std::string::npos);
  auto drained = run_loom(c.home.path(), {"node", "drain", trainer, "--reason", "disk swap"}, 30s);
  REQUIRE_MESSAGE(drained.code == 0, drained.err);
  CHECK(roster(c)[trainer].second == "draining");
  kill9(c, "scheduler");
  c.refresh();
  CHECK(roster(c)[trainer].second == "draining");
  kill9(c, "trainer");  // it registers again from its new process
  c.refresh();
  CHECK(eventually([&] { return roster(c)[trainer].second == "draining"; }, 20s));
  auto undrained = run_loom(c.home.path(), {"node", "undrain", trainer}, 30s);
  REQUIRE_MESSAGE(undrained.code == 0, undrained.err);
  CHECK(eventually([&] { return roster(c)[trainer].second == "alive"; }, 20s));

  // diloco.sites names only enrolled sites: refused at submit, naming them.
  REQUIRE(run_loom(c.home.path(), {"site", "token", "--site", "plant"}, 30s).code == 0);  // pending
  for (const auto& [sites, why] : {std::pair{"[\"nowhere\"]", "names nowhere, which is not a site of this cloud"},
                                   std::pair{"[\"plant\"]", "names plant, which is not enrolled yet (pending)"}}) {
    auto r = run_loom(c.home.path(), {"job", "submit", "--template", "pretrain-diloco-tiny", "--set",
                                      std::string("diloco.sites=") + sites, "--set", "dataset=text"},
                      30s);
    CHECK(r.code != 0);
    CHECK_MESSAGE(r.err.find(why) != std::string::npos, r.err);
    CHECK(r.err.find("enrolled sites: none") != std::string::npos);
  }
  CHECK(loom_json(c.home.path(), {"job", "list"}).value("jobs", json::array()).size() == 1);
}

TEST_CASE("a site's keys speak only for its own nodes, a job naming no zone stays off the sites, and revoking a "
          "site fails its running job and releases the other site's trainer") {
  cluster c({"--import-root", "/usr/share/common-licenses"});  // the jobs' text
  REQUIRE(c.up);
  auto north = start_edge_site(c, "north", "GPL-3");
  auto south = start_edge_site(c, "south", "GPL-2");
  const std::string cloud_trainer = trainer_in(c, "local"), n = trainer_in(c, "north"), s = trainer_in(c, "south");
  const layout::paths np{north->home.path()};
  const auto north_trainer = wire::load_keypair(np.curve_dir(), "trainer").value();
  const auto north_client = wire::load_keypair(np.curve_dir(), "client").value();
  auto token_file = files::read_file(np.cloud_token());
  REQUIRE(token_file.ok());
  const std::string north_token = token_file->substr(0, token_file->find_first_of(" \r\n"));

  // North's trainer key cannot take south's trainer over: not in north's zone, not in south's.
  auto as_north = scheduler_as(c, north_trainer);
  const std::string rid = wire::new_request_id();
  auto taken = send_msg(*as_north, register_as(s, "north"), north_token, rid);
  CHECK(taken.code == errc::permission_denied);
  CHECK_MESSAGE(taken.message.find("bound to CURVE key site:south:trainer") != std::string::npos, taken.message);
  CHECK(send_msg(*as_north, register_as(s, "south"), north_token).code == errc::permission_denied);
  CHECK(send_msg(*as_north, poll_as(s, "idle"), north_token).code == errc::permission_denied);
  CHECK(send_msg(*as_north, heartbeat_as(s), north_token).code == errc::permission_denied);
  CHECK(roster(c)[s].first == "south");
  auto rec = record_of(c, rid);
  CHECK(rec.principal() == "site:north");
  CHECK(rec.peer_key() == "site:north:trainer");
  CHECK(rec.decision() != v1::ALLOW);

  // North drains its own trainer with its token over its key; not south's, not over the cloud's key.
  auto north_cli = scheduler_as(c, north_client);
  CHECK(send_msg(*north_cli, for_node<v1::DrainNodeRequest>(s), north_token).code == errc::permission_denied);
  auto cloud_cli = c.client("scheduler", 0, 5000ms);
  REQUIRE(cloud_cli);
  CHECK(send_msg(*cloud_cli, for_node<v1::DrainNodeRequest>(n), north_token).code == errc::permission_denied);
  REQUIRE(send_msg(*north_cli, for_node<v1::DrainNodeRequest>(n), north_token).code == errc::ok);
  CHECK(roster(c)[n].second == "draining");
  REQUIRE(send_msg(*north_cli, for_node<v1::UndrainNodeRequest>(n), north_token).code == errc::ok);
  CHECK(roster(c)[n].second != "draining");

  // A job naming no zone is the cloud's: with the cloud's trainer drained it
  // waits, though both sites' trainers are idle; undrained, it runs there.
  REQUIRE(run_loom(c.home.path(), {"node", "drain", cloud_trainer}, 30s).code == 0);
  auto sub = loom_json(c.home.path(), {"job", "submit", "--template", "pipeline-test", "--set",
                                       std::string("text=") + licences + "/GPL-3", "--set", "pretrain.steps=100000"});
  REQUIRE_MESSAGE(sub.contains("id"), sub.dump());
  const std::string plain = sub["id"].get<std::string>();
  auto j = loom_json(c.home.path(), {"job", "show", plain});
  CHECK(j.value("zone", "") == "local");
  CHECK(j.value("state", "") == "queued");
  CHECK_MESSAGE(j["stages"][0].value("waiting", "").find("zone local") != std::string::npos, j.dump());
  REQUIRE(run_loom(c.home.path(), {"node", "undrain", cloud_trainer}, 30s).code == 0);
  REQUIRE(eventually(
      [&] {
        j = loom_json(c.home.path(), {"job", "show", plain});
        return j.value("state", "") == "running";
      },
      30s));
  CHECK(j["stages"][0].value("node", "") == cloud_trainer);
  REQUIRE(run_loom(c.home.path(), {"job", "cancel", plain}, 30s).code == 0);

  // A diloco job on both sites; south is revoked while it runs.
  auto dil = loom_json(c.home.path(), {"job", "submit", "--template", "pretrain-diloco-tiny", "--set",
                                       "diloco.sites=[\"north\", \"south\"]", "--set", "dataset=text", "--set",
                                       "pretrain.steps=100000"});
  REQUIRE(dil.contains("id"));
  const std::string id = dil["id"].get<std::string>();
  REQUIRE(eventually(
      [&] {
        j = loom_json(c.home.path(), {"job", "show", id});
        return j.contains("stages") && j["stages"][0].value("step", 0) >= 1;
      },
      180s));
  REQUIRE(run_loom(c.home.path(), {"site", "revoke", "south", "--reason", "box stolen"}, 30s).code == 0);
  j = wait_job_done(c.home.path(), id, 30s);
  CHECK(j.value("state", "") == "failed");
  CHECK_MESSAGE(j.value("message", "").find("site south was revoked (box stolen)") != std::string::npos, j.dump());
  // North's trainer is released: told to stop, it ends the stage and takes other work.
  const std::string north_log = north->home.path() + "/logs/trainer.log";
  CHECK(eventually(
      [&] {
        auto t = files::read_file(north_log);
        return t && (t->find(id + "/pretrain stopped") != std::string::npos ||
                     t->find(id + "/pretrain failed") != std::string::npos);
      },
      60s));
  // A diloco job naming the revoked site is refused at submit.
  auto again = run_loom(c.home.path(), {"job", "submit", "--template", "pretrain-diloco-tiny", "--set",
                                        "diloco.sites=[\"north\", \"south\"]", "--set", "dataset=text"},
                        30s);
  CHECK(again.code != 0);
  CHECK_MESSAGE(again.err.find("names south, which was revoked; enrolled sites: north") != std::string::npos, again.err);
}
