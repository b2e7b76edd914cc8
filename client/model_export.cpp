// `loom model export VERSION --format hf|gguf [--type f32|f16|q8_0] --out PATH`
// (issue 16 item 7; issue 25 item 3): the cloud's trainer runs every
// pre-export check on the cloud's data and, when all pass, writes the
// artefact and records the export (audited) before it offers it; a failure
// lists every failure, is recorded as a refused export, and nothing is
// written. The artefact then comes here in chunks of 4 MiB
// (FetchModelExport), each checked against its SHA-256 and every file
// against the one the trainer recorded, and is published atomically (a temp
// beside the target, renamed into place: nothing half-written on error).
//   hf    PATH is the model directory: absent or empty
//   gguf  PATH is the file, or an existing directory (or a path ending in
//         "/"), which then gets <model>-<version>-<type>.gguf; the file must
//         not exist
#include "client/model_check.hpp"
#include "client/typed_call.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/export/staging.hpp"
#include "libs/layout/layout.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/models.pb.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <zmq.hpp>

namespace loom::cli {
namespace {
namespace fs = std::filesystem;

// A chunk's reply may take longer than a control call on a slow link: 4 MiB
// in 60 s is 0.5 Mbit/s.
constexpr std::chrono::seconds fetch_timeout{60};

// Where the export goes, refused before the trainer is asked when it cannot
// (the staging below checks again, atomically, when it writes). A gguf
// path that is a directory gets its file name from the trainer.
result<fs::path> destination(const std::string& format, const std::string& out) {
  std::error_code ec;
  if (out.empty()) return make_error(errc::invalid_argument, "--out PATH is needed");
  fs::path p(out);
  if (format == "hf") {
    if (fs::exists(p, ec) && (!fs::is_directory(p, ec) || !fs::is_empty(p, ec)))
      return make_error(errc::already_exists, "--out " + out + " exists and is not an empty directory: refusing to write into it");
    return p;
  }
  if (out.ends_with('/') || fs::is_directory(p, ec)) return p;
  if (fs::exists(p, ec)) return make_error(errc::already_exists, p.string() + " exists: refusing to overwrite it");
  return p;
}

// One connection to the trainer for every chunk of an export (context::call
// makes a new one, with its CURVE handshake, per call), as context::call
// would make it: the deployment's endpoints, the trainer's public key, the
// client's keypair, the caller's token.
struct trainer_link {
  std::unique_ptr<wire::client> cli;
  std::string token;
};

result<trainer_link> connect_trainer(context& c) {
  auto eps = layout::read_endpoints(c.paths.endpoints());
  if (!eps) return make_error(errc::unavailable, "EdgeLoom is not running in " + c.paths.root + " (run `loom up`)");
  const auto* ep = eps->find("trainer");
  if (!ep || ep->rpc.empty()) return make_error(errc::unavailable, "trainer has no endpoint in " + c.paths.endpoints());
  auto server_key = wire::load_public_key(c.paths.curve_dir(), "trainer");
  if (!server_key) return server_key.err();
  auto mine = wire::load_keypair(c.paths.curve_dir(), "client");
  if (!mine) return mine.err();
  auto tok = c.token();
  if (!tok) return tok.err();
  return trainer_link{std::make_unique<wire::client>(*c.zmq, ep->rpc, *server_key, *mine,
                                                     wire::client_options{std::max<std::chrono::milliseconds>(c.timeout, fetch_timeout), 2}),
                      *tok};
}

// One file of the export into `sink`, chunk by chunk, each chunk and the
// whole checked against the hashes the trainer gave.
template <class Sink>
status fetch_file(trainer_link& link, const trainer_export& e, const trainer_export::file& f, Sink&& sink) {
  crypto::sha256_stream whole;
  std::uint64_t got = 0;
  do {
    loom::v1::FetchModelExportRequest req;
    req.set_id(e.id);
    req.set_file(f.name);
    req.set_offset(got);
    auto rep = wire::call_typed<loom::v1::FetchModelExportReply>(*link.cli, req, link.token);
    if (!rep)
      return make_error(rep.code(), "fetching " + f.name + " of " + e.id + " at byte " + std::to_string(got) +
                                        " from the trainer: " + rep.err().message);
    if (rep->offset() != got || rep->file_bytes() != f.bytes || crypto::sha256_hex(rep->data()) != rep->sha256() ||
        (rep->data().empty() && got < f.bytes))
      return make_error(errc::corruption, "a chunk of " + f.name + " at byte " + std::to_string(got) +
                                              " came back damaged (offset, size or SHA-256 differ)");
    whole.update(rep->data());
    if (auto st = sink(rep->data()); !st) return st;
    got += rep->data().size();
  } while (got < f.bytes);
  const auto d = whole.finish();
  const std::string hex = crypto::to_hex(crypto::as_view(d));
  if (hex != f.sha256)
    return make_error(errc::corruption, f.name + " hashes to " + hex + " here, the trainer recorded " + f.sha256);
  return ok_status();
}

// Every file of a done export into `dest`, published atomically.
result<fs::path> receive(context& c, const trainer_export& e, const std::string& format, const fs::path& dest) {
  auto link = connect_trainer(c);
  if (!link) return link.err();
  if (format == "hf") {
    auto dir = exporter::staged_dir::create(dest);
    if (!dir) return dir.err();
    for (const auto& f : e.files) {
      auto file = exporter::staged_file::create(dir->path() / f.name);
      if (!file) return file.err();
      auto st = fetch_file(*link, e, f, [&](const std::string& b) { return file->write(std::string_view(b)); });
      if (!st) return st.err();
      if (auto ok = file->commit(); !ok) return ok.err();
    }
    if (auto st = dir->commit(); !st) return st.err();
    return dest;
  }
  if (e.files.size() != 1) return make_error(errc::internal, "a GGUF export has one file; the trainer listed " +
                                                                 std::to_string(e.files.size()));
  std::error_code ec;
  const fs::path target = dest.string().ends_with('/') || fs::is_directory(dest, ec) ? dest / e.files[0].name : dest;
  auto file = exporter::staged_file::create(target);
  if (!file) return file.err();
  auto st = fetch_file(*link, e, e.files[0], [&](const std::string& b) { return file->write(std::string_view(b)); });
  if (!st) return st.err();
  if (auto ok = file->commit(); !ok) return ok.err();
  return target;
}

}  // namespace

int cmd_model_export(context& c) {
  const std::string id = c.a.positional.at(2), format = c.a.get_or("format", ""), out = c.a.get_or("out", "");
  if (format != "hf" && format != "gguf")
    return fail(c, make_error(errc::invalid_argument, "--format must be hf or gguf"));
  if (format == "hf" && c.a.get("type"))
    return fail(c, make_error(errc::invalid_argument, "--type is for --format gguf (a Hugging Face export is float32)"));
  const std::string type = format == "gguf" ? c.a.get_or("type", "f32") : "f32";
  auto dest = destination(format, out);
  if (!dest) return fail(c, dest.err());
  // Never into a data dir's keys, tokens, store or job outputs (issue 24 item 15).
  if (auto st = layout::check_not_private(c.paths, dest->string()); !st) return fail(c, st.err());
  std::error_code ec;
  auto e = run_on_trainer(c, "export", id, format, format == "gguf" ? type : "", fs::absolute(*dest, ec).string());
  if (!e) return fail(c, e.err());
  if (!e->passed) {
    if (c.json)
      print_json({{"version", e->version}, {"exported", false}, {"checks", checks_json(*e)}, {"recorded", e->recorded},
                  {"export_id", e->id}, {"trainer", e->trainer}});
    else {
      print_checks(*e);
      std::printf("nothing exported: every failed check is listed above (the refusal is in the audit log)\n");
    }
    return error_exit;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto written = receive(c, *e, format, *dest);
  const double fetch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  end_on_trainer(c, e->id);
  if (!written) return fail(c, make_error(written.code(), "export of " + id + ": " + written.err().message));
  if (c.json) {
    print_json({{"version", e->version}, {"exported", true}, {"format", format}, {"type", type},
                {"out", written->string()}, {"output_sha256", e->output_sha256}, {"output_bytes", e->output_bytes},
                {"check_seconds", e->check_seconds}, {"export_seconds", e->export_seconds}, {"fetch_seconds", fetch_s},
                {"checks", checks_json(*e)}, {"recorded", e->recorded}, {"export_id", e->id}, {"trainer", e->trainer}});
    return ok_exit;
  }
  print_checks(*e);
  std::printf("exported %s as %s%s to %s: %llu bytes written by %s in %.2f s and fetched in %.2f s (%s sha256 %s); "
              "recorded in the audit log\n",
              printable(e->version).c_str(), format.c_str(), format == "gguf" ? (" " + type).c_str() : "",
              printable(written->string()).c_str(), static_cast<unsigned long long>(e->output_bytes),
              printable(e->trainer).c_str(), e->export_seconds, fetch_s,
              format == "hf" ? "model.safetensors" : "file", e->output_sha256.substr(0, 16).c_str());
  return ok_exit;
}

}  // namespace loom::cli
