#include "libs/wire/envelope.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/wire/limits.hpp"
#include "loom/v1/envelope.pb.h"

#include <optional>

namespace loom::wire {
namespace {

// errc mirrors loom.v1.Code number for number; the casts below rely on it.
static_assert(static_cast<int>(errc::ok) == v1::OK);
static_assert(static_cast<int>(errc::unavailable) == v1::UNAVAILABLE);
static_assert(static_cast<int>(errc::internal) == v1::INTERNAL && v1::Code_MAX == v1::INTERNAL);

error invalid(std::string msg) { return make_error(errc::invalid_argument, std::move(msg)); }

// Checks shared by both directions; fills `env` on success. `request_id_seen`
// gets the request id as soon as the bytes parsed and it is of a sane length,
// so that a request refused below (a body over the limit) is still answered
// to its caller, who otherwise waits out its deadline for "no reply".
std::optional<error> parse_envelope(const void* data, std::size_t n, v1::Envelope& env,
                                    std::string* request_id_seen = nullptr) {
  if (n == 0) return invalid("empty frame: expected a loom.v1.Envelope");
  if (n > static_cast<std::size_t>(max_message_bytes))
    return invalid("envelope of " + std::to_string(n) + " bytes exceeds the " +
                   std::to_string(max_message_bytes) + "-byte limit");
  // n <= 64 MiB, so the int conversion below cannot overflow.
  if (!env.ParseFromArray(data, static_cast<int>(n)))
    return invalid("not a valid loom.v1.Envelope (" + std::to_string(n) + " bytes failed to parse)");
  if (env.request_id().size() > max_request_id_bytes)
    return invalid("request_id of " + std::to_string(env.request_id().size()) + " bytes exceeds " +
                   std::to_string(max_request_id_bytes));
  if (request_id_seen) *request_id_seen = env.request_id();
  if (env.type().size() > max_type_bytes)
    return invalid("type of " + std::to_string(env.type().size()) + " bytes exceeds " +
                   std::to_string(max_type_bytes));
  if (env.body().size() > max_body_bytes)
    return invalid("body too large: " + std::to_string(env.body().size()) + " bytes exceeds " +
                   std::to_string(max_body_bytes) + " (a request is a control message; bulk data travels as chunks)");
  return std::nullopt;
}

}  // namespace

std::string encode(const request& req) {
  v1::Envelope env;
  env.set_request_id(req.request_id);
  env.set_type(req.type);
  env.set_body(req.body);
  env.set_token(req.token);
  env.set_sent_unix_ns(req.sent_unix_ns);
  env.set_attempt(req.attempt);
  return env.SerializeAsString();
}

std::string encode(const reply& rep) {
  v1::Envelope env;
  env.set_request_id(rep.request_id);
  env.set_type(rep.type);
  env.set_body(rep.body);
  auto* st = env.mutable_status();
  st->set_code(static_cast<v1::Code>(rep.code));
  st->set_message(rep.message);
  for (const auto& [k, v] : rep.details) (*st->mutable_details())[k] = v;
  return env.SerializeAsString();
}

result<request> decode_request(const void* data, std::size_t n, std::string* request_id_seen) {
  v1::Envelope env;
  if (auto e = parse_envelope(data, n, env, request_id_seen)) return *e;
  if (env.request_id().empty()) return invalid("request has no request_id");
  if (env.type().empty()) return invalid("request " + env.request_id() + " has no type");
  if (env.has_status()) return invalid("request " + env.request_id() + " carries a status (is it a reply?)");
  request req;
  req.request_id = std::move(*env.mutable_request_id());
  req.type = std::move(*env.mutable_type());
  req.body = std::move(*env.mutable_body());
  req.token = std::move(*env.mutable_token());
  req.sent_unix_ns = env.sent_unix_ns();
  req.attempt = env.attempt() == 0 ? 1 : env.attempt();  // 0 = field absent
  return req;
}

result<reply> decode_reply(const void* data, std::size_t n) {
  v1::Envelope env;
  if (auto e = parse_envelope(data, n, env)) return *e;
  if (!env.has_status()) return invalid("reply " + env.request_id() + " has no status");
  reply rep;
  rep.request_id = std::move(*env.mutable_request_id());
  rep.type = std::move(*env.mutable_type());
  rep.body = std::move(*env.mutable_body());
  auto* st = env.mutable_status();
  rep.message = std::move(*st->mutable_message());
  for (auto& [k, v] : st->details()) rep.details.emplace(k, v);
  const int code = st->code();
  if (v1::Code_IsValid(code)) {
    rep.code = static_cast<errc>(code);
  } else {
    rep.code = errc::internal;
    rep.details["code"] = std::to_string(code);
  }
  return rep;
}

reply error_reply(std::string request_id, errc code, std::string message) {
  reply rep;
  rep.request_id = std::move(request_id);
  rep.code = code;
  rep.message = std::move(message);
  return rep;
}

std::string new_request_id() { return crypto::to_hex(crypto::random_bytes(16)); }

}  // namespace loom::wire
