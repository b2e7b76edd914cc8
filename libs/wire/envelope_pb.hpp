// Typed helpers over envelope.hpp for code that has the protobuf messages:
// build a request from a message, parse a body as the message it claims to
// be, make an ok reply, and call a service in one line. Includes protobuf
// headers (via the caller's *.pb.h), so include it only from .cpp files.
// Stateless templates: thread-safe (call_typed uses the caller's client).
#pragma once

#include "libs/wire/client.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/wire/envelope.hpp"

#include <chrono>
#include <string>

namespace loom::wire {

namespace detail {
template <class M>
result<M> parse_as(const std::string& type, const std::string& body) {
  const std::string& want = M::descriptor()->full_name();
  if (type != want)
    return make_error(errc::invalid_argument, "expected " + want + ", got " + (type.empty() ? "no type" : type));
  M msg;
  // ParseFromString returns false on bad input; it does not throw.
  if (!msg.ParseFromString(body))
    return make_error(errc::invalid_argument,
                      "body is not a valid " + want + " (" + std::to_string(body.size()) + " bytes)");
  return msg;
}
}  // namespace detail

// A request carrying `body`: fresh request_id, type = M's full name, now.
template <class M>
request make_request(const M& body, std::string token) {
  request req;
  req.request_id = new_request_id();
  req.type = M::descriptor()->full_name();
  req.body = body.SerializeAsString();
  req.token = std::move(token);
  req.sent_unix_ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                    loom::wall_now().time_since_epoch())
                                                    .count());
  return req;
}

// The ok reply to `req` carrying `body`.
template <class M>
reply ok_reply(const request& req, const M& body) {
  reply rep;
  rep.request_id = req.request_id;
  rep.type = M::descriptor()->full_name();
  rep.body = body.SerializeAsString();
  return rep;
}

// req.body as M. invalid_argument "expected X, got Y" on a type mismatch, or
// when the bytes do not parse.
template <class M>
result<M> parse_body(const request& req) {
  return detail::parse_as<M>(req.type, req.body);
}
template <class M>
result<M> parse_body(const reply& rep) {
  return detail::parse_as<M>(rep.type, rep.body);
}

// Calls the service with `body` and returns the reply body as Rep. A non-ok
// reply status becomes an error with the reply's code and message; transport
// failures are client::call's errors.
template <class Rep, class Req>
result<Rep> call_typed(client& c, const Req& body, std::string token) {
  auto rep = c.call(make_request(body, std::move(token)));
  if (!rep) return rep.err();
  if (!rep->ok()) return make_error(rep->code, rep->message);
  return parse_body<Rep>(*rep);
}

}  // namespace loom::wire
