// loom_json(): a `loom` command with --json, its output parsed — the helper
// the cross-process tests share. Header-only (it brings nlohmann/json only to
// the tests that use it); tests only.
#pragma once

#include "tests/support/harness.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

namespace loom::test {

// `loom ARGS... --json --data-dir home`: its JSON, or an empty object when it
// printed none — its stderr then goes to std::cerr (ctest --output-on-failure
// shows it). `code`, when given, receives the exit code.
inline nlohmann::json loom_json(const std::string& home, std::vector<std::string> args,
                                std::chrono::seconds timeout = std::chrono::seconds(60), int* code = nullptr) {
  args.push_back("--json");
  auto r = run_loom(home, args, timeout);
  if (code) *code = r.code;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded() || r.code != 0) std::cerr << "loom " << args.front() << " (exit " << r.code << "): " << r.err;
  return j.is_discarded() ? nlohmann::json::object() : j;
}

}  // namespace loom::test
