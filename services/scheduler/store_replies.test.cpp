#include "services/scheduler/store_replies.hpp"

#include <doctest/doctest.h>

using loom::errc;
using loom::make_error;
using loom::scheduler::refused_or_store;
using loom::scheduler::store_failed;

TEST_CASE("a registry's verdict on the request reaches the caller unchanged") {
  for (errc c : {errc::invalid_argument, errc::not_found, errc::permission_denied, errc::conflict,
                 errc::already_exists, errc::corruption}) {
    auto h = refused_or_store(make_error(c, "site 'a' is revoked"));
    CHECK(h.code == c);
    CHECK(h.message == "site 'a' is revoked");
  }
}

TEST_CASE("any other registry error came from the store and is unavailable, named as such") {
  for (errc c : {errc::unavailable, errc::internal, errc::resource_exhausted, errc::deadline_exceeded}) {
    auto h = refused_or_store(make_error(c, "database is locked"));
    CHECK(h.code == errc::unavailable);
    CHECK(h.message == "state store: database is locked");
  }
}

TEST_CASE("a failed store read is not_found when the row is missing and unavailable otherwise") {
  auto missing = store_failed(make_error(errc::not_found, "no job j-1"));
  CHECK(missing.code == errc::not_found);
  CHECK(missing.message == "state store: no job j-1");
  for (errc c : {errc::corruption, errc::internal, errc::invalid_argument}) {
    auto h = store_failed(make_error(c, "disk I/O error"));
    CHECK(h.code == errc::unavailable);
    CHECK(h.message == "state store: disk I/O error");
  }
}
