// Cross-process: `loom model check` and `loom model export` through `loom up`
// (issue 16 items 6-7; since issue 25 item 3 the cloud's trainer runs them and
// records them). A tiny pipeline-test job trains on a text file; its
// versions pass every check, export as a Hugging Face directory and a q8_0
// GGUF file that read back, and each export leaves an audit record. Then the
// refusals: an unknown version, a non-empty output directory, a corrupted
// checkpoint (every failure listed, nothing exported, the refusal audited),
// and a lineage from a dataset imported with PII redaction off (refused for an
// operator, exported under an admin's audited override), and a DPO version
// (no init_from in its recorded config, no data of its own) that passes.
#include "libs/export/gguf.hpp"
#include "libs/files/files.hpp"
#include "tests/support/at_rest.hpp"
#include "tests/support/audit_events.hpp"
#include "tests/support/cluster.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const char* corpus = "/usr/share/common-licenses/GPL-3";

// Submits pipeline-test with `sets` and waits for it; its versions, newest first.
json train(const std::string& home, std::vector<std::string> sets) {
  std::vector<std::string> args = {"job", "submit", "--template", "pipeline-test"};
  for (auto& s : sets) args.insert(args.end(), {"--set", s});
  auto j = loom_json(home, args);
  REQUIRE(j.contains("id"));
  auto watch = run_loom(home, {"job", "watch", j["id"].get<std::string>()}, 120s);
  INFO(watch.out << watch.err);
  REQUIRE(watch.code == 0);
  auto list = loom_json(home, {"model", "list", "--model", "pipeline-test"});
  REQUIRE(list["versions"].size() >= 2);
  return list["versions"];
}

std::string status_of(const json& report, const std::string& check) {
  for (const auto& c : report["checks"])
    if (c["name"] == check) return c["status"];
  return "absent";
}
std::string detail_of(const json& report, const std::string& check) {
  for (const auto& c : report["checks"])
    if (c["name"] == check) return c["detail"];
  return "";
}

// The RecordModelExport audit records (allowed and denied), their payloads parsed.
std::vector<std::pair<v1::AuditEvent, json>> export_records(cluster& c, std::size_t want) {
  std::vector<std::pair<v1::AuditEvent, json>> out;
  for (int i = 0; i < 100 && out.size() < want; ++i) {  // the audit spool forwards asynchronously
    if (i) std::this_thread::sleep_for(100ms);
    out.clear();
    for (auto& e : all_events(c))
      if (e.action() == "loom.v1.RecordModelExportRequest") {
        auto p = json::parse(e.payload(), nullptr, false);  // a refused call's record has no payload
        out.emplace_back(e, p.is_object() ? p : json::object());
      }
  }
  return out;
}

}  // namespace

TEST_CASE("a trained version passes every check, exports as HF and q8_0 GGUF that read back, audited, and bad exports are refused") {
  cluster c({"--import-root", "/usr/share/common-licenses"});
  REQUIRE(c.up);
  const std::string home = c.home.path();
  auto versions = train(home, {std::string("text=") + corpus, "export.max_loss=10.0"});
  const std::string sft = versions[0]["version"], pre = versions[1]["version"];
  CHECK(versions[0]["stage"] == "sft");

  // Every check passes; compliance is "not assessed" for a raw text file.
  int code = -1;
  auto report = loom_json(home, {"model", "check", pre}, 60s, &code);
  INFO(report.dump(1));
  CHECK(code == 0);
  CHECK(report["passed"] == true);
  REQUIRE(report["checks"].size() == 6);
  for (const char* name : {"signature", "finite", "shapes", "tokenizer", "held_out_loss"}) CHECK(status_of(report, name) == "pass");
  CHECK(status_of(report, "compliance") == "not_assessed");
  CHECK(detail_of(report, "held_out_loss").find("threshold 10.0000") != std::string::npos);
  const double check_s = report["seconds"];

  // A Hugging Face directory.
  auto hf = loom_json(home, {"model", "export", pre, "--format", "hf", "--out", home + "/out-hf"}, 60s, &code);
  INFO(hf.dump(1));
  REQUIRE(code == 0);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"})
    CHECK(fs::is_regular_file(home + "/out-hf/" + f));
  auto config = json::parse(files::read_file(home + "/out-hf/config.json").value(), nullptr, false);
  CHECK(config["n_layer"] == 2);
  CHECK(config["vocab_size"] == 50257);

  // A q8_0 GGUF file into a directory: <model>-<version>-q8_0.gguf.
  fs::create_directory(home + "/out-gguf");
  auto gg = loom_json(home, {"model", "export", sft, "--format", "gguf", "--type", "q8_0", "--out", home + "/out-gguf"},
                      60s, &code);
  INFO(gg.dump(1));
  REQUIRE(code == 0);
  const std::string gguf_path = gg["out"];
  CHECK(gguf_path == home + "/out-gguf/pipeline-test-" + sft + "-q8_0.gguf");
  auto file = exporter::read_gguf(gguf_path);
  REQUIRE_MESSAGE(file.ok(), file.err().message);
  REQUIRE(file->find("general.architecture") != nullptr);
  CHECK(file->find("general.architecture")->strings.at(0) == "gpt2");
  CHECK(file->tensors().size() == 2 + 2 * 12 + 2);  // token_embd, position_embd, 12 per block, output_norm
  CHECK(file->find_tensor("blk.1.ffn_up.weight")->type == exporter::gguf_type::q8_0);
  MESSAGE("check " << check_s << " s; hf export " << hf["export_seconds"] << " s, " << hf["output_bytes"]
                   << " bytes; gguf q8_0 export " << gg["export_seconds"] << " s, " << gg["output_bytes"] << " bytes");

  // A held-out file (in the import area: the trainer reads only under its
  // import roots) and a bar it cannot meet: the check fails, saying both.
  const std::string held = home + "/imports/held-out.txt";
  REQUIRE(files::write_atomic(held, "Everyone is permitted to copy and distribute verbatim copies of this license "
                                    "document, but changing it is not allowed.\n").ok());
  auto strict = loom_json(home, {"model", "check", pre, "--held-out", held, "--max-loss", "0.5"}, 60s, &code);
  INFO(strict.dump(1));
  CHECK(code == 1);
  CHECK(status_of(strict, "held_out_loss") == "fail");
  CHECK(detail_of(strict, "held_out_loss").find("above the threshold") != std::string::npos);
  CHECK(detail_of(strict, "held_out_loss").find(held + " (--held-out), threshold 0.5000") != std::string::npos);

  // Refusals: an unknown version, a non-empty output directory.
  auto unknown = run_loom(home, {"model", "check", "mv-999999"});
  CHECK(unknown.code != 0);
  CHECK(unknown.err.find("no model version mv-999999") != std::string::npos);
  auto again = run_loom(home, {"model", "export", pre, "--format", "hf", "--out", home + "/out-hf"});
  CHECK(again.code != 0);
  CHECK(again.err.find("exists and is not an empty directory") != std::string::npos);
  auto exists = run_loom(home, {"model", "export", sft, "--format", "gguf", "--type", "q8_0", "--out", gguf_path});
  CHECK(exists.code != 0);
  CHECK(exists.err.find("refusing to overwrite") != std::string::npos);

  // A corrupted checkpoint: a NaN written over model.safetensors' last value
  // (lnfb's last element) fails the signature (naming the file) and the NaN
  // scan (naming the tensor); nothing is exported, and the refusal is audited.
  // The file is sealed at rest: the NaN goes into its plaintext, sealed again
  // with the deployment's keys (what a writer with a bug would leave).
  const std::string ckpt = versions[0]["checkpoint"];
  {
    std::string plain = test::plain_file(ckpt + "/model.safetensors", home);
    const unsigned char nan[4] = {0x00, 0x00, 0xc0, 0x7f};
    std::memcpy(plain.data() + plain.size() - 4, nan, 4);
    test::process_keys_of keys(home);
    REQUIRE(atrest::write_object(ckpt + "/model.safetensors", plain, atrest::process_keys().get(),
                                 std::chrono::system_clock::now())
                .ok());
  }
  auto bad = loom_json(home, {"model", "export", sft, "--format", "hf", "--out", home + "/out-bad"}, 60s, &code);
  INFO(bad.dump(1));
  CHECK(code == 1);
  CHECK(bad["exported"] == false);
  CHECK(status_of(bad, "signature") == "fail");
  CHECK(detail_of(bad, "signature").find("model.safetensors") != std::string::npos);
  CHECK(status_of(bad, "finite") == "fail");
  CHECK(detail_of(bad, "finite").find("tensor lnfb: NaN at index 63") != std::string::npos);
  CHECK(status_of(bad, "held_out_loss") == "fail");  // a NaN parameter makes the loss NaN
  CHECK_FALSE(fs::exists(home + "/out-bad"));

  auto recs = export_records(c, 3);
  REQUIRE(recs.size() >= 3);
  int exported = 0, refused = 0;
  for (const auto& [e, p] : recs) {
    CHECK(e.decision() == v1::ALLOW);
    if (p["outcome"] == "exported") {
      ++exported;
      CHECK(!p["output_sha256"].get<std::string>().empty());
      CHECK(p["checks"].size() == 6);
    }
    if (p["outcome"] == "refused") {
      ++refused;
      CHECK(p["version"] == sft);
    }
  }
  CHECK(exported == 2);
  CHECK(refused == 1);
}

TEST_CASE("a model trained on a dataset imported with PII redaction off is refused unless an admin overrides it, audited") {
  cluster c({"--import-root", "/usr/share/common-licenses"});
  REQUIRE(c.up);
  const std::string home = c.home.path();
  auto imported = run_loom(home, {"data", "import", corpus, "--dataset", "raw", "--no-pii"}, 60s);
  INFO(imported.out << imported.err);
  REQUIRE(imported.code == 0);
  auto versions = train(home, {"dataset=raw"});
  const std::string sft = versions[0]["version"];

  int code = -1;
  auto report = loom_json(home, {"model", "check", sft}, 60s, &code);
  INFO(report.dump(1));
  CHECK(code == 1);
  CHECK(status_of(report, "compliance") == "fail");
  CHECK(detail_of(report, "compliance").find("dataset raw was imported with PII redaction off") != std::string::npos);
  CHECK(status_of(report, "held_out_loss") == "pass");  // on the dataset's last tokens

  // An operator may not override; an admin may, with a reason, and it is audited.
  const std::string op = c.token(auth::role::operator_);
  auto denied = run_loom(home, {"model", "export", sft, "--format", "gguf", "--out", home + "/m.gguf",
                                "--override-compliance", "--reason", "reviewed", "--token", op});
  CHECK(denied.code != 0);
  CHECK(denied.err.find("needs the admin role") != std::string::npos);
  CHECK_FALSE(fs::exists(home + "/m.gguf"));
  auto ok = loom_json(home, {"model", "export", sft, "--format", "gguf", "--out", home + "/m.gguf",
                             "--override-compliance", "--reason", "licence reviewed by legal"}, 60s, &code);
  INFO(ok.dump(1));
  CHECK(code == 0);
  CHECK(status_of(ok, "compliance") == "overridden");
  CHECK(exporter::read_gguf(home + "/m.gguf").ok());

  // Recorded by the trainer (its key), for the admin who asked.
  bool audited = false;
  for (const auto& [e, p] : export_records(c, 2))
    if (p["outcome"] == "exported")
      audited = p["override_compliance"] == true && p["reason"] == "licence reviewed by legal" &&
                p["caller"]["role"] == "admin" && e.peer_key() == "trainer";
  CHECK(audited);
}

TEST_CASE("a DPO version, started from its job's SFT stage on generated pairs, passes every check on its ancestors' text") {
  cluster c({"--import-root", "/usr/share/common-licenses"});
  REQUIRE(c.up);
  const std::string home = c.home.path();
  auto j = loom_json(home, {"job", "submit", "--template", "pipeline-dpo-tiny", "--set", std::string("text=") + corpus,
                            "--set", "pretrain.train.steps=10", "--set", "sft.train.steps=5", "--set", "dpo.train.steps=5"});
  REQUIRE(j.contains("id"));
  auto watch = run_loom(home, {"job", "watch", j["id"].get<std::string>()}, 120s);
  INFO(watch.out << watch.err);
  REQUIRE(watch.code == 0);
  auto list = loom_json(home, {"model", "list", "--model", "pipeline-dpo-tiny"});
  REQUIRE(list["versions"].size() == 3);
  const json& dpo = list["versions"][0];
  REQUIRE(dpo["stage"] == "dpo");
  CHECK(dpo["kind"] == "dpo");
  CHECK(dpo["datasets"] == json::array({"prefs:synthetic(seed 7)"}));  // the built-in pairs, seeded
  // Its recorded config has no model.init_from (the scheduler passes the SFT
  // checkpoint beside it): the parent's checkpoint stands in.
  CHECK(dpo["config_toml"].get<std::string>().find("init_from") == std::string::npos);
  int code = -1;
  auto report = loom_json(home, {"model", "check", dpo["version"]}, 60s, &code);
  INFO(report.dump(1));
  CHECK(code == 0);
  for (const char* name : {"signature", "finite", "shapes", "tokenizer", "held_out_loss"}) CHECK(status_of(report, name) == "pass");
  CHECK(detail_of(report, "held_out_loss").find("an ancestor's training data") != std::string::npos);
}
