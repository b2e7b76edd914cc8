// loom::store values and rows: what goes into a statement as a parameter and
// what comes back from a query, the same on SQLite and PostgreSQL.
// Plain value types; no thread-safety concerns beyond those of std::string.
//
// Column type -> value kind (both engines):
//   BIGINT / INTEGER (and PostgreSQL booleans, counts) -> std::int64_t
//   DOUBLE PRECISION                                   -> double
//   TEXT                                               -> std::string
//   BYTEA (BLOB affinity in SQLite)                    -> blob
//   NULL                                               -> std::monostate
// PostgreSQL NUMERIC (e.g. SUM(bigint)) comes back as int64 when integral.
#pragma once

#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace loom::store {

// Binary data (may contain NUL bytes); a distinct type so text and bytes never mix.
struct blob {
  std::string bytes;
  bool operator==(const blob&) const = default;
};

// A parameter or a column value. Integers of any width up to int64 convert
// implicitly; cast std::uint64_t yourself (stored as its int64 bit pattern).
// Text must not contain NUL bytes (PostgreSQL refuses them): use blob.
using value = std::variant<std::monostate, std::int64_t, double, std::string, blob>;

inline constexpr std::monostate null{};

// "null", "int64", "double", "text" or "blob".
std::string_view kind_name(const value& v);

// One result row. Columns are addressed by 0-based index or by name; a missing
// column or a value of another kind is invalid_argument naming the column.
class row {
 public:
  row(std::shared_ptr<const std::vector<std::string>> names, std::vector<value> values)
      : names_(std::move(names)), values_(std::move(values)) {}

  std::size_t size() const { return values_.size(); }
  const std::vector<std::string>& names() const { return *names_; }

  // REQUIRES: i < size().
  const value& operator[](std::size_t i) const { return values_[i]; }

  bool is_null(std::size_t i) const;
  result<std::int64_t> get_i64(std::size_t i) const;
  result<double> get_f64(std::size_t i) const;  // an int64 converts
  result<std::string> get_text(std::size_t i) const;
  result<blob> get_blob(std::size_t i) const;

  result<std::size_t> index_of(std::string_view column) const;
  result<bool> is_null(std::string_view column) const;
  result<std::int64_t> get_i64(std::string_view column) const;
  result<double> get_f64(std::string_view column) const;
  result<std::string> get_text(std::string_view column) const;
  result<blob> get_blob(std::string_view column) const;

 private:
  template <class T>
  result<T> typed(std::size_t i) const;

  std::shared_ptr<const std::vector<std::string>> names_;  // shared by a query's rows
  std::vector<value> values_;
};

}  // namespace loom::store
