#include "libs/wire/envelope.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "libs/wire/limits.hpp"
#include "loom/v1/envelope.pb.h"
#include "loom/v1/service.pb.h"

#include <doctest/doctest.h>

#include <set>

using namespace loom;
using namespace loom::wire;

namespace {
bool mentions(const error& e, const std::string& what) { return e.message.find(what) != std::string::npos; }

result<request> decode(const std::string& bytes, std::string* seen = nullptr) {
  return decode_request(bytes.data(), bytes.size(), seen);
}

request sample_request() {
  request req;
  req.request_id = "0123456789abcdef";
  req.type = "loom.v1.PingRequest";
  req.body = std::string("\0\x01payload\xff", 10);
  req.token = "tok.en";
  req.sent_unix_ns = 1'700'000'000'123'456'789ULL;
  req.attempt = 2;
  return req;
}
}  // namespace

TEST_CASE("a request survives encode and decode unchanged") {
  const request in = sample_request();
  auto out = decode(encode(in));
  REQUIRE(out.ok());
  CHECK(out->request_id == in.request_id);
  CHECK(out->type == in.type);
  CHECK(out->body == in.body);
  CHECK(out->token == in.token);
  CHECK(out->sent_unix_ns == in.sent_unix_ns);
  CHECK(out->attempt == 2);
}

TEST_CASE("an error reply with details survives encode and decode unchanged") {
  reply in = error_reply("id-1", errc::permission_denied, "token expired at 12:00");
  in.details = {{"field", "token"}, {"epoch", "7"}};
  const std::string bytes = encode(in);
  auto out = decode_reply(bytes.data(), bytes.size());
  REQUIRE(out.ok());
  CHECK_FALSE(out->ok());
  CHECK(out->request_id == "id-1");
  CHECK(out->code == errc::permission_denied);
  CHECK(out->message == "token expired at 12:00");
  CHECK(out->details == in.details);
}

TEST_CASE("an ok reply decodes as ok with its body") {
  reply in;
  in.request_id = "r";
  in.type = "loom.v1.PingReply";
  in.body = "xyz";
  const std::string bytes = encode(in);
  auto out = decode_reply(bytes.data(), bytes.size());
  REQUIRE(out.ok());
  CHECK(out->ok());
  CHECK(out->body == "xyz");
}

TEST_CASE("an empty frame is refused as an empty frame") {
  auto r = decode("");
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(mentions(r.err(), "empty frame"));
  auto rep = decode_reply("", 0);
  REQUIRE_FALSE(rep.ok());
  CHECK(mentions(rep.err(), "empty frame"));
}

TEST_CASE("bytes that are not an Envelope are refused as not a valid Envelope") {
  auto r = decode(std::string("\xff\xff\xff\xff", 4));
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(mentions(r.err(), "not a valid loom.v1.Envelope"));
}

TEST_CASE("a request without a type is refused and its request_id is still reported") {
  request req = sample_request();
  req.type.clear();
  std::string seen;
  auto r = decode(encode(req), &seen);
  REQUIRE_FALSE(r.ok());
  CHECK(mentions(r.err(), "has no type"));
  CHECK(seen == req.request_id);
}

TEST_CASE("a request without a request_id is refused") {
  request req = sample_request();
  req.request_id.clear();
  auto r = decode(encode(req));
  REQUIRE_FALSE(r.ok());
  CHECK(mentions(r.err(), "no request_id"));
}

TEST_CASE("a request_id or type longer than the limits is refused") {
  request req = sample_request();
  req.request_id = std::string(max_request_id_bytes + 1, 'a');
  auto r = decode(encode(req));
  REQUIRE_FALSE(r.ok());
  CHECK(mentions(r.err(), "request_id of 129 bytes"));
  req = sample_request();
  req.type = std::string(max_type_bytes + 1, 't');
  r = decode(encode(req));
  REQUIRE_FALSE(r.ok());
  CHECK(mentions(r.err(), "type of 257 bytes"));
}

TEST_CASE("a body one byte over the limit is refused as too large") {
  request req = sample_request();
  req.body.assign(max_body_bytes + 1, 'b');
  auto r = decode(encode(req));
  REQUIRE_FALSE(r.ok());
  CHECK(mentions(r.err(), "body too large"));
  // Its request id is still seen, so the refusal reaches the caller (not its deadline).
  std::string seen;
  const std::string bytes = encode(req);
  CHECK_FALSE(decode_request(bytes.data(), bytes.size(), &seen).ok());
  CHECK(seen == req.request_id);
  req.body.pop_back();
  CHECK(decode(encode(req)).ok());
}

TEST_CASE("an envelope over the message cap is refused before parsing") {
  const std::string huge(static_cast<std::size_t>(max_message_bytes) + 1, '\0');
  auto r = decode(huge);
  REQUIRE_FALSE(r.ok());
  CHECK(mentions(r.err(), "exceeds the 67108864-byte limit"));
}

TEST_CASE("a request that carries a status is refused as a misdirected reply") {
  v1::Envelope env;
  env.set_request_id("r");
  env.set_type("loom.v1.PingRequest");
  env.mutable_status()->set_code(v1::OK);
  auto r = decode(env.SerializeAsString());
  REQUIRE_FALSE(r.ok());
  CHECK(mentions(r.err(), "carries a status"));
}

TEST_CASE("a reply without a status is refused") {
  const std::string bytes = encode(sample_request());
  auto r = decode_reply(bytes.data(), bytes.size());
  REQUIRE_FALSE(r.ok());
  CHECK(mentions(r.err(), "has no status"));
}

TEST_CASE("an unknown status code from a newer peer becomes internal with the number kept") {
  v1::Envelope env;
  env.set_request_id("r");
  env.mutable_status()->set_code(static_cast<v1::Code>(99));
  const std::string bytes = env.SerializeAsString();
  auto r = decode_reply(bytes.data(), bytes.size());
  REQUIRE(r.ok());
  CHECK(r->code == errc::internal);
  CHECK(r->details.at("code") == "99");
}

TEST_CASE("an absent attempt field reads as the first attempt") {
  request req = sample_request();
  req.attempt = 0;
  auto r = decode(encode(req));
  REQUIRE(r.ok());
  CHECK(r->attempt == 1);
}

TEST_CASE("request ids are 32 hex characters and do not repeat") {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    auto id = new_request_id();
    CHECK(id.size() == 32);
    CHECK(id.find_first_not_of("0123456789abcdef") == std::string::npos);
    ids.insert(id);
  }
  CHECK(ids.size() == 1000);
}

TEST_CASE("typed helpers build, parse and answer a request by message type") {
  v1::PingRequest ping;
  ping.set_payload("hello");
  request req = make_request(ping, "tok");
  CHECK(req.type == "loom.v1.PingRequest");
  CHECK(req.token == "tok");
  CHECK(req.request_id.size() == 32);
  CHECK(req.sent_unix_ns > 0);

  auto parsed = parse_body<v1::PingRequest>(req);
  REQUIRE(parsed.ok());
  CHECK(parsed->payload() == "hello");

  v1::PingReply pong;
  pong.set_payload(parsed->payload());
  reply rep = ok_reply(req, pong);
  CHECK(rep.ok());
  CHECK(rep.request_id == req.request_id);
  CHECK(rep.type == "loom.v1.PingReply");
  auto back = parse_body<v1::PingReply>(rep);
  REQUIRE(back.ok());
  CHECK(back->payload() == "hello");
}

TEST_CASE("parsing a body as the wrong message type names both types") {
  request req = make_request(v1::HealthRequest(), "");
  auto r = parse_body<v1::PingRequest>(req);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.err().message == "expected loom.v1.PingRequest, got loom.v1.HealthRequest");
}

TEST_CASE("a body that does not parse as its declared type is refused") {
  request req = make_request(v1::PingRequest(), "");
  req.body = std::string("\xff\xff\xff", 3);
  auto r = parse_body<v1::PingRequest>(req);
  REQUIRE_FALSE(r.ok());
  CHECK(mentions(r.err(), "body is not a valid loom.v1.PingRequest"));
}
