// Checks shared by the multi-host tests (multihost.test.cpp, split.test.cpp):
// a throwaway PostgreSQL on a host's LAN address, polling, a command's JSON,
// the link-bytes samples of a metrics page, and a site's link state at the
// cloud. Header-only, tests only (one thread).
#pragma once

#include "tests/multihost/lan.hpp"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <tuple>

#ifndef LOOM_SOURCE_DIR
#error "LOOM_SOURCE_DIR: the tests find scripts/pg_throwaway.sh there"
#endif

namespace loom::test {
using namespace std::chrono_literals;
using json = nlohmann::json;

inline const char* licences = "/usr/share/common-licenses";

inline json as_json(const run_result& r) {
  auto j = json::parse(r.out, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

// A throwaway PostgreSQL on `h`'s LAN address (scripts/pg_throwaway.sh).
struct lan_postgres {
  lan& net;
  lan_host& h;
  int port;
  bool started = false;
  lan_postgres(lan& n, lan_host& host, int p) : net(n), h(host), port(p) {}
  std::string start() {
    auto r = net.exec_net(h, {"/bin/sh", std::string(LOOM_SOURCE_DIR) + "/scripts/pg_throwaway.sh", "start",
                              std::to_string(port)},
                          120s, {{"PG_LISTEN", h.ip}});
    started = r.code == 0;
    return started ? "" : r.out + r.err;
  }
  std::string url() const { return "postgresql://postgres@" + h.ip + ":" + std::to_string(port) + "/postgres"; }
  ~lan_postgres() {
    if (started)
      net.exec_net(h, {"/bin/sh", std::string(LOOM_SOURCE_DIR) + "/scripts/pg_throwaway.sh", "stop", std::to_string(port)},
                   60s);
  }
};

// Every loom_<svc>_link_bytes_total sample of a service's metrics page: {link, type, direction} -> bytes.
inline std::map<std::tuple<std::string, std::string, std::string>, double> link_bytes(const std::string& page) {
  std::map<std::tuple<std::string, std::string, std::string>, double> out;
  std::size_t at = 0;
  while ((at = page.find("_link_bytes_total{", at)) != std::string::npos) {
    const auto close = page.find('}', at);
    const auto eol = page.find('\n', close);
    if (close == std::string::npos || eol == std::string::npos) break;
    const std::string labels = page.substr(at, close - at);
    auto label = [&](const std::string& k) {
      const auto p = labels.find(k + "=\"");
      return p == std::string::npos ? std::string() : labels.substr(p + k.size() + 2, labels.find('"', p + k.size() + 2) - p - k.size() - 2);
    };
    out[{label("link"), label("type"), label("direction")}] += std::atof(page.substr(close + 1, eol - close - 1).c_str());
    at = eol;
  }
  return out;
}

inline bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A site's link state as `loom site list --json` at the cloud shows it ("" when absent).
inline std::string link_state(lan& net, lan_host& cloud, const std::string& site) {
  auto j = as_json(net.loom(cloud, {"site", "list", "--json"}, 20s));
  for (const auto& s : j.value("sites", json::array()))
    if (s.value("name", "") == site && s["link"].is_object()) return s["link"].value("state", "");
  return "";
}


// `loom job show ID` at `cloud` once the job ended (or at `limit`, as it stands then).
inline json wait_job(lan& net, lan_host& cloud, const std::string& id, std::chrono::seconds limit,
                     std::chrono::milliseconds every = 1000ms) {
  json j;
  eventually(
      [&] {
        j = as_json(net.loom(cloud, {"job", "show", id, "--json"}, 20s));
        const std::string st = j.value("state", "");
        return st == "succeeded" || st == "failed" || st == "cancelled";
      },
      limit, every);
  return j;
}

}  // namespace loom::test
