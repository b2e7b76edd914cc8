// Edge sites and DiLoCo checks for the cross-process site tests
// (site_deploy_tests, site_deploy4_tests, diloco_grants_tests; issue 15): an
// edge site brought up against a cloud `cluster` with its own data dir and
// imported dataset, polling helpers, the aggregator's status, saved θ (live)
// and θ's SHA-256 (retired), a snapshot's parameters, and a model's loss. Header-only, tests only (doctest REQUIREs inside); each test
// thread owns what it creates.
#pragma once

#include "libs/ckpt/gpt2_checkpoint.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/model/gpt_config.hpp"
#include "loom/v1/aggregator.pb.h"
#include "tests/support/at_rest.hpp"
#include "tests/support/cluster.hpp"
#include "tests/support/loom_json.hpp"
#include "tests/support/scoped_env.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace loom::test {

inline const char* licences = "/usr/share/common-licenses";

// An edge site: its name, its data dir, and `loom down` of it at the end.
struct edge_site {
  std::string name;
  temp_dir home{"loom-site"};
  up_guard guard{home.path()};
};

// `loom up --site NAME --cloud EP --enrol-token T` with a token the cloud
// issued, then its own text (`licences`/corpus) imported as `dataset`.
inline std::unique_ptr<edge_site> start_edge_site(cluster& c, const std::string& name, const std::string& corpus,
                                                  const std::string& dataset = "text") {
  using namespace std::chrono_literals;
  auto tok = loom_json(c.home.path(), {"site", "token", "--site", name});
  REQUIRE(tok.contains("token"));
  auto s = std::make_unique<edge_site>();
  s->name = name;
  auto r = run_loom(s->home.path(),
                    {"up", "--site", name, "--cloud", tok.value("cloud", ""), "--enrol-token", tok.value("token", ""),
                     "--import-root", licences},
                    60s);
  REQUIRE_MESSAGE(r.code == 0, r.out << r.err);
  auto eps = layout::read_endpoints(s->home.path() + "/endpoints.json");
  REQUIRE(eps.ok());
  CHECK(eps->role == "site");
  CHECK(eps->zone == name);
  CHECK(eps->find("scheduler")->rpc == c.ep("scheduler").rpc);  // the cloud's
  CHECK(eps->find("scheduler")->pid == 0);                      // not run here
  auto imp = run_loom(s->home.path(), {"data", "import", std::string(licences) + "/" + corpus, "--dataset", dataset},
                      120s);
  REQUIRE_MESSAGE(imp.code == 0, imp.err);
  return s;
}

// The pid of a site's (only) trainer, as its watcher last wrote it; 0 if none.
inline long site_trainer_pid(const edge_site& s) {
  auto eps = layout::read_endpoints(s.home.path() + "/endpoints.json");
  const auto* t = eps ? eps->find("trainer") : nullptr;
  return t ? static_cast<long>(t->pid) : 0;
}

// Every regular file under `dir`, by path.
inline std::vector<std::string> files_under(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) out.push_back(it->path().string());
  return out;
}

// Waits until `pred` holds, polling every `every`, up to `limit`.
// `loom job show ID` once the job ended (or at `limit`, as it stands then).
inline nlohmann::json wait_job_done(const std::string& home, const std::string& id, std::chrono::seconds limit) {
  nlohmann::json j;
  eventually(
      [&] {
        j = loom_json(home, {"job", "show", id});
        const std::string st = j.value("state", "");
        return st == "succeeded" || st == "failed" || st == "cancelled";
      },
      limit);
  return j;
}

// The cloud aggregator's status of its only job — live, or once its stage
// ended (retired) as it stood then, with `retired` set to its tombstone — or
// nullopt while it does not answer.
inline std::optional<v1::AggregationStatus> aggregation(cluster& c, v1::RetiredAggregation* retired = nullptr) {
  c.refresh();
  auto cli = c.client("aggregator", 0, std::chrono::milliseconds(1000));
  if (!cli) return std::nullopt;
  auto r = cli->call(wire::request{wire::new_request_id(), "loom.v1.AggregatorStatusRequest", "",
                                   c.token(auth::role::viewer)});
  v1::AggregatorStatusReply rep;
  if (!r || !r->ok() || !rep.ParseFromString(r->body)) return std::nullopt;
  if (rep.jobs_size() == 1 && rep.retired_size() == 0) return rep.jobs(0);
  if (rep.jobs_size() == 0 && rep.retired_size() == 1) {
    if (retired) *retired = rep.retired(0);
    return rep.retired(0).last();
  }
  return std::nullopt;
}

// SHA-256 of parameters as fp32 bytes in buffer order: what a retired
// aggregation's tombstone keeps of its θ (RetiredAggregation.theta_sha256).
inline std::string params_sha256(const std::vector<float>& p) {
  return std::string(crypto::as_view(crypto::sha256({reinterpret_cast<const char*>(p.data()), p.size() * sizeof(float)})));
}

// pretrain-diloco-tiny's model.
inline model::gpt2_config tiny_config() {
  model::gpt2_config cfg;
  cfg.layers = 2;
  cfg.heads = 2;
  cfg.channels = 64;
  cfg.max_seq_len = 64;
  cfg.vocab = 50257;
  cfg.padded_vocab = 50304;
  return cfg;
}

// The manifest of <data>/aggregator/<job>/state.bin (format 2, services/aggregator/job_store.hpp):
// "LOOMAGG2" | u64 LE n | AggregationState (the spec, the grant, each fragment's file).
inline void saved_manifest(const std::string& path, v1::AggregationState& st) {
  auto bytes = files::read_file(path);
  REQUIRE(bytes.ok());
  REQUIRE(bytes->size() > 16);
  REQUIRE(bytes->compare(0, 8, "LOOMAGG2") == 0);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes->data() + 8, 8);
  REQUIRE(bytes->size() == 16 + n);
  REQUIRE(st.ParseFromArray(bytes->data() + 16, static_cast<int>(n)));
}

// A snapshot's parameters in buffer order (libs/model's layout); a trainer's
// snapshot is sealed at rest with the keys of its data dir `data_dir`.
inline std::vector<float> snapshot_params(const std::string& dir, const model::gpt2_config& cfg,
                                          const std::string& data_dir = "") {
  std::optional<process_keys_of> keys;
  if (!data_dir.empty()) keys.emplace(data_dir);
  auto file = ckpt::read_safetensors(dir + "/" + ckpt::gpt2_model_file);
  REQUIRE_MESSAGE(file.ok(), file.err().message);
  auto theta = ckpt::gpt2_flat_params(*file, cfg, dir);
  REQUIRE_MESSAGE(theta.ok(), theta.err().message);
  return *theta;
}

// The loss of the tiny model in snapshot dir `init` ("" = a random one) on
// `text`: `loom-trainer train` for one step at lr 0 over 8 x 4 windows of 64
// tokens, its files under `data_dir`/eval-N.
inline double model_loss(const std::string& data_dir, const std::string& text, const std::string& init) {
  using namespace std::chrono_literals;
  static int n = 0;
  const std::string dir = data_dir + "/eval-" + std::to_string(n++);
  REQUIRE(files::write_atomic(dir + ".toml",
                              "[model]\nlayers = 2\nheads = 2\nchannels = 64\nmax_seq_len = 64\nvocab = 50257\n"
                              "padded_vocab = 50304\n[data]\ntext = \"" + text +
                                  "\"\n[train]\nbatch = 8\nseq_len = 64\ngrad_accum = 4\nsteps = 1\nseed = 99\n"
                                  "threads = 1\n[optim]\nlr = 0.0\nmin_lr = 0.0\n[checkpoint]\nevery_steps = 0\n")
              .ok());
  std::vector<std::string> args{bin("loom-trainer"), "train", "--config", dir + ".toml", "--data-dir",
                                data_dir, "--out", dir, "--json"};
  if (!init.empty()) args.insert(args.end(), {"--set", "model.init_from=" + init});
  auto r = run(args, 120s);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_MESSAGE(j.is_object(), r.out);
  return j.value("loss", 0.0);
}

}  // namespace loom::test
