// loom::retry::backoff: delays for retrying or restarting something that
// keeps failing — exponential, capped, with optional deterministic jitter.
// Pure value type: no clock, no sleeping; the caller waits next() itself.
// Not thread-safe; one owner (e.g. the supervisor actor) uses it. A library
// of its own so the CLI (the watcher) and the store use it without the runtime.
#pragma once

#include <chrono>
#include <cstdint>

namespace loom::retry {

class backoff {
 public:
  // The n-th call to next() (n = 0, 1, ...) returns
  //   min(max, initial * factor^n * (1 + u)),  u uniform in [-jitter, +jitter].
  // Defaults, and why:
  //  * factor 2.0: doubling reaches any cap in a handful of steps while halving
  //    the retry rate each time — the usual choice (TCP, Erlang, gRPC).
  //  * jitter 0.0: one supervisor restarting one actor has nobody to
  //    desynchronise from, so exact delays are simpler to reason about; turn it
  //    on (e.g. 0.2) when many clients retry against one server.
  //  * seed 0: jitter is reproducible by default (tests, replayed incidents).
  // Out-of-range arguments are normalised, not rejected: factor < 1 -> 1,
  // jitter clamped to [0, 1], negative initial -> 0, max < initial -> initial.
  backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double factor = 2.0,
          double jitter = 0.0, std::uint64_t seed = 0);

  // The delay before the next attempt; counts one attempt. `max` is a hard ceiling.
  std::chrono::milliseconds next();
  // Back to the initial delay (after a success); the jitter sequence continues.
  void reset();
  // Calls to next() since construction or the last reset().
  int attempts() const { return attempts_; }

 private:
  double uniform();  // in [0, 1), from a splitmix64 stream: same on every platform

  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  double factor_;
  double jitter_;
  std::uint64_t rng_state_;
  int attempts_ = 0;
};

}  // namespace loom::retry
