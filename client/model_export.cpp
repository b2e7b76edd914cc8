// `loom model export VERSION --format hf|gguf [--type f32|f16|q8_0] --out PATH`
// (issue 16 item 7): every pre-export check first (model_check.hpp); any
// failure lists every failure, is recorded as a refused export and writes
// nothing. Then libs/export writes atomically (a temp beside the target,
// renamed into place: nothing half-written on error), and the scheduler
// records the export (audited) before success is reported; if it will not,
// the output is removed again.
//   hf    PATH is the model directory: absent or empty
//   gguf  PATH is the file, or an existing directory (or a path ending in
//         "/"), which then gets <model>-<version>-<type>.gguf; the file must
//         not exist
#include "client/model_check.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/export/gguf_gpt2.hpp"
#include "libs/export/hf_dir.hpp"
#include "libs/files/files.hpp"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>

namespace loom::cli {
namespace {
namespace fs = std::filesystem;

std::string safe_name(const std::string& s) {
  std::string out;
  for (char ch : s) out += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.') ? ch : '_';
  return out;
}

// Where the export goes, refused early when it cannot (libs/export checks
// again, atomically, when it writes).
result<fs::path> destination(const std::string& format, const std::string& out, const std::string& model,
                             const std::string& version, const std::string& type) {
  std::error_code ec;
  fs::path p(out);
  if (format == "hf") {
    if (fs::exists(p, ec) && (!fs::is_directory(p, ec) || !fs::is_empty(p, ec)))
      return make_error(errc::already_exists, "--out " + out + " exists and is not an empty directory: refusing to write into it");
    return p;
  }
  if (out.ends_with('/') || fs::is_directory(p, ec)) p /= safe_name(model) + "-" + version + "-" + type + ".gguf";
  if (fs::exists(p, ec)) return make_error(errc::already_exists, p.string() + " exists: refusing to overwrite it");
  return p;
}

std::uint64_t bytes_under(const fs::path& p) {
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return fs::file_size(p, ec);
  std::uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(p, ec))
    if (e.is_regular_file(ec)) n += e.file_size(ec);
  return n;
}

}  // namespace

int cmd_model_export(context& c) {
  const std::string id = c.a.positional.at(2), format = c.a.get_or("format", ""), out = c.a.get_or("out", "");
  if (format == "hf" && c.a.get("type"))
    return fail(c, make_error(errc::invalid_argument, "--type is for --format gguf (a Hugging Face export is float32)"));
  const std::string type = format == "gguf" ? c.a.get_or("type", "f32") : "f32";
  auto ck = check_version(c, id);
  if (!ck) return fail(c, ck.err());
  auto dest = destination(format, out, ck->model, ck->version, type);
  if (!dest) return fail(c, dest.err());
  // Never into a data dir's keys, tokens, store or job outputs (issue 24 item 15).
  if (auto st = layout::check_not_private(c.paths, dest->string()); !st) return fail(c, st.err());
  if (!ck->report.passed()) {
    auto st = record(c, *ck, "export", "refused", format, type, dest->string(), "", 0);
    if (c.json)
      print_json({{"version", ck->version}, {"exported", false}, {"checks", checks_json(ck->report)},
                  {"recorded", st.ok()}});
    else {
      print_checks(*ck);
      std::printf("nothing exported: every failed check is listed above\n");
    }
    if (!st) std::fprintf(stderr, "warning: the refused export was not recorded: %s\n", printable(st.err().message).c_str());
    return error_exit;
  }
  const auto& rep = ck->report;
  const bool existed = fs::exists(*dest);
  const auto t0 = std::chrono::steady_clock::now();
  status written = ok_status();
  if (format == "hf") {
    written = exporter::write_hf_dir(*rep.cfg, rep.params, *rep.tok, *dest);
  } else {
    const auto t = type == "f16" ? exporter::gguf_type::f16 : type == "q8_0" ? exporter::gguf_type::q8_0 : exporter::gguf_type::f32;
    exporter::gguf_options o;
    o.name = ck->model + " " + ck->version;
    written = exporter::write_gguf(*rep.cfg, rep.params, *rep.tok, t, *dest, o);
  }
  if (!written) return fail(c, make_error(written.code(), "export of " + id + ": " + written.err().message));
  const double export_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const fs::path main_file = format == "hf" ? *dest / "model.safetensors" : *dest;
  auto bytes = files::read_file(main_file.string());
  const std::string sha = bytes ? crypto::sha256_hex(*bytes) : "";
  const std::uint64_t total = bytes_under(*dest);
  if (auto st = record(c, *ck, "export", "exported", format, type, dest->string(), sha, total); !st) {
    std::error_code ec;
    fs::remove_all(*dest, ec);
    if (existed) fs::create_directory(*dest, ec);  // it was an empty directory: leave it so
    return fail(c, make_error(st.code(), "the export was not recorded in the audit log, so " + dest->string() +
                                             " was removed again: " + st.err().message));
  }
  if (c.json) {
    print_json({{"version", ck->version}, {"exported", true}, {"format", format}, {"type", type},
                {"out", dest->string()}, {"output_sha256", sha}, {"output_bytes", total},
                {"check_seconds", rep.seconds}, {"export_seconds", export_s}, {"checks", checks_json(rep)}});
    return ok_exit;
  }
  print_checks(*ck);
  std::printf("exported %s as %s%s to %s: %llu bytes in %.2f s (%s sha256 %s); recorded in the audit log\n",
              printable(ck->version).c_str(), format.c_str(), format == "gguf" ? (" " + type).c_str() : "",
              printable(dest->string()).c_str(), static_cast<unsigned long long>(total), export_s,
              main_file.filename().c_str(), sha.substr(0, 16).c_str());
  return ok_exit;
}

}  // namespace loom::cli
