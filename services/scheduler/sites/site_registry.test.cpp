// The sites registry over a real store (SQLite and PostgreSQL: CTest names end
// in [sqlite] / [postgres]): one-time tokens, enrolment refusals, revocation,
// the key files every cloud service admits, and the scheduler's requests.
#include "libs/auth/site_token.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/runtime/admission.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/scheduler.pb.h"
#include "loom/v1/sites.pb.h"
#include "services/scheduler/scheduler_logic.hpp"
#include "services/scheduler/schema.hpp"
#include "services/scheduler/sites/site_registry.hpp"

#include <doctest/doctest.h>

#include <filesystem>

using namespace loom;
using namespace loom::scheduler;
using namespace std::chrono_literals;

namespace {
constexpr store::backend engine = store::testing::suite_backend;

struct registry_fixture {
  files::temp_dir dir{"loom-sites"};
  store::testing::scratch scratch = store::testing::scratch::make(engine, "sites").value();
  std::unique_ptr<store::database> db = store::database::open(scratch.url()).value();
  time_point now{std::chrono::seconds(1'700'000'000)};
  wire::curve_keypair cloud = wire::generate_keypair();
  wire::curve_keypair own_audit = wire::generate_keypair();
  int changed = 0;
  std::unique_ptr<site_registry> reg;

  registry_fixture() {
    REQUIRE(store::migrate(*db, scheduler_migrations()).ok());
    reg = make();
  }
  std::unique_ptr<site_registry> make() {
    cloud_info c{"local", cloud.public_z85, "tcp://127.0.0.1:5000", {{"scheduler", "tcp://127.0.0.1:5000", cloud.public_z85, ""}}};
    return std::make_unique<site_registry>(db.get(), [this] { return now; }, c, dir.path() + "/keys/sites",
                                           wire::allow_list{{own_audit.public_z85, "audit"}}, [this] { ++changed; });
  }
  std::map<std::string, std::string> keys() {
    return {{"trainer", wire::generate_keypair().public_z85}, {"ingest", wire::generate_keypair().public_z85}};
  }
  std::string token(const std::string& site, std::chrono::milliseconds ttl = 0ms) {
    auto t = reg->issue_token(site, ttl, "admin");
    REQUIRE_MESSAGE(t.ok(), t.err().message);
    return t->token;
  }
};

errc enrol_code(registry_fixture& f, const std::string& site, const std::string& token, std::string* why = nullptr) {
  auto r = f.reg->enrol(site, token, f.keys());
  if (why && !r) *why = r.err().message;
  return r.ok() ? errc::ok : r.code();
}
}  // namespace

TEST_CASE_FIXTURE(registry_fixture, "a token enrols its site once and the site's keys are written for admission") {
  auto k = keys();
  auto r = reg->enrol("plant-a", token("plant-a"), k);
  REQUIRE_MESSAGE(r.ok(), r.err().message);
  CHECK(r->state == "enrolled");
  CHECK(r->keys == k);
  CHECK(changed == 1);
  // What every cloud service admits: its own keys and the site's, named site:<site>:<service>.
  REQUIRE(wire::save_keypair(dir.path() + "/keys/curve", "audit", wire::generate_keypair()).ok());
  auto admitted = runtime::admitted_keys(layout::paths{dir.path()});
  REQUIRE(admitted.ok());
  CHECK(admitted->size() == 3);
  CHECK(admitted->at(k["trainer"]) == "site:plant-a:trainer");
  auto files_now = wire::load_allow_list(dir.path() + "/keys/sites");
  REQUIRE(files_now.ok());
  CHECK(files_now->at(k["trainer"]) == "plant-a.trainer");
  CHECK(files_now->at(k["ingest"]) == "plant-a.ingest");
}

TEST_CASE_FIXTURE(registry_fixture, "a used, expired, foreign, unknown or malformed token is refused as permission denied") {
  const auto t = token("plant-a");
  REQUIRE(enrol_code(*this, "plant-a", t) == errc::ok);
  std::string why;
  CHECK(enrol_code(*this, "plant-a", t, &why) == errc::permission_denied);
  CHECK(why.find("used already") != std::string::npos);
  CHECK(enrol_code(*this, "plant-b", token("plant-a"), &why) == errc::permission_denied);
  CHECK(why.find("not for site plant-b") != std::string::npos);
  const auto short_lived = token("plant-a", 1000ms);
  now += 1001ms;
  CHECK(enrol_code(*this, "plant-a", short_lived, &why) == errc::permission_denied);
  CHECK(why.find("expired") != std::string::npos);
  auto never_issued = auth::make_enrol_token(*wire::key_bytes(cloud.public_z85));
  CHECK(enrol_code(*this, "plant-a", never_issued, &why) == errc::permission_denied);
  CHECK(why.find("unknown") != std::string::npos);
  auto other_cloud = auth::make_enrol_token(*wire::key_bytes(wire::generate_keypair().public_z85));
  CHECK(enrol_code(*this, "plant-a", other_cloud, &why) == errc::permission_denied);
  CHECK(why.find("another cloud") != std::string::npos);
  CHECK(enrol_code(*this, "plant-a", "lse1.nonsense", &why) == errc::permission_denied);
  CHECK(why.find("malformed") != std::string::npos);
}

TEST_CASE_FIXTURE(registry_fixture, "a revoked site is refused with any token, loses its key files and gets no new token") {
  const auto first = token("plant-a"), spare = token("plant-a");
  REQUIRE(enrol_code(*this, "plant-a", first) == errc::ok);
  auto r = reg->revoke("plant-a", "stolen box");
  REQUIRE(r.ok());
  CHECK(r->state == "revoked");
  CHECK(r->revoke_reason == "stolen box");
  CHECK(std::filesystem::is_empty(dir.path() + "/keys/sites"));
  std::string why;
  CHECK(enrol_code(*this, "plant-a", spare, &why) == errc::permission_denied);
  CHECK(why.find("revoked") != std::string::npos);
  CHECK(reg->issue_token("plant-a", 0ms, "admin").code() == errc::conflict);
  CHECK(reg->revoke("plant-a", "again").ok());  // idempotent
  CHECK(reg->revoke("nowhere", "").code() == errc::not_found);
}

TEST_CASE_FIXTURE(registry_fixture, "bad names, the cloud's zone, long lifetimes and bad keys are invalid arguments") {
  CHECK(reg->issue_token("Plant_A", 0ms, "admin").code() == errc::invalid_argument);
  CHECK(reg->issue_token("local", 0ms, "admin").code() == errc::invalid_argument);
  CHECK(reg->issue_token("plant-a", site_registry::max_ttl + 1ms, "admin").code() == errc::invalid_argument);
  const auto t = token("plant-a");
  CHECK(reg->enrol("plant-a", t, {}).code() == errc::invalid_argument);
  CHECK(reg->enrol("plant-a", t, {{"trainer", "not-a-key"}}).code() == errc::invalid_argument);
  CHECK(reg->enrol("plant-a", t, {{"train.er", wire::generate_keypair().public_z85}}).code() == errc::invalid_argument);
  CHECK(reg->enrol("plant-a", t, {{"audit", own_audit.public_z85}}).code() == errc::invalid_argument);
  // None of these used the token up.
  CHECK(enrol_code(*this, "plant-a", t) == errc::ok);
  // Another site cannot enrol a key that plant-a holds.
  auto held = reg->list();
  REQUIRE(held.ok());
  const auto taken = held->front().keys.at("trainer");
  CHECK(reg->enrol("plant-b", token("plant-b"), {{"trainer", taken}}).code() == errc::invalid_argument);
}

TEST_CASE_FIXTURE(registry_fixture, "a restarted registry rewrites the key files from the store") {
  REQUIRE(enrol_code(*this, "plant-a", token("plant-a")) == errc::ok);
  const std::string sites = dir.path() + "/keys/sites";
  for (auto& e : std::filesystem::directory_iterator(sites)) std::filesystem::remove(e.path());
  REQUIRE(files::write_atomic(sites + "/ghost.trainer.pub", wire::generate_keypair().public_z85 + "\n", 0600).ok());
  reg = make();
  REQUIRE(reg->sync_key_files().ok());
  auto back = wire::load_allow_list(sites);
  REQUIRE(back.ok());
  CHECK(back->size() == 2);
  for (auto& [key, who] : *back) CHECK(who.starts_with("plant-a."));
}

TEST_CASE_FIXTURE(registry_fixture, "through the scheduler: list shows the site with its trainers and an unknown link") {
  scheduler_logic logic(db.get(), [this] { return now; });
  std::vector<std::string> events;
  logic.set_sites(std::move(reg), [&](const scheduler_logic::site_event& e) { events.push_back(e.action); });
  auto call = [&](const google::protobuf::Message& m, runtime::call_context ctx = {}) {
    return logic.handle(m.GetDescriptor()->full_name(), m.SerializeAsString(), ctx);
  };
  v1::IssueSiteTokenRequest it;
  it.set_site("plant-a");
  auto h = call(it, {"r1", "admin", "admin", "local"});
  REQUIRE(h.code == errc::ok);
  v1::IssueSiteTokenReply tok;
  REQUIRE(tok.ParseFromString(h.body));
  CHECK(h.audit_payload.find(tok.token()) == std::string::npos);
  v1::EnrolSiteRequest en;
  en.set_site("plant-a");
  en.set_token(tok.token());
  (*en.mutable_public_keys())["trainer"] = wire::generate_keypair().public_z85;
  h = call(en);
  REQUIRE_MESSAGE(h.code == errc::ok, h.message);
  v1::EnrolSiteReply er;
  REQUIRE(er.ParseFromString(h.body));
  CHECK(er.cloud_zone() == "local");
  REQUIRE(er.services_size() == 1);
  CHECK(er.services(0).public_key() == cloud.public_z85);
  CHECK(call(en).code == errc::permission_denied);  // the token again
  v1::RegisterNodeRequest rn;
  rn.mutable_node()->set_value("trainer@plant-a");
  rn.set_service("trainer");
  rn.set_zone("plant-a");
  runtime::call_context from_site{"r2", "site:plant-a", "operator", "local"};
  from_site.peer = "site:plant-a:trainer";
  REQUIRE(call(rn, from_site).code == errc::ok);
  h = call(v1::ListSitesRequest{});
  REQUIRE(h.code == errc::ok);
  v1::ListSitesReply ls;
  REQUIRE(ls.ParseFromString(h.body));
  REQUIRE(ls.sites_size() == 1);
  const auto& s = ls.sites(0);
  CHECK(s.name() == "plant-a");
  CHECK(s.state() == "enrolled");
  REQUIRE(s.trainers_size() == 1);
  CHECK(s.trainers(0).node() == "trainer@plant-a");
  CHECK(s.trainers(0).state() == "alive");
  CHECK_FALSE(s.has_link());
  CHECK_FALSE(s.datasets_known());
  CHECK(events == std::vector<std::string>{"site.token", "site.enrol", "site.enrol.refused"});
}

TEST_CASE_FIXTURE(registry_fixture, "a site's keys speak only for nodes in its zone and its zone only through them") {
  scheduler_logic logic(db.get(), [this] { return now; });
  REQUIRE(reg->issue_token("plant-a", 0ms, "admin").ok());  // plant-a is a site (pending)
  logic.set_sites(std::move(reg), {});
  auto as = [](const std::string& peer) {
    runtime::call_context c{"r", "svc", "operator", "local"};
    c.peer = peer;
    return c;
  };
  auto call = [&](const google::protobuf::Message& m, const runtime::call_context& ctx) {
    return logic.handle(m.GetDescriptor()->full_name(), m.SerializeAsString(), ctx);
  };
  auto reg_in = [](const std::string& id, const std::string& zone) {
    v1::RegisterNodeRequest r;
    r.mutable_node()->set_value(id);
    r.set_service("trainer");
    r.set_zone(zone);
    return r;
  };
  CHECK(call(reg_in("t@plant-a", "plant-a"), as("site:plant-a:trainer")).code == errc::ok);
  auto wrong_zone = call(reg_in("t2@plant-a", "local"), as("site:plant-a:trainer"));
  CHECK(wrong_zone.code == errc::permission_denied);
  CHECK(wrong_zone.message.find("zone plant-a, not local") != std::string::npos);
  CHECK(call(reg_in("t3", "plant-a"), as("site:plant-b:trainer")).code == errc::permission_denied);
  auto cloud_key = call(reg_in("t4", "plant-a"), as("trainer"));
  CHECK(cloud_key.code == errc::permission_denied);
  CHECK(cloud_key.message.find("only its enrolled keys") != std::string::npos);
  CHECK(call(reg_in("t5", "local"), as("trainer")).code == errc::ok);  // the cloud's own nodes as before
  // Polls and heartbeats of a site's node from another key are refused too.
  v1::PollWorkRequest poll;
  poll.mutable_node()->set_value("t@plant-a");
  CHECK(call(poll, as("trainer")).code == errc::permission_denied);
  CHECK(call(poll, as("site:plant-a:trainer")).code == errc::ok);
  v1::NodeHeartbeatRequest hb;
  hb.mutable_node()->set_value("t@plant-a");
  CHECK(call(hb, as("client")).code == errc::permission_denied);
  CHECK(call(hb, as("site:plant-a:trainer")).code == errc::ok);
}

TEST_CASE_FIXTURE(registry_fixture, "a site's trainer's measured uplink becomes its link's bandwidth and heartbeats keep it") {
  CHECK(reg->report_bandwidth("plant-a", 1e6).code() == errc::not_found);
  CHECK(reg->report_bandwidth("plant-a", -1).code() == errc::invalid_argument);
  scheduler_logic logic(db.get(), [this] { return now; });
  REQUIRE(reg->issue_token("plant-a", 0ms, "admin").ok());
  REQUIRE(reg->issue_token("plant-b", 0ms, "admin").ok());
  logic.set_sites(std::move(reg), {});
  auto as = [](const std::string& peer) {
    runtime::call_context c{"r", "svc", "operator", "local"};
    c.peer = peer;
    return c;
  };
  auto call = [&](const google::protobuf::Message& m, const runtime::call_context& ctx) {
    return logic.handle(m.GetDescriptor()->full_name(), m.SerializeAsString(), ctx);
  };
  auto link_of = [&](const std::string& site) {
    v1::ListSitesReply ls;
    REQUIRE(ls.ParseFromString(call(v1::ListSitesRequest{}, as("client")).body));
    for (const auto& s : ls.sites())
      if (s.name() == site) return s.link();
    FAIL("no site " << site);
    return v1::SiteLink{};
  };
  v1::RegisterNodeRequest rn;
  rn.mutable_node()->set_value("t@plant-a");
  rn.set_service("trainer");
  rn.set_zone("plant-a");
  REQUIRE(call(rn, as("site:plant-a:trainer")).code == errc::ok);
  v1::NodeHeartbeatRequest hb;
  hb.mutable_node()->set_value("t@plant-a");
  hb.mutable_link()->set_rtt_ms(22.4);
  hb.mutable_link()->set_state("up");
  REQUIRE(call(hb, as("site:plant-a:trainer")).code == errc::ok);
  CHECK(link_of("plant-a").bandwidth_bytes_per_s() == 0);  // heartbeats alone measure none
  v1::PollWorkRequest poll;
  poll.mutable_node()->set_value("t@plant-a");
  poll.mutable_site()->set_site("site-0");
  poll.mutable_site()->set_up_bytes_per_s(3.1e6);
  REQUIRE(call(poll, as("site:plant-a:trainer")).code == errc::ok);
  auto l = link_of("plant-a");
  CHECK(l.bandwidth_bytes_per_s() == doctest::Approx(3.1e6));
  CHECK(l.rtt_ms() == doctest::Approx(22.4));
  CHECK(l.state() == "up");
  CHECK(link_of("plant-b").bandwidth_bytes_per_s() == 0);  // only the reporting trainer's own site
  now += 11s;  // the next heartbeat is written, without a bandwidth: the measured one stays
  hb.mutable_link()->set_rtt_ms(30.0);
  REQUIRE(call(hb, as("site:plant-a:trainer")).code == errc::ok);
  l = link_of("plant-a");
  CHECK(l.rtt_ms() == doctest::Approx(30.0));
  CHECK(l.bandwidth_bytes_per_s() == doctest::Approx(3.1e6));
  // A restarted scheduler keeps it from the store.
  scheduler_logic again(db.get(), [this] { return now; });
  again.set_sites(make(), {});
  REQUIRE(again.handle(rn.GetDescriptor()->full_name(), rn.SerializeAsString(), as("site:plant-a:trainer")).code == errc::ok);
  REQUIRE(again.handle(hb.GetDescriptor()->full_name(), hb.SerializeAsString(), as("site:plant-a:trainer")).code == errc::ok);
  v1::ListSitesReply ls;
  REQUIRE(ls.ParseFromString(again.handle("loom.v1.ListSitesRequest", "", as("client")).body));
  REQUIRE(ls.sites_size() == 2);
  CHECK(ls.sites(0).link().bandwidth_bytes_per_s() == doctest::Approx(3.1e6));
}
