// Wall-clock time as EdgeLoom stores and sends it: integer seconds or
// nanoseconds since the Unix epoch (the *_unix_ns / *_unix_s fields of every
// proto and table), and the one way it is printed for people (ISO 8601, UTC).
// Lives beside loom::errc because, like it, every library speaks it.
// Stateless functions; thread-safe (gmtime_r).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace loom {

// Nanoseconds since the epoch of `t` (negative before 1970).
std::int64_t unix_ns(std::chrono::system_clock::time_point t);
// The system clock now, in nanoseconds / whole seconds since the epoch.
std::int64_t unix_now_ns();
std::int64_t unix_now_s();

// "2024-05-01T12:00:00Z": `unix_s` in UTC, whole seconds; `sep` between the
// date and the time ('T', or ' ' for tables). "" when gmtime cannot place it.
std::string utc_text(std::int64_t unix_s, char sep = 'T');

}  // namespace loom
