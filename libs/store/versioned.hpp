// Optimistic versioning for state machines (nodes, jobs, stages, …): a
// versioned table has a column `row_version BIGINT NOT NULL`; a writer reads a
// row with its row_version, decides, and writes back only if nobody else wrote
// in between. Of two writers racing from the same version exactly one wins;
// the other gets errc::conflict and re-reads — no update is ever lost.
// Stateless; runs inside the caller's transaction.
#pragma once

#include "libs/status/status.hpp"
#include "libs/store/database.hpp"
#include "libs/store/value.hpp"

#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace loom::store {

// UPDATE <table> SET <set_clause>, row_version = row_version + 1
//   WHERE <key_column> = key AND row_version = expected_version
// set_clause uses $1..$n for `params` (empty: only the version moves on).
// Returns the new row_version (expected_version + 1).
// Errors: conflict "<table> '<key>' changed concurrently: row_version is N,
// expected M"; not_found when no row has that key; invalid_argument for a table
// or column that is not a plain identifier; any statement error as is.
result<std::int64_t> update_versioned(transaction& tx, std::string_view table, std::string_view key_column,
                                      const value& key, std::int64_t expected_version,
                                      std::string_view set_clause, std::initializer_list<value> params = {});

}  // namespace loom::store
