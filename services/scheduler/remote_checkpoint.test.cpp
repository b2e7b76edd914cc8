// Where the scheduler judges a checkpoint (remote_checkpoint.hpp), without
// processes: on this host when the directory is here or the aggregator runs
// here, else by the aggregator of a split cloud; the choice follows
// endpoints.json as it is at each call, and the remote's errors come through
// with their code.
#include "services/scheduler/remote_checkpoint.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/runtime/service.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::scheduler;

namespace {

// Host A of a split cloud: the scheduler and audit here, the aggregator on host B.
layout::endpoints host_a() {
  layout::endpoints e;
  e.only = {"scheduler", "audit"};
  e.services["aggregator"].rpc = "tcp://10.0.0.2:7004";
  return e;
}

struct calls {
  int local = 0, remote = 0;
  checkpoint_inspector local_fn() {
    return [this](const std::string&) -> result<checkpoint_facts> {
      ++local;
      return checkpoint_facts{1, "m-local", "p-local", {}};
    };
  }
  checkpoint_inspector remote_fn() {
    return [this](const std::string&) -> result<checkpoint_facts> {
      ++remote;
      return checkpoint_facts{1, "m-remote", "p-remote", {}};
    };
  }
};

}  // namespace

TEST_CASE("a checkpoint on this host or under a local aggregator is inspected here, and on a split cloud another is asked of the aggregator") {
  files::temp_dir dir("loom-remote-ckpt");
  const std::string here = dir.path() + "/jobs/j/s/checkpoints/step-000001";
  REQUIRE(files::make_dirs(here).ok());
  const std::string there = dir.path() + "/jobs/j/t/checkpoints/step-000001";  // on host B only
  layout::endpoints eps = host_a();
  calls c;
  auto inspect = choosing_inspector(c.local_fn(), c.remote_fn(), [&] { return eps; });

  CHECK(inspect(here)->manifest_sha256 == "m-local");
  CHECK(inspect(there)->manifest_sha256 == "m-remote");
  CHECK((c.local == 1 && c.remote == 1));
  // The aggregator moves to this host (endpoints.json read at each call): asked here.
  eps.only.push_back("aggregator");
  CHECK(inspect(there)->manifest_sha256 == "m-local");
  eps.only.clear();  // one host runs everything
  CHECK(inspect(there)->manifest_sha256 == "m-local");
  CHECK((c.local == 3 && c.remote == 1));

  CHECK(inspect_here(here, host_a()));
  CHECK_FALSE(inspect_here(there, host_a()));
  CHECK(inspect_here(there, layout::endpoints{}));
}

TEST_CASE("the stage result check is the cheap local check here and the aggregator's inspection there, its errors kept") {
  files::temp_dir dir("loom-remote-ckpt");
  const std::string here = dir.path() + "/step-000002";
  REQUIRE(files::make_dirs(here).ok());
  int local_checks = 0;
  manifest_checker local = [&](const std::string&) -> status {
    ++local_checks;
    return ok_status();
  };
  errc remote_code = errc::ok;
  checkpoint_inspector remote = [&](const std::string& d) -> result<checkpoint_facts> {
    if (remote_code != errc::ok)
      return make_error(remote_code, "the aggregator at tcp://10.0.0.2:7004: checkpoint " + d + " does not verify");
    return checkpoint_facts{2, "m", "p", {}};
  };
  auto check = choosing_check(local, remote, [] { return host_a(); });
  CHECK(check(here).ok());
  CHECK(local_checks == 1);
  const std::string there = dir.path() + "/elsewhere/step-000002";
  CHECK(check(there).ok());
  remote_code = errc::corruption;
  auto bad = check(there);
  CHECK(bad.code() == errc::corruption);
  CHECK(bad.err().message == "the aggregator at tcp://10.0.0.2:7004: checkpoint " + there + " does not verify");
  remote_code = errc::not_found;
  CHECK(check(there).code() == errc::not_found);
  CHECK(local_checks == 1);
}

TEST_CASE("with no aggregator listed anywhere, a checkpoint not on this host is unavailable, naming it") {
  files::temp_dir dir("loom-remote-ckpt");
  runtime::service_env env;
  env.paths = layout::paths{dir.path()};  // no endpoints.json: the endpoints the scheduler started with
  env.eps.only = {"scheduler", "audit"};
  auto r = aggregator_inspector(env)(dir.path() + "/jobs/j/s/checkpoints/step-000003");
  CHECK(r.code() == errc::unavailable);
  CHECK(r.err().message.find("step-000003 is not on this host and no aggregator is listed") != std::string::npos);
  auto chosen = split_cloud_inspector(env)(dir.path() + "/jobs/j/s/checkpoints/step-000003");
  CHECK(chosen.code() == errc::unavailable);
}
