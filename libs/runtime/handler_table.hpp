// handler_table: a service logic's requests as a table — each protobuf
// request type with its typed handler, one line apiece — instead of if-chains
// on type strings. The table parses the body (invalid_argument naming the
// type when it does not) and answers an unknown type with unimplemented
// naming the service. Built once in the logic's constructor; dispatch is
// const and the table holds no state of its own. It includes no protobuf
// header itself: on<Req>() needs Req complete where it is called (a .cpp).
//
//   table_.on<v1::PingRequest>([this](const v1::PingRequest& r, const call_context& ctx) { return ping(r, ctx); });
//   ...
//   handled handle(type, body, ctx) override { return table_.dispatch(type, body, ctx); }
#pragma once

#include "libs/runtime/logic_pb.hpp"
#include "libs/runtime/service_logic.hpp"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace loom::runtime {

class handler_table {
 public:
  explicit handler_table(std::string service) : service_(std::move(service)) {}

  // Registers the handler of request type Req (its protobuf full name).
  // REQUIRES: Req not registered yet.
  template <class Req>
  handler_table& on(std::function<handled(const Req&, const call_context&)> fn) {
    handlers_[Req::descriptor()->full_name()] = [fn = std::move(fn)](const std::string& body,
                                                                     const call_context& ctx) -> handled {
      auto req = parse_as<Req>(body);
      if (!req) return fail(req.err());
      return fn(*req, ctx);
    };
    return *this;
  }

  handled dispatch(const std::string& type, const std::string& body, const call_context& ctx) const {
    auto it = handlers_.find(type);
    if (it == handlers_.end()) return unknown_type(service_, type);
    return it->second(body, ctx);
  }

  bool handles(const std::string& type) const { return handlers_.count(type) > 0; }
  // The request types, sorted (for tests and docs).
  std::vector<std::string> types() const {
    std::vector<std::string> out;
    for (const auto& [t, _] : handlers_) out.push_back(t);
    return out;
  }

 private:
  std::string service_;
  std::map<std::string, std::function<handled(const std::string&, const call_context&)>, std::less<>> handlers_;
};

}  // namespace loom::runtime
