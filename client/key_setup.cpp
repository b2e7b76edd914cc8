// Creating and checking the deployment's keys (key_setup.hpp, ensure_keys in cli.hpp).
#include "client/key_setup.hpp"
#include "libs/status/unix_time.hpp"

#include "client/cli.hpp"

#include "libs/auditchain/keyring.hpp"
#include "libs/auth/token.hpp"
#include "libs/files/files.hpp"
#include "libs/wire/curve.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

namespace loom::cli {
namespace {
namespace fs = std::filesystem;

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(loom::wall_now().time_since_epoch())
      .count();
}

// The first admin token lives a year: it is the operator's bootstrap credential
// and is replaced with `loom token issue` / revoked with `loom token revoke-all`.
constexpr std::int64_t admin_token_ttl_s = 365LL * 24 * 3600;

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// The existing ones of `candidates`, comma-separated; "" when none exists.
std::string existing(const std::vector<std::string>& candidates) {
  std::string out;
  for (const auto& c : candidates)
    if (exists(c)) out += (out.empty() ? "" : ", ") + c;
  return out;
}

// What was signed with the token key: the tokens (admin.token, the epoch
// `loom token revoke-all` keeps) and the store that holds services' state.
std::string token_key_dependents(const layout::paths& p) {
  return existing({p.admin_token(), p.epoch(), p.store()});
}

// Signs that the deployment ran: its CURVE public keys are then known to its
// own processes' files and to other sites that sync with it.
std::string run_evidence(const layout::paths& p) {
  return existing({p.endpoints(), p.store(), p.root + "/logs"});
}

std::string curve_names_hint(const std::string& name) {
  return "clients and other sites that trust the old " + name + ".pub (their keys/peers/) must be given the new one";
}

// Secret files under keys/ that group or others may read (public keys and
// the epoch are not secret).
std::vector<std::string> exposed_secrets(const layout::paths& p) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(p.root + "/keys", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!it->is_regular_file(ec) || name.ends_with(".pub") || name.find(".pub.") != std::string::npos ||
        name == "epoch" || name.ends_with(".destroyed"))
      continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      out.push_back(it->path().string() + " (mode " + mode + ")");
    }
  }
  return out;
}

status refuse_exposed(const layout::paths& p) {
  auto bad = exposed_secrets(p);
  if (bad.empty()) return {};
  std::string list, paths;
  for (const auto& b : bad) {
    list += (list.empty() ? "" : ", ") + b;
    paths += " " + b.substr(0, b.find(" (mode"));
  }
  return make_error(errc::invalid_argument, "group or others can read secret key files: " + list +
                                                "; EdgeLoom refuses to start with them. Fix with: chmod 600" + paths);
}

// The root and keys/ private (an older `loom up` made the root 0755).
status make_private(const layout::paths& p) {
  for (const auto& dir : {p.root, p.root + "/keys", p.curve_dir()}) {
    if (auto st = files::make_dirs(dir, 0700); !st) return st;
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
      return files::errno_error("chmod 700", dir);
  }
  return {};
}

status mint_admin_token(const layout::paths& p, const std::string& key) {
  auto epoch = auth::read_epoch(p.epoch());
  auto now = unix_now();
  auth::claims c{"admin", auth::role::admin, {"*"}, now + admin_token_ttl_s, epoch ? *epoch : 0, now};
  auto tok = auth::issue_token(c, key);
  if (!tok) return tok.err();
  return files::write_atomic(p.admin_token(), *tok + "\n", 0600);
}

// admin.token was signed with `key` (expiry and revocation aside).
status admin_token_matches(const layout::paths& p, const std::string& key) {
  auto tok = files::read_file(p.admin_token());
  if (!tok) return tok.code() == errc::not_found ? status{} : status{tok.err()};
  std::string t = *tok;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  auto c = auth::verify_token(t, key, {0, 0});
  if (c) return {};
  return make_error(errc::corruption, p.admin_token() + " does not verify with " + p.token_key() + " (" +
                                          c.err().message + "): the token key was replaced, or admin.token damaged. "
                                          "Restore keys/token.key from a backup, or run `loom keys init --force` to "
                                          "write a new admin token");
}

status ensure_token_key(const layout::paths& p) {
  if (!exists(p.token_key())) {
    if (auto deps = token_key_dependents(p); !deps.empty())
      return make_error(errc::not_found,
                        p.token_key() + " is missing, but " + deps + " depend on it (every token was signed with it). "
                        "Restore it from a backup, or run `loom keys init --force` to create a new one: that "
                        "invalidates every token issued so far (a new admin token is written)");
    if (auto r = auth::create_token_key(p.token_key()); !r && r.code() != errc::already_exists) return r;
  }
  auto key = auth::load_token_key(p.token_key());
  if (!key) return key.err();
  if (auto st = admin_token_matches(p, *key); !st) return st;
  if (!exists(p.admin_token())) return mint_admin_token(p, *key);
  return {};
}

status ensure_curve_key(const layout::paths& p, const std::string& name) {
  const std::string key = p.curve_dir() + "/" + name + ".key", pub = p.curve_dir() + "/" + name + ".pub";
  if (!exists(key) && !exists(pub)) {
    if (auto ran = run_evidence(p); !ran.empty())
      return make_error(errc::not_found, key + " and " + name + ".pub are missing, but this deployment has run (" +
                                             ran + "). Restore both from a backup, or run `loom keys init --force` "
                                             "to create a new pair: " + curve_names_hint(name));
    return wire::save_keypair(p.curve_dir(), name, wire::generate_keypair());
  }
  if (!exists(key))
    return make_error(errc::not_found, key + " is missing (" + pub + " is there). Restore it from a backup, or run "
                                           "`loom keys init --force` to create a new pair: " + curve_names_hint(name));
  auto kp = wire::load_keypair(p.curve_dir(), name);
  if (!kp) {
    if (kp.code() == errc::permission_denied) return kp.err();
    return make_error(kp.code(), kp.err().message + ". Restore the pair from a backup, or run `loom keys init "
                                                    "--force`: it re-derives " + name + ".pub from an intact " +
                                                    name + ".key (nothing is invalidated), else creates a new pair");
  }
  if (!exists(pub))
    return make_error(errc::not_found, pub + " is missing. Restore it from a backup, or run `loom keys init "
                                           "--force` to re-derive it from " + name + ".key (nothing is invalidated)");
  return {};
}

status ensure_checkpoint_key(const layout::paths& p) {
  if (!exists(p.checkpoint_key())) {
    if (auto snap = layout::find_snapshot(p.jobs()); !snap.empty())
      return make_error(errc::not_found,
                        p.checkpoint_key() + " is missing, but checkpoints signed with it exist (" + snap +
                            "): a new key would make every one of them fail verification. Restore it from a backup, "
                            "or run `loom keys init --force` to create a new one (those checkpoints can then no "
                            "longer be resumed or sampled)");
    if (auto r = auth::create_token_key(p.checkpoint_key()); !r && r.code() != errc::already_exists) return r;
  }
  auto key = auth::load_token_key(p.checkpoint_key());
  if (!key) return make_error(key.code(), "checkpoint signing key: " + key.err().message);
  return {};
}

bool has_kek(const layout::paths& p) {
  std::error_code ec;
  for (fs::directory_iterator it(p.audit_keys(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("kek-", 0) == 0 && name.ends_with(".key")) return true;
  }
  return false;
}

// The audit service makes its key-encryption key when there is none; once the
// audit log holds payloads sealed under one (its anchor file exists), a new
// one would leave every one of them unreadable.
status ensure_audit_keys(const layout::paths& p) {
  if (!exists(p.audit_anchors()) || has_kek(p)) return {};
  return make_error(errc::not_found,
                    p.audit_keys() + " has no key-encryption key (kek-*.key), but the audit log (" +
                        p.audit_anchors() + ") holds payloads sealed under one: the audit service would make a new "
                        "one and those payloads would stay unreadable. Restore keys/audit/ from a backup, or run "
                        "`loom keys init --force` to start with a new one");
}

// Moves a damaged key file out of the way, kept for inspection.
status set_aside(const std::string& path) {
  if (!exists(path)) return {};
  const std::string to = path + ".replaced-" + std::to_string(unix_now());
  if (::rename(path.c_str(), to.c_str()) != 0) return files::errno_error("rename", path);
  return {};
}

std::vector<std::string> curve_names() {
  std::vector<std::string> names(layout::service_names.begin(), layout::service_names.end());
  names.push_back("client");
  return names;
}

}  // namespace

status ensure_keys(const layout::paths& p) {
  if (auto st = make_private(p); !st) return st;
  if (auto st = refuse_exposed(p); !st) return st;
  if (auto st = ensure_token_key(p); !st) return st;
  for (const auto& n : curve_names())
    if (auto st = ensure_curve_key(p, n); !st) return st;
  if (auto st = ensure_audit_keys(p); !st) return st;
  return ensure_checkpoint_key(p);
}

result<std::vector<std::string>> recreate_keys(const layout::paths& p) {
  std::vector<std::string> notes;
  if (auto st = make_private(p); !st) return st.err();
  if (auto st = refuse_exposed(p); !st) return st.err();

  auto token = auth::load_token_key(p.token_key());
  if (!token && token.code() == errc::permission_denied) return token.err();
  if (!token) {
    if (auto st = set_aside(p.token_key()); !st) return st.err();
    if (auto st = auth::create_token_key(p.token_key()); !st) return st.err();
    if (auto st = set_aside(p.admin_token()); !st) return st.err();
    notes.push_back("new token key " + p.token_key() + ": every token issued so far no longer verifies; a new admin "
                    "token is in " + p.admin_token() + " (issue the others again with `loom token issue`)");
  } else if (!admin_token_matches(p, *token)) {
    if (auto st = set_aside(p.admin_token()); !st) return st.err();
    notes.push_back(p.admin_token() + " did not verify with " + p.token_key() + ": a new admin token is written");
  }

  for (const auto& n : curve_names()) {
    const std::string key = p.curve_dir() + "/" + n + ".key", pub = p.curve_dir() + "/" + n + ".pub";
    auto kp = wire::load_keypair(p.curve_dir(), n);
    if (kp && exists(pub)) continue;
    if (!kp && kp.code() == errc::permission_denied) return kp.err();
    if (!kp && exists(pub)) {  // maybe only the public half is damaged
      if (auto st = set_aside(pub); !st) return st.err();
      kp = wire::load_keypair(p.curve_dir(), n);
    }
    if (kp) {
      if (auto st = files::write_atomic(pub, kp->public_z85 + "\n", 0644); !st) return st.err();
      notes.push_back(pub + " re-derived from " + n + ".key: the secret key is kept, nothing that trusts it is "
                      "invalidated");
      continue;
    }
    if (auto st = set_aside(key); !st) return st.err();
    if (auto st = wire::save_keypair(p.curve_dir(), n, wire::generate_keypair()); !st) return st.err();
    notes.push_back("new CURVE keypair " + key + ": " + curve_names_hint(n));
  }

  auto ckpt = auth::load_token_key(p.checkpoint_key());
  if (!ckpt && ckpt.code() == errc::permission_denied) return ckpt.err();
  if (!ckpt) {
    if (auto st = set_aside(p.checkpoint_key()); !st) return st.err();
    if (auto st = auth::create_token_key(p.checkpoint_key()); !st) return st.err();
    auto snap = layout::find_snapshot(p.jobs());
    notes.push_back("new checkpoint key " + p.checkpoint_key() +
                    (snap.empty() ? std::string(": no checkpoint existed")
                                  : ": checkpoints signed with the old key (such as " + snap +
                                        ") no longer verify; they cannot be resumed or sampled"));
  }
  if (exists(p.audit_anchors()) && !has_kek(p)) {
    auditchain::keyring_options ko;
    ko.create = true;
    auto kr = auditchain::keyring::open(p.audit_keys(), ko, loom::wall_now());
    if (!kr) return kr.err();
    notes.push_back("new audit key-encryption key in " + p.audit_keys() + ": audit payloads sealed under the lost "
                    "one stay unreadable (`loom audit trail` shows them without payload)");
  }
  if (auto st = ensure_keys(p); !st) return st.err();
  return notes;
}

}  // namespace loom::cli
