// loom::store::group_commit: small transactions from many threads share one
// durable commit. A commit costs one fsync (SQLite: of the WAL; 0.3-5 ms on
// this class of disk), and SQLite has a single write lock, so one writer
// committing alone tops out at 1/fsync. Here a committer thread takes every
// unit queued while the previous commit was flushing, runs each in its own
// savepoint (transaction::nested), in submission order, and commits once.
// PostgreSQL gets the same from many connections committing at once; this
// class works on both engines.
//
// submit() returns when the unit's outcome is known (submit_async() calls back):
//   ok          the unit ran and the batch commit is durable;
//   its error   the unit failed: its own changes were undone, the batch went on;
//   commit's    the batch did not commit: nothing of it was kept.
// Units run on the committer thread and must not block on other units.
// Thread-safe: submit() from any number of threads. Owns its database.
#pragma once

#include "libs/status/status.hpp"
#include "libs/store/database.hpp"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

namespace loom::store {

class group_commit {
 public:
  // max_batch bounds the units in one transaction (and so the work lost to one
  // failed commit); 256 amortises an fsync well below a millisecond per unit.
  explicit group_commit(std::unique_ptr<database> db, std::size_t max_batch = 256);
  ~group_commit();  // runs what is queued, then stops
  group_commit(const group_commit&) = delete;
  group_commit& operator=(const group_commit&) = delete;

  status submit(std::function<status(transaction&)> unit);
  // Queues the unit and returns at once; `done` gets the outcome as submit()
  // would return it, on the committer thread, in submission order. A unit
  // queued while shutting down is answered unavailable at once.
  void submit_async(std::function<status(transaction&)> unit, std::function<void(status)> done);

  // Typed form: fn(transaction&) -> result<T>.
  template <class F>
  auto run(F&& fn) -> std::invoke_result_t<F&, transaction&>;

  // Commits made and units run so far (for metrics and the bench).
  std::uint64_t commits() const;
  std::uint64_t units() const;

 private:
  struct item;
  void loop();

  std::unique_ptr<database> db_;  // used by the committer thread only
  const std::size_t max_batch_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<item> queue_;
  bool stopping_ = false;
  std::uint64_t commits_ = 0, units_ = 0;
  std::thread committer_;
};

template <class F>
auto group_commit::run(F&& fn) -> std::invoke_result_t<F&, transaction&> {
  using R = std::invoke_result_t<F&, transaction&>;
  std::optional<R> out;  // written on the committer thread before submit() returns
  status s = submit([&](transaction& tx) -> status {
    out.emplace(fn(tx));
    if (!out->ok()) return out->err();
    return ok_status();
  });
  if (!s.ok()) return s.err();
  return std::move(*out);
}

}  // namespace loom::store
