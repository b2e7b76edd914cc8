// An environment variable set (or, with nullptr, unset) for a scope, and put
// back as it was at its end: the processes a test starts meanwhile inherit it.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace loom::test {

struct scoped_env {
  std::string name;
  std::optional<std::string> was;
  scoped_env(std::string n, const char* value) : name(std::move(n)) {
    if (const char* old = std::getenv(name.c_str())) was = old;
    if (value) ::setenv(name.c_str(), value, 1);
    else ::unsetenv(name.c_str());
  }
  ~scoped_env() {
    if (was) ::setenv(name.c_str(), was->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;
};

}  // namespace loom::test
