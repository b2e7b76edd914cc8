// The model registry over a real store (SQLite and PostgreSQL: CTest names end
// in [sqlite] / [postgres]) and real signed snapshots: a succeeded stage
// becomes a version with its lineage, rollback is hash-checked, and the
// scheduler's requests answer from it.
#include "libs/auth/token.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/ckpt/safetensors.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/runspec/job_template.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"
#include "loom/v1/models.pb.h"
#include "services/scheduler/jobs/job_store.hpp"
#include "services/scheduler/models/model_registry.hpp"
#include "services/scheduler/scheduler_logic.hpp"
#include "services/scheduler/schema.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <vector>

using namespace loom;
using namespace loom::scheduler;

namespace {
constexpr store::backend engine = store::testing::suite_backend;
const model_scope everyone{"default", true};

struct models_fixture {
  files::temp_dir dir{"loom-models"};
  store::testing::scratch scratch = store::testing::scratch::make(engine, "models").value();
  std::unique_ptr<store::database> db = store::database::open(scratch.url()).value();
  std::string key_path = dir.path() + "/checkpoint.key";
  std::chrono::system_clock::time_point now{std::chrono::seconds(1'700'000'000)};
  std::unique_ptr<model_registry> reg;

  models_fixture() {
    REQUIRE(store::migrate(*db, scheduler_migrations()).ok());
    REQUIRE(auth::create_token_key(key_path).ok());
    reg = std::make_unique<model_registry>(db.get(), [this] { return now; }, verifying_inspector(key_path));
  }
  // A signed snapshot <root>/step-N whose model.safetensors holds `value` repeated.
  std::string snapshot(const std::string& root, std::uint64_t step, float value) {
    auto key = auth::load_token_key(key_path).value();
    ckpt::snapshot_writer w;
    REQUIRE(w.begin(root, step).ok());
    std::vector<float> p(64, value);
    std::vector<ckpt::tensor_view> t = {{"wte", ckpt::dtype::F32, {8, 8}, p.data(), p.size() * sizeof(float)}};
    REQUIRE(ckpt::write_safetensors(w.dir() + "/model.safetensors", t).ok());
    REQUIRE(w.add_existing("model.safetensors").ok());
    auto d = w.publish(key, 1'700'000'000);
    REQUIRE_MESSAGE(d.ok(), d.err().message);
    return *d;
  }
  stage_outcome stage(const std::string& job, const std::string& name, const std::string& ckpt,
                      const std::string& parent_stage = "", double loss = 2.0) {
    stage_outcome s;
    s.model = "pipeline-x";
    s.job_id = job;
    s.stage = name;
    s.kind = name == "sft" ? "sft" : "lm";
    s.checkpoint = ckpt;
    s.parent_stage = parent_stage;
    s.tokenizer = "gpt2";
    s.datasets = {"dataset:licenses"};
    s.metrics = {{"loss", loss}};
    s.config_toml = "kind = \"" + s.kind + "\"\n\n[train]\nsteps = " + (name == "sft" ? "20" : "100") + "\n";
    return s;
  }
};
}  // namespace

TEST_CASE("a succeeded stage becomes a model version with its lineage, current for its model") {
  models_fixture f;
  auto pre = f.reg->register_stage(f.stage("job-000001", "pretrain", f.snapshot(f.dir.path() + "/j1/pretrain", 100, 1.0f)));
  REQUIRE_MESSAGE(pre.ok(), pre.err().message);
  CHECK(pre->version == "mv-000001");
  CHECK(pre->parent.empty());
  CHECK(pre->step == 100);
  CHECK(pre->params_sha256.size() == 64);
  CHECK(pre->manifest_sha256.size() == 64);
  auto sft = f.reg->register_stage(f.stage("job-000001", "sft", f.snapshot(f.dir.path() + "/j1/sft", 20, 2.0f), "pretrain", 1.5));
  REQUIRE_MESSAGE(sft.ok(), sft.err().message);
  CHECK(sft->version == "mv-000002");
  CHECK(sft->parent == "mv-000001");
  CHECK(sft->params_sha256 != pre->params_sha256);
  CHECK(f.reg->is_current(*sft).value());
  CHECK_FALSE(f.reg->is_current(*pre).value());
  // A stage of a later job starting from that checkpoint names it as its parent.
  auto next = f.stage("job-000002", "pretrain", f.snapshot(f.dir.path() + "/j2/pretrain", 50, 3.0f));
  next.init_from = f.dir.path() + "/j1/sft";
  auto cont = f.reg->register_stage(next);
  REQUIRE(cont.ok());
  CHECK(cont->parent == "mv-000002");
  // Registered once: a replayed completion is already_exists, nothing added.
  auto again = f.reg->register_stage(f.stage("job-000001", "sft", sft->checkpoint, "pretrain"));
  CHECK(again.code() == errc::already_exists);
  auto all = f.reg->list(everyone, "", 0);
  REQUIRE(all.ok());
  REQUIRE(all->size() == 3);
  CHECK((*all)[0].version == "mv-000003");  // newest first
  CHECK((*all)[2].datasets == std::vector<std::string>{"dataset:licenses"});
  CHECK((*all)[2].metrics.at("loss") == doctest::Approx(2.0));
}

TEST_CASE("a stage's lineage comes from its resolved config: an alignment stage is recorded with its kind, parent and pairs") {
  // The stored config of a later stage has no model.init_from (the scheduler
  // hands the previous checkpoint over at placement).
  constexpr const char* tmpl = R"(
[job]
stages = ["pretrain", "sft", "dpo"]
[model]
layers = 2
heads = 2
channels = 32
max_seq_len = 32
vocab = 50257
[train]
seq_len = 16
steps = 10
seed = 7
[data]
text = "/data/corpus.txt"
[stage.sft]
"data.format" = "sft"
[stage.dpo]
kind = "dpo"
"data.text" = ""
"data.synthetic_prefs" = true
)";
  auto plan = runspec::resolve_template("t", tmpl, {});
  REQUIRE_MESSAGE(plan.ok(), plan.err().message);
  job_rec j;
  j.id = "job-000001";
  j.name = "t";
  for (const auto& sp : plan->stages) {
    stage_rec s;
    s.name = sp.name;
    s.config_toml = sp.config_toml;
    s.checkpoint = "/jobs/job-000001/" + sp.name + "/checkpoints/step-000010";
    j.stages.push_back(s);
  }
  CHECK(j.stages[2].config_toml.find("init_from") == std::string::npos);
  const auto pre = outcome_of(j, 0), sft = outcome_of(j, 1), dpo = outcome_of(j, 2);
  CHECK(pre.kind == "lm");
  CHECK(pre.init_from.empty());
  CHECK(pre.datasets == std::vector<std::string>{"text:/data/corpus.txt"});
  CHECK(sft.kind == "sft");
  CHECK(sft.init_from == j.stages[0].checkpoint);
  CHECK(dpo.kind == "dpo");
  CHECK(dpo.parent_stage == "sft");
  CHECK(dpo.init_from == j.stages[1].checkpoint);
  CHECK(dpo.datasets == std::vector<std::string>{"prefs:synthetic(seed 7)"});
}

TEST_CASE("a version pins the data it read: a dataset's manifest hash, a file's hash, or why there is none") {
  models_fixture f;
  const std::string data = f.dir.path() + "/data", manifest = "{\"shards\": [\"shard-000000.bin\"]}";
  std::filesystem::create_directories(data + "/datasets/lic");
  REQUIRE(files::write_atomic(data + "/datasets/lic/manifest.json", manifest).ok());
  REQUIRE(files::write_atomic(f.dir.path() + "/corpus.txt", "some text\n").ok());
  model_registry reg(f.db.get(), [&] { return f.now; }, verifying_inspector(f.key_path), data);
  auto s = f.stage("job-000001", "pretrain", f.snapshot(f.dir.path() + "/j1/pretrain", 10, 1.0f));
  s.datasets = {"dataset:lic", "text:" + f.dir.path() + "/corpus.txt", "text:/nonexistent/corpus.txt",
                "prefs:synthetic(seed 7)"};
  auto v = reg.register_stage(s);
  REQUIRE_MESSAGE(v.ok(), v.err().message);
  auto listed = reg.list(everyone, "", 0);
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  const auto& pins = (*listed)[0].data_sha256;  // as stored and read back
  CHECK(pins.size() == 3);
  CHECK(pins.at("dataset:lic") == crypto::sha256_hex(manifest));
  CHECK(pins.at("text:" + f.dir.path() + "/corpus.txt") == crypto::sha256_hex("some text\n"));
  CHECK(pins.at("text:/nonexistent/corpus.txt").rfind("missing: ", 0) == 0);
  CHECK(pins.count("prefs:synthetic(seed 7)") == 0);
  // Another version of the same data differs in its pin once the data changes.
  REQUIRE(files::write_atomic(data + "/datasets/lic/manifest.json", manifest + " ").ok());
  auto s2 = f.stage("job-000002", "pretrain", f.snapshot(f.dir.path() + "/j2/pretrain", 10, 2.0f));
  s2.datasets = {"dataset:lic"};
  auto v2 = reg.register_stage(s2);
  REQUIRE(v2.ok());
  CHECK(v2->data_sha256.at("dataset:lic") != pins.at("dataset:lic"));
  bool differs = false;
  auto d = reg.diff(*v, *v2);
  REQUIRE(d.ok());
  for (const auto& x : *d) differs |= x[0] == "data_sha256";
  CHECK(differs);
}

TEST_CASE("a checkpoint that does not verify is not registered, and the error names the file") {
  models_fixture f;
  const std::string d = f.snapshot(f.dir.path() + "/bad", 10, 1.0f);
  {
    std::fstream io(d + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-4, std::ios::end);
    io.write("\x01\x02\x03\x04", 4);
  }
  auto r = f.reg->register_stage(f.stage("job-000001", "pretrain", d));
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::corruption);
  CHECK(r.err().message.find("model.safetensors: sha256 mismatch") != std::string::npos);
  CHECK(f.reg->register_stage(f.stage("job-000001", "pretrain", "")).code() == errc::not_found);
  CHECK(f.reg->register_stage(f.stage("job-000001", "pretrain", f.dir.path() + "/nothing/step-000001")).code() ==
        errc::not_found);
  CHECK(f.reg->list(everyone, "", 0)->empty());
}

TEST_CASE("an alignment stage's held-out eval beside its snapshots joins its version's metrics") {
  models_fixture f;
  // <stage>/checkpoints/step-N, and the eval.json the trainer writes at <stage>/.
  const std::string stage_dir = f.dir.path() + "/j1/dpo";
  const std::string d = f.snapshot(stage_dir + "/checkpoints", 30, 1.0f);
  REQUIRE(files::write_atomic(stage_dir + "/eval.json",
                              R"({"kind":"dpo","step":30,"before":{"accuracy":0.5,"kl":0},)"
                              R"("after":{"accuracy":0.9,"kl":0.03,"note":"x"},"kl_within_bound":true})")
              .ok());
  auto v = f.reg->register_stage(f.stage("job-000001", "dpo", d));
  REQUIRE_MESSAGE(v.ok(), v.err().message);
  CHECK(v->metrics.at("loss") == doctest::Approx(2.0));
  CHECK(v->metrics.at("eval_before_accuracy") == doctest::Approx(0.5));
  CHECK(v->metrics.at("eval_after_accuracy") == doctest::Approx(0.9));
  CHECK(v->metrics.at("eval_after_kl") == doctest::Approx(0.03));
  CHECK(v->metrics.size() == 5);  // loss and four figures: no string, no bool, nothing outside before/after
  CHECK(f.reg->list(everyone, "", 0)->at(0).metrics.at("eval_after_accuracy") == doctest::Approx(0.9));
  // A stage without one (or with a torn one) has no eval figures.
  CHECK(stage_eval_beside(f.dir.path() + "/nothing/checkpoints/step-000001").empty());
  REQUIRE(files::write_atomic(stage_dir + "/eval.json", "{\"before\": {\"accuracy\": 0.").ok());
  CHECK(stage_eval_beside(d).empty());
}

TEST_CASE("rollback makes an earlier version current only while its checkpoint hashes as recorded") {
  models_fixture f;
  auto a = f.reg->register_stage(f.stage("job-000001", "pretrain", f.snapshot(f.dir.path() + "/a", 100, 1.0f)));
  auto b = f.reg->register_stage(f.stage("job-000002", "pretrain", f.snapshot(f.dir.path() + "/b", 100, 2.0f)));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto prev = f.reg->rollback(everyone, a->version, "operator-1", "b regressed on held-out loss");
  REQUIRE_MESSAGE(prev.ok(), prev.err().message);
  CHECK(*prev == b->version);
  CHECK(f.reg->is_current(*a).value());
  CHECK_FALSE(f.reg->is_current(*b).value());
  // b's files replaced by other (validly signed) parameters: refused, a stays current.
  REQUIRE(std::filesystem::remove_all(f.dir.path() + "/b") > 0);
  f.snapshot(f.dir.path() + "/b", 100, 5.0f);
  auto bad = f.reg->rollback(everyone, b->version, "operator-1", "");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.code() == errc::corruption);
  CHECK(bad.err().message.find("recorded params " + b->params_sha256) != std::string::npos);
  CHECK(f.reg->is_current(*a).value());
  CHECK(f.reg->rollback(everyone, "mv-000099", "operator-1", "").code() == errc::not_found);
  // diff names what differs, config lines included.
  auto d = f.reg->diff(*a, *b);
  REQUIRE(d.ok());
  bool job = false, params = false;
  for (const auto& [field, x, y] : *d) {
    job |= field == "job" && x == "job-000001" && y == "job-000002";
    params |= field == "params_sha256";
  }
  CHECK(job);
  CHECK(params);
}

TEST_CASE("the scheduler answers ListModels, GetModel, DiffModels and RollbackModel from the registry") {
  models_fixture f;
  auto a = f.reg->register_stage(f.stage("job-000001", "pretrain", f.snapshot(f.dir.path() + "/a", 100, 1.0f)));
  auto b = f.reg->register_stage(f.stage("job-000001", "sft", f.snapshot(f.dir.path() + "/s", 20, 2.0f), "pretrain"));
  REQUIRE(b.ok());
  scheduler_logic logic(f.db.get());
  logic.set_models(std::make_unique<model_registry>(f.db.get(), [&] { return f.now; }, verifying_inspector(f.key_path)));
  runtime::call_context ctx{"r1", "op", "operator", "local", "default", ""};
  auto call = [&](const google::protobuf::Message& m) {
    return logic.handle(std::string(m.GetTypeName()), m.SerializeAsString(), ctx);
  };
  v1::ListModelsRequest lr;
  auto h = call(lr);
  REQUIRE(h.code == errc::ok);
  v1::ListModelsReply ls;
  REQUIRE(ls.ParseFromString(h.body));
  REQUIRE(ls.versions_size() == 2);
  CHECK(ls.versions(0).version() == "mv-000002");
  CHECK(ls.versions(0).current());
  CHECK(ls.versions(0).parent() == "mv-000001");
  v1::DiffModelsRequest dr;
  dr.set_a("mv-000001");
  dr.set_b("mv-000002");
  h = call(dr);
  REQUIRE(h.code == errc::ok);
  v1::DiffModelsReply dd;
  REQUIRE(dd.ParseFromString(h.body));
  bool steps = false;
  for (const auto& d : dd.differences()) steps |= d.field() == "config" && d.a() == "[train] steps = 100";
  CHECK(steps);
  v1::RollbackModelRequest rr;
  rr.set_version("mv-000001");
  rr.set_reason("sft overfit");
  h = call(rr);
  REQUIRE(h.code == errc::ok);
  CHECK(h.audit_payload.find("\"previous\":\"mv-000002\"") != std::string::npos);
  v1::GetModelRequest gr;
  gr.set_version("mv-000001");
  h = call(gr);
  REQUIRE(h.code == errc::ok);
  v1::GetModelReply g;
  REQUIRE(g.ParseFromString(h.body));
  CHECK(g.version().current());
  gr.set_version("mv-000404");
  CHECK(call(gr).code == errc::not_found);
}

TEST_CASE("RecordModelExport keeps an export's checks in its audit payload and needs an admin for a compliance override") {
  models_fixture f;
  REQUIRE(f.reg->register_stage(f.stage("job-000001", "pretrain", f.snapshot(f.dir.path() + "/a", 100, 1.0f))).ok());
  scheduler_logic logic(f.db.get());
  logic.set_models(std::make_unique<model_registry>(f.db.get(), [&] { return f.now; }, verifying_inspector(f.key_path)));
  // The trainer sends it, with its own key and service token, for its caller.
  runtime::call_context trainer{"r1", "trainer@host", "operator", "local", "default", "trainer"};
  auto call = [&](const google::protobuf::Message& m, const runtime::call_context& ctx) {
    return logic.handle(std::string(m.GetTypeName()), m.SerializeAsString(), ctx);
  };
  v1::RecordModelExportRequest r;
  r.set_version("mv-000001");
  r.set_action("export");
  r.set_outcome("exported");
  r.set_format("gguf");
  r.set_type("q8_0");
  r.set_out("/srv/m.gguf");
  r.set_output_sha256("ab12");
  r.set_export_id("exp-00112233");
  auto as = [&](const char* principal, const char* role) {
    r.mutable_caller()->set_principal(principal);
    r.mutable_caller()->set_role(role);
    r.mutable_caller()->set_tenant("default");
    r.mutable_caller()->set_peer("client");
  };
  as("op", "operator");
  for (const char* name : {"signature", "finite", "shapes", "tokenizer", "held_out_loss"}) {
    auto* c = r.add_checks();
    c->set_name(name);
    c->set_status("pass");
  }
  auto* compliance = r.add_checks();
  compliance->set_name("compliance");
  compliance->set_status("not_assessed");
  auto h = call(r, trainer);
  REQUIRE_MESSAGE(h.code == errc::ok, h.message);
  CHECK(h.audit_job_id == "job-000001");
  auto payload = nlohmann::json::parse(h.audit_payload);
  CHECK(payload["outcome"] == "exported");
  CHECK(payload["type"] == "q8_0");
  CHECK(payload["checks"].size() == 6);
  CHECK(payload["checks"][5]["status"] == "not_assessed");
  CHECK(payload["caller"]["principal"] == "op");
  CHECK(payload["caller"]["peer"] == "client");
  CHECK(payload["export_id"] == "exp-00112233");
  CHECK(payload["trainer"] == "trainer@host");

  // "exported" with a failed check is refused; "refused" with it is recorded.
  r.mutable_checks(1)->set_status("fail");
  CHECK(call(r, trainer).code == errc::invalid_argument);
  r.set_outcome("refused");
  CHECK(call(r, trainer).code == errc::ok);

  // An overridden compliance check: an admin caller and a reason, or refused.
  r.mutable_checks(1)->set_status("pass");
  r.set_outcome("exported");
  compliance->set_status("overridden");
  r.set_override_compliance(true);
  r.set_reason("cleared by legal");
  h = call(r, trainer);
  CHECK(h.code == errc::permission_denied);
  CHECK(h.message.find("needs the admin role") != std::string::npos);
  as("root", "admin");
  CHECK(call(r, trainer).code == errc::ok);
  r.set_reason("");
  CHECK(call(r, trainer).code == errc::invalid_argument);

  r.set_reason("x");
  r.set_version("mv-000404");
  CHECK(call(r, trainer).code == errc::not_found);
}

TEST_CASE("RecordModelExport and ResolveModelVersion come only from this deployment's trainer key, whatever the token") {
  models_fixture f;
  REQUIRE(f.reg->register_stage(f.stage("job-000001", "pretrain", f.snapshot(f.dir.path() + "/a", 100, 1.0f))).ok());
  scheduler_logic logic(f.db.get());
  logic.set_models(std::make_unique<model_registry>(f.db.get(), [&] { return f.now; }, verifying_inspector(f.key_path)));
  v1::RecordModelExportRequest r;
  r.set_version("mv-000001");
  r.set_action("export");
  r.set_outcome("exported");
  r.set_format("hf");
  r.add_checks()->set_name("signature");
  r.mutable_checks(0)->set_status("pass");
  r.mutable_caller()->set_principal("root");
  r.mutable_caller()->set_role("admin");
  r.mutable_caller()->set_tenant("default");
  v1::ResolveModelVersionRequest q;
  q.set_version("mv-000001");
  *q.mutable_caller() = r.caller();
  for (const char* peer : {"client", "scheduler", "site:north:trainer", "unenrolled", ""}) {
    runtime::call_context admin{"r", "root", "admin", "local", "default", peer};
    INFO("peer " << peer);
    auto h = logic.handle(std::string(r.GetTypeName()), r.SerializeAsString(), admin);
    CHECK(h.code == errc::permission_denied);
    CHECK(h.message.find("sent only by this deployment's trainers") != std::string::npos);
    CHECK(logic.handle(std::string(q.GetTypeName()), q.SerializeAsString(), admin).code == errc::permission_denied);
  }
  runtime::call_context trainer{"r", "trainer@host", "operator", "local", "default", "trainer"};
  CHECK(logic.handle(std::string(r.GetTypeName()), r.SerializeAsString(), trainer).code == errc::ok);
  auto h = logic.handle(std::string(q.GetTypeName()), q.SerializeAsString(), trainer);
  REQUIRE(h.code == errc::ok);
  v1::ResolveModelVersionReply rep;
  REQUIRE(rep.ParseFromString(h.body));
  CHECK(rep.version().version() == "mv-000001");
  // No caller named: refused.
  q.clear_caller();
  CHECK(logic.handle(std::string(q.GetTypeName()), q.SerializeAsString(), trainer).code == errc::invalid_argument);
}

TEST_CASE("tenant walls: another tenant's versions are not_found to list, show, diff, rollback and resolve, and an admin acts across") {
  models_fixture f;
  auto s_a = f.stage("job-000001", "pretrain", f.snapshot(f.dir.path() + "/a1", 100, 1.0f));
  s_a.tenant = "acme";
  auto a1 = f.reg->register_stage(s_a);
  auto s_a2 = f.stage("job-000001", "sft", f.snapshot(f.dir.path() + "/a2", 20, 1.5f), "pretrain");
  s_a2.tenant = "acme";
  auto a2 = f.reg->register_stage(s_a2);
  // globex trains a model of the same name after acme: it does not become acme's current version.
  auto s_b = f.stage("job-000002", "pretrain", f.snapshot(f.dir.path() + "/b1", 100, 2.0f));
  s_b.tenant = "globex";
  auto b1 = f.reg->register_stage(s_b);
  REQUIRE(a1.ok());
  REQUIRE(a2.ok());
  REQUIRE(b1.ok());
  CHECK(b1->tenant == "globex");
  CHECK(b1->model == a2->model);
  CHECK(f.reg->is_current(*a2).value());
  CHECK(f.reg->is_current(*b1).value());
  scheduler_logic logic(f.db.get());
  logic.set_models(std::make_unique<model_registry>(f.db.get(), [&] { return f.now; }, verifying_inspector(f.key_path)));
  runtime::call_context acme{"r1", "alice", "operator", "local", "acme", "client"};
  runtime::call_context globex{"r2", "bob", "operator", "local", "globex", "client"};
  runtime::call_context admin{"r3", "root", "admin", "local", "default", "client"};
  auto call = [&](const google::protobuf::Message& m, const runtime::call_context& ctx) {
    return logic.handle(std::string(m.GetTypeName()), m.SerializeAsString(), ctx);
  };
  auto list = [&](const runtime::call_context& ctx, const std::string& model = "") {
    v1::ListModelsRequest lr;
    lr.set_model(model);
    auto h = call(lr, ctx);
    REQUIRE(h.code == errc::ok);
    v1::ListModelsReply rep;
    REQUIRE(rep.ParseFromString(h.body));
    std::vector<std::pair<std::string, bool>> out;
    for (const auto& v : rep.versions()) out.emplace_back(v.version(), v.current());
    return out;
  };
  using L = std::vector<std::pair<std::string, bool>>;
  CHECK(list(acme) == L{{a2->version, true}, {a1->version, false}});
  CHECK(list(globex, "pipeline-x") == L{{b1->version, true}});
  CHECK(list(admin) == L{{b1->version, true}, {a2->version, true}, {a1->version, false}});

  // show, diff, rollback of another tenant's version: not_found, in the words of a missing one.
  v1::GetModelRequest g;
  g.set_version(a1->version);
  auto h = call(g, globex);
  CHECK(h.code == errc::not_found);
  CHECK(h.message == "no model version " + a1->version + " in tenant globex (`loom model list` shows them)");
  g.set_version("mv-000404");
  CHECK(call(g, globex).message == "no model version mv-000404 in tenant globex (`loom model list` shows them)");
  g.set_version(a1->version);
  CHECK(call(g, admin).code == errc::ok);
  v1::DiffModelsRequest d;
  d.set_a(b1->version);
  d.set_b(a1->version);
  CHECK(call(d, globex).code == errc::not_found);
  CHECK(call(d, admin).code == errc::ok);
  v1::RollbackModelRequest rb;
  rb.set_version(a1->version);
  CHECK(call(rb, globex).code == errc::not_found);
  CHECK(f.reg->is_current(*a2).value());  // nothing moved
  // acme rolls its own model back: globex's current version of the same name stays.
  h = call(rb, acme);
  REQUIRE_MESSAGE(h.code == errc::ok, h.message);
  CHECK(f.reg->is_current(*a1).value());
  CHECK(f.reg->is_current(*b1).value());
  // An admin rolls back across tenants.
  rb.set_version(a2->version);
  CHECK(call(rb, admin).code == errc::ok);
  CHECK(f.reg->is_current(*a2).value());
  // A trainer resolving for globex's caller: not_found; for acme's: the version and its parent.
  runtime::call_context trainer{"r4", "trainer@host", "operator", "local", "default", "trainer"};
  v1::ResolveModelVersionRequest q;
  q.set_version(a2->version);
  q.mutable_caller()->set_principal("bob");
  q.mutable_caller()->set_role("operator");
  q.mutable_caller()->set_tenant("globex");
  CHECK(call(q, trainer).code == errc::not_found);
  q.mutable_caller()->set_tenant("acme");
  h = call(q, trainer);
  REQUIRE(h.code == errc::ok);
  v1::ResolveModelVersionReply rr;
  REQUIRE(rr.ParseFromString(h.body));
  CHECK(rr.version().tenant() == "acme");
  REQUIRE(rr.ancestors_size() == 1);
  CHECK(rr.ancestors(0).version() == a1->version);
}

TEST_CASE("a stage never takes another tenant's version as its parent, even starting from its checkpoint") {
  models_fixture f;
  auto s_a = f.stage("job-000001", "pretrain", f.snapshot(f.dir.path() + "/a1", 100, 1.0f));
  s_a.tenant = "acme";
  auto a1 = f.reg->register_stage(s_a);
  REQUIRE(a1.ok());
  auto s_b = f.stage("job-000002", "pretrain", f.snapshot(f.dir.path() + "/b1", 100, 2.0f));
  s_b.tenant = "globex";
  s_b.init_from = f.dir.path() + "/a1";
  auto b1 = f.reg->register_stage(s_b);
  REQUIRE(b1.ok());
  CHECK(b1->parent.empty());
  s_b = f.stage("job-000003", "pretrain", f.snapshot(f.dir.path() + "/a3", 100, 3.0f));
  s_b.tenant = "acme";
  s_b.init_from = f.dir.path() + "/a1";
  auto a3 = f.reg->register_stage(s_b);
  REQUIRE(a3.ok());
  CHECK(a3->parent == a1->version);
}

TEST_CASE("migration v11: versions stored before it belong to their job's tenant, and each tenant keeps its own current version") {
  files::temp_dir dir{"loom-models-v11"};
  auto scratch = store::testing::scratch::make(engine, "models_v11").value();
  auto db = store::database::open(scratch.url()).value();
  const auto all = scheduler_migrations();
  REQUIRE(all.size() >= 11);
  REQUIRE(all[10].version == 11);
  REQUIRE(store::migrate(*db, all.first(10)).ok());
  // Before v11: acme's job and globex's job both named "shared"; globex's
  // version was registered last and took the name over.
  auto st = db->with_transaction([&](store::transaction& tx) -> status {
    for (auto [id, tenant] : {std::pair{"job-000001", "acme"}, std::pair{"job-000002", "globex"}}) {
      auto w = tx.exec(
          "INSERT INTO jobs (id, seq, request_id, name, template_name, state, tenant, priority_class, out_dir, "
          "submitted_unix_ns, updated_unix_ns) VALUES ($1, $2, $3, 'shared', 't', 'succeeded', $4, 'normal', '/o', 1, 1)",
          {std::string(id), std::int64_t(id[9] - '0'), std::string("r-") + id, std::string(tenant)});
      if (!w) return w.err();
    }
    for (int i = 1; i <= 3; ++i) {
      const std::string job = i < 3 ? "job-000001" : "job-000002";
      auto w = tx.exec(
          "INSERT INTO model_versions (version, seq, model, job_id, stage, kind, checkpoint, step, manifest_sha256, "
          "params_sha256, parent, datasets, tokenizer, metrics, config_toml, created_unix_ns) VALUES ($1, $2, "
          "'shared', $3, $4, 'lm', '/c', 1, 'm', 'p', '', '[]', 'gpt2', '{}', '', $5)",
          {"mv-00000" + std::to_string(i), std::int64_t(i), job, "s" + std::to_string(i), std::int64_t(i)});
      if (!w) return w.err();
    }
    auto w = tx.exec("INSERT INTO model_current (model, version, set_unix_ns, set_by, reason) VALUES ('shared', "
                     "'mv-000003', 3, 'scheduler', 'new version')");
    if (!w) return w.err();
    return ok_status();
  });
  REQUIRE_MESSAGE(st.ok(), st.err().message);
  auto migrated = store::migrate(*db, all.first(11));
  REQUIRE_MESSAGE(migrated.ok(), migrated.err().message);
  model_registry reg(db.get(), [] { return std::chrono::system_clock::time_point{}; }, verifying_inspector(dir.path() + "/k"));
  auto acme = reg.list({"acme", false}, "", 0);
  REQUIRE(acme.ok());
  REQUIRE(acme->size() == 2);
  CHECK(acme->at(0).tenant == "acme");
  auto globex = reg.list({"globex", false}, "", 0);
  REQUIRE(globex->size() == 1);
  CHECK(globex->at(0).version == "mv-000003");
  CHECK(reg.is_current(globex->at(0)).value());
  CHECK(reg.is_current(acme->at(0)).value());  // acme's newest, mv-000002, is acme's current again
  CHECK(acme->at(0).version == "mv-000002");
  // Still append-only after the migration lifted its trigger for the backfill.
  auto upd = db->with_transaction([](store::transaction& tx) -> status {
    auto w = tx.exec("UPDATE model_versions SET tenant = 'x'");
    return w ? ok_status() : status(w.err());
  });
  CHECK_FALSE(upd.ok());
  CHECK(upd.err().message.find("append-only") != std::string::npos);
}
