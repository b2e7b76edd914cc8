// Cross-process: keys that existing state depends on are never made again
// behind the owner's back (token key, CURVE keys, checkpoint key; `loom keys
// init --force` re-creates them and says what that breaks; `loom-trainer
// sample` never creates one), and local lifecycle operations are admin-only
// — but `loom down`, which is the data dir owner's with no token, so a
// damaged admin key never keeps a deployment running — and audited, spooled
// while the audit service is down, delivered by the next `loom up`.
#include "tests/support/harness.hpp"

#include "libs/auth/token.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/curve.hpp"
#include "loom/v1/audit.pb.h"

#include <doctest/doctest.h>
#include <zmq.hpp>

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <tuple>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string slurp(const std::string& path) {
  auto r = files::read_file(path);
  return r ? *r : "";
}

std::string token_for(const std::string& home, auth::role role, const std::string& principal) {
  auto key = auth::load_token_key(layout::paths{home}.token_key());
  REQUIRE(key.ok());
  auto epoch = auth::read_epoch(layout::paths{home}.epoch());
  auto t = auth::issue_token({principal, role, {"*"}, unix_now() + 600, epoch ? *epoch : 0, unix_now()}, *key);
  REQUIRE(t.ok());
  return *t;
}

// A published snapshot as a job leaves it (only its shape matters here).
std::string fake_snapshot(const std::string& home) {
  const std::string dir = home + "/jobs/1/pretrain/checkpoints/step-000010";
  fs::create_directories(dir);
  std::ofstream(dir + "/MANIFEST.json") << "{}\n";
  return dir;
}

struct event {
  std::string action, principal, reason;
  v1::Decision decision;
};

// The CLI's audit events the audit service stored, oldest first.
std::vector<event> cli_events(const std::string& home) {
  layout::paths p{home};
  auto eps = layout::read_endpoints(p.endpoints());
  REQUIRE(eps.ok());
  zmq::context_t ctx(1);
  wire::client cli(ctx, eps->find("audit")->rpc, *wire::load_public_key(p.curve_dir(), "audit"),
                   *wire::load_keypair(p.curve_dir(), "client"), wire::client_options{2000ms, 2});
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  v1::AuditQueryRequest q;
  q.set_source(std::string("cli@") + host);
  wire::request req{wire::new_request_id(), "loom.v1.AuditQueryRequest", q.SerializeAsString(),
                    token_for(home, auth::role::admin, "tester")};
  auto rep = cli.call(req);
  REQUIRE(rep.ok());
  REQUIRE_MESSAGE(rep->ok(), rep->message);
  v1::AuditQueryReply r;
  REQUIRE(r.ParseFromString(rep->body));
  std::vector<event> out;
  std::uint64_t last = 0;
  for (auto& e : r.events()) {
    CHECK(e.source_seq() == last + 1);  // each once, in order
    last = e.source_seq();
    out.push_back({e.action(), e.principal(), e.reason(), e.decision()});
  }
  return out;
}

int count(const std::vector<event>& es, const std::string& action, v1::Decision d, const std::string& principal = "") {
  int n = 0;
  for (auto& e : es) n += e.action == action && e.decision == d && (principal.empty() || e.principal == principal);
  return n;
}

std::string trainer_config(const std::string& dir) {
  const std::string path = dir + "/run.toml";
  std::ofstream(path) << "[model]\nlayers = 2\nheads = 2\nchannels = 64\nmax_seq_len = 32\n"
                         "vocab = 50257\npadded_vocab = 50304\n"
                         "[data]\ntext = \"/usr/share/common-licenses/GPL-3\"\n"
                         "[train]\nbatch = 4\nseq_len = 32\nsteps = 10\nseed = 42\nthreads = 2\n"
                         "[optim]\nlr = 3e-3\nmin_lr = 3e-4\nwarmup_steps = 10\n"
                         "[checkpoint]\nevery_steps = 10\nkeep = 3\n";
  return path;
}

}  // namespace

TEST_CASE("a deleted checkpoint key is not made again while checkpoints signed with it exist") {
  temp_dir home("loom-ckptkey");
  up_guard guard{home.path()};
  layout::paths p{home.path()};
  REQUIRE(run_loom(home.path(), {"keys", "init"}).code == 0);
  CHECK(fs::exists(p.checkpoint_key()));  // a fresh data dir gets every key
  const std::string snap = fake_snapshot(home.path());
  fs::remove(p.checkpoint_key());

  auto up = run_loom(home.path(), {"up"}, 60s);
  INFO("up: " << up.out << up.err);
  CHECK(up.code == 1);
  CHECK(up.err.find(p.checkpoint_key() + " is missing") != std::string::npos);
  CHECK(up.err.find(snap) != std::string::npos);
  CHECK(up.err.find("loom keys init --force") != std::string::npos);
  CHECK_FALSE(fs::exists(p.checkpoint_key()));
  CHECK(processes_of(home.path()).empty());

  // The trainer refuses too, instead of signing with a new key.
  temp_dir work("loom-ckptkey-run");
  auto train = run({bin("loom-trainer"), "train", "--config", trainer_config(work.path()), "--out",
                    work.path() + "/out", "--data-dir", home.path(), "--quiet"},
                   120s);
  INFO("train: " << train.err);
  CHECK(train.code == 1);
  CHECK(train.err.find(p.checkpoint_key() + " is missing") != std::string::npos);
  CHECK_FALSE(fs::exists(p.checkpoint_key()));

  CHECK(run_loom(home.path(), {"keys", "init"}).code == 1);
  auto force = run_loom(home.path(), {"keys", "init", "--force"});
  INFO("force: " << force.out << force.err);
  CHECK(force.code == 0);
  CHECK(force.out.find("new checkpoint key " + p.checkpoint_key()) != std::string::npos);
  CHECK(force.out.find("no longer verify") != std::string::npos);
  CHECK(auth::load_token_key(p.checkpoint_key()).ok());
}

TEST_CASE("a damaged or missing CURVE key is an error naming it and keys init --force repairs it saying what breaks") {
  temp_dir home("loom-curvekey");
  layout::paths p{home.path()};
  REQUIRE(run_loom(home.path(), {"keys", "init"}).code == 0);
  const std::string pub = p.curve_dir() + "/scheduler.pub", key = p.curve_dir() + "/scheduler.key";
  const std::string secret = slurp(key), good_pub = slurp(pub);
  REQUIRE(files::write_atomic(pub, "not a key\n", 0644).ok());

  auto up = run_loom(home.path(), {"up"}, 60s);
  INFO("up: " << up.out << up.err);
  CHECK(up.code == 1);
  CHECK(up.err.find(pub) != std::string::npos);
  CHECK(up.err.find("re-derives scheduler.pub") != std::string::npos);
  CHECK(slurp(key) == secret);  // no new pair
  CHECK(slurp(pub) == "not a key\n");

  auto force = run_loom(home.path(), {"keys", "init", "--force"});
  INFO("force: " << force.out << force.err);
  CHECK(force.code == 0);
  CHECK(force.out.find(pub + " re-derived from scheduler.key") != std::string::npos);
  CHECK(slurp(key) == secret);
  CHECK(slurp(pub) == good_pub);

  // Both halves gone in a deployment that has run: refused, then a new pair with a warning.
  layout::endpoints e;
  REQUIRE(layout::write_endpoints(p.endpoints(), e).ok());
  fs::remove(p.curve_dir() + "/aggregator.key");
  fs::remove(p.curve_dir() + "/aggregator.pub");
  auto init = run_loom(home.path(), {"keys", "init"});
  CHECK(init.code == 1);
  CHECK(init.err.find("aggregator.key and aggregator.pub are missing, but this deployment has run") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(p.curve_dir() + "/aggregator.key"));
  force = run_loom(home.path(), {"keys", "init", "--force"});
  CHECK(force.code == 0);
  CHECK(force.out.find("new CURVE keypair " + p.curve_dir() + "/aggregator.key") != std::string::npos);
  CHECK(wire::load_keypair(p.curve_dir(), "aggregator").ok());
}

TEST_CASE("a deleted or replaced token key is not made again while tokens signed with it exist") {
  temp_dir home("loom-tokenkey");
  layout::paths p{home.path()};
  REQUIRE(run_loom(home.path(), {"keys", "init"}).code == 0);
  const std::string old_admin = slurp(p.admin_token());
  fs::remove(p.token_key());
  auto init = run_loom(home.path(), {"keys", "init"});
  INFO("init: " << init.err);
  CHECK(init.code == 1);
  CHECK(init.err.find(p.token_key() + " is missing, but " + p.admin_token()) != std::string::npos);
  CHECK_FALSE(fs::exists(p.token_key()));
  CHECK(run_loom(home.path(), {"up"}, 60s).code == 1);
  CHECK_FALSE(fs::exists(p.token_key()));

  auto force = run_loom(home.path(), {"keys", "init", "--force"});
  INFO("force: " << force.out << force.err);
  CHECK(force.code == 0);
  CHECK(force.out.find("every token issued so far no longer verifies") != std::string::npos);
  auto key = auth::load_token_key(p.token_key());
  REQUIRE(key.ok());
  std::string admin = slurp(p.admin_token());
  CHECK(admin != old_admin);
  admin.pop_back();
  CHECK(auth::verify_token(admin, *key, {unix_now(), 0}).ok());

  // Another key in its place: admin.token no longer verifies, and up says so.
  fs::remove(p.token_key());
  REQUIRE(auth::create_token_key(p.token_key()).ok());
  init = run_loom(home.path(), {"keys", "init"});
  CHECK(init.code == 1);
  CHECK(init.err.find(p.admin_token() + " does not verify with " + p.token_key()) != std::string::npos);
}

TEST_CASE("loom-trainer sample never creates a key and says which key it needs and where it looked") {
  temp_dir home("loom-sample"), other("loom-sample-home");
  const std::string snap = fake_snapshot(home.path());
  const char* saved_home = std::getenv("HOME");
  const std::string home_env = saved_home ? saved_home : "";
  auto sample = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv{bin("loom-trainer"), "sample", "--checkpoint", snap, "--prompt", "x"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv, 60s);
  };

  ::setenv("LOOM_HOME", other.path().c_str(), 1);
  auto r = sample({});
  INFO("LOOM_HOME: " << r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("looked in " + other.path() + " ($LOOM_HOME)") != std::string::npos);
  CHECK(r.err.find("keys/checkpoint.key") != std::string::npos);
  CHECK(r.err.find("--data-dir") != std::string::npos);
  CHECK_FALSE(fs::exists(other.path() + "/keys"));
  ::unsetenv("LOOM_HOME");

  ::setenv("HOME", other.path().c_str(), 1);
  r = sample({});
  ::setenv("HOME", home_env.c_str(), 1);
  CHECK(r.code == 1);
  CHECK(r.err.find("looked in " + other.path() + "/.local/share/edgeloom (the default data dir)") != std::string::npos);
  CHECK_FALSE(fs::exists(other.path() + "/.local"));

  r = sample({"--data-dir", home.path()});
  CHECK(r.code == 1);
  CHECK(r.err.find("looked in " + home.path() + " (--data-dir)") != std::string::npos);
  CHECK_FALSE(fs::exists(home.path() + "/keys"));
}

TEST_CASE("loom down stops a deployment whose admin key was overwritten, with no token, and keys init --force then repairs it") {
  temp_dir home("loom-downkey");
  up_guard guard{home.path()};
  layout::paths p{home.path()};
  REQUIRE(run_loom(home.path(), {"up"}, 60s).code == 0);
  const std::vector<long> running = processes_of(home.path());
  REQUIRE(running.size() == 7);  // the watcher and six services
  // What `loom data train-tokenizer --out keys/token.key` once did: JSON over the admin key, mode 0644.
  REQUIRE(files::write_atomic(p.token_key(), "{\"model\": {\"type\": \"BPE\"}}\n", 0644).ok());
  ::chmod(p.token_key().c_str(), 0644);
  ::unsetenv("LOOM_TOKEN");
  auto down = run_loom(home.path(), {"down"}, 60s);
  INFO("down: " << down.out << down.err);
  CHECK(down.code == 0);
  CHECK(down.out.find("EdgeLoom stopped") != std::string::npos);
  for (long pid : running) CHECK_FALSE(alive(pid));
  CHECK(processes_of(home.path()).empty());
  // Stopped, the damaged key can be replaced (once it is private again: a key
  // file others could read is refused, saying how to fix it), and everything starts again.
  auto wide = run_loom(home.path(), {"keys", "init", "--force"});
  CHECK(wide.code == 3);
  CHECK(wide.err.find("fix with: chmod 600 " + p.token_key()) != std::string::npos);
  REQUIRE(::chmod(p.token_key().c_str(), 0600) == 0);
  auto force = run_loom(home.path(), {"keys", "init", "--force"});
  INFO("keys init --force: " << force.out << force.err);
  CHECK(force.code == 0);
  auto up = run_loom(home.path(), {"up"}, 60s);
  INFO("up: " << up.out << up.err);
  REQUIRE(up.code == 0);
  // The stop was recorded (spooled while the key was damaged, delivered now), naming the local user.
  const std::string me = "local:" + std::string(::getpwuid(::getuid())->pw_name);
  auto es = cli_events(home.path());
  CHECK(count(es, "loom.down", v1::ALLOW, me) == 1);
  CHECK(count(es, "loom.keys.init", v1::ALLOW) == 1);
  CHECK(count(es, "loom.keys.init", v1::DENY) == 1);  // the refusal while the file was 0644
  CHECK(run_loom(home.path(), {"down"}, 60s).code == 0);
}

TEST_CASE("a viewer cannot revoke tokens, loom down is the data dir owner's with no token, and lifecycle operations reach the audit log") {
  temp_dir home("loom-lifecycle");
  up_guard guard{home.path()};
  layout::paths p{home.path()};
  REQUIRE(run_loom(home.path(), {"up"}, 60s).code == 0);
  const std::string viewer = token_for(home.path(), auth::role::viewer, "viewer-1");

  auto revoke = run_loom(home.path(), {"token", "revoke-all", "--token", viewer});
  CHECK(revoke.code == 3);
  CHECK(revoke.err.find("loom token revoke-all needs the admin role; the token presented is viewer-1's, role viewer") !=
        std::string::npos);
  ::setenv("LOOM_TOKEN", viewer.c_str(), 1);
  auto by_env = run_loom(home.path(), {"token", "revoke-all"});
  ::unsetenv("LOOM_TOKEN");
  CHECK(by_env.code == 3);
  REQUIRE(run_loom(home.path(), {"token", "revoke-all"}).code == 0);
  CHECK(run_loom(home.path(), {"ping", "audit"}).code == 0);

  auto es = cli_events(home.path());
  CHECK(count(es, "loom.up", v1::ALLOW) == 1);
  CHECK(count(es, "loom.token.revoke_all", v1::DENY, "viewer-1") == 2);
  CHECK(count(es, "loom.token.revoke_all", v1::ALLOW) == 1);

  // `loom down` stops the owner's processes: a token is neither needed nor
  // consulted (a viewer's is no authority, and none is wanted: the owner can
  // signal them anyway). The record names the local user.
  const std::vector<long> before = processes_of(home.path());
  REQUIRE(!before.empty());
  auto down = run_loom(home.path(), {"down", "--token", viewer}, 60s);
  INFO("down: " << down.out << down.err);
  CHECK(down.code == 0);
  CHECK(down.out.find("EdgeLoom stopped") != std::string::npos);
  for (long pid : before) CHECK_FALSE(alive(pid));

  // While stopped: no admin key is needed even to stop nothing; what is done waits in the spool.
  fs::rename(p.token_key(), p.token_key() + ".away");
  auto keyless = run_loom(home.path(), {"down"});
  CHECK(keyless.code == 0);
  CHECK(keyless.out.find("not running") != std::string::npos);
  fs::rename(p.token_key() + ".away", p.token_key());
  REQUIRE(run_loom(home.path(), {"keys", "init", "--force"}).code == 0);
  auto offline = run_loom(home.path(), {"token", "issue", "--role", "viewer", "--offline"});
  CHECK(offline.code == 0);
  CHECK(offline.err.find("recorded in the local audit spool") != std::string::npos);
  REQUIRE(run_loom(home.path(), {"up"}, 60s).code == 0);

  es = cli_events(home.path());
  const std::string me = "local:" + std::string(::getpwuid(::getuid())->pw_name);
  CHECK(count(es, "loom.down", v1::ALLOW, me) == 2);  // one stored while audit still ran, one from the spool
  CHECK(count(es, "loom.down", v1::DENY) == 0);
  CHECK(count(es, "loom.keys.init", v1::ALLOW) == 1);   // from the spool too
  CHECK(count(es, "loom.up", v1::ALLOW) == 2);
  CHECK(count(es, "loom.token.issue_offline", v1::ALLOW) == 1);
  CHECK(run_loom(home.path(), {"down"}, 60s).code == 0);

  // The audit log's key-encryption key is not made again behind the owner's back either.
  REQUIRE(fs::exists(p.audit_anchors()));
  int keks = 0;
  for (auto& f : fs::directory_iterator(p.audit_keys()))
    if (f.path().filename().string().rfind("kek-", 0) == 0) keks += fs::remove(f.path());
  REQUIRE(keks > 0);
  auto up = run_loom(home.path(), {"up"}, 60s);
  INFO("up: " << up.out << up.err);
  CHECK(up.code == 1);
  CHECK(up.err.find(p.audit_keys() + " has no key-encryption key") != std::string::npos);
  CHECK(processes_of(home.path()).empty());
  auto force = run_loom(home.path(), {"keys", "init", "--force"});
  CHECK(force.code == 0);
  CHECK(force.out.find("new audit key-encryption key") != std::string::npos);
  CHECK(fs::exists(p.audit_keys() + "/kek-000001.key"));
}
