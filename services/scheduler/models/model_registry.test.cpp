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
  auto all = f.reg->list("", 0);
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
  auto listed = reg.list("", 0);
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
  CHECK(f.reg->list("", 0)->empty());
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
  CHECK(f.reg->list("", 0)->at(0).metrics.at("eval_after_accuracy") == doctest::Approx(0.9));
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
  auto prev = f.reg->rollback(a->version, "operator-1", "b regressed on held-out loss");
  REQUIRE_MESSAGE(prev.ok(), prev.err().message);
  CHECK(*prev == b->version);
  CHECK(f.reg->is_current(*a).value());
  CHECK_FALSE(f.reg->is_current(*b).value());
  // b's files replaced by other (validly signed) parameters: refused, a stays current.
  REQUIRE(std::filesystem::remove_all(f.dir.path() + "/b") > 0);
  f.snapshot(f.dir.path() + "/b", 100, 5.0f);
  auto bad = f.reg->rollback(b->version, "operator-1", "");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.code() == errc::corruption);
  CHECK(bad.err().message.find("recorded params " + b->params_sha256) != std::string::npos);
  CHECK(f.reg->is_current(*a).value());
  CHECK(f.reg->rollback("mv-000099", "operator-1", "").code() == errc::not_found);
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
  runtime::call_context op{"r1", "op", "operator", "local", "default", ""};
  runtime::call_context admin{"r2", "root", "admin", "local", "default", ""};
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
  for (const char* name : {"signature", "finite", "shapes", "tokenizer", "held_out_loss"}) {
    auto* c = r.add_checks();
    c->set_name(name);
    c->set_status("pass");
  }
  auto* compliance = r.add_checks();
  compliance->set_name("compliance");
  compliance->set_status("not_assessed");
  auto h = call(r, op);
  REQUIRE_MESSAGE(h.code == errc::ok, h.message);
  CHECK(h.audit_job_id == "job-000001");
  auto payload = nlohmann::json::parse(h.audit_payload);
  CHECK(payload["outcome"] == "exported");
  CHECK(payload["type"] == "q8_0");
  CHECK(payload["checks"].size() == 6);
  CHECK(payload["checks"][5]["status"] == "not_assessed");

  // "exported" with a failed check is refused; "refused" with it is recorded.
  r.mutable_checks(1)->set_status("fail");
  CHECK(call(r, op).code == errc::invalid_argument);
  r.set_outcome("refused");
  CHECK(call(r, op).code == errc::ok);

  // An overridden compliance check: admin and a reason, or refused.
  r.mutable_checks(1)->set_status("pass");
  r.set_outcome("exported");
  compliance->set_status("overridden");
  r.set_override_compliance(true);
  r.set_reason("cleared by legal");
  h = call(r, op);
  CHECK(h.code == errc::permission_denied);
  CHECK(h.message.find("needs the admin role") != std::string::npos);
  CHECK(call(r, admin).code == errc::ok);
  r.set_reason("");
  CHECK(call(r, admin).code == errc::invalid_argument);

  r.set_reason("x");
  r.set_version("mv-000404");
  CHECK(call(r, admin).code == errc::not_found);
}
