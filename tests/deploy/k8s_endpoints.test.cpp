// The endpoints.json files the Kubernetes manifests ship (deploy/k8s, one per
// pod) read with the parser every service uses (libs/layout), and say what a
// pod of that service needs: its own service alone runs there, on every
// interface; at the cloud, a pod without the scheduler follows the site keys
// over the wire (runs_here("scheduler") is false there); at a site, the
// scheduler and aggregator are the cloud's.
#include "libs/layout/layout.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace loom;
namespace fs = std::filesystem;

namespace {
// (file, the service its pod runs), for an overlay.
std::vector<std::pair<std::string, std::string>> files_of(const std::string& overlay) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : fs::directory_iterator(std::string(LOOM_SOURCE_DIR) + "/deploy/k8s/overlays/" + overlay)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("endpoints-", 0) == 0 && e.path().extension() == ".json")
      out.emplace_back(e.path().string(), name.substr(10, name.size() - 15));
  }
  return out;
}
}  // namespace

TEST_CASE("every endpoints.json of the Kubernetes overlays parses as the services parse it, and runs its pod's service alone") {
  for (const std::string overlay : {"cloud", "site"}) {
    const auto files = files_of(overlay);
    REQUIRE(files.size() >= 3);
    for (const auto& [path, svc] : files) {
      CAPTURE(path);
      auto e = layout::read_endpoints(path);
      REQUIRE_MESSAGE(e.ok(), e.err().to_string());
      CHECK(e->role == (overlay == "cloud" ? "cloud" : "site"));
      CHECK(e->only == std::vector<std::string>{svc});
      CHECK(e->net.listen == "0.0.0.0");
      CHECK(e->runs_here(svc));
      CHECK(layout::process_names(*e) == std::vector<std::string>{svc});  // what this pod starts
      REQUIRE(e->find(svc));
      for (const char* other : {"scheduler", "aggregator", "audit", "ingest"})
        CHECK_MESSAGE(e->find(other), other);  // every peer has an address
      if (overlay == "cloud") {
        CHECK(e->runs_here("scheduler") == (svc == "scheduler"));  // the others follow its site keys
      } else {
        CHECK_FALSE(e->runs_here("scheduler"));  // the cloud's
        CHECK_FALSE(e->runs_here("aggregator"));
      }
    }
  }
}
