// typed_call: one request to a service with a protobuf request and an expected
// reply type. Include only from .cpp files (pulls in protobuf); see cli.hpp.
#pragma once

#include "client/cli.hpp"

#include <google/protobuf/message.h>

#include <string>

namespace loom::cli {

// The reply parsed as M; the service's error, or internal when it answered
// with another type. request_id: "" = a fresh one.
template <class M>
result<M> typed_call(context& c, const std::string& service, const google::protobuf::Message& req, int retries,
                     const std::string& request_id = "") {
  auto rep = c.call(service, req.GetDescriptor()->full_name(), req.SerializeAsString(), retries, request_id);
  if (!rep) return rep.err();
  if (!rep->ok()) return make_error(rep->code, service + ": " + rep->message);
  M m;
  if (rep->type != M::descriptor()->full_name() || !m.ParseFromString(rep->body))
    return make_error(errc::internal, service + " answered with " + rep->type + ", expected " +
                                          M::descriptor()->full_name());
  return m;
}

}  // namespace loom::cli
