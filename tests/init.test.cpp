// Cross-process: `loom init` (issue 31 item 4) on an empty machine: --yes
// sets up a data dir that `loom up` then starts; a second run with the same
// answers writes nothing; a bad PostgreSQL URL or an unknown template is
// refused before anything is written; a reachable PostgreSQL URL (the
// store's throwaway cluster) is saved and `loom up` keeps its state there.
// Both runs' times are printed (the seed: effective within a second).
#include "libs/store/database.hpp"
#include "libs/files/files.hpp"
#include "libs/store/testing.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/scoped_env.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// Every file under `dir` with its bytes and modification time: what a run changed.
std::map<std::string, std::pair<std::string, std::int64_t>> snapshot(const std::string& dir) {
  std::map<std::string, std::pair<std::string, std::int64_t>> out;
  for (const auto& f : fs::recursive_directory_iterator(dir)) {
    if (!f.is_regular_file()) continue;
    auto bytes = files::read_file(f.path().string());
    struct stat st {};
    ::stat(f.path().c_str(), &st);
    out[f.path().string()] = std::make_pair(bytes ? *bytes : std::string(), std::int64_t(st.st_mtim.tv_sec) * 1000000000 + std::int64_t(st.st_mtim.tv_nsec));
  }
  return out;
}

json init(const std::string& home, std::vector<std::string> args, int* code = nullptr) {
  args.insert(args.begin(), {"init", "--yes", "--json"});
  auto r = run_loom(home, args, 60s);
  if (code) *code = r.code;
  INFO(r.out << r.err);
  auto j = json::parse(r.out, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

std::string state_of(const json& j, const std::string& item) {
  for (const auto& i : j.value("items", json::array()))
    if (i.value("item", "") == item) return i.value("state", "");
  return "?";
}

}  // namespace

TEST_CASE("loom init --yes on an empty machine sets up what loom up starts, and a second run changes nothing") {
  temp_dir scratch("loom-init");
  const std::string home = scratch.path() + "/fresh";  // not there yet: an empty machine's
  up_guard guard{home};
  int code = -1;
  auto first = init(home, {}, &code);
  REQUIRE(code == 0);
  CHECK(first.value("changed", false));
  for (const char* item : {"data dir", "keys", "admin token", "set-up", "template"}) CHECK(state_of(first, item) == "created");
  CHECK(state_of(first, "store") == "unchanged");  // SQLite in the data dir: nothing to save
  CHECK(fs::exists(home + "/admin.token"));
  CHECK(fs::exists(home + "/endpoints.json"));
  CHECK_FALSE(fs::exists(home + "/database.url"));
  CHECK(files::read_file(home + "/init.json")->find("pretrain-tiny") != std::string::npos);

  const auto before = snapshot(home);
  auto again = init(home, {}, &code);
  REQUIRE(code == 0);
  CHECK_FALSE(again.value("changed", true));
  for (const auto& i : again["items"]) CHECK_MESSAGE(i.value("state", "") == "unchanged", i.dump());
  CHECK(snapshot(home) == before);  // not a byte, not a timestamp
  MESSAGE("loom init: " << first.value("ms", 0.0) << " ms on an empty machine, " << again.value("ms", 0.0)
                        << " ms again with the same answers");
  std::printf("case=init_fresh ms=%.1f\ncase=init_again ms=%.1f\n", first.value("ms", 0.0), again.value("ms", 0.0));
  CHECK(first.value("ms", 1e9) < 1000);
  CHECK(again.value("ms", 1e9) < 1000);

  // A changed answer changes that item alone.
  auto two = init(home, {"--trainers", "2"}, &code);
  REQUIRE(code == 0);
  CHECK(state_of(two, "set-up") == "changed");
  CHECK(state_of(two, "keys") == "unchanged");

  auto up = run_loom(home, {"up"}, 90s);
  INFO(up.out << up.err);
  REQUIRE(up.code == 0);
  auto st = json::parse(run_loom(home, {"status", "--json"}).out, nullptr, false);
  int trainers = 0;
  for (const auto& s : st.value("services", json::array()))
    if (s.value("name", "").starts_with("trainer")) trainers += s.value("healthy", false);
  CHECK(trainers == 2);  // init's answer, taken by `loom up`
  // While it runs, a changed set-up is refused; the same answers are fine.
  init(home, {"--trainers", "3"}, &code);
  CHECK(code != 0);
  init(home, {"--trainers", "2"}, &code);
  CHECK(code == 0);
}

TEST_CASE("loom init refuses a bad PostgreSQL URL or an unknown template before anything is written") {
  temp_dir scratch("loom-init");
  const std::string home = scratch.path() + "/fresh";
  const std::string url = "postgresql://loom:SECRET@127.0.0.1:" + std::to_string(free_port()) + "/loom";
  auto r = run_loom(home, {"init", "--yes", "--database", url}, 60s);
  INFO(r.out << r.err);
  CHECK(r.code != 0);
  CHECK(r.err.find("--database postgresql://loom:") != std::string::npos);
  CHECK(r.err.find("SECRET") == std::string::npos);  // masked
  CHECK_FALSE(fs::exists(home));
  r = run_loom(home, {"init", "--yes", "--database", "mysql://x"}, 60s);
  CHECK(r.code != 0);
  CHECK_FALSE(fs::exists(home));
  r = run_loom(home, {"init", "--yes", "--template", "no-such-template"}, 60s);
  CHECK(r.code != 0);
  CHECK(r.err.find("no-such-template") != std::string::npos);
  CHECK_FALSE(fs::exists(home));
  r = run_loom(home, {"init"}, 60s);  // not a terminal, no --yes
  CHECK(r.code == 2);
  CHECK(r.err.find("--yes") != std::string::npos);
  CHECK_FALSE(fs::exists(home));
}

TEST_CASE("loom init --database saves a reachable PostgreSQL URL, and loom up keeps its state there") {
  auto pg = store::testing::scratch::make(store::backend::postgres, "loominit");
  REQUIRE(pg.ok());
  temp_dir scratch("loom-init");
  const std::string home = scratch.path() + "/fresh";
  up_guard guard{home};
  int code = -1;
  auto first = init(home, {"--database", pg->url()}, &code);
  REQUIRE(code == 0);
  CHECK(state_of(first, "store") == "created");
  struct stat st {};
  REQUIRE(::stat((home + "/database.url").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(state_of(init(home, {"--database", pg->url()}), "store") == "unchanged");

  auto up = [&] {
    scoped_env saved_url_alone("LOOM_DATABASE_URL", nullptr);
    return run_loom(home, {"up"}, 90s);
  }();
  INFO(up.out << up.err);
  REQUIRE(up.code == 0);
  CHECK_FALSE(fs::exists(home + "/loom.db"));
  auto db = store::database::open(pg->url());
  REQUIRE(db.ok());
  CHECK(eventually([&] {
    auto n = (*db)->with_read_transaction([&](store::transaction& tx) -> result<std::int64_t> {
      auto q = tx.query("SELECT COUNT(*) FROM nodes");
      if (!q) return q.err();
      return (*q)[0].get_i64(0);
    });
    return n && *n >= 6;
  }, 30s));
}
