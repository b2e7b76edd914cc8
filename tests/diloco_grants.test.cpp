// Cross-process, on loopback (issue 24 items 3, 4 and 13): a cloud (`loom up`)
// and two enrolled edge sites (`loom up --site north|south`); south's trainer
// reaches the cloud's delta socket only through a link of 1 h latency
// (LOOM_LINK_SHAPE_SOUTH), so it never contributes a delta.
//   1. A diloco stage placed on north alone: south (enrolled, not placed) and
//      an operator with the client key cannot start it, export it, join it,
//      pull from it or send to it, even holding its grant; north cannot
//      export it into another job's stage dir (nothing is left there), and
//      north's deltas are bounded: tokens = 2^64 - 1 and values of 1e20 are
//      refused, counted and audited; another tenant's viewer does not see it.
//   2. A stage on north and south: it fails, naming south.
//   3. The same with diloco.min_sites = 1: it succeeds, and `loom job show`
//      says north contributed and south did not.
#include "libs/diloco/fragment_plan.hpp"
#include "libs/diloco/client/site_client.hpp"
#include "libs/diloco/grant/stage_spec.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/codec/codec.hpp"
#include "tests/support/audit_events.hpp"
#include "tests/support/edge_sites.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <set>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {


std::string submit(cluster& c, const std::vector<std::string>& sets) {
  std::vector<std::string> args{"job", "submit", "--template", "pretrain-diloco-tiny", "--set", "dataset=text"};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  auto sub = loom_json(c.home.path(), args);
  REQUIRE_MESSAGE(sub.contains("id"), sub.dump());
  return sub["id"].get<std::string>();
}

// The aggregator's status as an admin sees it (every tenant's), or nullopt.
std::optional<v1::AggregatorStatusReply> status_of(cluster& c) {
  c.refresh();
  auto cli = c.client("aggregator", 0, 2000ms);
  if (!cli) return std::nullopt;
  auto r = cli->call(wire::request{wire::new_request_id(), "loom.v1.AggregatorStatusRequest", "", c.admin()});
  v1::AggregatorStatusReply rep;
  if (!r || !r->ok() || !rep.ParseFromString(r->body)) return std::nullopt;
  return rep;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A site as the test plays it: its trainer's CURVE key and its token (its data dir's).
struct site_identity {
  wire::curve_keypair keys;
  std::string token;
};
site_identity identity_of(const edge_site& s) {
  auto keys = wire::load_keypair(s.home.path() + "/keys/curve", "trainer");
  REQUIRE(keys.ok());
  auto token = files::read_file(s.home.path() + "/keys/cloud/token");
  REQUIRE(token.ok());
  return {*keys, trimmed(*token)};
}

std::unique_ptr<wire::client> aggregator_as(cluster& c, const wire::curve_keypair& keys) {
  auto server = wire::load_public_key(c.paths.curve_dir(), "aggregator");
  REQUIRE(server.ok());
  return std::make_unique<wire::client>(c.ctx, c.ep("aggregator").rpc, *server, keys,
                                        wire::client_options{std::chrono::milliseconds(10000), 1});
}

errc code_of(const result<std::vector<std::string>>& r, std::string* message = nullptr) {
  if (!r) return r.code();
  if (r->size() < 2 || (*r)[0] != "loom.v1.Status") return errc::ok;
  v1::Status s;
  s.ParseFromString((*r)[1]);
  if (message) *message = s.message();
  return static_cast<errc>(s.code());
}

std::vector<std::string> delta_frames(const std::string& job, const std::string& site, std::uint64_t elements,
                                      codec::codec_id c, const std::vector<float>& v, std::uint64_t tokens) {
  auto q = codec::encode(c, v).value();
  std::string payload(reinterpret_cast<const char*>(q.data()), q.size());
  v1::DeltaHeader h;
  h.set_job(job);
  h.set_site(site);
  h.set_fragment(0);
  h.set_codec(std::string(codec::to_string(c)));
  h.set_element_count(elements);
  h.set_payload_bytes(payload.size());
  h.set_tokens(tokens);
  h.set_payload_sha256(std::string(crypto::as_view(crypto::sha256(payload))));
  return {"loom.v1.DeltaHeader", h.SerializeAsString(), payload};
}

std::vector<std::string> temp_dirs_under(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(".tmp-", 0) == 0) out.push_back(it->path().string());
  return out;
}

}  // namespace

TEST_CASE("an aggregation serves only the sites its stage was placed on, bounds their deltas, and a site that never contributes fails the job by name unless diloco.min_sites allows it") {
  const auto t0 = std::chrono::steady_clock::now();
  cluster c;
  REQUIRE(c.up);
  auto north = start_edge_site(c, "north", "GPL-3");
  std::unique_ptr<edge_site> south;
  {
    scoped_env slow("LOOM_LINK_SHAPE_SOUTH", "lat=1h");  // south's trainer: its deltas would arrive in an hour
    south = start_edge_site(c, "south", "GPL-2");
  }
  MESSAGE("cloud and sites up: " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");

  // 1. A stage placed on north alone, running long enough for what follows.
  const std::string h = submit(c, {"diloco.sites=[\"north\"]", "pretrain.steps=2000"});
  const std::string name = diloco::aggregation_name(h, "pretrain");
  std::optional<v1::AggregatorStatusReply> st;
  REQUIRE(eventually(
      [&] {
        st = status_of(c);
        if (!st) return false;
        for (const auto& j : st->jobs())
          if (j.spec().job() == name && j.fragments_size() > 0 && j.fragments(0).rounds_closed_total() >= 1) return true;
        return false;
      },
      180s));
  // The grant as the scheduler minted it (kept in the aggregation's state): a copy in hostile hands.
  v1::AggregationState saved;
  saved_manifest(c.home.path() + "/aggregator/" + name + "/state.bin", saved);
  const v1::AggregationGrant grant = saved.grant();
  REQUIRE(grant.sites_size() == 1);
  CHECK(grant.sites(0) == "north");
  CHECK(grant.edge_sites());
  CHECK(grant.stage_dir() == c.home.path() + "/jobs/" + h + "/pretrain");
  v1::StartAggregationRequest start;
  *start.mutable_grant() = grant;
  *start.mutable_spec() = grant.spec();

  const auto south_id = identity_of(*south), north_id = identity_of(*north);
  const std::string op = c.token(auth::role::operator_);
  auto operator_cli = c.client("aggregator", 1, 10000ms);
  auto as_south = aggregator_as(c, south_id.keys);
  auto as_north = aggregator_as(c, north_id.keys);
  // An operator (client key): without a grant, with the copy; south (its key and token): with the copy.
  auto bare = start;
  bare.clear_grant();
  CHECK(send(*operator_cli, "loom.v1.StartAggregationRequest", bare.SerializeAsString(), op, wire::new_request_id())
            .code == errc::invalid_argument);
  CHECK(send(*operator_cli, "loom.v1.StartAggregationRequest", start.SerializeAsString(), op, wire::new_request_id())
            .code == errc::permission_denied);
  auto theirs =
      send(*as_south, "loom.v1.StartAggregationRequest", start.SerializeAsString(), south_id.token, wire::new_request_id());
  CHECK(theirs.code == errc::permission_denied);
  INFO("south's StartAggregation: " << theirs.message);
  // Exports: south with the copy; north into another job's stage dir, or with the grant's stage dir altered.
  v1::ExportGlobalRequest exp;
  *exp.mutable_grant() = grant;
  exp.set_step(16);
  exp.set_trainer_state("{\"step\": 16}");
  const std::string other_dir = c.home.path() + "/jobs/job-000099/pretrain";
  auto exp_south = exp;
  exp_south.set_stage_dir(grant.stage_dir());
  CHECK(send(*as_south, "loom.v1.ExportGlobalRequest", exp_south.SerializeAsString(), south_id.token,
             wire::new_request_id())
            .code == errc::permission_denied);
  auto exp_other = exp;
  exp_other.set_stage_dir(other_dir);
  CHECK(send(*as_north, "loom.v1.ExportGlobalRequest", exp_other.SerializeAsString(), north_id.token,
             wire::new_request_id())
            .code == errc::permission_denied);
  auto exp_altered = exp;
  exp_altered.mutable_grant()->set_stage_dir(other_dir);
  CHECK(send(*as_north, "loom.v1.ExportGlobalRequest", exp_altered.SerializeAsString(), north_id.token,
             wire::new_request_id())
            .code == errc::permission_denied);
  CHECK_FALSE(std::filesystem::exists(c.home.path() + "/jobs/job-000099"));
  CHECK(temp_dirs_under(c.home.path() + "/jobs").empty());

  // The delta socket: south's key neither joins, pulls, sends nor asks; north's deltas are bounded.
  zmq::context_t zctx(1);
  auto client_of = [&](const site_identity& id, const std::string& site) {
    diloco::client_options o;
    o.endpoint = st->delta_endpoint();
    o.server_public = st->public_key();
    o.keys = id.keys;
    o.job = name;
    o.site = site;
    o.timeout = 5000ms;
    o.attempts = 1;
    return diloco::site_client::make(zctx, o).value();
  };
  auto south_delta = client_of(south_id, "south");
  std::vector<float> ignored;
  CHECK(south_delta->join(ignored).code() == errc::permission_denied);
  v1::GlobalPull pull;
  pull.set_job(name);
  pull.set_site("south");
  pull.set_want_params(true);
  CHECK(code_of(south_delta->request({"loom.v1.GlobalPull", pull.SerializeAsString()})) == errc::permission_denied);
  v1::RoundStatusQuery rq;
  rq.set_job(name);
  CHECK(code_of(south_delta->request({"loom.v1.RoundStatusQuery", rq.SerializeAsString()})) == errc::permission_denied);
  const std::size_t size0 =
      diloco::fragment_plan::for_gpt2(tiny_config(), static_cast<int>(grant.spec().fragments()), grant.spec().sync_every())
          .value()
          .size(0);
  const std::vector<float> zeros(size0, 0.0f);
  CHECK(code_of(south_delta->request(delta_frames(name, "south", size0, codec::codec_id::int8, zeros, 100))) ==
        errc::permission_denied);
  auto north_delta = client_of(north_id, "north");
  std::string why;
  CHECK(code_of(north_delta->request(delta_frames(name, "north", size0, codec::codec_id::int8, zeros, UINT64_MAX)),
                &why) == errc::invalid_argument);
  CHECK(why.find("18446744073709551615 tokens") != std::string::npos);
  CHECK(code_of(north_delta->request(
                    delta_frames(name, "north", size0, codec::codec_id::fp32, std::vector<float>(size0, 1e20f), 100)),
                &why) == errc::invalid_argument);
  CHECK(why.find("has norm") != std::string::npos);
  // Counted by reason, and audited.
  st = status_of(c);
  REQUIRE(st);
  std::map<std::string, std::uint64_t> rejected;
  for (const auto& j : st->jobs())
    if (j.spec().job() == name) rejected.insert(j.fragments(0).rejected_total().begin(), j.fragments(0).rejected_total().end());
  CHECK(rejected["not_granted"] == 1);
  CHECK(rejected["too_many_tokens"] == 1);
  CHECK(rejected["norm_bound"] == 1);
  const std::set<std::string> must{"not_granted",           "too_many_tokens",        "norm_bound",
                                   "aggregation.join_refused", "aggregation.pull_refused", "aggregation.status_refused"};
  std::set<std::string> audited;
  CHECK(eventually(
      [&] {
        audited.clear();
        for (const auto& e : all_events(c))
          if (e.job_id() == name && e.decision() == v1::DENY) {
            if (e.action() == "aggregation.delta_rejected") audited.insert(e.reason().substr(0, e.reason().find(':')));
            else audited.insert(e.action());
          }
        return std::includes(audited.begin(), audited.end(), must.begin(), must.end());
      },
      30s));
  for (const auto& m : must) CHECK_MESSAGE(audited.count(m), m << " was not audited");
  // Another tenant's viewer does not see the aggregation; its own tenant's (default) does.
  auto visible_to = [&](const std::string& token) {
    auto cli = c.client("aggregator", 1, 10000ms);
    auto r = send(*cli, "loom.v1.AggregatorStatusRequest", "", token, wire::new_request_id());
    v1::AggregatorStatusReply rep;
    REQUIRE(rep.ParseFromString(r.body));
    return std::any_of(rep.jobs().begin(), rep.jobs().end(), [&](const auto& j) { return j.spec().job() == name; });
  };
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  const auth::claims beta{"viewer@beta", auth::role::viewer, {"*"}, now + 600, 0, now, "beta"};
  CHECK_FALSE(visible_to(auth::issue_token(beta, c.token_key).value()));
  CHECK(visible_to(c.token(auth::role::viewer)));
  REQUIRE(run_loom(c.home.path(), {"job", "cancel", h}, 30s).code == 0);
  wait_job_done(c.home.path(), h, 60s);

  // 2. North and south: south never reaches the delta socket; the job fails naming it.
  const std::string a = submit(c, {"diloco.sites=[\"north\", \"south\"]", "pretrain.steps=16"});
  json ja = wait_job_done(c.home.path(), a, 300s);
  INFO(ja.dump());
  CHECK(ja.value("state", "") == "failed");
  const std::string message = ja.value("message", "");
  CHECK(message.find("site south never contributed") != std::string::npos);
  CHECK(message.find("(north)") != std::string::npos);  // the one that did

  // 3. The same with diloco.min_sites = 1: it succeeds, and says who contributed.
  const std::string b = submit(c, {"diloco.sites=[\"north\", \"south\"]", "pretrain.steps=16", "diloco.min_sites=1"});
  json jb = wait_job_done(c.home.path(), b, 300s);
  INFO(jb.dump());
  REQUIRE(jb.value("state", "") == "succeeded");
  const json& pre = jb["stages"][0];
  CHECK(pre["contributed_sites"] == json::array({"north"}));
  CHECK(pre["missing_sites"] == json::array({"south"}));
  auto shown = run_loom(c.home.path(), {"job", "show", b}, 30s);
  CHECK(shown.out.find("contributed: north; never contributed: south") != std::string::npos);
  MESSAGE("loom job show:\n" << shown.out);
  MESSAGE("total " << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s");
}
