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
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "tests/multihost/lan.hpp"
#include "tests/support/harness.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
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

struct outcome {
  double enrol_s = 0, wall_s = 0;
  int steps = 0;
  std::map<std::string, std::pair<double, double>> bytes;  // site -> {up (site->cloud), down}
  std::string error;
};

// Cloud up, both sites enrolled and their text imported, one diloco job; bytes
// from the cloud's metrics (what its services received from and sent to each site).
outcome run_case(place& cloud, place& north, place& south, const std::string& cloud_advertise, int steps) {
  outcome o;
  std::vector<std::string> up{"up"};
  if (!cloud.listen.empty()) up.insert(up.end(), {"--listen", "0.0.0.0", "--advertise", cloud_advertise, "--ports", "7400-7499"});
  if (auto r = cloud.loom(up, 120s); r.code != 0) return o.error = "cloud up: " + r.err, o;
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
      lan_o = run_case(cloud, north, south, net.host("cloud").ip, steps);
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
    loop_o = run_case(cloud, north, south, "", steps);
  }
  print("lan", lan_o);
  print("loopback", loop_o);
  if (lan_o.error.empty() && loop_o.error.empty())
    std::printf("case=lan_vs_loopback job_wall_ratio=%.3f enrol_ratio=%.3f\n", lan_o.wall_s / loop_o.wall_s,
                lan_o.enrol_s / loop_o.enrol_s);
  return lan_o.error.empty() || lan_o.error.rfind("skipped", 0) == 0 ? (loop_o.error.empty() ? 0 : 1) : 1;
}
