// Private to libs/store: the engine interface behind database/transaction.
// One connection per database object; used by one thread at a time.
// Implementations catch every engine exception and return loom::errc.
#pragma once

#include "libs/status/status.hpp"
#include "libs/store/database.hpp"
#include "libs/store/value.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::store::detail {

class connection {
 public:
  virtual ~connection() = default;
  virtual backend kind() const = 0;

  // BEGIN (read_only: a snapshot that never waits for writers and refuses
  // writes). A connection found broken here may be re-established (no work lost).
  virtual status begin(bool read_only) = 0;
  virtual status commit() = 0;
  virtual void rollback() noexcept = 0;

  virtual result<std::vector<row>> query(std::string_view sql, std::span<const value> params) = 0;
  virtual result<std::int64_t> exec(std::string_view sql, std::span<const value> params) = 0;
  virtual status exec_script(std::string_view sql) = 0;
  // SAVEPOINT / RELEASE / ROLLBACK TO: allowed in read transactions too.
  virtual status exec_control(const std::string& sql) = 0;

  // True once the link to the server is known to be lost (PostgreSQL only).
  virtual bool broken() const { return false; }
  // Replaces a broken link with a fresh one (prepared statements start over).
  virtual status reconnect() { return ok_status(); }
};

// The write fence's check (lease.cpp), run first in a write transaction of
// a fenced database: ok, or permission_denied naming the epochs.
status check_write_fence(connection& c);

// url_or_path as given to database::open; masked is what error messages show.
result<std::unique_ptr<connection>> open_sqlite(const std::string& path);
result<std::unique_ptr<connection>> open_postgres(const std::string& url, const std::string& masked);

// The URL libpq is given: connect_timeout=5 unless named, and, when the URL
// asks for TLS (sslmode require / verify-ca / verify-full),
// ssl_min_protocol_version=TLSv1.3 unless named.
std::string with_connect_defaults(const std::string& url);
// libpq's connect failure `message` -> the code (unavailable: worth retrying;
// a refusal over TLS, a CA or a password: not) and a hint to append ("" or " (...)").
std::pair<errc, std::string> explain_connect_error(const std::string& message);

// "$1" -> 1; 0 when `name` is not of that form.
int placeholder_number(std::string_view name);
// The highest $N in `sql` outside quotes, comments and $tag$ strings (0: none).
int highest_placeholder(std::string_view sql);
// The first `n` characters of `sql` on one line, for error messages.
std::string sql_excerpt(std::string_view sql, std::size_t n = 80);

}  // namespace loom::store::detail
