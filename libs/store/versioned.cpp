#include "libs/store/versioned.hpp"

#include "libs/store/identifier.hpp"

#include <vector>

namespace loom::store {
namespace {

std::string show(const value& v) {
  switch (v.index()) {
    case 0: return "NULL";
    case 1: return std::to_string(std::get<1>(v));
    case 2: return std::to_string(std::get<2>(v));
    case 3: return "'" + std::get<3>(v) + "'";
    default: return "<blob of " + std::to_string(std::get<4>(v).bytes.size()) + " bytes>";
  }
}

}  // namespace

result<std::int64_t> update_versioned(transaction& tx, std::string_view table, std::string_view key_column,
                                      const value& key, std::int64_t expected_version,
                                      std::string_view set_clause, std::initializer_list<value> params) {
  if (!is_identifier(table) || !is_identifier(key_column)) {
    return make_error(errc::invalid_argument, "update_versioned: table '" + std::string(table) + "' and key '" +
                                                  std::string(key_column) + "' must be plain names");
  }
  const std::string t(table), k(key_column);
  const auto n = params.size();
  std::string sql = "UPDATE " + t + " SET ";
  if (!set_clause.empty()) sql += std::string(set_clause) + ", ";
  sql += "row_version = row_version + 1 WHERE " + k + " = $" + std::to_string(n + 1) +
         " AND row_version = $" + std::to_string(n + 2);
  std::vector<value> all;
  all.reserve(n + 2);
  all.insert(all.end(), params.begin(), params.end());
  all.push_back(key);
  all.push_back(expected_version);
  auto changed = tx.exec(sql, all);
  if (!changed.ok()) return changed.err();
  if (*changed == 1) return expected_version + 1;
  if (*changed > 1) {
    return make_error(errc::invalid_argument, "update_versioned: " + k + " is not unique in " + t);
  }
  auto now = tx.query("SELECT row_version FROM " + t + " WHERE " + k + " = $1", {key});
  if (!now.ok()) return now.err();
  if (now->empty()) return make_error(errc::not_found, t + " " + show(key) + " not found");
  auto v = (*now)[0].get_i64(0);
  return make_error(errc::conflict, t + " " + show(key) + " changed concurrently: row_version is " +
                                        (v.ok() ? std::to_string(*v) : std::string("?")) + ", expected " +
                                        std::to_string(expected_version));
}

}  // namespace loom::store
