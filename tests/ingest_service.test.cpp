// Cross-process: `loom data import|status|verify|rejects|list` through `loom up`.
// A corpus with good text and every kind of bad input (truncated gzip, binary
// junk, invalid UTF-8, JSONL with wrong types, an empty directory, PII, exact
// duplicates, a link to /etc/shadow) imports with exit 0: the bad files are
// reason-coded rejects, the rest is a dataset of shards the trainer's reader
// accepts; the import and its outcome are audit events; bad requests (a path
// outside the import roots, an unknown node) get clear errors and exit codes
// and leave nothing behind; a deleted or corrupted shard makes the dataset
// damaged; kill -9 mid-import leaves no staging behind and no task id reused;
// datasets are per tenant (another tenant's dataset or task is not found, a
// job is refused another tenant's dataset and one without tokens).
#include "libs/auth/token.hpp"
#include "libs/files/files.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/ingest.pb.h"
#include "tests/support/at_rest.hpp"
#include "tests/support/cluster.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <ctime>
#include <set>

#include <filesystem>
#include <optional>
#include <random>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// Imports take longer than loom_json's default minute.
json slow_json(const std::string& home, std::vector<std::string> args, int* code = nullptr) {
  return loom::test::loom_json(home, std::move(args), 120s, code);
}

void write(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  REQUIRE(files::write_atomic(path, bytes, 0644).ok());
}

// Deterministic prose: sentences of common words, varied per document.
std::string prose(std::mt19937_64& rng, int sentences) {
  static const char* words[] = {"the", "river", "carries", "data", "across", "sites", "where", "models", "learn",
                                "from", "what", "people", "write", "every", "day", "and", "night", "a", "small",
                                "cluster", "trains", "while", "storage", "waits", "for", "new", "shards"};
  std::string out;
  for (int s = 0; s < sentences; ++s) {
    int n = 8 + static_cast<int>(rng() % 10);
    for (int w = 0; w < n; ++w) {
      std::string word = words[rng() % std::size(words)];
      if (w == 0) word[0] = static_cast<char>(std::toupper(word[0]));
      out += word + (w + 1 < n ? " " : ". ");
    }
  }
  return out + "\n";
}

// An operator (or `role`) token of `tenant` for the cluster's deployment.
std::string tenant_token(const cluster& c, const std::string& tenant, auth::role role = auth::role::operator_) {
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  const auto epoch = auth::read_epoch(c.paths.epoch());
  auto t = auth::issue_token(auth::claims{tenant + "-ops", role, {"*"}, now + 900, epoch ? *epoch : 0, now, tenant},
                             c.token_key);
  REQUIRE(t.ok());
  return *t;
}

// The source tree's templates/ (LOOM_SOURCE_DIR: ccache's base_dir makes __FILE__ relative).
std::string templates_dir() { return std::string(LOOM_SOURCE_DIR) + "/templates"; }

}  // namespace

TEST_CASE("loom data import: good and bad files, reason-coded rejects, a dataset, audit events, exit 0") {
  temp_dir home, src("loom-corpus");
  up_guard guard{home.path()};
  const std::string d = src.path();
  REQUIRE(run_loom(home.path(), {"up", "--import-root", d}, 60s).code == 0);
  std::mt19937_64 rng(2026);
  for (int i = 0; i < 30; ++i) write(d + "/docs/doc" + std::to_string(i) + ".txt", prose(rng, 40));
  write(d + "/docs/copy-of-doc3.txt", *files::read_file(d + "/docs/doc3.txt"));  // exact duplicate
  write(d + "/docs/contact.md", "# Contact\n\n" + prose(rng, 30) + "Write to jane.doe@example.com or call +1 415 555 0132.\n");
  write(d + "/GPL-3", *files::read_file("/usr/share/common-licenses/GPL-3"));
  write(d + "/records.jsonl", "{\"text\": \"" + prose(rng, 30).substr(0, 400) + "\"}\n{\"text\": 42}\n[1,2]\n");
  std::string junk(4096, '\0');
  for (auto& ch : junk) ch = static_cast<char>(rng());
  write(d + "/junk.txt", junk);
  write(d + "/latin1.txt", "caf\xe9 cr\xe8me br\xfbl\xe9" "e, " + prose(rng, 30));  // a few bad bytes: repaired
  std::string mangled = prose(rng, 5);
  for (std::size_t i = 0; i < mangled.size(); i += 3) mangled[i] = static_cast<char>(0xff);  // mostly invalid
  write(d + "/mangled.txt", mangled);
  write(d + "/truncated.txt.gz", std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10) + "abc");
  std::filesystem::create_directories(d + "/empty-dir");
  std::filesystem::create_symlink("/etc/shadow", d + "/shadow.txt");  // the service runs as root here: it could read it
  std::filesystem::create_symlink("docs/doc1.txt", d + "/link-in.txt");  // inside the root: followed

  auto r = run_loom(home.path(), {"data", "import", d, "--dataset", "corpus"}, 120s);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("importing " + d) != std::string::npos);
  CHECK(r.out.find("MB/s") != std::string::npos);  // the progress line
  CHECK(r.out.find("documents kept") != std::string::npos);

  auto st = slow_json(home.path(), {"data", "status", "corpus"});
  CHECK(st["state"] == "ready");
  CHECK(st["documents"].get<int>() >= 30);
  CHECK(st["tokens"].get<int>() > 10000);
  CHECK(st["placement"].size() == 1);
  const auto& task = st["last_task"];
  CHECK(task["state"] == "succeeded");
  CHECK(task["duplicates"].get<int>() >= 1);
  CHECK(task["report"]["pii"].dump().find("email") != std::string::npos);

  // The shards open with the trainer's strict reader, under the deployment's
  // keys: shards, records and rejects are sealed at rest, their descriptions not.
  const std::string dir = home.path() + "/datasets/corpus";
  {
    process_keys_of keys(home.path());
    auto ds = shards::dataset::open(dir, shards::verify::eager);
    REQUIRE_MESSAGE(ds.ok(), ds.err().to_string());
  }
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file())
      CHECK_MESSAGE(atrest::is_sealed_file(e.path().string()) == shards::sealed_in_dataset(name), name);
  }
  CHECK(atrest::is_sealed_file(dir + "/rejects.jsonl"));
  CHECK(plain_file(dir + "/rejects.jsonl", home.path()).find("\"rule\"") != std::string::npos);
  CHECK(files::read_file(dir + "/rejects.jsonl")->find("\"rule\"") == std::string::npos);

  // Every bad input is a reason-coded reject naming its file.
  auto rj = slow_json(home.path(), {"data", "rejects", "corpus", "--limit", "1000"});
  std::map<std::string, std::string> rule_of;  // file name -> rule
  for (auto& x : rj["rejects"]) rule_of[std::filesystem::path(x["file"].get<std::string>()).filename().string()] = x["rule"];
  for (const char* f : {"junk.txt", "mangled.txt", "truncated.txt.gz", "records.jsonl", "empty-dir"})
    CHECK_MESSAGE(rule_of.count(f) == 1, std::string(f) << " not among the rejects: " << rj.dump());
  CHECK(rule_of.count("latin1.txt") == 0);  // repaired, kept
  // The link out of the root is named, with where it leads, and not read.
  CHECK(rule_of["shadow.txt"] == "outside_roots");
  for (auto& x : rj["rejects"])
    if (x["file"].get<std::string>().ends_with("shadow.txt"))
      CHECK(x["detail"].get<std::string>().find("/etc/shadow") != std::string::npos);
  CHECK(rule_of["link-in.txt"] == "duplicate_exact");  // read: a copy of docs/doc1.txt, which comes first
  CHECK(rj["total"] == rj["rejects"].size());
  auto page = slow_json(home.path(), {"data", "rejects", "corpus", "--limit", "2", "--offset", "1"});
  REQUIRE(page["rejects"].size() == 2);
  CHECK(page["rejects"][0] == rj["rejects"][1]);
  CHECK(page["total"] == rj["total"]);
  CHECK(run_loom(home.path(), {"data", "rejects", "corpus", "--limit", "many"}).code == 2);
  // Of the two identical files the first in input order is kept.
  CHECK(rule_of["doc3.txt"] == "duplicate_exact");
  CHECK(rule_of.count("copy-of-doc3.txt") == 0);
  bool wrong_type = false;
  for (auto& x : rj["rejects"])
    wrong_type |= x["file"].get<std::string>().ends_with("records.jsonl") && x["line"].get<int>() >= 2;
  CHECK(wrong_type);
  MESSAGE("rejects: " << rj["total"] << " " << json(rule_of).dump());

  // The listing, and the audit log: the request and the outcome.
  auto list = slow_json(home.path(), {"data", "list"});
  REQUIRE(list["datasets"].size() == 1);
  CHECK(list["datasets"][0]["name"] == "corpus");
  auto tail = run_loom(home.path(), {"audit", "tail", "--lines", "50", "--json"});
  CHECK(tail.out.find("loom.v1.ImportDatasetRequest") != std::string::npos);
  CHECK(tail.out.find("\"action\":\"dataset.import\"") != std::string::npos);

  // A re-import replaces the dataset (version 2) atomically.
  REQUIRE(run_loom(home.path(), {"data", "import", d + "/docs", "--dataset", "corpus"}, 120s).code == 0);
  CHECK(slow_json(home.path(), {"data", "status", "corpus"})["version"] == 2);
}

TEST_CASE("loom data import refuses bad requests with clear errors and exit codes, and creates nothing") {
  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up"}, 60s).code == 0);
  const std::string imports = home.path() + "/imports";  // made by ingest at start: always a root
  auto missing = run_loom(home.path(), {"data", "import", imports + "/no/such/corpus", "--dataset", "x"});
  CHECK(missing.code == 1);
  CHECK(missing.err.find(imports + "/no/such/corpus") != std::string::npos);
  // Outside every root: refused whether it exists or not (exit 3), naming the path and the roots, and audited.
  for (const std::string& path : {std::string("/etc"), std::string("/no/such/corpus")}) {
    auto outside = run_loom(home.path(), {"data", "import", path, "--dataset", "x"});
    CHECK(outside.code == 3);
    CHECK(outside.err.find(path + " is outside the allowed roots (" + imports + ")") != std::string::npos);
  }
  // A learned filter's model file is read by the service too: only inside the roots (a hostile
  // tenant must not make ingest open /etc/shadow as a model).
  std::filesystem::create_directories(imports + "/pics");
  for (const char* flag : {"--image-filter", "--text-filter"}) {
    auto model_out = run_loom(home.path(), {"data", "import", imports + "/pics", "--dataset", "x", flag, "/etc/passwd"});
    CHECK(model_out.code == 3);
    CHECK(model_out.err.find("the filter model /etc/passwd is outside the allowed roots") != std::string::npos);
  }
  auto trail = run_loom(home.path(), {"audit", "tail", "--lines", "20", "--json"});
  CHECK(trail.out.find("outside the allowed roots") != std::string::npos);
  // A node that is not one of this deployment's trainers: refused by name.
  std::filesystem::create_directories(imports + "/corpus");
  write(imports + "/corpus/a.txt", "A short text.\n");
  auto nodes = run_loom(home.path(), {"data", "import", imports + "/corpus", "--dataset", "x", "--nodes", "nosuchnode"});
  CHECK(nodes.code == 1);
  CHECK(nodes.err.find("unknown node 'nosuchnode'") != std::string::npos);
  CHECK(nodes.err.find("trainer@") != std::string::npos);  // the known ones are listed
  auto badname = run_loom(home.path(), {"data", "import", imports, "--dataset", "../etc"});
  CHECK(badname.code == 1);
  CHECK(badname.err.find("dataset") != std::string::npos);
  CHECK(run_loom(home.path(), {"data", "import", "/usr/share/common-licenses"}).code == 2);  // no --dataset
  CHECK(run_loom(home.path(), {"data", "import", "/usr/share/common-licenses", "--dataset", "x", "--memory", "lots"})
            .code == 2);
  // A viewer may look but not import.
  auto viewer = run_loom(home.path(), {"token", "issue", "--role", "viewer", "--zones", "local", "--json"});
  REQUIRE(viewer.code == 0);
  auto tok = json::parse(viewer.out)["token"].get<std::string>();
  auto denied = run_loom(home.path(), {"data", "import", "/usr/share/common-licenses", "--dataset", "x", "--token", tok});
  CHECK(denied.code == 3);
  CHECK(run_loom(home.path(), {"data", "list", "--token", tok}).code == 0);
  CHECK(run_loom(home.path(), {"data", "status", "nope"}).code == 1);
  CHECK(run_loom(home.path(), {"data", "rejects", "nope"}).code == 1);
  // Nothing was created.
  std::error_code ec;
  std::size_t entries = 0;
  for (auto it = std::filesystem::directory_iterator(home.path() + "/datasets", ec);
       !ec && it != std::filesystem::directory_iterator(); ++it)
    if (it->path().filename().string()[0] != '.') ++entries;
  CHECK(entries == 0);
  CHECK(slow_json(home.path(), {"data", "list"})["datasets"].size() == 0);
}

TEST_CASE("a deleted or corrupted shard makes the dataset damaged, named in status and by loom data verify") {
  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up"}, 60s).code == 0);
  const std::string src = home.path() + "/imports/corpus";
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20; ++i) write(src + "/doc" + std::to_string(i) + ".txt", prose(rng, 40));
  REQUIRE(run_loom(home.path(), {"data", "import", src, "--dataset", "d"}, 120s).code == 0);
  auto verified = run_loom(home.path(), {"data", "verify", "d"}, 120s);
  INFO(verified.out << verified.err);
  CHECK(verified.code == 0);
  CHECK(verified.out.find("is intact") != std::string::npos);

  const std::string shard = home.path() + "/datasets/d/shard-000001.bin";
  const std::string good = *files::read_file(shard);
  std::string bad = good;
  // Sealed at rest: a flipped byte of the same size fails its chunk's tag.
  REQUIRE(atrest::is_sealed_file(shard));
  bad[bad.size() / 2] ^= 0x20;  // same size: only the tag can tell
  REQUIRE(files::write_atomic(shard, bad).ok());
  CHECK(slow_json(home.path(), {"data", "status", "d"})["state"] == "ready");
  auto v = run_loom(home.path(), {"data", "verify", "d"}, 120s);
  INFO(v.err);
  CHECK(v.code == 1);
  CHECK(v.err.find("dataset d is damaged: shard-000001.bin cannot be unsealed") != std::string::npos);
  CHECK(v.err.find("fails authentication") != std::string::npos);
  auto st = slow_json(home.path(), {"data", "status", "d"});
  CHECK(st["state"] == "damaged");
  CHECK(st["damage"].get<std::string>().starts_with("shard-000001.bin cannot be unsealed"));

  std::filesystem::remove(shard);  // deleted: the cheap check sees it at once
  st = slow_json(home.path(), {"data", "status", "d"});
  CHECK(st["state"] == "damaged");
  CHECK(st["shard_problems"]["shard-000001.bin"] == "is missing");
  CHECK(slow_json(home.path(), {"data", "list"})["datasets"][0]["state"] == "damaged");
  auto text = run_loom(home.path(), {"data", "status", "d"});
  CHECK(text.out.find("DAMAGED: shard-000001.bin is missing") != std::string::npos);
  // A job cannot be submitted on it.
  const std::string templates = std::string(LOOM_SOURCE_DIR) + "/templates";  // not __FILE__: relative under ccache base_dir
  auto submit =
      run_loom(home.path(), {"job", "submit", "--templates", templates, "--template", "pretrain-tiny", "--set", "dataset=d"});
  CHECK(submit.code != 0);
  CHECK(submit.err.find("damaged") != std::string::npos);
  // A re-import repairs it.
  REQUIRE(run_loom(home.path(), {"data", "import", src, "--dataset", "d"}, 120s).code == 0);
  CHECK(slow_json(home.path(), {"data", "status", "d"})["state"] == "ready");
}

TEST_CASE("kill -9 of loom-ingest mid-import: the restarted service clears the staging and does not reuse the task id") {
  cluster c;
  REQUIRE(c.up);
  // ~15 MB of prose in the data dir's import area: an import of a second or more.
  const std::string src = c.paths.imports() + "/big";
  std::mt19937_64 rng(21);
  for (int i = 0; i < 240; ++i) write(src + "/doc" + std::to_string(i) + ".txt", prose(rng, 800));
  auto cli = c.client("ingest");
  REQUIRE(cli);
  loom::v1::ImportDatasetRequest imp;
  imp.set_path(src);
  imp.set_dataset("big");
  auto started = wire::call_typed<loom::v1::ImportDatasetReply>(*cli, imp, c.admin());
  REQUIRE_MESSAGE(started.ok(), started.err().to_string());
  const std::string first = started->task().id();
  const std::string staging = c.home.path() + "/datasets/.staging";
  auto leftovers = [&] {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(staging, ec); !ec && it != std::filesystem::directory_iterator();
         ++it)
      if (it->path().filename().string().starts_with("big.") && !it->path().filename().string().ends_with(".lock"))
        out.push_back(it->path().filename().string());
    return out;
  };
  // Wait until it is writing its staging version, then kill it.
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (leftovers().size() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  REQUIRE(leftovers().size() == 2);  // big.<id> and big.<id>.work
  c.refresh();
  const long old_pid = c.ep("ingest").pid;
  REQUIRE(old_pid > 0);
  REQUIRE(::kill(static_cast<pid_t>(old_pid), SIGKILL) == 0);

  // The watcher restarts it; the new process cleans the staging before it serves.
  std::optional<loom::v1::ImportDatasetReply> next;
  deadline = std::chrono::steady_clock::now() + 60s;
  loom::v1::ImportDatasetRequest small;
  write(c.paths.imports() + "/small/a.txt", prose(rng, 20));
  small.set_path(c.paths.imports() + "/small");
  small.set_dataset("small");
  while (!next && std::chrono::steady_clock::now() < deadline) {
    auto again = c.client("ingest", 0, 500ms);
    if (auto r = wire::call_typed<loom::v1::ImportDatasetReply>(*again, small, c.admin())) next = *r;
    else std::this_thread::sleep_for(100ms);
  }
  REQUIRE(next);
  c.refresh();
  CHECK(c.ep("ingest").pid != old_pid);
  CHECK(leftovers().empty());
  CHECK(!std::filesystem::exists(c.home.path() + "/datasets/big"));  // nothing was published
  MESSAGE("killed during " << first << ", next task " << next->task().id());
  CHECK(next->task().id() != first);
  CHECK(next->task().id() == "imp-000002");
}

TEST_CASE("loom up --import-root is checked, remembered by later loom up, and changed only after loom down") {
  temp_dir home, corpus("loom-root"), other("loom-root-2");
  up_guard guard{home.path()};
  write(corpus.path() + "/a.txt", "The first root holds this text.\n");
  write(other.path() + "/b.txt", "The second root holds this one.\n");
  for (const std::string& bad : {home.path(), std::string("/"), std::string("/no/such/dir")}) {
    auto r = run_loom(home.path(), {"up", "--import-root", bad});
    CHECK_MESSAGE(r.code == 2, bad);
    CHECK(r.err.find("import root " + bad) != std::string::npos);
  }
  REQUIRE(run_loom(home.path(), {"up", "--import-root", corpus.path()}, 60s).code == 0);
  auto eps = layout::read_endpoints(home.path() + "/endpoints.json");
  REQUIRE(eps.ok());
  CHECK(eps->import_roots == std::vector<std::string>{corpus.path()});
  CHECK(run_loom(home.path(), {"data", "import", corpus.path(), "--dataset", "first"}, 120s).code == 0);
  CHECK(run_loom(home.path(), {"data", "import", other.path(), "--dataset", "second"}).code == 3);
  auto running = run_loom(home.path(), {"up", "--import-root", other.path()});
  CHECK(running.code == 1);
  CHECK(running.err.find("loom down") != std::string::npos);
  CHECK(run_loom(home.path(), {"up"}, 60s).code == 0);  // a plain `loom up` keeps the roots

  REQUIRE(run_loom(home.path(), {"down"}, 60s).code == 0);
  REQUIRE(run_loom(home.path(), {"up", "--import-root", other.path()}, 60s).code == 0);
  CHECK(run_loom(home.path(), {"data", "import", other.path(), "--dataset", "second"}, 120s).code == 0);
  CHECK(run_loom(home.path(), {"data", "import", corpus.path(), "--dataset", "first"}).code == 3);
}

TEST_CASE("datasets are per tenant: another tenant's dataset and tasks are not found, names are per tenant, an admin "
          "sees all, and a job is refused another tenant's dataset") {
  temp_dir src("loom-tenants");
  std::mt19937_64 rng(24);
  for (int i = 0; i < 12; ++i) write(src.path() + "/acme/doc" + std::to_string(i) + ".txt", prose(rng, 30));
  for (int i = 0; i < 5; ++i) write(src.path() + "/globex/doc" + std::to_string(i) + ".txt", prose(rng, 20));
  cluster c({"--import-root", src.path()});
  REQUIRE(c.up);
  const std::string acme = tenant_token(c, "acme"), globex = tenant_token(c, "globex"), admin = c.admin();
  auto as = [&](const std::string& token, std::vector<std::string> args) {
    args.insert(args.end(), {"--token", token});
    return run_loom(c.home.path(), args, 120s);
  };
  auto json_as = [&](const std::string& token, std::vector<std::string> args) {
    args.insert(args.end(), {"--token", token});
    return slow_json(c.home.path(), args);
  };

  // One name, two tenants, two datasets; acme also has "secret", globex "gx-only".
  for (const auto& [token, dir, name] : {std::tuple{acme, "acme", "notes"}, std::tuple{acme, "acme", "secret"},
                                         std::tuple{globex, "globex", "notes"}, std::tuple{globex, "globex", "gx-only"}}) {
    auto r = as(token, {"data", "import", src.path() + "/" + dir, "--dataset", name});
    INFO(name << ": " << r.out << r.err);
    REQUIRE(r.code == 0);
  }
  auto na = json_as(acme, {"data", "status", "notes"});
  auto ng = json_as(globex, {"data", "status", "notes"});
  CHECK(na["tenant"] == "acme");
  CHECK(ng["tenant"] == "globex");
  CHECK(na["version"] == 1);
  CHECK(ng["version"] == 1);  // globex's import made its own, it did not re-import acme's
  CHECK(na["documents"].get<int>() > ng["documents"].get<int>());
  CHECK(na["dir"] != ng["dir"]);
  CHECK(na["dir"] == c.home.path() + "/datasets/.tenant-acme/notes");

  // globex cannot read, page, verify or list acme's: not found, as if it did not exist.
  for (const auto& args : {std::vector<std::string>{"data", "status", "secret"},
                           std::vector<std::string>{"data", "rejects", "secret"},
                           std::vector<std::string>{"data", "verify", "secret"}}) {
    auto r = as(globex, args);
    INFO(args[1] << ": " << r.out << r.err);
    CHECK(r.code == 1);
    CHECK(r.err.find("no dataset secret") != std::string::npos);
  }
  auto lg = json_as(globex, {"data", "list"});
  REQUIRE(lg["datasets"].size() == 2);
  for (const auto& d : lg["datasets"]) CHECK(d["tenant"] == "globex");
  auto named = as(globex, {"data", "status", "secret", "--tenant", "acme"});
  CHECK(named.code == 3);  // naming another tenant is an admin's
  CHECK(named.err.find("tenant acme") != std::string::npos);

  // acme's tasks: globex can neither follow nor cancel them.
  const std::string task = na["last_task"]["id"];
  auto cli = c.client("ingest");
  REQUIRE(cli);
  loom::v1::GetTaskRequest get;
  get.set_id(task);
  CHECK(wire::call_typed<loom::v1::GetTaskReply>(*cli, get, acme).ok());
  CHECK(wire::call_typed<loom::v1::GetTaskReply>(*cli, get, globex).code() == errc::not_found);
  loom::v1::CancelTaskRequest cancel;
  cancel.set_id(task);
  CHECK(wire::call_typed<loom::v1::CancelTaskReply>(*cli, cancel, acme).code() == errc::conflict);  // already ended
  CHECK(wire::call_typed<loom::v1::CancelTaskReply>(*cli, cancel, globex).code() == errc::not_found);
  // Nor let another ingest pull acme's dataset (the grant `loom data sync` asks for).
  loom::v1::SyncInfoRequest grant;
  grant.set_dataset("secret");
  grant.set_peer_public_key(*wire::load_public_key(c.paths.curve_dir(), "client"));
  CHECK(wire::call_typed<loom::v1::SyncInfoReply>(*cli, grant, globex).code() == errc::not_found);
  grant.set_for_tenant("acme");
  CHECK(wire::call_typed<loom::v1::SyncInfoReply>(*cli, grant, globex).code() == errc::permission_denied);
  // acme itself may grant only a trusted peer's key, never the shared client key.
  grant.clear_for_tenant();
  auto own_key = wire::call_typed<loom::v1::SyncInfoReply>(*cli, grant, acme);
  CHECK(own_key.code() == errc::permission_denied);
  if (!own_key.ok()) CHECK(own_key.err().message.find("granted only to a trusted peer") != std::string::npos);

  // The admin sees every tenant's, and reads one by naming its tenant.
  auto la = json_as(admin, {"data", "list"});
  std::set<std::string> seen;
  for (const auto& d : la["datasets"]) seen.insert(d["tenant"].get<std::string>() + "/" + d["name"].get<std::string>());
  CHECK(seen == std::set<std::string>{"acme/notes", "acme/secret", "globex/gx-only", "globex/notes"});
  CHECK(json_as(admin, {"data", "status", "secret", "--tenant", "acme"})["state"] == "ready");

  // At submit the scheduler asks ingest for the job's tenant: another
  // tenant's dataset is not found; no job is made.
  auto submit = [&](const std::string& token, const std::string& dataset) {
    return as(token, {"job", "submit", "--templates", templates_dir(), "--template", "pretrain-tiny", "--set",
                      "dataset=" + dataset, "--set", "steps=2"});
  };
  auto other = submit(acme, "gx-only");
  CHECK(other.code == 1);
  CHECK_MESSAGE(other.err.find("data.dataset gx-only: ingest has no dataset gx-only") != std::string::npos, other.err);
  auto theirs = submit(globex, "secret");
  CHECK(theirs.code == 1);
  CHECK_MESSAGE(theirs.err.find("ingest has no dataset secret") != std::string::npos, theirs.err);
  CHECK(json_as(admin, {"job", "list"})["jobs"].size() == 0);
  // Its own dataset passes the same check.
  auto own = submit(globex, "gx-only");
  CHECK_MESSAGE(own.code == 0, own.err);
}

TEST_CASE("a dataset without tokens is empty, not ready, and a job on it is refused at submit naming the dataset and why") {
  temp_dir src("loom-hollow");
  std::mt19937_64 rng(14);
  std::string junk(8192, '\0');
  for (auto& ch : junk) ch = static_cast<char>(rng());
  write(src.path() + "/junk.txt", junk);  // binary: rejected, nothing kept
  cluster c({"--import-root", src.path()});
  REQUIRE(c.up);
  auto hollow = run_loom(c.home.path(), {"data", "import", src.path(), "--dataset", "hollow"}, 120s);
  INFO(hollow.out << hollow.err);
  REQUIRE(hollow.code == 0);  // an import that completed, rejects included
  CHECK(hollow.out.find("dataset hollow has no tokens") != std::string::npos);
  auto h = slow_json(c.home.path(), {"data", "status", "hollow"});
  CHECK(h["tokens"] == 0);
  CHECK(h["state"] == "empty");
  const std::string reason = h["reason"].get<std::string>();
  CHECK_MESSAGE(reason.starts_with("it has no tokens: version 1 ("), reason);  // then the version's id
  CHECK_MESSAGE(reason.ends_with(") kept no document: all 1 were rejected (`loom data rejects hollow` says why)"),
                reason);
  auto submit = run_loom(c.home.path(), {"job", "submit", "--templates", templates_dir(), "--template", "pretrain-tiny",
                                         "--set", "dataset=hollow", "--set", "steps=2"});
  CHECK(submit.code == 1);
  CHECK_MESSAGE(submit.err.find("data.dataset hollow is empty, not ready: it has no tokens") != std::string::npos,
                submit.err);
  CHECK(slow_json(c.home.path(), {"job", "list"})["jobs"].size() == 0);
}
