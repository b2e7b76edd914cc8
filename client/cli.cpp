#include "client/cli.hpp"

#include "client/input.hpp"
#include "libs/auth/token.hpp"
#include "libs/files/files.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/curve.hpp"

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace loom::cli {

namespace {
// A token is a few hundred bytes; anything past this is not a token file.
constexpr std::uint64_t max_token_file = 64 << 10;
}  // namespace

context::context(args parsed) : a(std::move(parsed)), zmq(std::make_unique<zmq::context_t>(1)) {
  paths.root = files::resolve_data_dir(a.get_or("data-dir", ""));
  json = a.flag("json");
  if (auto t = a.duration("timeout")) timeout = *t;
}

context::~context() = default;

result<std::string> context::token() const {
  if (auto t = a.get("token")) return *t;
  if (const char* e = std::getenv("LOOM_TOKEN")) {
    // Empty is a mistake (an unset variable in a script), not "use the admin token".
    if (!*e) return make_error(errc::invalid_argument, "$LOOM_TOKEN is set but empty; unset it or pass --token");
    return std::string(e);
  }
  auto t = read_token_file(paths.admin_token());
  if (!t && t.code() == errc::not_found)
    return make_error(errc::unauthenticated, "no token: pass --token, set LOOM_TOKEN, or run `loom up` to create " +
                                                 paths.admin_token());
  return t;
}

result<std::string> context::token_for(const layout::service_reach& r) const {
  if (r.token_file.empty()) return token();
  if (a.get("token") || std::getenv("LOOM_TOKEN")) {
    auto t = token();
    if (!t) return t;
    // This deployment's own token (it verifies with keys/token.key: the site's
    // admin token in $LOOM_TOKEN, say) is a credential for its own services
    // and is never handed to the cloud's.
    if (auto key = auth::load_token_key(paths.token_key()))
      if (auth::verify_token(*t, *key, {0, 0}))
        return make_error(errc::invalid_argument,
                          "the token given (--token or $LOOM_TOKEN) is this site's own (it verifies with " +
                              paths.token_key() + "): it is not sent to the cloud's services; they take "
                              "the site's token (" + r.token_file + ", used when none is given) or one the "
                              "cloud's admin issued");
    return t;
  }
  auto t = read_token_file(r.token_file);
  if (!t && t.code() == errc::not_found)
    return make_error(errc::unauthenticated, "no " + r.token_file + ": this edge site holds no token for the cloud's "
                                                 "services (enrol it again: `loom site enrol`), or pass --token");
  return t;
}

result<std::string> read_token_file(const std::string& path) {
  auto f = read_capped(path, max_token_file, "a token file");
  if (!f) return f.err();
  std::string t = f->substr(0, f->find('\n'));
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.empty()) return make_error(errc::unauthenticated, path + " holds no token");
  return t;
}

result<wire::reply> context::call(const std::string& service, const std::string& type, const std::string& body,
                                  int retries, const std::string& request_id) {
  auto eps = layout::read_endpoints(paths.endpoints());
  if (!eps) return make_error(errc::unavailable, "EdgeLoom is not running in " + paths.root + " (run `loom up`)");
  const auto* ep = eps->find(service);
  if (!ep || ep->rpc.empty()) return make_error(errc::unavailable, service + " has no endpoint in " + paths.endpoints());
  // Extra instances (trainer-2) use their kind's keypair. An edge site
  // reaches the cloud's services with the cloud's keys and the site's token
  // (layout::reach, the one rule); its own client key is admitted there as
  // site:<site>:client.
  auto kind = layout::service_kind(service);
  if (kind.empty()) kind = service;
  const auto reach = layout::reach(paths, *eps, kind);
  const std::string who = reach.token_file.empty() ? service : "the cloud's " + service + " (" + ep->rpc + ")";
  auto server_key = wire::load_public_key(reach.key_dir, kind);
  if (!server_key) return make_error(server_key.code(), who + ": " + server_key.err().message);
  auto mine = wire::load_keypair(paths.curve_dir(), "client");
  if (!mine) return mine.err();
  auto tok = token_for(reach);
  if (!tok) return tok.err();
  wire::client cli(*zmq, pinned ? std::vector<std::string>{ep->rpc} : eps->rpc_targets(service), *server_key, *mine,
                   wire::client_options{timeout, retries});
  wire::request req;
  req.request_id = request_id;
  req.type = type;
  req.body = body;
  req.token = *tok;
  auto rep = cli.call(std::move(req));
  if (!rep) return make_error(rep.code(), who + ": " + rep.err().message);
  return rep;
}

int fail(const context& c, const error& e) {
  if (c.json) {
    print_json({{"error", {{"code", std::string(to_string(e.code))}, {"message", e.message}}}});
  } else {
    std::fprintf(stderr, "error: %s\n", printable_message(e.to_string()).c_str());
  }
  return loom::exit_code(e.code);
}

int usage(const std::string& text) {
  std::fprintf(stderr, "%s\n", text.c_str());
  return usage_exit;
}

}  // namespace loom::cli
