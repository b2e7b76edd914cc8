// Admin check and audit records of local lifecycle operations (lifecycle.hpp).
#include "client/lifecycle.hpp"
#include "libs/status/unix_time.hpp"

#include "client/procs.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/auth/token.hpp"
#include "libs/files/files.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/envelope.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace loom::cli {
namespace {
using clock = std::chrono::steady_clock;

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(loom::wall_now().time_since_epoch())
      .count();
}

std::string local_user() {
  const passwd* pw = ::getpwuid(::getuid());
  return "local:" + (pw && pw->pw_name ? std::string(pw->pw_name) : std::to_string(::getuid()));
}

// A token the caller chose to present (--token, $LOOM_TOKEN); "" for none.
std::string presented_token(const context& c) {
  if (auto t = c.a.get("token")) return *t;
  if (const char* e = std::getenv("LOOM_TOKEN"); e && *e) return e;
  return "";
}

// How long a second CLI process waits for the spool's lock (spool.hpp: one
// process per spool): the holder keeps it only for one record and its delivery.
constexpr auto spool_wait = std::chrono::seconds(10);

}  // namespace

result<caller> require_admin(const context& c, const std::string& what) {
  auto key = auth::load_token_key(c.paths.token_key());
  const std::string tok = presented_token(c);
  if (!key)
    return make_error(errc::permission_denied, what + " needs the admin key " + c.paths.token_key() +
                                                   (tok.empty() ? "" : " (to check the token presented)") + ": " +
                                                   key.err().message);
  if (tok.empty()) return caller{local_user(), "admin"};
  auto epoch = auth::read_epoch(c.paths.epoch());
  auto cl = auth::verify_token(tok, *key, {unix_now(), epoch ? *epoch : 0});
  if (!cl)
    return make_error(errc::permission_denied,
                      what + " needs an admin token; the token presented (--token or LOOM_TOKEN) is not valid: " +
                          cl.err().message);
  if (cl->r != auth::role::admin)
    return make_error(errc::permission_denied, what + " needs the admin role; the token presented is " +
                                                   cl->principal + "'s, role " + std::string(auth::to_string(cl->r)));
  return caller{cl->principal, "admin"};
}

result<caller> require_owner(const context& c, const std::string& what) {
  struct stat st {};
  const uid_t me = ::geteuid();
  if (::stat(c.paths.root.c_str(), &st) == 0 && st.st_uid != me && me != 0) {
    const passwd* pw = ::getpwuid(st.st_uid);
    return make_error(errc::permission_denied,
                      what + ": " + c.paths.root + " belongs to " +
                          (pw && pw->pw_name ? std::string(pw->pw_name) : "uid " + std::to_string(st.st_uid)) +
                          ", not to " + local_user().substr(6) + ": only its owner (or root) stops its processes");
  }
  return caller{local_user(), "owner"};
}

caller presented_caller(const context& c) {
  const std::string tok = presented_token(c);
  if (tok.empty()) return caller{local_user(), ""};
  // Unverified: the claims are only read to name who tried.
  if (auto key = auth::load_token_key(c.paths.token_key()))
    if (auto cl = auth::verify_token(tok, *key, {0, 0}))
      return caller{cl->principal, std::string(auth::to_string(cl->r))};
  return caller{local_user() + " (token not valid)", ""};
}

bool audit_local(context& c, const local_event& e, std::chrono::milliseconds deliver) {
  const layout::paths& p = c.paths;
  auto eps = layout::read_endpoints(p.endpoints());
  const layout::service_endpoint* audit = eps ? eps->find("audit") : nullptr;
  const bool running = audit && !audit->pull.empty() && is_process_of(static_cast<pid_t>(audit->pid), p.root, "audit");

  audit::emitter_options o;
  o.source = "cli@" + host_name();
  o.spool_dir = p.spool("cli");
  auto server = wire::load_public_key(p.curve_dir(), "audit");
  auto mine = wire::load_keypair(p.curve_dir(), "client");
  if (running && server && mine) {
    o.push_endpoint = audit->pull;
    o.rpc_endpoint = audit->rpc;
    if (const auto audits = eps->instances("audit"); audits.size() > 1)  // replicas: the leader's PULL
      for (const auto* a : audits) o.replicas.emplace_back(a->rpc, a->pull);
    o.server_public = *server;
    o.mine = *mine;
  } else {
    // Nothing to deliver to: the record waits in the spool for the next command that finds audit running.
    o.mine = wire::generate_keypair();
    o.server_public = o.mine.public_z85;
    o.push_endpoint = o.rpc_endpoint = "tcp://127.0.0.1:1";
  }
  const auto key = auth::load_token_key(p.token_key());
  o.token = [&] {
    if (!key) return std::string();
    auto epoch = auth::read_epoch(p.epoch());
    auth::claims cl{"svc:cli", auth::role::operator_, {"*"}, unix_now() + 600, epoch ? *epoch : 0, unix_now()};
    auto t = auth::issue_token(cl, *key);
    return t ? *t : std::string();
  };
  if (auto st = files::make_dirs(p.root + "/spool", 0700); !st) {
    std::fprintf(stderr, "warning: %s was not audited: %s\n", e.action.c_str(), st.err().to_string().c_str());
    return false;
  }
  auto until = clock::now() + spool_wait;
  auto em = audit::emitter::start(*c.zmq, o);
  while (!em && em.code() == errc::unavailable && clock::now() < until) {  // another loom command holds the spool
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    em = audit::emitter::start(*c.zmq, o);
  }
  if (!em) {
    std::fprintf(stderr, "warning: %s was not audited: %s\n", e.action.c_str(), em.err().to_string().c_str());
    return false;
  }
  audit::record r;
  r.principal = e.who.principal;
  r.role = e.who.role;
  r.zone = eps ? eps->zone : "local";
  r.action = e.action;
  r.request_id = wire::new_request_id();
  r.outcome = e.outcome;
  r.reason = e.reason;
  r.payload = e.payload;
  r.service = "cli";
  r.peer = local_user();
  (*em)->emit(std::move(r));
  bool durable = (*em)->wait_spooled(std::chrono::seconds(5));
  if (!durable) std::fprintf(stderr, "warning: the audit record of %s is not durable yet\n", e.action.c_str());
  if (running) (void)(*em)->wait_confirmed(deliver);
  return durable;
}

}  // namespace loom::cli
