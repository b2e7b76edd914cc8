// The handler table: a registered type reaches its typed handler with the
// parsed request; a bad body and an unknown type get precise errors.
#include "libs/runtime/handler_table.hpp"

#include "loom/v1/service.pb.h"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::runtime;

TEST_CASE("a handler table dispatches by type to the typed handler and refuses the rest by name") {
  handler_table t("demo");
  std::string seen;
  t.on<v1::PingRequest>([&](const v1::PingRequest& r, const call_context& ctx) {
    seen = r.payload() + " from " + ctx.principal;
    v1::PingReply rep;
    rep.set_payload(r.payload());
    return reply(rep);
  });
  v1::PingRequest p;
  p.set_payload("hello");
  call_context ctx;
  ctx.principal = "alice";
  auto h = t.dispatch(p.GetDescriptor()->full_name(), p.SerializeAsString(), ctx);
  REQUIRE(h.code == errc::ok);
  CHECK(seen == "hello from alice");
  CHECK(h.type == "loom.v1.PingReply");

  auto bad = t.dispatch("loom.v1.PingRequest", "\xff\xff\xff", ctx);
  CHECK(bad.code == errc::invalid_argument);
  CHECK(bad.message.find("loom.v1.PingRequest") != std::string::npos);
  auto unknown = t.dispatch("loom.v1.Nope", "", ctx);
  CHECK(unknown.code == errc::unimplemented);
  CHECK(unknown.message == "demo does not handle loom.v1.Nope");
  CHECK(t.handles("loom.v1.PingRequest"));
  CHECK(t.types() == std::vector<std::string>{"loom.v1.PingRequest"});
}
