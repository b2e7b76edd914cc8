#include "libs/ckpt/snapshot.hpp"

#include "libs/atrest/object.hpp"
#include "libs/atrest/sealed.hpp"
#include "libs/ckpt/safetensors.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::ckpt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr std::string_view manifest_name = "MANIFEST.json";
constexpr std::string_view manifest_format = "loom-ckpt-v1";
constexpr std::string_view tmp_prefix = ".tmp-";

// A file name inside a snapshot: one plain path component, not the manifest.
bool valid_name(const std::string& n) {
  return !n.empty() && n[0] != '.' && n.find('/') == std::string::npos && n != manifest_name;
}

struct hashed {
  std::string sha256_hex;
  std::uint64_t bytes = 0;
};

// Streams the file through SHA-256; with `sync`, fsyncs it first.
result<hashed> hash_file(const std::string& path, bool sync) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  if (sync && files::fsync_fd(fd) != 0) {
    auto e = files::errno_error("fsync", path);
    ::close(fd);
    return e;
  }
  crypto::sha256_stream s;
  hashed h;
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      auto e = files::errno_error("read", path);
      ::close(fd);
      return e;
    }
    if (n == 0) break;
    s.update(buf.data(), static_cast<std::size_t>(n));
    h.bytes += static_cast<std::uint64_t>(n);
  }
  ::close(fd);
  h.sha256_hex = crypto::to_hex(crypto::as_view(s.finish()));
  return h;
}

// The signed bytes: the manifest without "signature", compact, keys sorted.
std::string signature_hex(const json& manifest, std::string_view key) {
  json body = manifest;
  body.erase("signature");
  return crypto::to_hex(crypto::as_view(crypto::hmac_sha256(key, body.dump())));
}

std::optional<std::uint64_t> read_latest(const std::string& root) {
  auto text = files::read_file(root + "/LATEST");
  if (!text) return std::nullopt;
  std::string s = *text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return parse_step_dir(s);
}

// Published steps at or below LATEST (or all, without a valid LATEST), newest first.
std::vector<std::uint64_t> candidate_steps(const std::string& root, std::vector<std::string>* warnings) {
  std::vector<std::uint64_t> steps;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(root, ec))
    if (auto s = parse_step_dir(d.path().filename().string()); s && d.is_directory(ec)) steps.push_back(*s);
  std::sort(steps.rbegin(), steps.rend());
  auto latest = read_latest(root);
  if (!latest || std::find(steps.begin(), steps.end(), *latest) == steps.end()) {
    if (warnings && !steps.empty())
      warnings->push_back(root + "/LATEST is missing, invalid or names no snapshot; starting from the highest step " +
                          step_dir_name(steps.front()));
    return steps;
  }
  std::vector<std::uint64_t> out;
  for (auto s : steps) {
    if (s <= *latest) out.push_back(s);
    else if (warnings) warnings->push_back(step_dir_name(s) + " is newer than LATEST (never committed); ignored");
  }
  return out;
}

// Rename first so a crash mid-delete never leaves a half-deleted snapshot
// that looks published (research/reliability.md §1.2).
status remove_dir(const std::string& root, const std::string& name) {
  std::string trash = root + "/.trash-" + name;
  std::error_code ec;
  fs::remove_all(trash, ec);
  if (::rename((root + "/" + name).c_str(), trash.c_str()) != 0) return files::errno_error("rename for deletion", root + "/" + name);
  fs::remove_all(trash, ec);
  if (ec) return make_error(errc::internal, "remove " + trash + ": " + ec.message());
  return {};
}

}  // namespace

std::optional<std::uint64_t> parse_step_dir(std::string_view name) {
  if (name.substr(0, 5) != "step-" || name.size() == 5 || name.size() > 5 + 19) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

std::string step_dir_name(std::uint64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%06llu", static_cast<unsigned long long>(step));
  return buf;
}

status snapshot_writer::begin(const std::string& root, std::uint64_t step) {
  root_ = root;
  step_ = step;
  tmp_dir_ = root + "/" + std::string(tmp_prefix) + step_dir_name(step);
  names_.clear();
  sealed_.clear();
  open_ = false;
  if (auto s = files::make_dirs(root); !s) return s;
  std::error_code ec;
  fs::remove_all(tmp_dir_, ec);  // a stale attempt at this step from a crashed run
  if (ec) return make_error(errc::internal, "remove stale " + tmp_dir_ + ": " + ec.message());
  if (::mkdir(tmp_dir_.c_str(), 0755) != 0) return files::errno_error("mkdir", tmp_dir_);
  open_ = true;
  return {};
}

status snapshot_writer::add_file(const std::string& name, std::string_view bytes) {
  if (!open_) return make_error(errc::invalid_argument, "snapshot_writer::add_file before begin");
  if (!valid_name(name)) return make_error(errc::invalid_argument, "invalid snapshot file name '" + name + "'");
  if (auto s = atrest::write_object(tmp_dir_ + "/" + name, bytes, seal_, seal_now_); !s) return s;
  if (auto s = add_existing(name); !s) return s;
  if (seal_) sealed_[name] = {crypto::sha256_hex(bytes), bytes.size()};
  return {};
}

status snapshot_writer::add_sealed(const std::string& name, const std::string& sha256_hex, std::uint64_t bytes) {
  if (!seal_) return make_error(errc::invalid_argument, "snapshot_writer::add_sealed without seal_with keys");
  if (auto s = add_existing(name); !s) return s;
  if (!atrest::is_sealed_file(tmp_dir_ + "/" + name)) {
    names_.pop_back();
    return make_error(errc::invalid_argument, tmp_dir_ + "/" + name + " is not sealed");
  }
  sealed_[name] = {sha256_hex, bytes};
  return {};
}

status snapshot_writer::add_existing(const std::string& name) {
  if (!open_) return make_error(errc::invalid_argument, "snapshot_writer::add_existing before begin");
  if (!valid_name(name)) return make_error(errc::invalid_argument, "invalid snapshot file name '" + name + "'");
  if (std::find(names_.begin(), names_.end(), name) != names_.end())
    return make_error(errc::already_exists, "file '" + name + "' already added to " + tmp_dir_);
  std::error_code ec;
  if (!fs::is_regular_file(tmp_dir_ + "/" + name, ec))
    return make_error(errc::not_found, "no regular file " + tmp_dir_ + "/" + name);
  names_.push_back(name);
  return {};
}

result<std::string> snapshot_writer::publish(std::string_view key, std::int64_t created_unix) {
  if (!open_) return make_error(errc::invalid_argument, "snapshot_writer::publish before begin");
  if (key.empty()) return make_error(errc::invalid_argument, "empty manifest signing key");
  json m = {{"format", manifest_format}, {"step", step_}, {"created_unix", created_unix}, {"files", json::object()}};
  for (const auto& n : names_) {
    const std::string path = tmp_dir_ + "/" + n;
    if (seal_) {
      // A file the caller wrote itself is sealed in place here (write_object
      // publishes it durably); add_file sealed its own already.
      auto it = sealed_.find(n);
      if (it == sealed_.end()) {
        auto plain = files::read_file(path);
        if (!plain) return make_error(errc::internal, plain.err().message);
        it = sealed_.emplace(n, file_entry{crypto::sha256_hex(*plain), plain->size()}).first;
        if (auto st = atrest::write_object(path, *plain, seal_, seal_now_); !st)
          return make_error(errc::internal, st.err().message);
      }
      m["files"][n] = {{"sha256", it->second.sha256_hex}, {"bytes", it->second.bytes}, {"sealed", true}};
      continue;
    }
    auto h = hash_file(path, /*sync=*/true);
    if (!h) return make_error(errc::internal, h.err().message);
    m["files"][n] = {{"sha256", h->sha256_hex}, {"bytes", h->bytes}};
  }
  m["signature"] = signature_hex(m, key);
  if (auto s = files::write_atomic(tmp_dir_ + "/" + std::string(manifest_name), m.dump(2) + "\n"); !s)
    return make_error(errc::internal, s.err().message);
  if (auto s = files::fsync_dir(tmp_dir_); !s) return make_error(errc::internal, s.err().message);

  const std::string name = step_dir_name(step_);
  const std::string final_dir = root_ + "/" + name;
  std::error_code ec;
  if (fs::exists(final_dir, ec)) {
    auto latest = read_latest(root_);
    // A step renamed into place but never committed by LATEST (crash in
    // between) is replaced; a committed one is never overwritten.
    if (latest && *latest < step_) {
      if (auto s = remove_dir(root_, name); !s) return s.err();
    } else {
      return make_error(errc::already_exists, "snapshot " + final_dir + " already published");
    }
  }
  if (::rename(tmp_dir_.c_str(), final_dir.c_str()) != 0) return files::errno_error("rename to", final_dir);
  open_ = false;
  if (auto s = files::fsync_dir(root_); !s) return make_error(errc::internal, s.err().message);
  if (auto s = files::write_atomic(root_ + "/LATEST", name + "\n"); !s) return make_error(errc::internal, s.err().message);
  return final_dir;
}

namespace {
// A file the signed manifest lists as sealed: it must be sealed (not a plain
// file put in its place), unseal with the process's keys (every tag), and its
// plaintext must have the listed hash and size and, for .safetensors, parse.
// The problem, "" when it checks.
std::string check_sealed(const std::string& path, const std::string& label, const file_entry& want) {
  const std::string expected = ": expected sha256 " + want.sha256_hex + " (" + std::to_string(want.bytes) + " bytes)";
  std::error_code ec;
  if (!fs::exists(path, ec)) return label + ": missing" + expected;
  if (!atrest::is_sealed_file(path))
    return label + ": is not sealed at rest, but the signed manifest says it was written sealed" + expected;
  // Streamed chunk by chunk: hashed as it is unsealed, and a safetensors
  // file's header kept to check, never the whole file in memory.
  const bool tensors = label.ends_with(".safetensors");
  crypto::sha256_stream hash;
  std::uint64_t total = 0, want_head = 8;
  std::string head;
  auto st = atrest::read_object_stream(path, [&](std::string_view piece) {
    hash.update(piece.data(), piece.size());
    total += piece.size();
    while (tensors && !piece.empty() && head.size() < want_head) {
      const auto k = static_cast<std::size_t>(std::min<std::uint64_t>(piece.size(), want_head - head.size()));
      head.append(piece.substr(0, k));
      piece.remove_prefix(k);
      if (want_head == 8 && head.size() == 8) want_head = safetensors_head_bytes(head);
    }
    return ok_status();
  });
  if (!st) return label + ": " + st.err().message;
  const std::string got = crypto::to_hex(crypto::as_view(hash.finish()));
  if (got != want.sha256_hex || total != want.bytes)
    return label + ": sha256 mismatch: expected " + want.sha256_hex + " actual " + got + " (bytes expected " +
           std::to_string(want.bytes) + " actual " + std::to_string(total) + ")";
  if (tensors)
    if (auto c = check_safetensors_head(head, total, path); !c) return label + ": " + c.err().message;
  return "";
}

// The signed manifest of `dir` for `step` into `m`; the problem when it is not one ("" when it is).
std::string signed_manifest(const std::string& dir, std::uint64_t step, std::string_view key, json& m) {
  const std::string label = fs::path(dir).filename().string();
  const std::string mpath = dir + "/" + std::string(manifest_name);
  auto text = files::read_file(mpath);
  if (!text) return label + ": " + std::string(manifest_name) + " unreadable: " + text.err().message;
  m = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_object()) return label + ": " + std::string(manifest_name) + " is not a JSON object";
  if (!m.contains("signature") || !m["signature"].is_string())
    return label + ": " + std::string(manifest_name) + " has no signature";
  const std::string expected_sig = signature_hex(m, key);
  const std::string actual_sig = m["signature"].get<std::string>();
  if (!crypto::constant_time_equal(expected_sig, actual_sig))
    return label + ": " + std::string(manifest_name) + " signature mismatch: expected hmac-sha256 " + expected_sig +
           " actual " + actual_sig;
  // Signed from here on; schema errors mean a writer bug or a different format.
  // (json::value("format", "") would throw on a "format" that is not a string.)
  const auto format = m.find("format");
  if (format == m.end() || !format->is_string() || format->get<std::string>() != manifest_format ||
      !m.contains("step") || !m["step"].is_number_unsigned() || !m.contains("files") || !m["files"].is_object())
    return label + ": " + std::string(manifest_name) + " has an unknown format";
  if (m["step"].get<std::uint64_t>() != step)
    return label + ": " + std::string(manifest_name) + " is for step " + std::to_string(m["step"].get<std::uint64_t>());
  return "";
}
}  // namespace

std::string verify_manifest(const std::string& dir, std::uint64_t step, std::string_view key) {
  json m;
  return signed_manifest(dir, step, key, m);
}

std::vector<std::string> verify_snapshot(const std::string& dir, std::uint64_t step, std::string_view key,
                                         loaded_snapshot* out) {
  const std::string label = fs::path(dir).filename().string();
  json m;
  if (auto problem = signed_manifest(dir, step, key, m); !problem.empty()) return {problem};

  std::vector<std::string> problems;
  std::map<std::string, file_entry> listed;
  for (auto it = m["files"].begin(); it != m["files"].end(); ++it) {
    const std::string& n = it.key();
    const json& e = *it;
    if (!valid_name(n) || !e.is_object() || !e.contains("sha256") || !e["sha256"].is_string() || !e.contains("bytes") ||
        !e["bytes"].is_number_unsigned()) {
      problems.push_back(label + "/" + n + ": malformed manifest entry");
      continue;
    }
    file_entry want{e["sha256"].get<std::string>(), e["bytes"].get<std::uint64_t>()};
    if (e.contains("sealed")) {
      if (!e["sealed"].is_boolean() || !e["sealed"].get<bool>()) {
        problems.push_back(label + "/" + n + ": malformed manifest entry");
        continue;
      }
      if (auto p = check_sealed(dir + "/" + n, label + "/" + n, want); !p.empty()) {
        problems.push_back(std::move(p));
        continue;
      }
      listed.emplace(n, std::move(want));
      continue;
    }
    auto got = hash_file(dir + "/" + n, /*sync=*/false);
    if (!got) {
      problems.push_back(label + "/" + n + ": " + (got.code() == errc::not_found ? "missing" : got.err().message) +
                         ": expected sha256 " + want.sha256_hex + " (" + std::to_string(want.bytes) + " bytes)");
      continue;
    }
    if (got->sha256_hex != want.sha256_hex || got->bytes != want.bytes) {
      problems.push_back(label + "/" + n + ": sha256 mismatch: expected " + want.sha256_hex + " actual " +
                         got->sha256_hex + " (bytes expected " + std::to_string(want.bytes) + " actual " +
                         std::to_string(got->bytes) + ")");
      continue;
    }
    // Hashes can only vouch for what was written; the parser must accept it too.
    if (n.ends_with(".safetensors"))
      if (auto s = check_safetensors(dir + "/" + n); !s) problems.push_back(label + "/" + n + ": " + s.err().message);
    listed.emplace(n, std::move(want));
  }
  if (problems.empty() && out) {
    out->step = step;
    out->dir = dir;
    out->files = std::move(listed);
  }
  return problems;
}

result<loaded_snapshot> load_latest(const std::string& root, std::string_view key) {
  loaded_snapshot snap;
  auto steps = candidate_steps(root, &snap.warnings);
  if (steps.empty()) return make_error(errc::not_found, "no snapshot under " + root);
  for (auto step : steps) {
    auto problems = verify_snapshot(root + "/" + step_dir_name(step), step, key, &snap);
    if (problems.empty()) return snap;
    snap.warnings.push_back("REFUSED snapshot " + step_dir_name(step) + "; falling back to the previous one");
    snap.warnings.insert(snap.warnings.end(), problems.begin(), problems.end());
  }
  std::string msg = "no snapshot under " + root + " verifies:";
  for (const auto& w : snap.warnings) msg += "\n  " + w;
  return make_error(errc::corruption, msg);
}

status retain(const std::string& root, std::size_t keep, std::string_view key) {
  if (keep == 0) return make_error(errc::invalid_argument, "retain: keep must be at least 1");
  std::error_code ec;
  std::vector<std::string> stale;
  for (const auto& d : fs::directory_iterator(root, ec)) {
    std::string n = d.path().filename().string();
    if (n.starts_with(tmp_prefix) || n.starts_with(".trash-")) stale.push_back(n);
  }
  if (ec) return make_error(ec == std::errc::no_such_file_or_directory ? errc::not_found : errc::internal,
                            "list " + root + ": " + ec.message());
  for (const auto& n : stale) {
    if (n.starts_with(tmp_prefix)) {
      if (auto s = remove_dir(root, n); !s) return s;
    } else {
      fs::remove_all(root + "/" + n, ec);  // a deletion interrupted by a crash
    }
  }

  auto steps = candidate_steps(root, nullptr);
  auto latest = read_latest(root);
  std::size_t verified = 0;
  for (auto step : steps) {
    if (verified < keep) {
      if (verify_snapshot(root + "/" + step_dir_name(step), step, key).empty()) ++verified;
      continue;
    }
    if (latest && *latest == step) continue;
    if (auto s = remove_dir(root, step_dir_name(step)); !s) return s;
  }
  return files::fsync_dir(root);
}

}  // namespace loom::ckpt
