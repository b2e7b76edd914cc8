// multihost_bench: a cloud and two edge sites through the real services, on
// three hosts (network and mount namespaces on a bridge: tests/multihost/lan)
// and, in the same run, on loopback in one machine — enrolment time, the
// `pretrain-diloco-tiny` job's wall time over north and south, and the bytes
// that crossed each site's link, by direction. Root only for the LAN case
// (skipped otherwise, saying so). bench/multihost.sh runs it with the
// aggregator's round at d12 and 350m.
//   multihost_bench [--steps N]      (default 24)
// Last lines, one per case:
//   case=<lan|loopback> enrol_s=… job_wall_s=… steps=… north_up_bytes=… north_down_bytes=… south_up_bytes=… south_down_bytes=…
//   case=lan_vs_loopback job_wall_ratio=…
//   case=lan_split_cloud … (the same job, the cloud split over two hosts: scheduler + audit / aggregator + ingest)
//   case=split_revoke follow_s=… (a revocation at the scheduler's host until the other cloud host forgets the keys)
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "tests/multihost/lan.hpp"
#include "tests/support/harness.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <thread>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

namespace {

const char* licences = "/usr/share/common-licenses";

// One deployment's `loom` (cloud, north or south), wherever it runs.
struct place {
  std::string name, listen;  // listen: "" on loopback
  std::function<run_result(std::vector<std::string>, std::chrono::seconds)> loom;
  std::function<std::string(const std::string& url)> get;  // HTTP GET from where it runs
};

json as_json(const run_result& r) {
  auto j = json::parse(r.out, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

double since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// Sum of loom_*_link_bytes_total{link="<site>", direction="<dir>"} over a metrics page.
double link_bytes(const std::string& page, const std::string& site, const std::string& dir) {
  double sum = 0;
  std::size_t at = 0;
  while ((at = page.find("_link_bytes_total{", at)) != std::string::npos) {
    const auto close = page.find('}', at), eol = page.find('\n', at);
    if (close == std::string::npos || eol == std::string::npos) break;
    const std::string labels = page.substr(at, close - at);
    if (labels.find("link=\"" + site + "\"") != std::string::npos &&
        labels.find("direction=\"" + dir + "\"") != std::string::npos)
      sum += std::atof(page.substr(close + 1, eol - close - 1).c_str());
    at = eol;
  }
  return sum;
}

// Seconds from `loom site revoke SITE` at the cloud until the other cloud
// host's keys/sites holds none of the site's keys (-1: not within 10 s).
double revoke_reaches(lan& net, place& cloud, const lan_host& other, const std::string& site) {
  auto has_site = [&] {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(net.seen_from_outside(other, other.data + "/keys/sites"), ec), end;
         !ec && it != end; it.increment(ec))
      if (it->path().filename().string().rfind(site + ".", 0) == 0) return true;
    return false;
  };
  if (!has_site()) return -1;
  const auto t = clock_type::now();
  if (cloud.loom({"site", "revoke", site, "--reason", "bench"}, 30s).code != 0) return -1;
  for (auto until = t + 10s; clock_type::now() < until; std::this_thread::sleep_for(10ms))
    if (!has_site()) return since(t);
  return -1;
}

struct outcome {
  double enrol_s = 0, wall_s = 0;
  int steps = 0;
  std::map<std::string, std::pair<double, double>> bytes;  // site -> {up (site->cloud), down}
  std::string error;
};

// Cloud up, both sites enrolled and their text imported, one diloco job; bytes
// from the cloud's metrics (what its services received from and sent to each site).
// `cloud_up` starts the cloud ("" when up, else why not).
outcome run_case(place& cloud, place& north, place& south, const std::function<std::string()>& cloud_up, int steps) {
  outcome o;
  if (auto why = cloud_up(); !why.empty()) return o.error = "cloud up: " + why, o;
  std::map<std::string, std::string> corpus{{"north", "GPL-3"}, {"south", "GPL-2"}};
  for (auto* s : {&north, &south}) {
    auto tok = as_json(cloud.loom({"site", "token", "--site", s->name, "--json"}, 30s));
    std::vector<std::string> args{"up", "--site", s->name, "--cloud", tok.value("cloud", ""), "--enrol-token",
                                  tok.value("token", ""), "--import-root", licences};
    if (!s->listen.empty()) args.insert(args.end(), {"--listen", s->listen});
    const auto t = clock_type::now();
    if (auto r = s->loom(args, 120s); r.code != 0) return o.error = s->name + " up: " + r.err, o;
    o.enrol_s += since(t) / 2;  // the mean of the two: enrolment plus the site's start
    auto imp = s->loom({"data", "import", std::string(licences) + "/" + corpus[s->name], "--dataset", "text"}, 120s);
    if (imp.code != 0) return o.error = s->name + " import: " + imp.err, o;
  }
  auto sub = as_json(cloud.loom({"job", "submit", "--template", "pretrain-diloco-tiny", "--set",
                                 "diloco.sites=[\"north\", \"south\"]", "--set", "dataset=text", "--set",
                                 "pretrain.steps=" + std::to_string(steps), "--json"},
                                60s));
  if (!sub.contains("id")) return o.error = "submit: " + sub.dump(), o;
  const auto t = clock_type::now();
  json j;
  for (auto until = t + 900s; clock_type::now() < until; std::this_thread::sleep_for(250ms)) {
    j = as_json(cloud.loom({"job", "show", sub["id"].get<std::string>(), "--json"}, 20s));
    const std::string st = j.value("state", "");
    if (st == "succeeded" || st == "failed" || st == "cancelled") break;
  }
  o.wall_s = since(t);
  if (j.value("state", "") != "succeeded") return o.error = "job: " + j.dump(), o;
  o.steps = j["stages"][0].value("step", 0);
  auto eps = as_json(cloud.loom({"status", "--json"}, 30s));
  for (const auto& svc : eps.value("services", json::array())) {
    const std::string page = cloud.get("http://" + svc.value("metrics", "") + "/metrics");
    for (const char* site : {"north", "south"}) {
      o.bytes[site].first += link_bytes(page, site, "in");
      o.bytes[site].second += link_bytes(page, site, "out");
    }
  }
  return o;
}

void print(const std::string& name, const outcome& o) {
  if (!o.error.empty()) {
    std::printf("case=%s error=\"%s\"\n", name.c_str(), o.error.substr(0, 300).c_str());
    return;
  }
  std::printf("case=%s enrol_s=%.2f job_wall_s=%.2f steps=%d north_up_bytes=%.0f north_down_bytes=%.0f "
              "south_up_bytes=%.0f south_down_bytes=%.0f\n",
              name.c_str(), o.enrol_s, o.wall_s, o.steps, o.bytes.at("north").first, o.bytes.at("north").second,
              o.bytes.at("south").first, o.bytes.at("south").second);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 24;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = std::atoi(argv[++i]);

  outcome lan_o, loop_o;
  {
    remove_lan_leftovers();
    lan net({"cloud", "north", "south"});
    if (auto why = net.make(); !why.empty()) {
      std::fprintf(stderr, "multihost_bench: no LAN case: %s\n", why.c_str());
      lan_o.error = "skipped: " + why;
    } else {
      auto make = [&](const std::string& name, bool listen) {
        auto& h = net.host(name);
        return place{name, listen ? h.ip : "",
                     [&net, &h](std::vector<std::string> a, std::chrono::seconds t) { return net.loom(h, std::move(a), t); },
                     [&net, &h](const std::string& url) {
                       return net.exec(h, {"/usr/bin/curl", "-s", "--max-time", "10", url}, 30s).out;
                     }};
      };
      place cloud = make("cloud", true), north = make("north", true), south = make("south", true);
      lan_o = run_case(cloud, north, south, [&] {
        auto r = cloud.loom({"up", "--listen", "0.0.0.0", "--advertise", net.host("cloud").ip, "--ports", "7400-7499"}, 120s);
        return r.code == 0 ? std::string() : r.err;
      }, steps);
      const auto n = net.link_bytes(net.host("north")), s = net.link_bytes(net.host("south"));
      std::printf("case=lan_wire north_sent_bytes=%llu north_received_bytes=%llu south_sent_bytes=%llu "
                  "south_received_bytes=%llu\n",
                  static_cast<unsigned long long>(n.first), static_cast<unsigned long long>(n.second),
                  static_cast<unsigned long long>(s.first), static_cast<unsigned long long>(s.second));
    }
  }
  {
    temp_dir c("loom-mhb-cloud"), n("loom-mhb-north"), s("loom-mhb-south");
    up_guard gc{c.path()}, gn{n.path()}, gs{s.path()};
    auto make = [](const std::string& name, const std::string& dir) {
      return place{name, "", [dir](std::vector<std::string> a, std::chrono::seconds t) { return run_loom(dir, std::move(a), t); },
                   [](const std::string& url) {
                     const std::string hp = url.substr(7, url.find('/', 7) - 7);
                     return http_get(hp, "/metrics", 5000ms);
                   }};
    };
    place cloud = make("cloud", c.path()), north = make("north", n.path()), south = make("south", s.path());
    loop_o = run_case(cloud, north, south, [&] {
      auto r = cloud.loom({"up"}, 120s);
      return r.code == 0 ? std::string() : r.err;
    }, steps);
  }
  outcome split_o;
  double follow_s = -1;
  {
    remove_lan_leftovers();
    lan net({"cloud", "cloud2", "north", "south"});
    if (auto why = net.make(); !why.empty()) {
      split_o.error = "skipped: " + why;
    } else {
      auto& c1 = net.host("cloud");
      auto& c2 = net.host("cloud2");
      c2.data = c1.data;  // the same data dir path, each host its own files
      auto make = [&](lan_host& h) {
        return place{h.name, h.ip,
                     [&net, &h](std::vector<std::string> a, std::chrono::seconds t) { return net.loom(h, std::move(a), t); },
                     [&net, &h](const std::string& url) {
                       return net.exec(h, {"/usr/bin/curl", "-s", "--max-time", "10", url}, 30s).out;
                     }};
      };
      place cloud = make(c1), cloud2 = make(c2), north = make(net.host("north")), south = make(net.host("south"));
      split_o = run_case(cloud, north, south, [&]() -> std::string {
        auto r = cloud.loom({"up", "--only", "scheduler,audit", "--listen", c1.ip, "--ports", "7400-7499"}, 120s);
        if (r.code != 0) return r.err;
        net.copy_keys(c1, c2);
        auto r2 = cloud2.loom({"up", "--only", "aggregator,ingest", "--peer-endpoints", net.copy_endpoints(c1, c2),
                               "--listen", c2.ip, "--ports", "7400-7499"}, 120s);
        if (r2.code != 0) return "cloud2: " + r2.err;
        auto r3 = cloud.loom({"up", "--peer-endpoints", net.copy_endpoints(c2, c1)}, 60s);
        return r3.code == 0 ? std::string() : r3.err;
      }, steps);
      if (split_o.error.empty()) follow_s = revoke_reaches(net, cloud, c2, "south");
    }
  }
  print("lan", lan_o);
  print("loopback", loop_o);
  print("lan_split_cloud", split_o);
  if (follow_s >= 0) std::printf("case=split_revoke follow_s=%.3f\n", follow_s);
  if (lan_o.error.empty() && loop_o.error.empty())
    std::printf("case=lan_vs_loopback job_wall_ratio=%.3f enrol_ratio=%.3f\n", lan_o.wall_s / loop_o.wall_s,
                lan_o.enrol_s / loop_o.enrol_s);
  auto ok = [](const outcome& o) { return o.error.empty() || o.error.rfind("skipped", 0) == 0; };
  return ok(lan_o) && ok(split_o) && loop_o.error.empty() ? 0 : 1;
}
