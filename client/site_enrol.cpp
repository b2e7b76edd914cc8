// `loom site enrol`: an edge site's data dir joins a cloud instance (issue 15
// item 1). Run on the site's machine against its own data dir:
//
//   1. the token names the cloud scheduler's CURVE key: that is the key this
//      first connection trusts (nothing is trusted on first use);
//   2. the site's keys are created if missing (as `loom up` does);
//   3. EnrolSiteRequest {site, token, every keys/curve/*.pub} goes to the
//      cloud scheduler, presenting the site's client key, which the cloud does
//      not know yet (it admits it as "unenrolled", for this request only);
//   4. the reply's cloud keys go to <data>/keys/cloud/<service>.pub, its
//      bearer token to <data>/keys/cloud/token, and its endpoints and zone to
//      <data>/cloud.json, for `loom up --site` (launcher.cpp, which enrols
//      through enrol_site when cloud.json is missing and --enrol-token is given).
//
// Sent once, never retried: the token is one-time, so a lost reply is said
// to be one (ask for a new token) rather than answered "used already".
#include "client/cli.hpp"
#include "client/lifecycle.hpp"
#include "client/site_enrol.hpp"

#include "libs/auth/site_token.hpp"
#include "libs/files/files.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/endpoint.hpp"
#include "loom/v1/sites.pb.h"

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace loom::cli {
namespace {
using nlohmann::json;

// A site already enrolled elsewhere is not silently moved to another name.
status check_previous(const layout::paths& p, const std::string& site) {
  auto text = files::read_file(p.cloud());
  if (!text) return text.code() == errc::not_found ? ok_status() : status(text.err());
  auto j = json::parse(*text, nullptr, false);
  if (!j.is_object()) return make_error(errc::corruption, p.cloud() + ": not JSON");
  const auto was = j.value("site", "");
  if (!was.empty() && was != site)
    return make_error(errc::conflict, p.root + " is enrolled as site " + was + " already (" + p.cloud() +
                                          "); a data dir is one site");
  return ok_status();
}

status save_cloud(const layout::paths& p, const loom::v1::EnrolSiteReply& rep, const std::string& cloud_ep) {
  if (auto st = files::make_dirs(p.cloud_keys_dir(), 0700); !st) return st;
  json services = json::object();
  for (const auto& s : rep.services()) {
    if (!wire::valid_z85_key(s.public_key()) || s.name().empty() || s.name().find('/') != std::string::npos ||
        s.name().find('.') != std::string::npos)
      return make_error(errc::invalid_argument, "the cloud answered a bad key or name for service " + s.name());
    if (auto st = files::write_atomic(p.cloud_keys_dir() + "/" + s.name() + ".pub", s.public_key() + "\n", 0600); !st)
      return st;
    services[s.name()] = {{"endpoint", s.endpoint()}, {"pull", s.pull()}};
  }
  if (!rep.token().empty())  // the site's bearer token for the cloud's services (layout::reach)
    if (auto st = files::write_atomic(p.cloud_token(), rep.token() + "\n", 0600); !st) return st;
  json doc = {{"version", 1}, {"site", rep.site()}, {"cloud_zone", rep.cloud_zone()}, {"cloud", cloud_ep},
              {"services", services}};
  return files::write_atomic(p.cloud(), doc.dump(2) + "\n", 0600);
}

// Whether a TCP connection to tcp://HOST:PORT opens within `wait`: "" when it
// does, else why not (refused, no route, timed out, unknown host).
std::string tcp_probe(const std::string& endpoint, std::chrono::milliseconds wait) {
  const std::string hp = endpoint.substr(endpoint.find("://") + 3);
  const auto colon = hp.rfind(':');
  const std::string host = hp.substr(0, colon), port = hp.substr(colon + 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) return "unknown host: " + std::string(::gai_strerror(rc));
  std::string why = "no address";
  for (auto* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(wait.count())) == 1) {
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      } else {
        err = ETIMEDOUT;
      }
    }
    ::close(fd);
    if (err == 0) {
      ::freeaddrinfo(res);
      return "";
    }
    why = std::strerror(err);
  }
  ::freeaddrinfo(res);
  return why;
}

result<loom::v1::EnrolSiteReply> send_enrolment(context& c, const std::string& endpoint, const std::string& cloud_key,
                                                const loom::v1::EnrolSiteRequest& req) {
  auto mine = wire::load_keypair(c.paths.curve_dir(), "client");
  if (!mine) return mine.err();
  wire::client cli(*c.zmq, endpoint, cloud_key, *mine, wire::client_options{c.timeout, 0});
  wire::request r;
  r.type = req.GetDescriptor()->full_name();
  r.body = req.SerializeAsString();  // no bearer token: the enrolment token in the body is the credential
  auto rep = cli.call(std::move(r));
  if (!rep) {
    // Nothing listens there, or something does that is not the cloud the
    // token names (CURVE: a server with another key never completes the handshake).
    if (auto why = tcp_probe(endpoint, std::chrono::milliseconds(2000)); !why.empty())
      return make_error(errc::unavailable, "--cloud " + endpoint + " cannot be reached: " + why +
                                               " (check the address, the route and the cloud's firewall for its --ports)");
    return make_error(errc::invalid_argument,
                      "--cloud " + endpoint + " answers, but not as the cloud scheduler the enrolment token names (its "
                      "CURVE key differs, or it is another service): the wrong --cloud, or a token of another cloud. "
                      "If it was the right cloud and it did get the request, the token is used: ask for a new one");
  }
  if (!rep->ok()) return make_error(rep->code, "cloud scheduler: " + rep->message);
  loom::v1::EnrolSiteReply out;
  if (rep->type != out.GetDescriptor()->full_name() || !out.ParseFromString(rep->body))
    return make_error(errc::internal, "the cloud scheduler answered with " + rep->type);
  return out;
}

}  // namespace

status check_enrol_options(const std::string& site, const std::string& endpoint, const std::string& token_text) {
  if (auto st = auth::validate_site_name(site); !st) return make_error(errc::invalid_argument, "--site: " + st.err().message);
  if (!wire::valid_tcp_endpoint(endpoint, wire::endpoint_use::connect))
    return make_error(errc::invalid_argument, "--cloud " + endpoint + " is not tcp://HOST:PORT");
  if (auto token = auth::parse_enrol_token(token_text); !token)
    return make_error(errc::invalid_argument, "--enrol-token: " + token.err().message);
  return ok_status();
}

result<enrolment> enrol_site(context& c, const std::string& site, const std::string& endpoint,
                             const std::string& token_text, const caller& admin) {
  if (auto st = check_enrol_options(site, endpoint, token_text); !st) return st.err();
  auto token = auth::parse_enrol_token(token_text);
  if (!token) return token.err();
  auto cloud_key = wire::key_z85(token->cloud_key_raw);
  if (!cloud_key) return cloud_key.err();
  if (auto st = check_previous(c.paths, site); !st) return st.err();
  auto own = wire::load_allow_list(c.paths.curve_dir());
  if (!own) return own.err();

  loom::v1::EnrolSiteRequest req;
  req.set_site(site);
  req.set_token(token_text);
  for (const auto& [key, name] : *own) (*req.mutable_public_keys())[name] = key;
  if (c.a.get("timeout") == std::nullopt) c.timeout = std::chrono::milliseconds(10000);
  auto rep = send_enrolment(c, endpoint, *cloud_key, req);
  if (!rep) {
    audit_local(c, {"site.enrol", admin, audit::decision::error, rep.err().message, "site " + site + " at " + endpoint});
    return rep.err();
  }
  if (auto st = save_cloud(c.paths, *rep, endpoint); !st) return st.err();
  audit_local(c, {"site.enrol", admin, audit::decision::allow, "", "site " + site + " at " + endpoint});
  enrolment out{rep->site(), rep->cloud_zone(), {}};
  for (const auto& s : rep->services()) out.services.push_back(s.name());
  return out;
}

int cmd_site_enrol(context& c) {
  const std::string site = *c.a.get("site"), endpoint = *c.a.get("cloud");
  // A malformed option is a usage error; whatever the cloud answers is not (a refusal: exit 3).
  if (auto st = check_enrol_options(site, endpoint, *c.a.get("enrol-token")); !st)
    return usage("loom site enrol: " + printable(st.err().message));
  ::umask(077);
  if (auto st = files::make_dirs(c.paths.root, 0700); !st) return fail(c, st.err());
  if (auto st = ensure_keys(c.paths); !st) return fail(c, st.err());
  auto admin = require_admin(c, "loom site enrol");
  if (!admin) return fail(c, admin.err());
  auto done = enrol_site(c, site, endpoint, *c.a.get("enrol-token"), *admin);
  if (!done) return fail(c, done.err());
  if (c.json) {
    print_json({{"site", done->site}, {"cloud_zone", done->cloud_zone}, {"cloud", endpoint},
                {"services", done->services}, {"cloud_json", c.paths.cloud()}});
  } else {
    std::printf("enrolled %s as site %s of the cloud at %s (zone %s); its keys are in %s\n",
                printable(c.paths.root).c_str(), printable(done->site).c_str(), printable(endpoint).c_str(),
                printable(done->cloud_zone).c_str(), printable(c.paths.cloud_keys_dir()).c_str());
  }
  return ok_exit;
}

}  // namespace loom::cli
