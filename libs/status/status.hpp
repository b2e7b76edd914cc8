// loom::errc and loom::result<T>: the one error vocabulary of every fallible
// call in EdgeLoom. On the wire it becomes loom.v1.Status (libs/wire maps it).
// Value types; no thread-safety concerns beyond those of std::string.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace loom {

// Same numbering as loom.v1.Code (proto/loom/v1/common.proto).
enum class errc : int {
  ok = 0,
  invalid_argument = 1,
  not_found = 2,
  already_exists = 3,
  conflict = 4,
  corruption = 5,
  unavailable = 6,
  deadline_exceeded = 7,
  permission_denied = 8,
  unauthenticated = 9,
  resource_exhausted = 10,
  unimplemented = 11,
  device_failure = 12,
  internal = 13,
};

// Stable lower-case name ("permission_denied"); "unknown" for out-of-range values.
std::string_view to_string(errc c);
// Inverse of to_string; nullopt for unknown names.
std::optional<errc> errc_from_string(std::string_view name);
// CLI exit code for an error: 3 permission/authentication, 4 unavailable/deadline, else 1.
int exit_code(errc c);

// An error: a code and a message naming what was wrong and where.
struct error {
  errc code = errc::internal;
  std::string message;

  std::string to_string() const;  // "permission_denied: <message>"
};

inline error make_error(errc c, std::string msg) { return error{c, std::move(msg)}; }

// result<T>: a T or an error. REQUIRES: value() only when ok(), err() only when !ok().
template <class T>
class [[nodiscard]] result {
 public:
  result(T v) : v_(std::move(v)) {}
  result(error e) : v_(std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const error& err() const { return std::get<1>(v_); }
  errc code() const { return ok() ? errc::ok : err().code; }

 private:
  std::variant<T, error> v_;
};

// result<void>: success or an error.
template <>
class [[nodiscard]] result<void> {
 public:
  result() = default;
  result(error e) : e_(std::move(e)) {}

  bool ok() const { return !e_.has_value(); }
  explicit operator bool() const { return ok(); }
  const error& err() const { return *e_; }
  errc code() const { return ok() ? errc::ok : e_->code; }

 private:
  std::optional<error> e_;
};

using status = result<void>;

inline status ok_status() { return {}; }

}  // namespace loom
