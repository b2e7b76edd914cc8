// loom::runtime::commit_ticket: "this request's state change is durable" as a
// value a logic hands back with its reply (handled::durable). A logic that
// writes through a group commit (libs/store/group_commit.hpp) answers at once
// with a ticket; the gateway holds the reply, and its audit record, until the
// ticket resolves: ok → the reply goes out; an error → the caller gets it
// instead (the request's effect was not kept). Thread-safe: resolve() from the
// committer thread, the rest from the gateway's.
#pragma once

#include "libs/status/status.hpp"

#include <functional>
#include <mutex>
#include <optional>

namespace loom::runtime {

class commit_ticket {
 public:
  // The first outcome counts; later calls are ignored.
  void resolve(status s) {
    std::function<void()> fn;
    {
      std::lock_guard lk(mu_);
      if (outcome_) return;
      outcome_ = std::move(s);
      fn = std::move(on_resolved_);
    }
    if (fn) fn();
  }
  std::optional<status> outcome() const {
    std::lock_guard lk(mu_);
    return outcome_;
  }
  // Calls fn once when the ticket resolves (on the resolving thread), or now
  // when it already has.
  void on_resolved(std::function<void()> fn) {
    {
      std::lock_guard lk(mu_);
      if (!outcome_) {
        on_resolved_ = std::move(fn);
        return;
      }
    }
    fn();
  }

 private:
  mutable std::mutex mu_;
  std::optional<status> outcome_;
  std::function<void()> on_resolved_;
};

}  // namespace loom::runtime
