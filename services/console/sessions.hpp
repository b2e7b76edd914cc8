// sessions: the console's logged-in browsers. A session is made when a token
// verifies at log-in; the browser holds only its id (a cookie) and echoes its
// CSRF token in a header on every state-changing call. The bearer token stays
// here and rides on each ZeroMQ request the session makes, so the services
// check it (role, tenant, zones, revocation) on every call.
// Pure logic: time is passed in. Thread-safe (one mutex): the HTTPS server's
// worker threads share one table.
#pragma once

#include "libs/status/status.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace loom::console {

using sys_ms = std::chrono::milliseconds;  // unix time in milliseconds

struct session {
  std::string id;          // 64 hex (256 random bits): the cookie's value
  std::string csrf;        // 64 hex: the X-CSRF-Token every POST must carry
  std::string token;       // the bearer token sent with this session's requests
  std::string principal, role, tenant;
  sys_ms created{0}, last_used{0};
  std::int64_t token_expires_unix_s = 0;
};

struct session_limits {
  // An idle browser is logged out after 30 min; any session after 12 h (an
  // operator's shift), or when its token expires, whichever comes first.
  sys_ms idle{30 * 60 * 1000};
  sys_ms absolute{12 * 60 * 60 * 1000};
  // At most this many live sessions: log-ins beyond it drop the least
  // recently used, so a flood of log-ins cannot grow memory without bound.
  std::size_t max_sessions = 4096;
};

class session_table {
 public:
  explicit session_table(session_limits lim = {}) : lim_(lim) {}

  // A new session for a verified token; its id and csrf are fresh randoms.
  session open(std::string token, std::string principal, std::string role, std::string tenant,
               std::int64_t token_expires_unix_s, sys_ms now);
  // The live session `id` names, touched (last_used = now); unauthenticated
  // naming why (no such session, idle, too old, token expired) otherwise.
  result<session> use(const std::string& id, sys_ms now);
  // ok when `csrf` is the session's own (compared in constant time);
  // permission_denied otherwise.
  static status check_csrf(const session& s, const std::string& csrf);
  void close(const std::string& id);
  std::size_t size() const;

 private:
  session_limits lim_;
  mutable std::mutex mu_;
  std::map<std::string, session> by_id_;
};

}  // namespace loom::console
