#include "libs/store/group_commit.hpp"

#include <future>
#include <vector>

namespace loom::store {

struct group_commit::item {
  std::function<status(transaction&)> unit;
  std::function<void(status)> done;
};

group_commit::group_commit(std::unique_ptr<database> db, std::size_t max_batch)
    : db_(std::move(db)), max_batch_(max_batch == 0 ? 1 : max_batch), committer_([this] { loop(); }) {}

group_commit::~group_commit() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  committer_.join();
}

status group_commit::submit(std::function<status(transaction&)> unit) {
  std::promise<status> p;
  auto outcome = p.get_future();
  submit_async(std::move(unit), [&p](status s) { p.set_value(std::move(s)); });
  return outcome.get();
}

void group_commit::submit_async(std::function<status(transaction&)> unit, std::function<void(status)> done) {
  {
    std::lock_guard lk(mu_);
    if (!stopping_) {
      queue_.push_back({std::move(unit), std::move(done)});
      wake_.notify_one();
      return;
    }
  }
  done(make_error(errc::unavailable, "group_commit is shutting down"));
}

std::uint64_t group_commit::commits() const {
  std::lock_guard lk(mu_);
  return commits_;
}

std::uint64_t group_commit::units() const {
  std::lock_guard lk(mu_);
  return units_;
}

void group_commit::loop() {
  for (;;) {
    std::vector<item> batch;
    {
      std::unique_lock lk(mu_);
      wake_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    std::vector<status> results(batch.size());
    status committed = db_->with_transaction([&](transaction& tx) -> status {
      for (std::size_t i = 0; i < batch.size(); ++i) results[i] = tx.nested(batch[i].unit);
      return ok_status();
    });
    {
      std::lock_guard lk(mu_);
      ++commits_;
      units_ += batch.size();
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i].done(!results[i].ok() ? results[i] : committed);
    }
  }
}

}  // namespace loom::store
