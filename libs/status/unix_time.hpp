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

// The wall clock the product reads: the system's, shifted while the chaos
// harness's clock fault is armed — $LOOM_FAULTS_DIR/clock holding a signed
// number of seconds (libs/files/fault.hpp), as a host whose clock steps (NTP,
// a VM resumed) — re-read at most every 50 ms. Without the variable it is the
// system clock (one getenv per 50 ms). Every product read of "now" as a date
// goes through it; durations use steady_clock.
std::chrono::system_clock::time_point wall_now();

// wall_now() as this process first read it, advanced by the steady clock
// since: a step of the host's clock does not move it, so a scheduler's
// liveness windows and deadlines, measured in it, survive a clock that jumps
// for a moment (the chaos harness found every trainer declared dead, and its
// stage requeued, by a +120 s step of 1.4 s). A disagreement with wall_now()
// of more than a second that lasts 60 s is a correction (NTP, an operator),
// and is taken then, in one step. Thread-safe.
std::chrono::system_clock::time_point steady_wall_now();

// Nanoseconds since the epoch of `t` (negative before 1970).
std::int64_t unix_ns(std::chrono::system_clock::time_point t);
// wall_now(), in nanoseconds / whole seconds since the epoch.
std::int64_t unix_now_ns();
std::int64_t unix_now_s();

// "2024-05-01T12:00:00Z": `unix_s` in UTC, whole seconds; `sep` between the
// date and the time ('T', or ' ' for tables). "" when gmtime cannot place it.
std::string utc_text(std::int64_t unix_s, char sep = 'T');

}  // namespace loom
