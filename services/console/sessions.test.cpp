#include "services/console/sessions.hpp"

#include <doctest/doctest.h>

using namespace loom::console;
using std::chrono::milliseconds;

TEST_CASE("a console session is found by its id and refuses another session's CSRF token") {
  session_table t;
  auto a = t.open("tokA", "alice", "operator", "A", 0, milliseconds(1000));
  auto b = t.open("tokB", "bob", "viewer", "B", 0, milliseconds(1000));
  CHECK(a.id.size() == 64);
  CHECK(a.id != b.id);
  CHECK(a.csrf != b.csrf);
  auto got = t.use(a.id, milliseconds(2000));
  REQUIRE(got);
  CHECK(got->token == "tokA");
  CHECK(session_table::check_csrf(*got, a.csrf));
  CHECK(session_table::check_csrf(*got, b.csrf).code() == loom::errc::permission_denied);
  CHECK(session_table::check_csrf(*got, "").code() == loom::errc::permission_denied);
  CHECK(t.use("forged" + a.id.substr(6), milliseconds(2000)).code() == loom::errc::unauthenticated);
  CHECK(t.use("", milliseconds(2000)).code() == loom::errc::unauthenticated);
}

TEST_CASE("a console session ends when idle, too old, its token expires or it logs out") {
  session_limits lim;
  lim.idle = milliseconds(100);
  lim.absolute = milliseconds(1000);
  session_table t(lim);
  auto idle = t.open("t", "p", "viewer", "A", 0, milliseconds(0));
  CHECK(t.use(idle.id, milliseconds(50)));
  auto r = t.use(idle.id, milliseconds(200));
  CHECK(r.code() == loom::errc::unauthenticated);
  CHECK(r.err().message.find("idle") != std::string::npos);
  CHECK(t.use(idle.id, milliseconds(210)).err().message.find("no session") != std::string::npos);

  auto old = t.open("t", "p", "viewer", "A", 0, milliseconds(0));
  for (int ms = 90; ms < 1000; ms += 90) REQUIRE(t.use(old.id, milliseconds(ms)));
  CHECK(t.use(old.id, milliseconds(1050)).err().message.find("too old") != std::string::npos);

  session_table u;  // default limits: only the token's expiry ends it
  auto exp = u.open("t", "p", "viewer", "A", 10, milliseconds(9000));
  CHECK(u.use(exp.id, milliseconds(9950)));
  CHECK(u.use(exp.id, milliseconds(10'000)).err().message.find("expired") != std::string::npos);

  auto out = t.open("t", "p", "viewer", "A", 0, milliseconds(0));
  t.close(out.id);
  CHECK(t.use(out.id, milliseconds(1)).code() == loom::errc::unauthenticated);
}

TEST_CASE("a flood of console log-ins keeps at most max_sessions, dropping the least recently used") {
  session_limits lim;
  lim.max_sessions = 3;
  session_table t(lim);
  auto drop = t.open("t", "p", "viewer", "A", 0, milliseconds(1));
  for (int i = 0; i < 10; ++i) t.open("t", "p", "viewer", "A", 0, milliseconds(10 + i));
  CHECK(t.size() == 3);
  CHECK_FALSE(t.use(drop.id, milliseconds(30)));
}
