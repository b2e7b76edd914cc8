// Fuzzes edge-site enrolment (issue 15 item 1) on both ends of the wire.
//   byte 0 even: the rest is an EnrolSiteRequest body. It reaches the cloud
//     scheduler from a key nobody knows yet (token-free: the enrolment token
//     in the body is the credential), so it is the least trusted input of
//     the deployment. The target runs what the scheduler runs before its
//     store: the parse (runtime::parse_as, as its handler table does), the
//     site name, the token (parse_enrol_token, enrol_token_hash) and the
//     keys as site_registry::check_keys checks them (private: its rules are
//     composed here from the same library calls); then what an accepted
//     enrolment does with the keys: write_site_keys into keys/sites, which
//     every cloud service's admission reads back (admitted_keys), and the
//     site's bearer token the scheduler mints.
//   byte 0 odd: the rest is an EnrolSiteReply body, the answer `loom site
//     enrol` parses (wire::parse_body) and whose keys and endpoints it keeps.
// Checks: keys that pass the checks are written and admitted under exactly
// "site:<site>:<service>", which parse_peer reads back as that site and
// service; Z85 keys round-trip through their raw bytes; the site's token
// issues, verifies, and names the site.
#include "libs/auth/identity.hpp"
#include "libs/auth/site_token.hpp"
#include "libs/auth/token.hpp"
#include "libs/layout/layout.hpp"
#include "libs/runtime/admission.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "libs/runtime/site_keys.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/endpoint.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/sites.pb.h"
#include "tests/fuzz/fuzz_file.hpp"
#include "tests/fuzz/quiet_protobuf.hpp"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>

using namespace loom;

namespace {
constexpr std::size_t max_site_services = 16;  // services/scheduler/sites/site_registry.cpp
const std::string token_key(32, 't');           // the cloud's token key, as the target's own
constexpr std::int64_t now_s = 1'700'000'000;

void require(bool ok) {
  if (!ok) std::abort();  // a broken promise: libFuzzer saves the input
}

// A data dir with one key of the deployment's own (keys/curve), which no site may enrol.
struct fixture {
  layout::paths paths;
  std::string own_key;
  fixture() {
    paths.root = fuzz::scratch_dir("enrol").string();
    own_key = *wire::key_z85(std::string(32, '\x01'));
    std::filesystem::create_directories(paths.curve_dir());
    const std::string text = own_key + "\n";
    fuzz::write_file(paths.curve_dir(), "scheduler.pub", reinterpret_cast<const std::uint8_t*>(text.data()),
                     text.size());
  }
};
fixture& fx() {
  static fixture f;
  return f;
}

void z85_round_trip(const std::string& key) {
  if (!wire::valid_z85_key(key)) return;
  auto raw = wire::key_bytes(key);
  require(raw.ok() && raw->size() == 32);
  auto back = wire::key_z85(*raw);
  require(back.ok() && *back == key);
}

// site_registry::enrol's checks, in its order, up to the store.
bool accepted(const v1::EnrolSiteRequest& req, const std::map<std::string, std::string>& keys) {
  if (!auth::validate_site_name(req.site())) return false;
  auto t = auth::parse_enrol_token(req.token());
  if (!t) return false;
  require(t->secret_hex.size() == 32 && t->cloud_key_raw.size() == 32 && auth::enrol_token_hash(*t).size() == 64);
  auto cloud = wire::key_z85(t->cloud_key_raw);  // what the site trusts on its first connection
  require(cloud.ok() && wire::valid_z85_key(*cloud));
  if (keys.empty() || keys.size() > max_site_services) return false;
  std::set<std::string> seen;
  for (const auto& [service, key] : keys) {
    z85_round_trip(key);
    if (!runtime::check_site_service_name(service) || !wire::valid_z85_key(key) || !seen.insert(key).second ||
        key == fx().own_key)
      return false;
  }
  return true;
}

void request(const std::string& body) {
  auto req = runtime::parse_as<v1::EnrolSiteRequest>(body);
  if (!req) return;
  (void)auth::printable(req->site());  // quoted in the audit record, valid or not
  const std::map<std::string, std::string> keys(req->public_keys().begin(), req->public_keys().end());
  if (!accepted(*req, keys)) return;
  const std::string& site = req->site();

  // The store took it: the keys become files every cloud service admits.
  std::vector<runtime::site_key> files;
  for (const auto& [service, key] : keys) files.push_back({site, service, key});
  require(runtime::write_site_keys(fx().paths.sites_dir(), files).ok());
  auto admitted = runtime::admitted_keys(fx().paths);
  require(admitted.ok() && admitted->size() == keys.size() + 1);
  for (const auto& [service, key] : keys) {
    auto it = admitted->find(key);
    require(it != admitted->end() && it->second == runtime::site_principal(site, service));
    const auto peer = auth::parse_peer(it->second);
    require(peer.kind == auth::peer_kind::site_service && peer.site == site && peer.service == service);
  }

  // The site's bearer token (site_handlers.cpp): principal site:<site>, its zone and the cloud's.
  auth::claims c{auth::site_token_principal(site), auth::role::operator_, {site, "cloud"}, now_s + 3600, 0, now_s};
  auto tok = auth::issue_token(c, token_key);
  require(tok.ok());
  auto back = auth::verify_token(*tok, token_key, {now_s, 0});
  require(back.ok() && back->principal == c.principal && back->zones == c.zones);
  require(auth::site_of_token(back->principal) == site);
}

void reply(const std::string& body) {
  wire::reply rep;
  rep.type = "loom.v1.EnrolSiteReply";
  rep.body = body;
  auto r = wire::parse_body<v1::EnrolSiteReply>(rep);
  if (!r) return;
  (void)auth::validate_site_name(r->site());
  (void)auth::validate_site_name(r->cloud_zone());
  for (const auto& s : r->services()) {
    z85_round_trip(s.public_key());
    (void)runtime::check_site_service_name(s.name());
    (void)wire::valid_tcp_endpoint(s.endpoint(), wire::endpoint_use::connect);
    (void)wire::valid_tcp_endpoint(s.pull(), wire::endpoint_use::connect);
  }
  (void)auth::verify_token(r->token(), token_key, {now_s, 0});  // not ours: never verifies, never crashes
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) request(body);
  else reply(body);
  return 0;
}
