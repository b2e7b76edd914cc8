// Cross-process: incremental dataset sync between two `loom up` deployments
// (`loom data sync`, the ingest services' sync servers, libs/cdc) and the
// trainer fetching a stage's data.dataset from its ingest. The corpus is
// generated text from a fixed seed plus the licence texts Debian ships.
// The receiver accepts a dataset only if its manifest.json tells the truth
// about the files that came; datasets and their sync are per tenant.
#include "libs/auth/token.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/ingest.pb.h"
#include "tests/support/at_rest.hpp"
#include "tests/support/cluster.hpp"
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>
#include <algorithm>
#include <map>
#include <set>
#include <random>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

json parse_json(const run_result& r) {
  auto j = json::parse(r.out, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

json loom_json(const std::string& home, std::vector<std::string> args) {
  args.push_back("--json");
  auto r = run_loom(home, args, 60s);
  INFO("loom " << args.front() << " stderr: " << r.err);
  return parse_json(r);
}

void write(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  REQUIRE(files::write_atomic(path, bytes, 0644).ok());
}

// Varied prose: sentences over 3,000 pseudo-words made of syllables and
// English stop words (the quality filter wants some), so that no two
// documents are near-duplicates of each other.
struct prose_maker {
  std::mt19937_64 rng;
  std::vector<std::string> words;
  explicit prose_maker(std::uint64_t seed) : rng(seed) {
    static const char* syl[] = {"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "en", "dra", "qui", "sto",
                                "pel", "mar", "ith", "on", "bre", "gu", "zan", "fe", "hol", "wy", "ex", "ap"};
    for (int i = 0; i < 3000; ++i) {
      std::string w;
      for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) w += syl[rng() % std::size(syl)];
      words.push_back(w);
    }
  }
  std::string doc(int sentences) {
    std::string out;
    for (int s = 0; s < sentences; ++s) {
      int n = 6 + static_cast<int>(rng() % 14);
      for (int w = 0; w < n; ++w) {
        static const char* stop[] = {"the", "of", "and", "to", "that", "with", "a", "in", "is", "for"};
        std::string word = rng() % 3 == 0 ? stop[rng() % std::size(stop)] : words[rng() % words.size()];
        if (w == 0) word[0] = static_cast<char>(std::toupper(word[0]));
        out += word + (w + 1 < n ? " " : ". ");
      }
      if (rng() % 6 == 0) out += "\n\n";
    }
    return out + "\n";
  }
};

// `files` generated documents of ~`bytes_each` plus the licence texts, in `dir`.
void make_corpus(const std::string& dir, int files_n, int sentences_each) {
  prose_maker p(20260115);
  for (int i = 0; i < files_n; ++i) write(dir + "/text/doc" + std::to_string(i) + ".txt", p.doc(sentences_each));
  for (const auto& e : fs::directory_iterator("/usr/share/common-licenses"))
    if (e.is_regular_file() && !e.is_symlink())
      write(dir + "/licenses/" + e.path().filename().string(), *files::read_file(e.path().string()));
}

// The data dir a dataset directory lies in: the nearest parent with keys at rest.
std::string home_of(const std::string& dir) {
  for (fs::path p = fs::path(dir).parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
    if (fs::exists(p / "keys" / "atrest")) return p.string();
  return dir;
}

// path -> SHA-256 of the plaintext of every file under `dir` (shards, records
// and rejects are sealed at rest, each side under its own keys; compared as
// what they hold), the receiver's .loom-sync left out.
std::map<std::string, std::string> tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  const std::string home = home_of(dir);
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    if (it.depth() == 0 && it->path().filename() == ".loom-sync") {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    out[it->path().string().substr(dir.size() + 1)] = crypto::sha256_hex(plain_file(it->path().string(), home));
  }
  return out;
}

// The plaintext bytes of every file under `dir`.
std::uint64_t tree_bytes(const std::string& dir) {
  std::uint64_t n = 0;
  const std::string home = home_of(dir);
  for (const auto& [rel, sha] : tree(dir)) n += plain_file(dir + "/" + rel, home).size();
  return n;
}

json dataset_in_list(const std::string& home, const std::string& name) {
  for (auto& d : loom_json(home, {"data", "list"}).value("datasets", json::array()))
    if (d.value("name", "") == name) return d;
  return json::object();
}

// The source tree's templates/ (the client's own lookup assumes a build dir inside it).
// LOOM_SOURCE_DIR, not __FILE__: with ccache's base_dir the file name is relative to the build dir.
std::string templates_dir() { return std::string(LOOM_SOURCE_DIR) + "/templates"; }

run_result sync(const std::string& a, const std::string& b, const std::string& dataset,
                std::vector<std::string> more = {}) {
  // --data-dir (added by run_loom) names neither side: the command takes both from --from/--to.
  std::vector<std::string> args{"data", "sync", "--from", a, "--to", b, "--dataset", dataset, "--json"};
  args.insert(args.end(), more.begin(), more.end());
  return run_loom(b, args, 60s);
}

// A token of `tenant` with `role` for the deployment whose token key is `key`.
std::string tenant_token(const std::string& home, const std::string& tenant,
                         auth::role role = auth::role::operator_) {
  layout::paths p{home};
  auto key = auth::load_token_key(p.token_key());
  REQUIRE(key.ok());
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  const auto epoch = auth::read_epoch(p.epoch());
  auto t = auth::issue_token(auth::claims{tenant + "-ops", role, {"*"}, now + 900, epoch ? *epoch : 0, now, tenant}, *key);
  REQUIRE(t.ok());
  return *t;
}

// Rewrites <dir>/manifest.json as a hostile site would: every SHA-256 zeroed,
// every token count ×10 (the shards themselves untouched).
void tamper_manifest(const std::string& dir) {
  auto m = json::parse(*files::read_file(dir + "/manifest.json"));
  for (auto& s : m["shards"]) {
    s["sha256"] = std::string(64, '0');
    s["tokens"] = s["tokens"].get<std::uint64_t>() * 10;
  }
  write(dir + "/manifest.json", m.dump(2) + "\n");
}

}  // namespace

TEST_CASE("loom data sync copies a dataset to a second deployment byte for byte, then sends only what a re-import changed") {
  temp_dir a, b, src("loom-sync-corpus");
  up_guard ga{a.path()}, gb{b.path()};
  REQUIRE(run_loom(a.path(), {"up", "--import-root", src.path()}, 60s).code == 0);
  REQUIRE(run_loom(b.path(), {"up"}, 60s).code == 0);
  make_corpus(src.path(), 96, 600);  // 3.9 MB in 110 files: 1.4 M tokens, one 2.8 MB shard
  auto imp = run_loom(a.path(), {"data", "import", src.path(), "--dataset", "corpus"}, 60s);
  INFO(imp.out << imp.err);
  REQUIRE(imp.code == 0);
  const std::string da = a.path() + "/datasets/corpus", db = b.path() + "/datasets/corpus";

  auto first = sync(a.path(), b.path(), "corpus");
  INFO("sync: " << first.out << first.err);
  REQUIRE(first.code == 0);
  json t1 = parse_json(first);
  CHECK(t1["state"] == "succeeded");
  CHECK(t1["kind"] == "pull");
  // A now trusts B's ingest key, as a peer.
  auto b_key = wire::load_public_key(b.path() + "/keys/curve", "ingest");
  REQUIRE(b_key.ok());
  auto peers = wire::load_allow_list(layout::paths{a.path()}.peers_dir());
  REQUIRE(peers.ok());
  CHECK(peers->count(*b_key) == 1);

  // Byte for byte in what they hold: the manifest, every shard, the report.
  // Each side keeps the shards sealed under its own keys: no two bytes on
  // disk alike, and none of the text in the clear.
  CHECK(*files::read_file(da + "/manifest.json") == *files::read_file(db + "/manifest.json"));
  const auto ta = tree(da);
  CHECK(ta == tree(db));
  std::size_t shard_files = 0;
  for (const auto& [rel, sha] : ta) {
    if (!rel.starts_with("shard-")) continue;
    ++shard_files;
    CHECK(atrest::is_sealed_file(da + "/" + rel));
    CHECK(atrest::is_sealed_file(db + "/" + rel));
    CHECK(*files::read_file(da + "/" + rel) != *files::read_file(db + "/" + rel));
  }
  CHECK(shard_files >= 1);
  const std::uint64_t dataset_bytes = tree_bytes(da);
  CHECK(t1["bytes_sent"].get<std::uint64_t>() >= dataset_bytes * 9 / 10);  // a first sync sends (nearly) all
  CHECK(t1["files"].get<std::uint64_t>() == ta.size());
  // B's catalogue knows it, with A's counts.
  json la = dataset_in_list(a.path(), "corpus"), lb = dataset_in_list(b.path(), "corpus");
  REQUIRE(lb.contains("tokens"));
  CHECK(lb["tokens"] == la["tokens"]);
  CHECK(lb["documents"] == la["documents"]);
  CHECK(lb["shards"] == la["shards"]);
  MESSAGE("first sync: " << t1["bytes_sent"] << " bytes received of a " << dataset_bytes << "-byte dataset ("
                         << ta.size() << " files, " << la["tokens"] << " tokens), " << t1["elapsed_s"] << " s");

  // Nothing changed: one manifest round trip, nothing fetched.
  auto same = sync(a.path(), b.path(), "corpus");
  REQUIRE(same.code == 0);
  json t2 = parse_json(same);
  CHECK(t2["bytes_sent"] == 0);
  CHECK(t2["files"] == 0);
  MESSAGE("unchanged sync: " << t2["bytes_sent"] << " bytes, " << t2["elapsed_s"] << " s");

  // One input file changes a little; A re-imports (version 2); B gets only the changed chunks.
  const std::string doc = src.path() + "/text/doc17.txt";
  std::string text = *files::read_file(doc);
  const auto at = text.find(' ', text.size() / 2);
  text.insert(at, " an inserted phrase of seven plain words");
  write(doc, text);
  REQUIRE(run_loom(a.path(), {"data", "import", src.path(), "--dataset", "corpus"}, 60s).code == 0);
  REQUIRE(dataset_in_list(a.path(), "corpus")["version"] == 2);
  auto again = sync(a.path(), b.path(), "corpus");
  INFO("sync: " << again.out << again.err);
  REQUIRE(again.code == 0);
  json t3 = parse_json(again);
  const auto ta2 = tree(da);
  CHECK(ta2 != ta);
  CHECK(ta2 == tree(db));
  const std::uint64_t dataset_bytes2 = tree_bytes(da);
  const auto sent = t3["bytes_sent"].get<std::uint64_t>();
  MESSAGE("after a 40-byte edit of one of " << 96 << " files: " << sent << " bytes received of a " << dataset_bytes2
                                            << "-byte dataset (" << (100.0 * sent / dataset_bytes2) << " %), "
                                            << t3["files"] << " files changed, " << t3["elapsed_s"] << " s");
  CHECK(sent > 0);
  CHECK(sent < dataset_bytes2 / 4);
  // Tighter: one edit in the token stream changes the chunk it falls in and
  // perhaps the next (FastCDC resynchronises at the following cut point),
  // each at most 256 KiB; the manifest and the report are rewritten whole.
  const std::uint64_t small_files = fs::file_size(da + "/manifest.json") + fs::file_size(da + "/report.json");
  CHECK(sent <= 2 * (256u << 10) + small_files);
  CHECK(dataset_in_list(b.path(), "corpus")["tokens"] == dataset_in_list(a.path(), "corpus")["tokens"]);

  // A dataset A does not have: exit 1 naming it, and nothing left behind in B.
  auto none = run_loom(b.path(), {"data", "sync", "--from", a.path(), "--to", b.path(), "--dataset", "no-such-set"}, 60s);
  INFO(none.out << none.err);
  CHECK(none.code == 1);
  CHECK(none.err.find("no-such-set") != std::string::npos);
  CHECK(!fs::exists(b.path() + "/datasets/no-such-set"));
}

TEST_CASE("loom data sync exits 4 when a side is not running, and 2 without its options") {
  temp_dir a, b;
  up_guard ga{a.path()};
  REQUIRE(run_loom(a.path(), {"up"}, 60s).code == 0);
  REQUIRE(run_loom(b.path(), {"keys", "init"}, 30s).code == 0);  // keys, but no services
  auto r = run_loom(b.path(), {"data", "sync", "--from", a.path(), "--to", b.path(), "--dataset", "x"}, 30s);
  INFO(r.out << r.err);
  CHECK(r.code == 4);
  CHECK(r.err.find(b.path()) != std::string::npos);
  auto r2 = run_loom(b.path(), {"data", "sync", "--from", b.path(), "--to", a.path(), "--dataset", "x"}, 30s);
  CHECK(r2.code == 4);
  CHECK(run_loom(a.path(), {"data", "sync", "--from", a.path(), "--dataset", "x"}).code == 2);
  CHECK(run_loom(a.path(), {"data", "sync", "--from", a.path(), "--to", a.path(), "--dataset", "x"}).code == 2);
}

TEST_CASE("the ingest service refuses bad pulls naming the field, and a pull into a dataset being imported") {
  cluster c;
  REQUIRE(c.up);
  auto cli = c.client("ingest");
  REQUIRE(cli);
  auto info = wire::call_typed<loom::v1::SyncInfoReply>(*cli, loom::v1::SyncInfoRequest{}, c.admin());
  REQUIRE_MESSAGE(info.ok(), info.err().to_string());
  CHECK(info->endpoint().starts_with("tcp://127.0.0.1:"));
  CHECK(info->public_key() == *wire::load_public_key(c.paths.curve_dir(), "ingest"));
  // SyncInfo is for operators: a viewer is refused.
  auto viewer = wire::call_typed<loom::v1::SyncInfoReply>(*cli, loom::v1::SyncInfoRequest{}, c.token(auth::role::viewer));
  CHECK(viewer.code() == errc::permission_denied);

  auto pull = [&](std::string dataset, std::string endpoint, std::string key) {
    loom::v1::PullDatasetRequest q;
    q.set_dataset(dataset);
    q.set_endpoint(endpoint);
    q.set_public_key(key);
    return wire::call_typed<loom::v1::PullDatasetReply>(*cli, q, c.admin());
  };
  const std::string key = info->public_key(), ep = "tcp://127.0.0.1:9";
  struct bad { std::string dataset, endpoint, key, names; };
  for (const auto& x : {bad{"../etc", ep, key, "dataset"}, bad{".staging", ep, key, "dataset"},
                        bad{"d", "ipc:///tmp/x", key, "endpoint"}, bad{"d", "tcp://127.0.0.1", key, "endpoint"},
                        bad{"d", "tcp://*:5555", key, "endpoint"}, bad{"d", ep, "not-a-key", "public_key"},
                        bad{"d", info->endpoint(), key, "own sync server"}}) {
    auto r = pull(x.dataset, x.endpoint, x.key);
    CHECK_MESSAGE(r.code() == errc::invalid_argument, x.dataset << " " << x.endpoint << " " << x.key);
    if (!r.ok()) CHECK_MESSAGE(r.err().message.find(x.names) != std::string::npos, r.err().message);
  }

  // An import of "busy" is queued or running: a pull into it is refused.
  const std::string src = c.paths.imports() + "/busy";  // the data dir's own import area
  make_corpus(src, 96, 600);  // ~0.3 s of import: the pull below lands while it runs
  loom::v1::ImportDatasetRequest imp;
  imp.set_path(src);
  imp.set_dataset("busy");
  auto started = wire::call_typed<loom::v1::ImportDatasetReply>(*cli, imp, c.admin());
  REQUIRE_MESSAGE(started.ok(), started.err().to_string());
  auto refused = pull("busy", ep, key);
  CHECK(refused.code() == errc::conflict);
  if (!refused.ok()) CHECK(refused.err().message.find(started->task().id()) != std::string::npos);
}

TEST_CASE("a training stage with data.dataset fetches the dataset from ingest and trains from its own copy") {
  temp_dir home, src("loom-sync-train");
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--import-root", src.path()}, 60s).code == 0);
  make_corpus(src.path(), 8, 200);
  REQUIRE(run_loom(home.path(), {"data", "import", src.path(), "--dataset", "tiny"}, 60s).code == 0);

  auto sub = loom_json(home.path(), {"job", "submit", "--templates", templates_dir(), "--template", "pretrain-tiny", "--set",
                                     "dataset=tiny", "--set", "steps=5"});
  REQUIRE(sub.contains("id"));
  const std::string id = sub["id"];
  auto watch = run_loom(home.path(), {"job", "watch", id}, 60s);
  INFO(watch.out << watch.err);
  CHECK(watch.code == 0);
  auto job = loom_json(home.path(), {"job", "show", id});
  REQUIRE(job["state"] == "succeeded");
  CHECK(job["stages"][0]["step"] == 5);

  const std::string copy = home.path() + "/trainer/datasets/tiny";
  REQUIRE(fs::exists(copy + "/manifest.json"));
  CHECK(*files::read_file(copy + "/manifest.json") == *files::read_file(home.path() + "/datasets/tiny/manifest.json"));
  auto log = files::read_file(home.path() + "/logs/trainer.log");
  REQUIRE(log.ok());
  const auto at = log->find("fetched dataset tiny");
  REQUIRE(at != std::string::npos);
  MESSAGE(log->substr(at, log->find('\n', at) - at));
  CHECK(log->find("bytes received", at) != std::string::npos);

  // A dataset ingest does not have: the scheduler asks ingest at submit and
  // refuses the job naming it — also when it comes from the template's own
  // [data], which only the trainer used to read — and no job is made.
  temp_dir tmpl("loom-sync-templates");
  auto tiny = files::read_file(templates_dir() + "/pretrain-tiny.toml");
  REQUIRE(tiny.ok());
  REQUIRE(files::write_atomic(tmpl.path() + "/pretrain-absent.toml", *tiny + "\n[data]\ndataset = \"absent\"\n").ok());
  auto bad = run_loom(home.path(), {"job", "submit", "--templates", tmpl.path(), "--template", "pretrain-absent",
                                    "--set", "steps=5"});
  CHECK(bad.code == 1);
  CHECK_MESSAGE(bad.err.find("data.dataset absent") != std::string::npos, bad.err);
  CHECK_MESSAGE(bad.err.find("ingest has no dataset absent") != std::string::npos, bad.err);
  CHECK(!fs::exists(home.path() + "/trainer/datasets/absent"));
  const auto jobs_before = loom_json(home.path(), {"job", "list"})["jobs"].size();

  // A shard deleted at ingest: the dataset is damaged, and the submit is
  // refused naming the dataset's own shard file, not a path in the trainer's
  // copy (which still has it).
  fs::remove(home.path() + "/datasets/tiny/shard-000001.bin");
  REQUIRE(files::write_atomic(tmpl.path() + "/pretrain-tiny-data.toml", *tiny + "\n[data]\ndataset = \"tiny\"\n").ok());
  auto damaged = run_loom(home.path(), {"job", "submit", "--templates", tmpl.path(), "--template", "pretrain-tiny-data",
                                        "--set", "steps=5"});
  CHECK(damaged.code == 1);
  const std::string told = damaged.err;
  CHECK_MESSAGE(told.find("dataset tiny is damaged") != std::string::npos, told);
  CHECK_MESSAGE(told.find("shard-000001.bin is missing") != std::string::npos, told);
  CHECK(loom_json(home.path(), {"job", "list"})["jobs"].size() == jobs_before);
  CHECK_MESSAGE(told.find("/trainer/datasets/") == std::string::npos, told);
}

TEST_CASE("loom data sync refuses a tampered manifest (zeroed hashes, tokens x10) naming the file and field, and the "
          "receiver keeps its previous copy") {
  temp_dir a, b, src("loom-sync-tamper");
  up_guard ga{a.path()}, gb{b.path()};
  REQUIRE(run_loom(a.path(), {"up", "--import-root", src.path()}, 60s).code == 0);
  REQUIRE(run_loom(b.path(), {"up"}, 60s).code == 0);
  make_corpus(src.path(), 24, 300);
  REQUIRE(run_loom(a.path(), {"data", "import", src.path(), "--dataset", "corpus"}, 60s).code == 0);
  REQUIRE(run_loom(a.path(), {"data", "import", src.path(), "--dataset", "fresh"}, 60s).code == 0);
  const std::string da = a.path() + "/datasets/corpus", db = b.path() + "/datasets/corpus";
  REQUIRE(sync(a.path(), b.path(), "corpus").code == 0);
  const auto good = tree(db);
  const json listed = dataset_in_list(b.path(), "corpus");
  REQUIRE(listed.contains("tokens"));

  // A's manifest.json lies; its shards are what they were (A still serves it: sizes match).
  const std::string honest = *files::read_file(da + "/manifest.json");
  tamper_manifest(da);
  auto r = sync(a.path(), b.path(), "corpus");
  INFO("sync: " << r.out << r.err);
  CHECK(r.code == 1);
  const json t = parse_json(r);
  CHECK(t["state"] == "failed");
  const std::string why = t.value("message", "");
  CHECK_MESSAGE(why.find("manifest.json does not match the files received") != std::string::npos, why);
  CHECK_MESSAGE(why.find("shard-000001.bin: sha256: manifest.json says " + std::string(64, '0')) != std::string::npos, why);
  CHECK_MESSAGE(why.find("shard-000001.bin: tokens: manifest.json says") != std::string::npos, why);
  CHECK_MESSAGE(why.find("the previous copy stands") != std::string::npos, why);
  // Nothing of it replaced B's good copy: files, manifest, catalogue.
  CHECK(tree(db) == good);
  CHECK(dataset_in_list(b.path(), "corpus")["tokens"] == listed["tokens"]);
  CHECK(dataset_in_list(b.path(), "corpus")["version"] == listed["version"]);

  // A first sync of a tampered dataset leaves nothing behind at B.
  tamper_manifest(a.path() + "/datasets/fresh");
  auto first = sync(a.path(), b.path(), "fresh");
  CHECK(first.code == 1);
  CHECK(!fs::exists(b.path() + "/datasets/fresh"));
  CHECK(dataset_in_list(b.path(), "fresh").empty());

  // The honest manifest back at A: the next sync lands.
  write(da + "/manifest.json", honest);
  auto fixed = sync(a.path(), b.path(), "corpus");
  INFO("sync: " << fixed.out << fixed.err);
  CHECK(fixed.code == 0);
  CHECK(tree(db) == tree(da));
}

TEST_CASE("loom data sync is per tenant: a tenant syncs its dataset into its own tenant, and the pulling key reads only "
          "what it was granted") {
  temp_dir a, b, src("loom-sync-tenants");
  up_guard ga{a.path()}, gb{b.path()};
  REQUIRE(run_loom(a.path(), {"up", "--import-root", src.path()}, 60s).code == 0);
  REQUIRE(run_loom(b.path(), {"up"}, 60s).code == 0);
  make_corpus(src.path(), 8, 200);
  const std::string acme_a = tenant_token(a.path(), "acme"), acme_b = tenant_token(b.path(), "acme");
  REQUIRE(run_loom(a.path(), {"data", "import", src.path(), "--dataset", "notes", "--token", acme_a}, 60s).code == 0);
  REQUIRE(run_loom(a.path(), {"data", "import", src.path(), "--dataset", "private"}, 60s).code == 0);  // default's

  // acme syncs its notes: they land in B's tenant acme, not B's default.
  auto r = sync(a.path(), b.path(), "notes", {"--from-token", acme_a, "--to-token", acme_b});
  INFO("sync: " << r.out << r.err);
  REQUIRE(r.code == 0);
  const std::string landed = b.path() + "/datasets/.tenant-acme/notes";
  CHECK(tree(landed) == tree(a.path() + "/datasets/.tenant-acme/notes"));
  CHECK(!fs::exists(b.path() + "/datasets/notes"));
  auto mine = run_loom(b.path(), {"data", "status", "notes", "--json", "--token", acme_b});
  CHECK(mine.code == 0);
  CHECK(parse_json(mine)["tenant"] == "acme");
  CHECK(run_loom(b.path(), {"data", "status", "notes"}).code == 1);  // B's default tenant has none

  // acme cannot sync default's dataset at A: not found, nothing granted.
  auto theirs = sync(a.path(), b.path(), "private", {"--from-token", acme_a, "--to-token", acme_b});
  CHECK(theirs.code == 1);
  CHECK_MESSAGE(parse_json(theirs)["error"]["message"].get<std::string>().find("no dataset private") !=
                    std::string::npos,
                theirs.out);
  CHECK(!fs::exists(b.path() + "/datasets/.tenant-acme/private"));

  // B's ingest key, trusted by A since the first sync, reads only what was
  // granted: a pull of A's "private" by B's admin is refused by A's sync server.
  zmq::context_t ctx(1);
  auto admin_of = [](const std::string& home) {
    auto t = files::read_file(home + "/admin.token");
    REQUIRE(t.ok());
    std::string s = *t;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  };
  auto client_of = [&](const std::string& home) {
    layout::paths p{home};
    auto eps = layout::read_endpoints(p.endpoints());
    REQUIRE(eps.ok());
    return std::make_unique<wire::client>(ctx, eps->find("ingest")->rpc, *wire::load_public_key(p.curve_dir(), "ingest"),
                                          *wire::load_keypair(p.curve_dir(), "client"), wire::client_options{2000ms, 1});
  };
  auto ia = client_of(a.path()), ib = client_of(b.path());
  auto ep = wire::call_typed<loom::v1::SyncInfoReply>(*ia, loom::v1::SyncInfoRequest{},
                                                      admin_of(a.path()));
  REQUIRE_MESSAGE(ep.ok(), ep.err().to_string());
  loom::v1::PullDatasetRequest q;
  q.set_dataset("private");
  q.set_endpoint(ep->endpoint());
  q.set_public_key(ep->public_key());
  const std::string b_admin = admin_of(b.path());
  auto started = wire::call_typed<loom::v1::PullDatasetReply>(*ib, q, b_admin);
  REQUIRE_MESSAGE(started.ok(), started.err().to_string());
  loom::v1::TaskInfo t = started->task();
  for (int i = 0; i < 600 && t.state() != "failed" && t.state() != "succeeded"; ++i) {
    std::this_thread::sleep_for(100ms);
    loom::v1::GetTaskRequest get;
    get.set_id(t.id());
    auto now = wire::call_typed<loom::v1::GetTaskReply>(*ib, get, b_admin);
    REQUIRE(now.ok());
    t = now->task();
  }
  CHECK(t.state() == "failed");
  CHECK_MESSAGE(t.message().find("may not read dataset \"private\"") != std::string::npos, t.message());
  CHECK(!fs::exists(b.path() + "/datasets/private"));
}

TEST_CASE("a tenant's training stage fetches its own tenant's dataset of that name, not another's") {
  temp_dir home, src("loom-sync-train-tenant");
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--import-root", src.path()}, 60s).code == 0);
  make_corpus(src.path() + "/big", 8, 200);
  make_corpus(src.path() + "/small", 2, 60);
  const std::string acme = tenant_token(home.path(), "acme");
  REQUIRE(run_loom(home.path(), {"data", "import", src.path() + "/big", "--dataset", "tiny"}, 60s).code == 0);
  REQUIRE(run_loom(home.path(), {"data", "import", src.path() + "/small", "--dataset", "tiny", "--token", acme}, 60s)
              .code == 0);
  const std::string theirs = home.path() + "/datasets/tiny", ours = home.path() + "/datasets/.tenant-acme/tiny";
  REQUIRE(*files::read_file(theirs + "/manifest.json") != *files::read_file(ours + "/manifest.json"));

  auto sub = run_loom(home.path(), {"job", "submit", "--templates", templates_dir(), "--template", "pretrain-tiny",
                                    "--set", "dataset=tiny", "--set", "steps=3", "--json", "--token", acme});
  INFO(sub.out << sub.err);
  REQUIRE(sub.code == 0);
  const std::string id = parse_json(sub)["id"];
  auto watch = run_loom(home.path(), {"job", "watch", id, "--token", acme}, 120s);
  INFO(watch.out << watch.err);
  CHECK(watch.code == 0);
  const std::string copy = home.path() + "/trainer/datasets/.tenant-acme/tiny";
  REQUIRE(fs::exists(copy + "/manifest.json"));
  CHECK(*files::read_file(copy + "/manifest.json") == *files::read_file(ours + "/manifest.json"));
  CHECK(!fs::exists(home.path() + "/trainer/datasets/tiny"));  // default's was never fetched
}

namespace {

// The trainer nodes of the roster, once `n` have registered.
std::vector<std::string> trainer_node_ids(const std::string& home, std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  std::vector<std::string> ids;
  while (std::chrono::steady_clock::now() < deadline) {
    ids.clear();
    for (const auto& node : loom_json(home, {"status"}).value("nodes", json::array()))
      if (node.value("service", "") == "trainer" && node.value("state", "") == "alive") ids.push_back(node["id"]);
    if (ids.size() >= n) break;
    std::this_thread::sleep_for(200ms);
  }
  REQUIRE(ids.size() == n);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The job's events of `kind`, in order.
std::vector<std::string> events_of(const std::string& home, const std::string& id, const std::string& kind) {
  std::vector<std::string> out;
  const json logs = loom_json(home, {"job", "logs", id});
  INFO(logs.dump());
  REQUIRE(logs.contains("events"));
  for (const auto& e : logs["events"])
    if (e.value("kind", "") == kind) out.push_back(e.value("text", ""));
  return out;
}

// The files of a node's share copy (manifest.json and shards), and what the
// dataset's manifest.json at ingest places on that node.
std::set<std::string> share_files(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file()) out.insert(e.path().filename().string());
  return out;
}
std::set<std::string> placed_on(const json& manifest, const std::string& node) {
  std::set<std::string> out = {"manifest.json"};
  for (const auto& s : manifest["shards"])
    if (s.value("node", "") == node) out.insert(s["name"].get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("data.local: a two-node group fetches and reads only the shards placed on each node, and placing anew moves only "
          "the shards whose node changed") {
  temp_dir home, src("loom-local-src");
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--trainers", "2", "--import-root", src.path()}, 60s).code == 0);
  // About 10 MB of prose in 2 MiB shards (a 16 MiB import budget): four or more shards.
  make_corpus(src.path(), 150, 800);
  auto imported = run_loom(home.path(), {"data", "import", src.path(), "--dataset", "loc", "--memory", "16MiB"}, 300s);
  INFO(imported.out << imported.err);
  REQUIRE(imported.code == 0);
  const auto nodes = trainer_node_ids(home.path(), 2);
  auto placed = loom_json(home.path(), {"data", "place", "loc", "--nodes", nodes[0] + "," + nodes[1]});
  INFO(placed.dump());
  REQUIRE(placed.value("shards", 0) >= 3);  // then the load cap leaves each node at least one
  REQUIRE(placed["nodes"].size() == 2);
  for (const auto& n : placed["nodes"]) CHECK(n.value("shards", 0) >= 1);
  const std::string ingest_copy = home.path() + "/datasets/loc";
  json manifest = json::parse(*files::read_file(ingest_copy + "/manifest.json"));

  auto sub = loom_json(home.path(), {"job", "submit", "--templates", templates_dir(), "--template", "pretrain-tiny",
                                     "--set", "dataset=loc", "--set", "data.local=true", "--set", "trainers=2", "--set",
                                     "train.grad_accum=2", "--set", "threads=1", "--set", "steps=4"});
  REQUIRE(sub.contains("id"));
  const std::string id = sub["id"];
  auto watch = run_loom(home.path(), {"job", "watch", id}, 240s);
  INFO(watch.out << watch.err);
  REQUIRE(watch.code == 0);
  // Each member read all of its bytes from its own node's shards.
  const auto locality = events_of(home.path(), id, "data_locality");
  REQUIRE(locality.size() == 2);
  std::uint64_t local_bytes = 0;
  for (const auto& text : locality) {
    MESSAGE(text);
    CHECK(text.find("and 0 bytes remotely") != std::string::npos);
    CHECK(text.find("100.0% local (data.local)") != std::string::npos);
    const auto at = text.find("reads ") + 6;
    local_bytes += std::stoull(text.substr(at, text.find(' ', at) - at));
  }
  std::uint64_t all_bytes = 0;
  for (const auto& s : manifest["shards"]) all_bytes += s["bytes"].get<std::uint64_t>();
  CHECK(local_bytes == all_bytes);  // the two shares make the whole dataset, each read where it lies
  // Each node's copy holds manifest.json and exactly the shards placed on it.
  const std::string shares = home.path() + "/trainer/datasets";
  for (const auto& n : nodes) CHECK(share_files(shares + "/.node-" + n + "/loc") == placed_on(manifest, n));
  CHECK(events_of(home.path(), id, "dataset_fetched").size() == 2);

  // nodes[1] leaves: its shards move to nodes[0], nothing else does.
  const auto before = placed_on(manifest, nodes[0]);
  const std::size_t leaving = placed_on(manifest, nodes[1]).size() - 1;
  auto moved = loom_json(home.path(), {"data", "place", "loc", "--nodes", nodes[0]});
  INFO(moved.dump());
  CHECK(moved.value("shards_moved", 0) == leaving);
  manifest = json::parse(*files::read_file(ingest_copy + "/manifest.json"));
  REQUIRE(run_loom(home.path(), {"node", "drain", nodes[1], "--reason", "leaves the dataset"}).code == 0);
  auto again = loom_json(home.path(), {"job", "submit", "--templates", templates_dir(), "--template", "pretrain-tiny",
                                       "--set", "dataset=loc", "--set", "data.local=true", "--set", "threads=1",
                                       "--set", "steps=2"});
  REQUIRE(again.contains("id"));
  const std::string id2 = again["id"];
  auto watch2 = run_loom(home.path(), {"job", "watch", id2}, 240s);
  INFO(watch2.out << watch2.err);
  REQUIRE(watch2.code == 0);
  const auto fetched = events_of(home.path(), id2, "dataset_fetched");
  REQUIRE(fetched.size() == 1);
  MESSAGE(fetched[0]);
  // The shards nodes[0] already held stay; the moved ones and the new manifest.json come.
  CHECK(fetched[0].find("; " + std::to_string(leaving + 1) + " files written, 0 removed)") != std::string::npos);
  CHECK(share_files(shares + "/.node-" + nodes[0] + "/loc") == placed_on(manifest, nodes[0]));
  CHECK(placed_on(manifest, nodes[0]).size() == before.size() + leaving);
}
