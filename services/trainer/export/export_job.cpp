#include "services/trainer/export/export_job.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/export/gguf_gpt2.hpp"
#include "libs/export/hf_dir.hpp"
#include "libs/files/confine.hpp"
#include "services/trainer/check/model_check.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>

namespace loom::trainer {
namespace {
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

std::string safe_name(const std::string& s) {
  std::string out;
  for (char ch : s) out += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.') ? ch : '_';
  return out;
}

result<std::string> sha256_of_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return make_error(errc::internal, "cannot read " + p.string());
  crypto::sha256_stream h;
  std::string buf(1 << 20, '\0');
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  const auto d = h.finish();
  return crypto::to_hex(crypto::as_view(d));
}

// Every file the export wrote (one level: an HF directory is flat), hashed.
result<std::vector<export_file>> list_files(const fs::path& dir) {
  std::vector<export_file> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) return make_error(errc::internal, "the export wrote " + e.path().string() + ", not a file");
    auto sha = sha256_of_file(e.path());
    if (!sha) return sha.err();
    out.push_back({e.path().filename().string(), static_cast<std::uint64_t>(e.file_size(ec)), *sha});
  }
  if (ec) return make_error(errc::internal, "listing " + dir.string() + ": " + ec.message());
  std::sort(out.begin(), out.end(), [](const export_file& a, const export_file& b) { return a.name < b.name; });
  return out;
}

std::vector<export_check> checks_of(const modelcheck::check_report& rep) {
  std::vector<export_check> out;
  for (const auto& k : rep.checks) out.push_back({k.name, std::string(modelcheck::to_string(k.status)), k.detail, k.seconds});
  return out;
}

bool overridden(const modelcheck::check_report& rep) {
  for (const auto& k : rep.checks)
    if (k.status == modelcheck::check_status::overridden) return true;
  return false;
}

status cancelled() { return make_error(errc::unavailable, "cancelled"); }

}  // namespace

status admit_held_out(const export_job_options& o, const export_request& r) {
  if (r.held_out.empty()) return ok_status();
  const auto roots = o.import_roots ? o.import_roots() : std::vector<std::string>{};
  auto in = files::confined(roots, r.held_out);
  if (in) return ok_status();
  if (in.code() == errc::permission_denied) return make_error(errc::permission_denied, "--held-out: " + in.err().message);
  return make_error(in.code(), "--held-out " + r.held_out + ": " + in.err().message);
}

status run_model_export(const export_job_options& o, registry_port& registry, const export_request& r,
                        const export_caller& c, export_context& ctx) {
  ctx.update([](export_info& i) { i.phase = "resolve"; });
  auto v = registry.resolve(r.version, c);
  if (!v) return v.err();
  ctx.update([&](export_info& i) {
    i.model = v->model;
    i.checkpoint = v->checkpoint;
    i.phase = "checks";
  });
  // The registry's path, but a checkpoint is only ever a job output.
  if (auto in = files::confined({o.jobs_dir}, v->checkpoint); !in && in.code() == errc::permission_denied)
    return make_error(errc::permission_denied, "the checkpoint of " + v->version + ": " + in.err().message);
  if (ctx.stop->load()) return cancelled();

  modelcheck::check_request q;
  q.data_dir = o.data_dir;
  q.tenant = v->tenant;  // its datasets are its tenant's (layout::tenant_dataset_dir)
  q.checkpoint = v->checkpoint;
  q.params_sha256 = v->params_sha256;
  q.config_toml = v->config_toml;
  q.parent_checkpoint = v->parent_checkpoint;
  q.tokenizer = v->tokenizer;
  q.data = v->data;
  q.lineage = v->lineage;
  q.held_out_file = r.held_out;
  q.max_loss = r.max_loss;
  q.override_compliance = r.override_compliance;
  q.held_out_roots = o.import_roots ? o.import_roots() : std::vector<std::string>{};
  q.read_roots = o.read_roots ? o.read_roots() : std::vector<std::string>{};
  q.stop = ctx.stop;  // a cancel or the trainer's stop ends the checks early
  modelcheck::check_report rep = modelcheck::run_checks(q);
  const bool passed = rep.passed();
  ctx.update([&](export_info& i) {
    i.checks = checks_of(rep);
    i.passed = passed;
    i.check_seconds = rep.seconds;
  });
  if (ctx.stop->load()) return cancelled();

  export_record rec;
  rec.export_id = fs::path(ctx.artefact_dir).parent_path().filename().string();
  rec.version = v->version;
  rec.action = r.action;
  rec.format = r.format;
  rec.type = r.action == "export" ? r.type : "";
  rec.out = r.out;
  rec.checks = checks_of(rep);
  rec.override_compliance = overridden(rep);
  rec.reason = r.reason;
  auto record = [&](const std::string& outcome) -> status {
    ctx.update([](export_info& i) { i.phase = "record"; });
    rec.outcome = outcome;
    auto st = registry.record(rec, c);
    if (st) ctx.update([](export_info& i) { i.recorded = true; });
    return st;
  };
  if (r.action == "check" || !passed) {
    auto st = record(r.action == "check" ? (passed ? "passed" : "failed") : "refused");
    if (!st) return make_error(st.code(), "the " + r.action + " of " + v->version + " ran but was not recorded in the audit log: " +
                                              st.err().message);
    return ok_status();
  }

  // An export that passed: write it, hash it, record it, then offer it.
  ctx.update([](export_info& i) { i.phase = "write"; });
  std::error_code ec;
  fs::create_directories(fs::path(ctx.artefact_dir).parent_path(), ec);
  const auto t0 = clock_type::now();
  status written = ok_status();
  if (r.format == "hf") {
    written = exporter::write_hf_dir(*rep.cfg, rep.params, *rep.tok, ctx.artefact_dir);
  } else {
    fs::create_directories(ctx.artefact_dir, ec);
    const auto t = r.type == "f16" ? exporter::gguf_type::f16 : r.type == "q8_0" ? exporter::gguf_type::q8_0 : exporter::gguf_type::f32;
    exporter::gguf_options go;
    go.name = v->model + " " + v->version;
    written = exporter::write_gguf(*rep.cfg, rep.params, *rep.tok, t,
                                   fs::path(ctx.artefact_dir) / (safe_name(v->model) + "-" + v->version + "-" + r.type + ".gguf"),
                                   go);
  }
  if (!written) return make_error(written.code(), "export of " + v->version + ": " + written.err().message);
  auto files = list_files(ctx.artefact_dir);
  if (!files) return files.err();
  const double export_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  std::uint64_t total = 0;
  std::string main_sha;
  for (const auto& f : *files) {
    total += f.bytes;
    if (r.format == "gguf" || f.name == "model.safetensors") main_sha = f.sha256;
  }
  rec.output_sha256 = main_sha;
  rec.output_bytes = total;
  if (ctx.stop->load()) return cancelled();
  if (auto st = record("exported"); !st) {
    fs::remove_all(ctx.artefact_dir, ec);  // every export a client can fetch has its audit record
    return make_error(st.code(), "the export was not recorded in the audit log, so it was deleted: " + st.err().message);
  }
  ctx.update([&](export_info& i) {
    i.files = *files;
    i.output_sha256 = main_sha;
    i.output_bytes = total;
    i.export_seconds = export_s;
  });
  return ok_status();
}

}  // namespace loom::trainer
