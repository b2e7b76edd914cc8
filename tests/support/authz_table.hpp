// The authorization table of docs/security.md ("## Authorization table") as
// data: one row per request type, the socket it goes to and one expected
// outcome per identity. The identity matrix test (identity_matrix_tests)
// checks the running services against it, so the documentation is the
// specification the test holds the code to. Header-only, tests only.
#pragma once

#include "libs/files/files.hpp"

#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace loom::test {

// The identities, in the table's column order.
inline const std::vector<std::string> authz_identities{"admin", "op-A",  "view-A",  "op-B",    "view-B",
                                                       "north", "south", "revoked", "trainer", "unenrolled"};

// allow: acted on (or refused by the service for its own reasons); deny:
// permission_denied / unauthenticated; hidden: not_found, or absent from a
// list; closed: the CURVE handshake refuses the key.
enum class outcome { allow, deny, hidden, closed };

inline const char* to_string(outcome o) {
  switch (o) {
    case outcome::allow: return "allow";
    case outcome::deny: return "deny";
    case outcome::hidden: return "hidden";
    case outcome::closed: return "closed";
  }
  return "?";
}

struct authz_row {
  std::string type;     // short name, e.g. "PingRequest"
  std::string service;  // "scheduler", ..., "aggregator delta socket", "ingest sync socket"
  std::map<std::string, outcome> cells;  // identity -> expected
  int line = 0;         // in docs/security.md
};

struct authz_table {
  std::map<std::string, authz_row> rows;
  std::vector<std::string> errors;  // malformed lines, unknown cells, duplicates
};

inline std::string trim(std::string s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '`')) s.erase(s.begin());
  while (!s.empty() && (s.back() == ' ' || s.back() == '`')) s.pop_back();
  return s;
}

// Parses the table that follows the "## Authorization table" heading: its
// header row must name the identities above in order.
inline authz_table parse_authz_table(const std::string& markdown) {
  authz_table t;
  std::istringstream in(markdown);
  std::string line;
  int n = 0;
  bool in_section = false, in_table = false;
  while (std::getline(in, line)) {
    ++n;
    if (line.rfind("## ", 0) == 0) {
      in_section = line == "## Authorization table";
      in_table = false;
      continue;
    }
    if (!in_section || line.empty() || line[0] != '|') {
      if (in_table) in_section = false;  // the table ended
      continue;
    }
    std::vector<std::string> cols;
    std::string cell;
    std::istringstream cells(line.substr(1));
    while (std::getline(cells, cell, '|')) cols.push_back(trim(cell));
    if (!in_table) {  // the header
      in_table = true;
      std::vector<std::string> want{"request", "service"};
      want.insert(want.end(), authz_identities.begin(), authz_identities.end());
      if (cols != want) t.errors.push_back("line " + std::to_string(n) + ": the header does not name the identities in order");
      continue;
    }
    if (cols.size() >= 1 && cols[0].rfind("---", 0) == 0) continue;  // the separator
    if (cols.size() != 2 + authz_identities.size()) {
      t.errors.push_back("line " + std::to_string(n) + ": " + std::to_string(cols.size()) + " cells");
      continue;
    }
    authz_row r{cols[0], cols[1], {}, n};
    for (std::size_t i = 0; i < authz_identities.size(); ++i) {
      const auto& v = cols[2 + i];
      outcome o;
      if (v == "allow") o = outcome::allow;
      else if (v == "deny") o = outcome::deny;
      else if (v == "hidden") o = outcome::hidden;
      else if (v == "closed") o = outcome::closed;
      else {
        t.errors.push_back("line " + std::to_string(n) + ": cell '" + v + "' for " + authz_identities[i]);
        continue;
      }
      r.cells[authz_identities[i]] = o;
    }
    if (t.rows.count(r.type)) t.errors.push_back("line " + std::to_string(n) + ": a second row for " + r.type);
    t.rows[r.type] = std::move(r);
  }
  return t;
}

}  // namespace loom::test
