// diloco_netns_site: one synthetic site (tests/diloco_links/harness run_site)
// as its own process, so tests/diloco_netns.test.cpp can run it inside a
// network namespace (`ip netns exec`). Prints a line after every step and a
// summary; exit 0 when the site finished (joined, trained, synced its last
// deltas), 1 otherwise, 2 for bad arguments.
//
//   diloco_netns_site --endpoint E --server-public K --public P --secret S
//                     --job J --site NAME [--index I] [--steps N] [--step-ms MS]
// stdout:  step=N t=SECONDS versions=V0,V1
//          done ok=1 steps=N unreachable=U syncs=S params_applied=P productive_s=X wall_s=Y [error=...]
#include "tests/diloco_links/harness.hpp"

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

using namespace loom;
using namespace loom::test::links;

int main(int argc, char** argv) {
  std::map<std::string, std::string> a;
  for (int i = 1; i + 1 < argc; i += 2) a[argv[i]] = argv[i + 1];
  for (const char* need : {"--endpoint", "--server-public", "--public", "--secret", "--job", "--site"})
    if (!a.count(need)) {
      std::fprintf(stderr, "diloco_netns_site: %s is required\n", need);
      return 2;
    }
  site_options o;
  o.where = {a["--endpoint"], a["--server-public"]};
  o.keys = {a["--public"], a["--secret"]};
  o.job = a["--job"];
  o.site = a["--site"];
  o.index = a.count("--index") ? std::stoi(a["--index"]) : 0;
  o.steps = a.count("--steps") ? std::stoi(a["--steps"]) : 400;
  o.step_time = std::chrono::milliseconds(a.count("--step-ms") ? std::stoi(a["--step-ms"]) : 20);
  o.on_step = [](int step, double t, const std::vector<std::uint64_t>& v) {
    std::printf("step=%d t=%.3f versions=", step, t);
    for (std::size_t i = 0; i < v.size(); ++i) std::printf("%s%llu", i ? "," : "", static_cast<unsigned long long>(v[i]));
    std::printf("\n");
    std::fflush(stdout);
  };
  const auto r = run_site(o, clock::now());
  std::printf("done ok=%d steps=%zu unreachable=%llu syncs=%llu params_applied=%llu productive_s=%.3f wall_s=%.3f%s%s\n",
              r.outcome.ok() ? 1 : 0, r.versions.size(), static_cast<unsigned long long>(r.stats.unreachable),
              static_cast<unsigned long long>(r.stats.syncs),
              static_cast<unsigned long long>(r.stats.wire.params_applied), r.productive_s, r.wall_s,
              r.outcome.ok() ? "" : " error=", r.outcome.ok() ? "" : r.outcome.err().message.c_str());
  std::fflush(stdout);
  return r.outcome.ok() ? 0 : 1;
}
