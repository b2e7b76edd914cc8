#include "services/console/sessions.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"

#include <openssl/crypto.h>

#include <algorithm>

namespace loom::console {

session session_table::open(std::string token, std::string principal, std::string role, std::string tenant,
                            std::int64_t token_expires_unix_s, sys_ms now) {
  session s;
  s.id = crypto::to_hex(crypto::random_bytes(32));
  s.csrf = crypto::to_hex(crypto::random_bytes(32));
  s.token = std::move(token);
  s.principal = std::move(principal);
  s.role = std::move(role);
  s.tenant = std::move(tenant);
  s.created = s.last_used = now;
  s.token_expires_unix_s = token_expires_unix_s;
  std::lock_guard lk(mu_);
  while (by_id_.size() >= lim_.max_sessions && !by_id_.empty()) {
    auto oldest = std::min_element(by_id_.begin(), by_id_.end(), [](const auto& a, const auto& b) {
      return a.second.last_used < b.second.last_used;
    });
    by_id_.erase(oldest);
  }
  by_id_[s.id] = s;
  return s;
}

result<session> session_table::use(const std::string& id, sys_ms now) {
  std::lock_guard lk(mu_);
  auto it = by_id_.find(id);
  if (id.empty() || it == by_id_.end())
    return make_error(errc::unauthenticated, "no session: log in with a token");
  auto& s = it->second;
  const char* why = nullptr;
  if (now - s.last_used > lim_.idle) why = "the session was idle too long: log in again";
  else if (now - s.created > lim_.absolute) why = "the session is too old: log in again";
  else if (s.token_expires_unix_s > 0 && now.count() / 1000 >= s.token_expires_unix_s)
    why = "the session's token has expired: log in with a new one";
  if (why) {
    by_id_.erase(it);
    return make_error(errc::unauthenticated, why);
  }
  s.last_used = now;
  return s;
}

status session_table::check_csrf(const session& s, const std::string& csrf) {
  if (csrf.size() != s.csrf.size() || CRYPTO_memcmp(csrf.data(), s.csrf.data(), csrf.size()) != 0)
    return make_error(errc::permission_denied,
                      "missing or wrong X-CSRF-Token: a state-changing call must carry its own session's token");
  return ok_status();
}

void session_table::close(const std::string& id) {
  std::lock_guard lk(mu_);
  by_id_.erase(id);
}

std::size_t session_table::size() const {
  std::lock_guard lk(mu_);
  return by_id_.size();
}

}  // namespace loom::console
