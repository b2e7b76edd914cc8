// Cross-process: what the scheduler refuses at submit and what a running stage
// answers to — a job no trainer could run (memory, threads, zone, bad values,
// a stage kind the trainer lacks) is refused before anything is stored; a job on
// a missing dataset is refused by the scheduler itself, also through the raw
// wire; cancel interrupts a long step within seconds; a stage that resumes past a
// corrupt snapshot leaves a job event and an audit record; a 30 MB submit is
// refused within seconds at the first place that can tell.
#include "libs/files/files.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/trainer.pb.h"
#include "tests/support/cluster.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const char* corpus = "/usr/share/common-licenses/GPL-3";

// Admission checks memory and threads against registered trainers: wait for one.
void wait_for_trainer(const std::string& home) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& n : loom_json(home, {"status"}).value("nodes", json::array()))
      if (n.value("service", "") == "trainer" && n.value("state", "") == "alive") return;
    std::this_thread::sleep_for(200ms);
  }
  FAIL("no trainer registered within 30 s");
}

// Waits until `file` holds `text` (or `limit` passes).
bool wait_for_text(const std::string& file, const std::string& text, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto t = files::read_file(file);
    if (t && t->find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

std::string submit(const std::string& home, std::vector<std::string> sets) {
  std::vector<std::string> args = {"job", "submit", "--template", "pipeline-test"};
  for (auto& s : sets) args.insert(args.end(), {"--set", s});
  auto j = loom_json(home, args);
  REQUIRE(j.contains("id"));
  return j["id"].get<std::string>();
}

}  // namespace

TEST_CASE("a job no trainer could run is refused at submit naming what is wrong, and nothing is stored") {
  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 60s).code == 0);
  wait_for_trainer(home.path());
  const std::string text = std::string("text=") + corpus;
  auto refused = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"job", "submit", "--template", "pipeline-test", "--set", text};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_loom(home.path(), args);
  };
  auto has = [](const run_result& r, const std::string& what) { return r.err.find(what) != std::string::npos; };

  auto big = refused({"--set", "batch=65536"});
  INFO(big.err);
  CHECK(big.code == 1);
  CHECK(has(big, "stage pretrain needs an estimated"));
  CHECK(has(big, "GiB (GiB: parameters"));
  CHECK(has(big, "train.batch (now 65536)"));

  auto threads = refused({"--set", "threads=1000"});
  CHECK(threads.code == 1);
  CHECK(has(threads, "train.threads 1000 exceeds the"));

  auto zone = refused({"--zone", "mars"});
  CHECK(zone.code == 1);
  CHECK(has(zone, "zone mars is not a zone of this deployment"));

  auto lr = refused({"--set", "lr=-1"});
  CHECK(lr.code == 1);
  CHECK(has(lr, "optim.lr must be in [0, 10], got -1"));
  auto key = refused({"--set", "train.lr=0.1"});
  CHECK(key.code == 1);
  CHECK(has(key, "train.lr is not a known key"));
  auto kind = refused({"--set", "sft.kind=magic"});
  CHECK(kind.code == 1);
  CHECK(has(kind, "kind \"magic\" is not a stage kind"));
  auto search = refused({"--set", "pretrain.kind=hpo"});  // an hpo stage needs its [hpo] search
  CHECK(search.code == 1);
  CHECK(has(search, "no [hpo] table"));

  // Files outside the import roots and the job outputs: refused, also a key of the deployment.
  auto shadow = run_loom(home.path(), {"job", "submit", "--template", "pipeline-test", "--set", "text=/etc/passwd"});
  CHECK(shadow.code == 3);
  CHECK(has(shadow, "/etc/passwd is outside the allowed roots"));
  auto secret = run_loom(home.path(), {"job", "submit", "--template", "pipeline-test", "--set", text, "--set",
                                       "data.tokenizer=" + home.path() + "/keys/token.key"});
  CHECK(secret.code == 3);
  CHECK(has(secret, "data.tokenizer"));
  auto trail = run_loom(home.path(), {"audit", "tail", "--lines", "50"});
  CHECK(trail.out.find("/etc/passwd") != std::string::npos);  // the refusal is audited

  CHECK(loom_json(home.path(), {"job", "list"})["jobs"].empty());
  std::error_code ec;
  CHECK((!fs::exists(home.path() + "/jobs", ec) || fs::is_empty(home.path() + "/jobs", ec)));
}

TEST_CASE("the scheduler itself refuses a job on a missing dataset, also when submitted through the raw wire") {
  cluster c;
  REQUIRE(c.up);
  auto cli = c.client("scheduler");
  REQUIRE(cli);
  auto tmpl = files::read_file(std::string(LOOM_SOURCE_DIR) + "/templates/pipeline-test.toml");
  REQUIRE(tmpl.ok());
  loom::v1::SubmitJobRequest req;
  req.set_template_name("pipeline-test");
  req.set_template_toml(*tmpl);
  req.add_overrides("dataset=nope");
  auto rep = wire::call_typed<loom::v1::SubmitJobReply>(*cli, req, c.admin());
  REQUIRE(!rep.ok());
  CHECK(rep.code() == errc::not_found);
  CHECK(rep.err().message.find("ingest has no dataset nope") != std::string::npos);
  CHECK(rep.err().message.find("--set dataset=nope") != std::string::npos);
  auto list = wire::call_typed<loom::v1::ListJobsReply>(*cli, loom::v1::ListJobsRequest{}, c.admin());
  REQUIRE(list.ok());
  CHECK(list->jobs_size() == 0);
}

TEST_CASE("cancel interrupts a long training step within seconds instead of waiting for it to end") {
  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 60s).code == 0);
  // 64 micro-batches of 32 x 32 tokens: a step of many seconds even on fast
  // cores (with 16 a fast machine finished step 1 inside the 1.5 s below).
  const std::string id = submit(home.path(), {std::string("text=") + corpus, "batch=32", "seq_len=32",
                                              "train.grad_accum=64", "steps=3"});
  const std::string log = home.path() + "/logs/trainer.log";
  REQUIRE(wait_for_text(log, "training L2 H2 C64", 60s));
  std::this_thread::sleep_for(1500ms);  // well inside step 1
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(run_loom(home.path(), {"job", "cancel", id}).code == 0);
  CHECK(wait_for_text(log, "stopped at step 0 (inside step 1", 5000ms));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("the trainer stopped " << took << " s after the cancel");
  auto metrics = files::read_file(home.path() + "/jobs/" + id + "/pretrain/metrics.jsonl");
  CHECK((!metrics || metrics->empty()));  // no step completed: it was interrupted, not waited for
}

TEST_CASE("a stage that resumes past a corrupt snapshot says so in the job's log and the audit trail") {
  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 60s).code == 0);
  const std::string id = submit(home.path(), {std::string("text=") + corpus, "steps=400", "checkpoint.every_steps=20",
                                              "checkpoint.keep=5", "sft.train.steps=5"});
  const std::string ckpts = home.path() + "/jobs/" + id + "/pretrain/checkpoints";
  // Two snapshots, then freeze the trainer so it writes nothing more.
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  // Until LATEST names step 40 (it moves after the rename: a trainer stopped in
  // between would leave step 40 uncommitted and step 20 the only snapshot).
  auto latest_is_40 = [&] {
    auto l = files::read_file(ckpts + "/LATEST");
    return l.ok() && l->rfind("step-000040", 0) == 0;
  };
  while (std::chrono::steady_clock::now() < deadline && !latest_is_40()) std::this_thread::sleep_for(20ms);
  auto eps = json::parse(*files::read_file(home.path() + "/endpoints.json"));
  const long pid = eps["services"]["trainer"]["pid"].get<long>();
  REQUIRE(pid > 0);
  REQUIRE(::kill(static_cast<pid_t>(pid), SIGSTOP) == 0);
  auto latest = files::read_file(ckpts + "/LATEST");  // the newest committed snapshot
  REQUIRE(latest.ok());
  std::string newest = *latest;
  while (!newest.empty() && (newest.back() == '\n' || newest.back() == ' ')) newest.pop_back();
  REQUIRE(newest.rfind("step-", 0) == 0);
  {
    std::fstream f(ckpts + "/" + newest + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(300);
    f.put('\x5a');
  }
  REQUIRE(::kill(static_cast<pid_t>(pid), SIGKILL) == 0);  // the watcher starts a new one: it resumes
  const auto done = std::chrono::steady_clock::now() + 240s;
  json job;
  while (std::chrono::steady_clock::now() < done) {
    job = loom_json(home.path(), {"job", "show", id});
    if (job.value("state", "") == "succeeded" || job.value("state", "") == "failed") break;
    std::this_thread::sleep_for(250ms);
  }
  CHECK(job.value("state", "") == "succeeded");
  auto logs = run_loom(home.path(), {"job", "logs", id});
  INFO(logs.out);
  CHECK(logs.out.find("snapshot_fallback") != std::string::npos);
  CHECK(logs.out.find("REFUSED snapshot " + newest) != std::string::npos);
  auto trail = run_loom(home.path(), {"audit", "trail", id});
  INFO(trail.out);
  CHECK(trail.out.find("checkpoint.fallback") != std::string::npos);
  CHECK(trail.out.find("job.snapshot_fallback") != std::string::npos);
}

TEST_CASE("TrainerStatus tells the truth: the stage a trainer runs, its step and group, then idle again") {
  cluster c({"--import-root", "/usr/share/common-licenses"});
  REQUIRE(c.up);
  const std::string id = submit(c.home.path(), {std::string("text=") + corpus, "steps=400", "sft.train.steps=2"});
  auto status = [&] {
    c.refresh();
    auto cli = c.client("trainer");
    REQUIRE(cli);
    auto rep = wire::call_typed<loom::v1::TrainerStatusReply>(*cli, loom::v1::TrainerStatusRequest{}, c.admin());
    REQUIRE(rep.ok());
    return *rep;
  };
  loom::v1::TrainerStatusReply seen;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (std::chrono::steady_clock::now() < deadline) {
    seen = status();
    if (seen.state() == "running" && seen.step() >= 5) break;
    std::this_thread::sleep_for(100ms);
  }
  CHECK(seen.state() == "running");
  CHECK(seen.job().value() == id);
  CHECK(seen.stage() == "pretrain");
  CHECK(seen.step() >= 5);
  CHECK(seen.total_steps() == 400);
  CHECK(seen.world() == 1);
  CHECK(seen.loss() > 0);
  REQUIRE(run_loom(c.home.path(), {"job", "cancel", id}).code == 0);
  const auto idle_by = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < idle_by && status().state() != "idle") std::this_thread::sleep_for(100ms);
  CHECK(status().state() == "idle");
}

TEST_CASE("a 30 MB job submit gets a clear error within seconds at the first place that can tell") {
  cluster c;
  REQUIRE(c.up);
  auto tmpl = files::read_file(std::string(LOOM_SOURCE_DIR) + "/templates/pipeline-test.toml");
  REQUIRE(tmpl.ok());
  const std::string padded = *tmpl + "\n# " + std::string(30u << 20, 'x') + "\n";  // valid TOML, 30 MB
  temp_dir work("loom-big-submit");
  const std::string big = work.path() + "/big.toml";
  REQUIRE(files::write_atomic(big, padded).ok());
  auto within = [](auto t0, std::chrono::seconds s) { return std::chrono::steady_clock::now() - t0 < s; };

  // `loom job submit`: the template file is read no further than 1 MiB.
  auto t0 = std::chrono::steady_clock::now();
  auto cli_run = run_loom(c.home.path(), {"job", "submit", "--template", big}, 60s);
  INFO("loom job submit: " << cli_run.out << cli_run.err);
  CHECK(within(t0, 10s));
  CHECK(cli_run.code == 1);
  CHECK(cli_run.err.find(big + " is larger than 1 MiB") != std::string::npos);

  // Through the wire library: refused before anything is sent.
  loom::v1::SubmitJobRequest req;
  req.set_template_name("big");
  req.set_template_toml(padded);
  auto cli = c.client("scheduler", 1, 5000ms);
  REQUIRE(cli);
  t0 = std::chrono::steady_clock::now();
  auto rep = wire::call_typed<loom::v1::SubmitJobReply>(*cli, req, c.admin());
  CHECK(within(t0, 10s));
  REQUIRE_FALSE(rep.ok());
  CHECK(rep.code() == errc::invalid_argument);
  CHECK(rep.err().message.find("over the 16 MiB a request may carry") != std::string::npos);

  // A raw sender that ignores the limit: the scheduler answers it, matched by its request id.
  auto mine = wire::load_keypair(c.paths.curve_dir(), "client");
  auto server = wire::load_public_key(c.paths.curve_dir(), "scheduler");
  REQUIRE(mine.ok());
  REQUIRE(server.ok());
  zmq::socket_t raw(c.ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.set(zmq::sockopt::rcvtimeo, 20000);
  wire::make_curve_client(raw, *mine, *server);
  raw.connect(c.ep("scheduler").rpc);
  wire::request w{"raw-30mb", "loom.v1.SubmitJobRequest", req.SerializeAsString(), c.admin()};
  const std::string bytes = wire::encode(w);
  t0 = std::chrono::steady_clock::now();
  raw.send(zmq::buffer(bytes), zmq::send_flags::none);
  zmq::message_t back;
  REQUIRE_MESSAGE(raw.recv(back, zmq::recv_flags::none).has_value(), "no reply to a 30 MB request within 20 s");
  CHECK(within(t0, 10s));
  auto answer = wire::decode_reply(back.data(), back.size());
  REQUIRE(answer.ok());
  CHECK(answer->request_id == "raw-30mb");
  CHECK(answer->code == errc::invalid_argument);
  CHECK(answer->message.find("body too large") != std::string::npos);

  // Under the wire's limit but over a template's: the scheduler refuses it before parsing it.
  req.set_template_toml(*tmpl + "\n# " + std::string(2u << 20, 'x') + "\n");
  t0 = std::chrono::steady_clock::now();
  rep = wire::call_typed<loom::v1::SubmitJobReply>(*cli, req, c.admin());
  CHECK(within(t0, 10s));
  REQUIRE_FALSE(rep.ok());
  CHECK(rep.code() == errc::invalid_argument);
  CHECK(rep.err().message.find("a template is at most 1 MiB") != std::string::npos);
  auto list = wire::call_typed<loom::v1::ListJobsReply>(*cli, loom::v1::ListJobsRequest{}, c.admin());
  REQUIRE(list.ok());
  CHECK(list->jobs_size() == 0);
}
