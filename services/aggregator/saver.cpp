#include "services/aggregator/saver.hpp"

#include "services/aggregator/job_store.hpp"

#include <algorithm>
#include <chrono>

namespace loom::aggregator {

saver::saver(done_fn done) : done_(std::move(done)), thread_([this] { loop(); }) {}

saver::~saver() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void saver::push(std::string job, std::shared_ptr<save_task> t) {
  {
    std::lock_guard lock(mu_);
    queue_.emplace_back(std::move(job), std::move(t));
    ++unfinished_;
  }
  cv_.notify_all();
}

void saver::forget(const std::string& job) {
  std::unique_lock lock(mu_);
  const auto before = queue_.size();
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [&](const auto& q) { return q.first == job; }),
               queue_.end());
  unfinished_ -= before - queue_.size();
  cv_.wait(lock, [&] { return writing_ != job; });
  cv_.notify_all();  // drain() may be waiting on the count
}

void saver::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return unfinished_ == 0; });
}

void saver::loop() {
  for (;;) {
    std::pair<std::string, std::shared_ptr<save_task>> next;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return quit_ || !queue_.empty(); });
      if (queue_.empty()) return;  // quit, and nothing left to write
      next = std::move(queue_.front());
      queue_.pop_front();
      writing_ = next.first;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const status st = run_save(*next.second);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    {
      std::lock_guard lock(mu_);
      writing_.clear();
    }
    cv_.notify_all();  // forget() of this job may go on
    if (done_) done_(next.first, *next.second, st, secs);
    {
      std::lock_guard lock(mu_);
      --unfinished_;
    }
    cv_.notify_all();
  }
}

}  // namespace loom::aggregator
