// `loom keys init`, `loom token issue|revoke-all`: the deployment's secrets.
// CURVE keypairs for each service and the client, the token (admin) key, and
// a first admin token; all secret files 0600 in a 0700 directory.
#include "client/cli.hpp"
#include "client/typed_call.hpp"

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
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The first admin token lives a year: it is the operator's bootstrap credential
// and is replaced with `loom token issue` / revoked with `loom token revoke-all`.
constexpr std::int64_t admin_token_ttl_s = 365LL * 24 * 3600;

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

status ensure_keys(const layout::paths& p) {
  if (auto st = files::make_dirs(p.root, 0755); !st) return st;
  if (auto st = files::make_dirs(p.curve_dir(), 0700); !st) return st;
  ::chmod((p.root + "/keys").c_str(), 0700);
  struct stat st {};
  if (::stat(p.token_key().c_str(), &st) != 0)
    if (auto r = auth::create_token_key(p.token_key()); !r && r.code() != errc::already_exists) return r;
  std::vector<std::string> names(layout::service_names.begin(), layout::service_names.end());
  names.push_back("client");
  for (const auto& n : names) {
    if (wire::load_keypair(p.curve_dir(), n)) continue;
    if (auto r = wire::save_keypair(p.curve_dir(), n, wire::generate_keypair()); !r) return r;
  }
  if (::stat(p.admin_token().c_str(), &st) != 0) {
    auto key = auth::load_token_key(p.token_key());
    if (!key) return key.err();
    auto epoch = auth::read_epoch(p.epoch());
    auto now = unix_now();
    auth::claims c{"admin", auth::role::admin, {"*"}, now + admin_token_ttl_s, epoch ? *epoch : 0, now};
    auto tok = auth::issue_token(c, *key);
    if (!tok) return tok.err();
    if (auto r = files::write_atomic(p.admin_token(), *tok + "\n", 0600); !r) return r;
  }
  return {};
}

int cmd_keys(context& c) {
  auto& pos = c.a.positional;
  if (pos.size() >= 2 && pos[1] == "rotate") return cmd_keys_rotate(c);
  if (pos.size() < 2 || pos[1] != "init") return usage("usage: loom keys init | loom keys rotate [--data-dir D]");
  if (auto st = ensure_keys(c.paths); !st) return fail(c, st.err());
  if (c.json)
    print_json({{"keys", c.paths.root + "/keys"}, {"admin_token", c.paths.admin_token()}});
  else
    std::printf("keys in %s/keys, admin token in %s\n", printable(c.paths.root).c_str(),
                printable(c.paths.admin_token()).c_str());
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
                                                           "issue is audited; `--offline` issues one locally, unaudited)"));
        return fail(c, rep.err());
      }
      tok = rep->token();
      cl.expires_unix_s = rep->expires_unix_s();
      cl.epoch = rep->epoch();
      if (!rep->tenant().empty()) cl.tenant = rep->tenant();
    } else {
      auto key = admin_key(c.paths);
      if (!key) return fail(c, key.err());
      auto epoch = auth::read_epoch(c.paths.epoch());
      cl.epoch = epoch ? *epoch : 0;
      auto issued = auth::issue_token(cl, *key);
      if (!issued) return fail(c, issued.err());
      tok = *issued;
      std::fprintf(stderr, "warning: issued offline with the admin key; this issue is not in the audit log\n");
    }
    if (c.json)
      print_json({{"token", tok}, {"principal", cl.principal}, {"role", auth::to_string(*r)}, {"zones", zones},
                  {"tenant", cl.tenant}, {"expires_unix_s", cl.expires_unix_s}, {"epoch", cl.epoch}});
    else
      std::printf("%s\n", printable(tok).c_str());
    return ok_exit;
  }
  if (sub == "revoke-all") {
    auto key = admin_key(c.paths);
    if (!key) return fail(c, key.err());
    auto epoch = auth::read_epoch(c.paths.epoch());
    if (!epoch) return fail(c, epoch.err());
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
