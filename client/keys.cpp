// `loom keys init [--force]`, `loom token issue|revoke-all`: the deployment's
// secrets. Creating and checking the keys is key_setup.cpp's; here are the
// commands. `keys init --force` (re-creates damaged or missing keys) and
// `token revoke-all` are admin-only lifecycle operations, audited locally
// (lifecycle.hpp).
#include "client/cli.hpp"
#include "libs/status/unix_time.hpp"
#include "client/dir_lock.hpp"
#include "client/key_setup.hpp"
#include "client/keys_import.hpp"
#include "client/lifecycle.hpp"
#include "client/typed_call.hpp"

#include "libs/auth/identity.hpp"
#include "libs/auth/token.hpp"
#include "libs/files/files.hpp"
#include "libs/wire/curve.hpp"
#include "loom/v1/audit.pb.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::cli {
namespace {

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(loom::wall_now().time_since_epoch())
      .count();
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ','))
    if (!part.empty()) out.push_back(part);
  return out;
}

result<std::string> admin_key(const layout::paths& p) {
  auto key = auth::load_token_key(p.token_key());
  if (!key)
    return make_error(errc::permission_denied, "this needs the admin key " + p.token_key() + ": " + key.err().message);
  return key;
}

}  // namespace

int cmd_keys(context& c) {
  auto& pos = c.a.positional;
  if (pos.size() >= 2 && pos[1] == "rotate") return cmd_keys_rotate(c);
  if (pos.size() >= 2 && pos[1] == "status") return cmd_keys_status(c);
  if (pos.size() >= 2 && pos[1] == "import") {
    ::umask(077);
    const std::string from = c.a.get("from").value_or("");
    auto got = import_keys(from, c.paths.root + "/keys");
    audit_local(c, {"loom.keys.import", presented_caller(c), got ? audit::decision::allow : audit::decision::error,
                    got ? "" : got.err().message, "from " + from});
    if (!got) return fail(c, got.err());
    if (c.json) {
      print_json({{"keys", c.paths.root + "/keys"}, {"imported", *got}});
    } else {
      std::printf("%zu key files from %s into %s/keys\n", got->size(), printable(from).c_str(),
                  printable(c.paths.root).c_str());
    }
    return ok_exit;
  }
  if (pos.size() < 2 || pos[1] != "init")
    return usage("usage: loom keys init [--force] | loom keys rotate | loom keys status | loom keys import --from DIR "
                 "[--data-dir D]");
  ::umask(077);
  if (!c.a.flag("force")) {
    if (auto st = ensure_keys(c.paths); !st) {
      audit_local(c, {"loom.keys.init", presented_caller(c), audit::decision::error, st.err().message, ""});
      return fail(c, st.err());
    }
    audit_local(c, {"loom.keys.init", presented_caller(c), audit::decision::allow, "", "keys in " + c.paths.root});
    if (c.json)
      print_json({{"keys", c.paths.root + "/keys"}, {"admin_token", c.paths.admin_token()}});
    else
      std::printf("keys in %s/keys, admin token in %s\n", printable(c.paths.root).c_str(),
                  printable(c.paths.admin_token()).c_str());
    return ok_exit;
  }
  // --force: only on a stopped deployment (running services hold the old keys),
  // and only by the admin when there is an admin key to check against.
  if (auto st = files::make_dirs(c.paths.root, 0700); !st) return fail(c, st.err());
  auto lock = dir_lock::take(c.paths, "keys");
  if (!lock)
    return fail(c, make_error(errc::conflict,
                              lock.err().message + "; run `loom down` before `loom keys init --force`"));
  caller who = presented_caller(c);
  if (auto key = auth::load_token_key(c.paths.token_key()); key || key.code() == errc::permission_denied) {
    auto admin = require_admin(c, "loom keys init --force");
    if (!admin) {
      audit_local(c, {"loom.keys.init", who, audit::decision::deny, admin.err().message, "--force"});
      return fail(c, admin.err());
    }
    who = *admin;
  }
  who.role = "admin";
  auto notes = recreate_keys(c.paths);
  if (!notes) {
    audit_local(c, {"loom.keys.init", who, audit::decision::error, notes.err().message, "--force"});
    return fail(c, notes.err());
  }
  std::string done;
  for (const auto& n : *notes) done += (done.empty() ? "" : "; ") + n;
  audit_local(c, {"loom.keys.init", who, audit::decision::allow, "", "--force: " + (done.empty() ? "nothing" : done)});
  if (c.json) {
    print_json({{"keys", c.paths.root + "/keys"}, {"recreated", *notes}});
  } else if (notes->empty()) {
    std::printf("every key in %s/keys is intact: nothing re-created\n", printable(c.paths.root).c_str());
  } else {
    for (const auto& n : *notes) std::printf("%s\n", printable(n).c_str());
  }
  return ok_exit;
}

int cmd_token(context& c) {
  auto& pos = c.a.positional;
  std::string sub = pos.size() > 1 ? pos[1] : "";
  if (sub == "issue") {
    auto role_name = c.a.get("role");
    auto r = role_name ? auth::role_from_string(*role_name) : std::nullopt;
    if (!r)
      return usage("usage: loom token issue --role viewer|operator|admin [--zones Z1,Z2|*] [--ttl SECONDS] "
                   "[--principal P] [--tenant T] [--offline]");
    auto zones = split_commas(c.a.get_or("zones", "*"));
    const auto ttl = static_cast<long long>(c.a.number("ttl").value_or(3600));  // 1..365 days: the table's range
    if (zones.empty() || ttl <= 0) return usage("loom token issue: --zones needs at least one zone and --ttl a positive number");
    auto now = unix_now();
    std::string principal = c.a.get_or("principal", std::string(auth::to_string(*r)) + "-" + std::to_string(now));
    auth::claims cl{principal, *r, zones, now + ttl, 0, now, c.a.get_or("tenant", std::string(auth::default_tenant))};
    std::string tok;
    // A site's, a service's or the enrolment socket's principal is never issued
    // (identity.hpp); through the audit service it says so itself, audited.
    const auto issuable = auth::issuable_principal(principal);
    if (!c.a.flag("offline")) {
      // Through the audit service: the issue is an audited request.
      auto key = admin_key(c.paths);  // the caller must hold the admin key either way
      if (!key) return fail(c, key.err());
      loom::v1::IssueTokenRequest req;
      req.set_principal(principal);
      req.set_role(std::string(auth::to_string(*r)));
      for (auto& z : zones) req.add_zones(z);
      req.set_ttl_s(static_cast<std::uint64_t>(ttl));
      req.set_tenant(cl.tenant);
      auto rep = typed_call<loom::v1::IssueTokenReply>(c, "audit", req, 1);
      if (!rep) {
        if (rep.code() == errc::unavailable)
          return fail(c, make_error(errc::unavailable, rep.err().message +
                                                           " (tokens are issued through the audit service so the "
                                                           "issue is audited; `--offline` issues one locally, "
                                                           "audited through the local spool)"));
        return fail(c, rep.err());
      }
      tok = rep->token();
      cl.expires_unix_s = rep->expires_unix_s();
      cl.epoch = rep->epoch();
      if (!rep->tenant().empty()) cl.tenant = rep->tenant();
    } else {
      // Locally with the admin key: audited like the other local operations (lifecycle.hpp).
      ::umask(077);
      auto admin = require_admin(c, "loom token issue --offline");
      if (!admin) {
        audit_local(c, {"loom.token.issue_offline", presented_caller(c), audit::decision::deny,
                        admin.err().message, ""});
        return fail(c, admin.err());
      }
      if (!issuable.ok) {
        audit_local(c, {"loom.token.issue_offline", *admin, audit::decision::deny, issuable.why, ""});
        return fail(c, make_error(errc::permission_denied, issuable.why));
      }
      auto key = admin_key(c.paths);
      if (!key) return fail(c, key.err());
      auto epoch = auth::read_epoch(c.paths.epoch());
      cl.epoch = epoch ? *epoch : 0;
      auto issued = auth::issue_token(cl, *key);
      if (!issued) return fail(c, issued.err());
      tok = *issued;
      std::string zs;
      for (auto& z : zones) zs += (zs.empty() ? "" : ",") + z;
      audit_local(c, {"loom.token.issue_offline", *admin, audit::decision::allow, "",
                      "principal=" + principal + " role=" + std::string(auth::to_string(*r)) + " zones=" + zs +
                          " expires_unix_s=" + std::to_string(cl.expires_unix_s)});
      std::fprintf(stderr,
                   "warning: issued offline with the admin key, not through the audit service: the issue is "
                   "recorded in the local audit spool (%s) and stored once the audit service runs\n",
                   c.paths.spool("cli").c_str());
    }
    if (c.json)
      print_json({{"token", tok}, {"principal", cl.principal}, {"role", auth::to_string(*r)}, {"zones", zones},
                  {"tenant", cl.tenant}, {"expires_unix_s", cl.expires_unix_s}, {"epoch", cl.epoch}});
    else
      std::printf("%s\n", printable(tok).c_str());
    return ok_exit;
  }
  if (sub == "revoke-all") {
    ::umask(077);
    auto admin = require_admin(c, "loom token revoke-all");
    if (!admin) {
      audit_local(c, {"loom.token.revoke_all", presented_caller(c), audit::decision::deny, admin.err().message, ""});
      return fail(c, admin.err());
    }
    // The keys must be sound before anything changes: the new admin token is minted from them.
    if (auto st = ensure_keys(c.paths); !st) return fail(c, st.err());
    auto epoch = auth::read_epoch(c.paths.epoch());
    if (!epoch) return fail(c, epoch.err());
    // Recorded before the epoch moves: the record names the epoch revoked.
    audit_local(c, {"loom.token.revoke_all", *admin, audit::decision::allow, "",
                    "epoch " + std::to_string(*epoch) + " -> " + std::to_string(*epoch + 1)});
    if (auto st = auth::write_epoch(c.paths.epoch(), *epoch + 1); !st) return fail(c, st.err());
    // The bootstrap admin token is revoked too: mint a fresh one.
    ::unlink(c.paths.admin_token().c_str());
    if (auto st = ensure_keys(c.paths); !st) return fail(c, st.err());
    if (c.json)
      print_json({{"epoch", *epoch + 1}, {"admin_token", c.paths.admin_token()}});
    else
      std::printf("revoked every token before epoch %llu; new admin token in %s\n",
                  static_cast<unsigned long long>(*epoch + 1), printable(c.paths.admin_token()).c_str());
    return ok_exit;
  }
  return usage("usage: loom token issue --role R [--zones Z] [--ttl SECONDS] | loom token revoke-all");
}

}  // namespace loom::cli
