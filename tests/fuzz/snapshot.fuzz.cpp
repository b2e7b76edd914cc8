// Fuzzes the checkpoint snapshot reader (libs/ckpt/snapshot.hpp):
// verify_manifest, verify_snapshot, load_latest and retain read a snapshot
// directory that a trainer resumes from, the scheduler judges, `loom model
// check` verifies and data sync copies between sites, so MANIFEST.json, the
// files it lists (plain or sealed at rest) and LATEST are outside input.
// Input layout:
//   byte 0: bit 0 — sign MANIFEST.json: the target, holding the key, sets
//           "signature" to the HMAC of the rest as a writer does (random
//           bytes alone never pass the HMAC); bit 1 — write LATEST naming
//           step-000007 (else the reader falls back to the highest step)
//   then sections, each a u16 little-endian length and that many bytes (the
//   last may be short): MANIFEST.json, then up to 4 pairs name, contents,
//   written as files of root/step-000007/ (a name that is not one plain path
//   component is not written: the manifest may still list it).
// The files live in one per-process directory on tmpfs, emptied per input.
// Sealed files unseal with the fixed at-rest keys (fixed_keys.hpp), which
// the sealed seeds were written with. Checks: a snapshot whose manifest is
// refused is refused for that alone and does not load; a verified one lists
// only files that exist, loads through load_latest with the same list, and
// retain keeps it.
#include "libs/atrest/object.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "tests/fuzz/fixed_keys.hpp"
#include "tests/fuzz/fuzz_file.hpp"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace loom;

namespace {
constexpr std::uint64_t step = 7;
constexpr std::size_t max_files = 4;

void require(bool ok) {
  if (!ok) std::abort();  // a broken promise: libFuzzer saves the input
}

// The next section: a u16 LE length, then that many bytes (or what is left).
bool take(std::string_view& in, std::string_view& out) {
  if (in.size() < 2) return false;
  const std::size_t n = static_cast<std::uint8_t>(in[0]) | static_cast<std::size_t>(static_cast<std::uint8_t>(in[1])) << 8;
  in.remove_prefix(2);
  out = in.substr(0, n);
  in.remove_prefix(out.size());
  return true;
}

bool plain_component(std::string_view n) {
  return !n.empty() && n.size() < 200 && n != "." && n != ".." && n.find('/') == std::string_view::npos &&
         n.find('\0') == std::string_view::npos;
}

// `text` signed as snapshot_writer::publish signs: the HMAC of the compact
// dump without "signature"; unchanged when it is not a JSON object.
std::string signed_text(std::string_view text) {
  auto m = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_object()) return std::string(text);
  m.erase("signature");
  m["signature"] = crypto::to_hex(crypto::as_view(crypto::hmac_sha256(fuzz::snapshot_key, m.dump())));
  return m.dump(2) + "\n";
}

const fs::path& root() {
  static const fs::path r = [] {
    const auto& scratch = fuzz::scratch_dir("snapshot");
    // Readers of sealed files unseal with the process's keys.
    atrest::set_process_keys(fuzz::fixed_kek_store((scratch / "keys").string()));
    return scratch / "root";
  }();
  return r;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t flags = data[0];
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1), manifest;
  if (!take(in, manifest)) return 0;

  fs::remove_all(root());
  const fs::path dir = root() / ckpt::step_dir_name(step);
  fs::create_directories(dir);
  const std::string text = flags & 1 ? signed_text(manifest) : std::string(manifest);
  fuzz::write_file(dir, "MANIFEST.json", reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  std::string_view name, contents;
  for (std::size_t k = 0; k < max_files && take(in, name) && take(in, contents); ++k)
    if (plain_component(name) && name != "MANIFEST.json")
      fuzz::write_file(dir, std::string(name), reinterpret_cast<const std::uint8_t*>(contents.data()), contents.size());
  if (flags & 2) {
    const std::string latest = ckpt::step_dir_name(step) + "\n";
    fuzz::write_file(root(), "LATEST", reinterpret_cast<const std::uint8_t*>(latest.data()), latest.size());
  }

  const std::string d = dir.string(), r = root().string();
  const std::string manifest_problem = ckpt::verify_manifest(d, step, fuzz::snapshot_key);
  ckpt::loaded_snapshot got;
  const auto problems = ckpt::verify_snapshot(d, step, fuzz::snapshot_key, &got);
  if (!manifest_problem.empty()) require(problems.size() == 1 && problems[0] == manifest_problem);
  // load_latest and retain verify the snapshot again, hashing every file
  // through a fresh 1 MiB buffer (ASan maps and unmaps each): only where
  // their answer says something new — a verified snapshot, or a refused
  // manifest (which they refuse before hashing anything).
  if (!problems.empty() && manifest_problem.empty()) return 0;
  auto loaded = ckpt::load_latest(r, fuzz::snapshot_key);
  if (!problems.empty()) {
    require(!loaded.ok() && loaded.code() == errc::corruption);
    return 0;
  }
  require(got.step == step && got.dir == d);
  for (const auto& [n, e] : got.files) require(fs::is_regular_file(dir / n));
  require(loaded.ok() && loaded->step == step && loaded->files.size() == got.files.size());
  for (const auto& [n, e] : got.files) {
    auto it = loaded->files.find(n);
    require(it != loaded->files.end() && it->second.sha256_hex == e.sha256_hex && it->second.bytes == e.bytes);
  }
  require(ckpt::retain(r, 1, fuzz::snapshot_key).ok());
  require(fs::is_directory(dir));  // the only snapshot (and LATEST's) is never removed
  return 0;
}
