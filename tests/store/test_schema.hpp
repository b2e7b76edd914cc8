// Tables shared by store_writer and the cross-process store tests.
//   crash_rows/crash_counter: each writer transaction inserts K rows tagged
//     txn = counter + 1 and bumps the counter, so a visible partial transaction
//     shows up as rows != K × counter.
//   race_rows: a few versioned rows two processes fight over; value is bumped
//     together with row_version, so value == row_version means no lost update.
#pragma once

#include "libs/store/migrate.hpp"

#include <span>

namespace loom::store_test {

inline std::span<const store::migration> test_migrations() {
  static const store::migration all[] = {
      {.owner = "store_test",
       .version = 1,
       .description = "crash and race tables",
       .sql = R"sql(
CREATE TABLE crash_rows (txn BIGINT NOT NULL, i BIGINT NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (txn, i));
CREATE TABLE crash_counter (id BIGINT NOT NULL PRIMARY KEY, n BIGINT NOT NULL);
INSERT INTO crash_counter (id, n) VALUES (1, 0);
CREATE TABLE race_rows (id BIGINT NOT NULL PRIMARY KEY, value BIGINT NOT NULL, row_version BIGINT NOT NULL);
INSERT INTO race_rows (id, value, row_version) VALUES (1, 0, 0), (2, 0, 0), (3, 0, 0);
)sql"},
  };
  return all;
}

inline constexpr int race_row_count = 3;

}  // namespace loom::store_test
