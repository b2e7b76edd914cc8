#include "libs/runtime/gateway_audit.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::runtime;

TEST_CASE("a read the logic refuses is recorded as a denial, other reads are not recorded") {
  CHECK(record_of(false, errc::permission_denied) == reply_record::denial);  // a poll for another's node
  CHECK(record_of(false, errc::unauthenticated) == reply_record::denial);
  CHECK(record_of(false, errc::ok) == reply_record::none);
  CHECK(record_of(false, errc::not_found) == reply_record::none);
  CHECK(record_of(false, errc::invalid_argument) == reply_record::none);
}

TEST_CASE("a state-changing request is recorded once whatever the answer, a refusal as a denial") {
  for (errc c : {errc::ok, errc::permission_denied, errc::not_found, errc::unavailable})
    CHECK(record_of(true, c) == reply_record::request);
  CHECK(decision_of(errc::ok) == audit::decision::allow);
  CHECK(decision_of(errc::permission_denied) == audit::decision::deny);
  CHECK(decision_of(errc::unauthenticated) == audit::decision::deny);
  CHECK(decision_of(errc::not_found) == audit::decision::error);
  CHECK(decision_of(errc::deadline_exceeded) == audit::decision::error);
}
