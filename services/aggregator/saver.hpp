// saver: the engine's one thread that writes the jobs' saves (save_task,
// job_store.hpp) off the engine's lock, so that while a fragment's file goes
// to disk the delta server keeps taking deltas, pulls and other fragments'
// closes. One thread, first in first out: a job's saves run in the order of
// its closes, so each manifest names only files already written.
// Owned by the engine. push/forget/drain from any thread; `done` runs on the
// saver's thread with none of the saver's locks held (it may take the
// engine's).
#pragma once

#include "libs/status/status.hpp"

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace loom::aggregator {

struct save_task;

class saver {
 public:
  // After each save: the job, the task, what the write returned and how long it took.
  using done_fn = std::function<void(const std::string& job, const save_task& t, const status& st, double seconds)>;
  explicit saver(done_fn done);
  ~saver();  // writes what is queued (a clean stop loses no closed round), then stops
  saver(const saver&) = delete;
  saver& operator=(const saver&) = delete;

  void push(std::string job, std::shared_ptr<save_task> t);
  // Drops the queued saves of `job` and waits for the one being written, if
  // it is one of job's: once it returns nothing more is written for `job`
  // (its retirement removes its directory's state next).
  void forget(const std::string& job);
  // Waits until every save pushed before has been written and its `done`
  // has returned. REQUIRES: not holding a lock that `done` takes.
  void drain();

 private:
  void loop();

  done_fn done_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::string, std::shared_ptr<save_task>>> queue_;
  std::string writing_;      // the job whose save is being written ("" none)
  std::size_t unfinished_ = 0;  // pushed, and not yet done or forgotten
  bool quit_ = false;
  std::thread thread_;  // last: starts once the rest is made
};

}  // namespace loom::aggregator
