#include "services/console/change_feed.hpp"

#include "libs/wire/pubsub.hpp"

#include <memory>

namespace loom::console {

change_feed::change_feed(zmq::context_t& ctx, layout::paths paths, wire::curve_keypair mine)
    : ctx_(ctx), paths_(std::move(paths)), mine_(std::move(mine)), thread_([this] { run(); }) {}

change_feed::~change_feed() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::uint64_t change_feed::wait(std::uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return gen_.load() != seen || stop_.load(); });
  return gen_.load();
}

void change_feed::run() {
  std::unique_ptr<wire::subscriber> sub;
  std::string endpoint;
  while (!stop_) {
    if (!sub) {  // the scheduler's event endpoint, once endpoints.json names it
      auto eps = layout::read_endpoints(paths_.endpoints());
      const auto* s = eps ? eps->find("scheduler") : nullptr;
      auto key = wire::load_public_key(paths_.curve_dir(), "scheduler");
      if (!s || s->data.empty() || !key) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      endpoint = s->data;
      sub = std::make_unique<wire::subscriber>(ctx_, endpoint, *key, mine_);
      sub->subscribe("");
      // Events sent before the subscription took hold are missed: one wake-up now.
      ++gen_;
      cv_.notify_all();
    }
    auto e = sub->recv(std::chrono::milliseconds(200));
    if (!e) continue;
    ++events_;
    {
      std::lock_guard lk(mu_);
      ++gen_;
    }
    cv_.notify_all();
  }
  std::lock_guard lk(mu_);
  cv_.notify_all();
}

}  // namespace loom::console
