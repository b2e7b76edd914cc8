// Protobuf helpers for service logic: parse a request body of an expected
// type, build an ok reply. Include only from .cpp files (pulls in protobuf).
#pragma once

#include "libs/runtime/service_logic.hpp"

#include <string>

namespace loom::runtime {

template <class M>
bool is(const std::string& type) {
  return type == M::descriptor()->full_name();
}

// invalid_argument naming the type when the body does not parse.
template <class M>
result<M> parse_as(const std::string& body) {
  M m;
  if (!m.ParseFromString(body))
    return make_error(errc::invalid_argument, "body is not a valid " + M::descriptor()->full_name());
  return m;
}

template <class M>
handled reply(const M& m) {
  handled h;
  h.type = M::descriptor()->full_name();
  h.body = m.SerializeAsString();
  return h;
}

inline handled fail(errc c, std::string message) {
  handled h;
  h.code = c;
  h.message = std::move(message);
  return h;
}
inline handled fail(const error& e) { return fail(e.code, e.message); }

inline handled unknown_type(const std::string& service, const std::string& type) {
  return fail(errc::unimplemented, service + " does not handle " + type);
}

}  // namespace loom::runtime
