// A cloud and two edge sites on three hosts (issue 26): network namespaces
// `cloud`, `north` and `south` on a bridge with private addresses, each with
// its own mount namespace and a private tmpfs for its data dir (lan.hpp), so no
// host sees another's files. The cloud keeps its state in PostgreSQL (running
// on the cloud host, on its LAN address). Every service listens on its host's
// LAN address (`loom up --listen/--advertise/--ports`) and everything between
// hosts goes through those addresses, never loopback:
//   - both sites enrol with tokens and import their own text; the endpoints
//     each learnt are the other host's LAN addresses;
//   - `pretrain-diloco-tiny` over north and south succeeds while north's link
//     is cut for 5 s mid-job (`ip link set down`): `loom site list` shows north
//     degraded (and down, once silent past the roster's death), then up again;
//   - the cloud's final model verifies; what crossed into the cloud's services
//     from each site, by message type, holds no dataset traffic, and no file
//     of the cloud holds a site's text;
//   - a plain pretrain job for zone north runs on north's trainer;
//   - south, revoked, is refused.
// Root, iproute2 and util-linux only: otherwise skipped (LOOM_TEST_SKIPPED), never faked.
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "tests/multihost/lan.hpp"
#include "tests/multihost/lan_checks.hpp"
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <thread>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;


TEST_CASE("a cloud and two edge sites on three hosts train one diloco job over their LAN addresses, through a cut link") {
  remove_lan_leftovers();
  lan net({"cloud", "north", "south"});
  if (auto why = net.make(); !why.empty()) {
    MESSAGE("LOOM_TEST_SKIPPED: cannot make three hosts (network and mount namespaces on a bridge): " << why);
    return;
  }
  auto& cloud = net.host("cloud");
  auto& north = net.host("north");
  auto& south = net.host("south");
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };

  lan_postgres pg(net, cloud, 17000 + static_cast<int>(::getpid()) % 2000);
  const std::string pg_err = pg.start();
  REQUIRE_MESSAGE(pg_err.empty(), pg_err);
  const std::map<std::string, std::string> cloud_env{{"LOOM_DATABASE_URL", pg.url()}};

  // The cloud listens on every interface and advertises its LAN address, its ports from one range.
  auto up = net.loom(cloud, {"up", "--listen", "0.0.0.0", "--advertise", cloud.ip, "--ports", "7400-7499"}, 120s, cloud_env);
  REQUIRE_MESSAGE(up.code == 0, up.out << up.err);
  auto eps = layout::read_endpoints(net.seen_from_outside(cloud, cloud.data + "/endpoints.json"));
  REQUIRE(eps.ok());
  CHECK(eps->net.listen == "0.0.0.0");
  for (const auto& [name, s] : eps->services) {
    CHECK_MESSAGE(s.rpc.rfind("tcp://" + cloud.ip + ":74", 0) == 0, name << " " << s.rpc);
    CHECK_MESSAGE(s.metrics.rfind(cloud.ip + ":74", 0) == 0, name << " " << s.metrics);
  }
  CHECK(!exists(net.seen_from_outside(cloud, cloud.data + "/loom.db")));  // the cloud's state is in PostgreSQL
  auto status = as_json(net.loom(cloud, {"status", "--json"}, 30s));
  CHECK(status["network"].value("advertise", "") == cloud.ip);
  CHECK(status["network"].value("ports", "") == "7400-7499");

  // Both sites enrol through the cloud's LAN address and import their own text.
  std::map<std::string, std::string> corpus{{"north", "GPL-3"}, {"south", "GPL-2"}};
  for (auto* site : {&north, &south}) {
    auto tok = as_json(net.loom(cloud, {"site", "token", "--site", site->name, "--json"}, 30s));
    REQUIRE(tok.contains("token"));
    CHECK(tok.value("cloud", "").rfind("tcp://" + cloud.ip + ":", 0) == 0);
    auto r = net.loom(*site, {"up", "--site", site->name, "--cloud", tok.value("cloud", ""), "--enrol-token",
                              tok.value("token", ""), "--import-root", licences, "--listen", site->ip},
                      120s);
    REQUIRE_MESSAGE(r.code == 0, site->name << ": " << r.out << r.err);
    auto se = layout::read_endpoints(net.seen_from_outside(*site, site->data + "/endpoints.json"));
    REQUIRE(se.ok());
    CHECK(se->find("scheduler")->rpc.rfind("tcp://" + cloud.ip + ":74", 0) == 0);  // the cloud's, from the enrolment
    CHECK(se->find("aggregator")->rpc.rfind("tcp://" + cloud.ip + ":74", 0) == 0);
    CHECK(se->find("trainer")->rpc.rfind("tcp://" + site->ip + ":", 0) == 0);      // its own
    auto imp = net.loom(*site, {"data", "import", std::string(licences) + "/" + corpus[site->name], "--dataset", "text"},
                        120s);
    REQUIRE_MESSAGE(imp.code == 0, imp.out << imp.err);
    // No host sees another's files.
    CHECK(!exists(net.seen_from_outside(*site, cloud.data)));
    CHECK(!exists(net.seen_from_outside(cloud, site->data)));
  }
  MESSAGE("cloud and sites up, data imported: " << elapsed() << " s");

  // Both sites' trainers registered from their own addresses.
  json sites;
  REQUIRE(eventually(
      [&] {
        sites = as_json(net.loom(cloud, {"site", "list", "--json"}, 20s));
        int registered = 0;
        for (const auto& s : sites.value("sites", json::array()))
          for (const auto& t : s.value("trainers", json::array()))
            registered += t.value("endpoint", "").rfind("tcp://" + (s.value("name", "") == "north" ? north.ip : south.ip) + ":", 0) == 0;
        return registered == 2;
      },
      60s));

  const auto before_north = net.link_bytes(north), before_south = net.link_bytes(south);
  auto sub = as_json(net.loom(cloud, {"job", "submit", "--template", "pretrain-diloco-tiny", "--set",
                                      "diloco.sites=[\"north\", \"south\"]", "--set", "dataset=text", "--set",
                                      "pretrain.steps=24", "--json"},
                              60s));
  REQUIRE(sub.contains("id"));
  const std::string id = sub["id"].get<std::string>();
  json job;
  REQUIRE(eventually(
      [&] {
        job = as_json(net.loom(cloud, {"job", "show", id, "--json"}, 20s));
        return job.contains("stages") && job["stages"][0].value("step", 0) >= 4;
      },
      180s));

  // North's link goes down for 5 s: the cloud shows it degraded or down, then up again.
  REQUIRE(net.set_link(north, false));
  std::set<std::string> seen;
  for (auto until = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < until;) {
    seen.insert(link_state(net, cloud, "north"));
    std::this_thread::sleep_for(250ms);
  }
  REQUIRE(net.set_link(north, true));
  const bool noticed = seen.count("down") || seen.count("degraded") ||
                       eventually(
                           [&] {
                             const auto s = link_state(net, cloud, "north");
                             seen.insert(s);
                             return s == "down" || s == "degraded";
                           },
                           20s);
  CHECK_MESSAGE(noticed, "north's link states seen at the cloud: " << json(seen).dump());
  CHECK_MESSAGE(seen.count("degraded"), "north's link states seen at the cloud: " << json(seen).dump());
  MESSAGE("north's link states seen at the cloud during and after the cut: " << json(seen).dump());
  CHECK(eventually([&] { return link_state(net, cloud, "north") == "up"; }, 90s));

  json done = wait_job(net, cloud, id, 300s, 1000ms);
  REQUIRE(done.contains("state"));
  REQUIRE_MESSAGE(done.value("state", "") == "succeeded", done.dump());
  MESSAGE("diloco job done: " << elapsed() << " s");
  const auto after_north = net.link_bytes(north), after_south = net.link_bytes(south);
  MESSAGE("link north: " << after_north.first - before_north.first << " B out, " << after_north.second - before_north.second
                         << " B in; link south: " << after_south.first - before_south.first << " B out, "
                         << after_south.second - before_south.second << " B in");
  CHECK(after_north.first > before_north.first);
  CHECK(after_south.first > before_south.first);

  // The north trainer saw the cut and came back.
  auto north_log = files::read_file(net.seen_from_outside(north, north.data + "/logs/trainer.log"));
  REQUIRE(north_log.ok());
  CHECK(north_log->find("diloco north: joined") != std::string::npos);

  // The cloud's final model verifies (its checkpoint key, in the cloud's own stage dir).
  auto models = as_json(net.loom(cloud, {"model", "list", "--json"}, 30s));
  std::string version;
  for (const auto& m : models.value("versions", json::array()))
    if (m.value("job_id", "") == id) version = m.value("version", "");
  REQUIRE_MESSAGE(!version.empty(), models.dump());
  // Signature, hashes, finiteness, shapes and tokenizer pass; the checks on
  // data (held-out loss, licence compliance) cannot run at the cloud, which
  // by design holds none of the sites' datasets, and say so.
  auto check = net.loom(cloud, {"model", "check", version, "--json"}, 120s);
  auto checked = as_json(check);
  std::map<std::string, std::string> outcome;
  for (const auto& k : checked.value("checks", json::array())) outcome[k.value("name", "")] = k.value("status", "");
  INFO(check.out << check.err);
  for (const auto* name : {"signature", "finite", "shapes", "tokenizer"}) CHECK(outcome[name] == "pass");
  CHECK(outcome["held_out_loss"] == "fail");
  CHECK(check.out.find(cloud.data + "/datasets/text") != std::string::npos);

  // What crossed into the cloud's services from each site, by type: control
  // messages and the aggregator's deltas and pulls, nothing for ingest.
  eps = layout::read_endpoints(net.seen_from_outside(cloud, cloud.data + "/endpoints.json"));
  REQUIRE(eps.ok());
  const std::set<std::string> delta_types{"DeltaHeader", "DeltaJoin", "GlobalPull", "RoundStatusQuery"};
  double from_sites = 0;
  for (const auto& svc : {"scheduler", "aggregator", "ingest", "audit"}) {
    auto page = net.exec(cloud, {"/usr/bin/curl", "-s", "--max-time", "10", "http://" + eps->find(svc)->metrics + "/metrics"}, 30s);
    REQUIRE_MESSAGE(page.code == 0, svc << ": " << page.err);
    for (const auto& [key, bytes] : link_bytes(page.out)) {
      const auto& [link, type, dir] = key;
      if (link != "north" && link != "south") continue;
      MESSAGE(std::string(svc) << " " << link << " " << dir << " " << type << " " << bytes << " B");
      if (dir == "in") from_sites += bytes;
      CHECK_MESSAGE(std::string(svc) != "ingest", "a site sent " << type << " to the cloud's ingest");
      if (std::string(svc) == "aggregator" && type.rfind("loom.v1.", 0) != 0)
        CHECK_MESSAGE(delta_types.count(type), type);
    }
  }
  CHECK(from_sites > 0);
  // And no file of the cloud holds a line of a site's text.
  const std::vector<std::string> lines{"Everyone is permitted to copy and distribute verbatim copies",
                                       "When we speak of free software, we are referring to freedom"};
  std::size_t scanned = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(net.seen_from_outside(cloud, cloud.data), ec), end;
       !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    auto bytes = files::read_file(it->path().string());
    if (!bytes) continue;
    ++scanned;
    for (const auto& l : lines) CHECK_MESSAGE(bytes->find(l) == std::string::npos, it->path() << " holds site text");
  }
  CHECK(scanned > 10);

  // A plain pretrain job for zone north runs on north's trainer.
  auto plain_r = net.loom(cloud, {"job", "submit", "--template", "pretrain-tiny", "--zone", "north", "--set",
                                   "dataset=text", "--set", "pretrain.steps=4", "--json"},
                          60s);
  auto plain = as_json(plain_r);
  REQUIRE_MESSAGE(plain.contains("id"), plain_r.out << plain_r.err);
  const std::string plain_id = plain["id"].get<std::string>();
  json pj = wait_job(net, cloud, plain_id, 240s, 1000ms);
  REQUIRE(pj.contains("state"));
  CHECK_MESSAGE(pj.value("state", "") == "succeeded", pj.dump());
  CHECK(!layout::find_snapshot(net.seen_from_outside(north, north.data + "/jobs/" + plain_id)).empty());
  CHECK(!exists(net.seen_from_outside(south, south.data + "/jobs/" + plain_id)));

  // South is revoked in the middle of a second diloco job: the cloud refuses
  // its open connections within about a second and the job fails naming it.
  auto second = as_json(net.loom(cloud, {"job", "submit", "--template", "pretrain-diloco-tiny", "--set",
                                         "diloco.sites=[\"north\", \"south\"]", "--set", "dataset=text", "--set",
                                         "pretrain.steps=400", "--json"},
                                 60s));
  REQUIRE(second.contains("id"));
  const std::string id2 = second["id"].get<std::string>();
  REQUIRE(eventually(
      [&] {
        job = as_json(net.loom(cloud, {"job", "show", id2, "--json"}, 20s));
        return job.contains("stages") && job["stages"][0].value("step", 0) >= 2;
      },
      180s));
  const std::string south_log = net.seen_from_outside(south, south.data + "/logs/trainer.log");
  const std::size_t log_before = files::read_file(south_log)->size();
  const auto revoked_at = std::chrono::steady_clock::now();
  REQUIRE(net.loom(cloud, {"site", "revoke", "south", "--reason", "stolen box"}, 30s).code == 0);
  const bool refused = eventually(
      [&] {
        auto t = files::read_file(south_log);
        const auto at = t ? t->find("not registered with the cloud scheduler", log_before) : std::string::npos;
        return at != std::string::npos && t->find("permission", at) != std::string::npos;
      },
      20s, 50ms);
  CHECK(refused);
  const double refused_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - revoked_at).count();
  json failed = wait_job(net, cloud, id2, 120s, 500ms);
  REQUIRE(failed.contains("state"));
  CHECK_MESSAGE(failed.value("state", "") == "failed", failed.dump());
  CHECK_MESSAGE(failed.dump().find("south") != std::string::npos, failed.dump());
  CHECK_MESSAGE(failed.dump().find("revoked") != std::string::npos, failed.dump());
  MESSAGE("south refused " << refused_after << " s after its revocation (its trainer's log); total " << elapsed() << " s");
}
