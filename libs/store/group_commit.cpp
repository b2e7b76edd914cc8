#include "libs/store/group_commit.hpp"

#include <future>
#include <vector>

namespace loom::store {

struct group_commit::item {
  std::function<status(transaction&)> unit;
  std::promise<status> done;
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
  item it{std::move(unit), {}};
  auto outcome = it.done.get_future();
  {
    std::lock_guard lk(mu_);
    if (stopping_) return make_error(errc::unavailable, "group_commit is shutting down");
    queue_.push_back(&it);
  }
  wake_.notify_one();
  return outcome.get();
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
    std::vector<item*> batch;
    {
      std::unique_lock lk(mu_);
      wake_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    std::vector<status> results(batch.size());
    status committed = db_->with_transaction([&](transaction& tx) -> status {
      for (std::size_t i = 0; i < batch.size(); ++i) results[i] = tx.nested(batch[i]->unit);
      return ok_status();
    });
    {
      std::lock_guard lk(mu_);
      ++commits_;
      units_ += batch.size();
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i]->done.set_value(!results[i].ok() ? results[i] : committed);
    }
  }
}

}  // namespace loom::store
