#include "libs/runtime/leadership.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/store/database.hpp"
#include "libs/store/lease.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace loom::runtime {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

leadership_options lease_timing_from_env(leadership_options o) {
  if (const char* v = std::getenv("LOOM_LEASE_TTL_MS"); v && *v) {
    const long ms = std::strtol(v, nullptr, 10);
    if (ms >= 50 && ms <= 60000) o.ttl = milliseconds(ms);
  }
  o.renew = std::max(milliseconds(5), o.ttl / 4);
  o.poll = std::max(milliseconds(5), o.ttl / 12);
  return o;
}

result<std::unique_ptr<leadership>> leadership::start(leadership_options o,
                                                      std::function<void(bool, std::int64_t)> on_change) {
  auto db = store::database::open(o.database_url);
  if (!db) return db.err();
  (*db)->set_fenced(false);
  if (auto st = store::ensure_lease_table(**db); !st) return st.err();
  store::set_write_fence(o.service);
  std::unique_ptr<leadership> l(new leadership(std::move(o), std::move(*db), std::move(on_change)));
  l->thread_ = std::thread([p = l.get()] { p->run(); });
  return l;
}

leadership::leadership(leadership_options o, std::unique_ptr<store::database> db,
                       std::function<void(bool, std::int64_t)> cb)
    : o_(std::move(o)), db_(std::move(db)), on_change_(std::move(cb)) {
  holder_ = o_.node_id + "#" + crypto::to_hex(crypto::random_bytes(6));
}

leadership::~leadership() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (leading_) {
    const auto e = epoch_.load();
    leading_ = false;
    store::set_fence_epoch(0);
    (void)store::release_lease(*db_, o_.service, holder_, e);  // a standby takes over at once
  }
}

leadership::view leadership::snapshot() const {
  std::lock_guard lock(mu_);
  view v = view_;
  v.leading = leading_;
  v.view_age_ms = seen_ == clock::time_point{}
                      ? -1
                      : std::chrono::duration_cast<milliseconds>(clock::now() - seen_).count();
  return v;
}

void leadership::step_down(const std::string& why) {
  leading_ = false;
  store::set_fence_epoch(0);
  {
    std::lock_guard lock(mu_);  // who leads now is read at the next poll
    view_.leader.clear();
    view_.leader_endpoint.clear();
    view_.lease_left_ms = 0;
  }
  std::fprintf(stderr, "loom-%s: %s steps down at epoch %lld: %s\n", o_.service.c_str(), o_.node_id.c_str(),
               static_cast<long long>(epoch_.load()), why.c_str());
  if (on_change_) on_change_(false, epoch_.load());
}

void leadership::run() {
  clock::time_point local_deadline{};  // leading: when our last renewal runs out by our clock
  clock::time_point last_sent{};       // leading: renewals start every `renew`, however long one took
  for (;;) {
    {
      const auto wait = leading_ ? std::max<clock::duration>(clock::duration::zero(), last_sent + o_.renew - clock::now())
                                 : clock::duration(o_.poll);
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, wait, [&] { return stop_; })) return;
    }
    const auto sent = clock::now();
    last_sent = sent;
    if (leading_) {
      auto r = store::renew_lease(*db_, o_.service, holder_, epoch_.load(), o_.ttl);
      const auto took = std::chrono::duration_cast<milliseconds>(clock::now() - sent);
      if (took > o_.ttl / 2 || !r)
        std::fprintf(stderr, "loom-%s: %s: renewing the lease took %lld ms%s%s\n", o_.service.c_str(),
                     o_.node_id.c_str(), static_cast<long long>(took.count()), r ? "" : ": ",
                     r ? "" : r.err().message.c_str());
      if (r) {
        local_deadline = sent + o_.ttl;
        std::lock_guard lock(mu_);
        view_.epoch = r->epoch;
        view_.lease_left_ms = r->left_ms();
        view_.last_error.clear();
        seen_ = clock::now();
        continue;
      }
      {
        std::lock_guard lock(mu_);
        view_.last_error = r.err().message;
      }
      if (r.code() == errc::permission_denied) {
        step_down(r.err().message);
      } else if (clock::now() >= local_deadline) {
        step_down("the store did not confirm the lease before it ran out (" + r.err().message + ")");
      }
      continue;
    }
    // Standing by: read; take the lease when it has run out.
    auto cur = store::read_lease(*db_, o_.service);
    if (!cur) {
      std::lock_guard lock(mu_);
      view_.last_error = cur.err().message;
      continue;
    }
    if (*cur && (*cur)->live()) {
      std::lock_guard lock(mu_);
      view_.epoch = (*cur)->epoch;
      view_.leader = (*cur)->holder.substr(0, (*cur)->holder.find('#'));
      view_.leader_endpoint = (*cur)->endpoint;
      view_.lease_left_ms = (*cur)->left_ms();
      view_.last_error.clear();
      seen_ = clock::now();
      continue;
    }
    auto got = store::acquire_lease(*db_, o_.service, holder_, o_.endpoint, o_.ttl);
    if (!got) {
      std::lock_guard lock(mu_);
      view_.last_error = got.err().message;
      continue;
    }
    {
      std::lock_guard lock(mu_);
      view_.epoch = got->epoch;
      view_.leader = got->holder.substr(0, got->holder.find('#'));
      view_.leader_endpoint = got->endpoint;
      view_.lease_left_ms = got->left_ms();
      view_.last_error.clear();
      seen_ = clock::now();
      if (got->holder == holder_) ++view_.takeovers;
    }
    if (got->holder != holder_) continue;  // another was quicker
    local_deadline = sent + o_.ttl;
    epoch_ = got->epoch;
    store::set_fence_epoch(got->epoch);  // before anyone sees us leading
    leading_ = true;
    std::fprintf(stderr, "loom-%s: %s leads at epoch %lld\n", o_.service.c_str(), o_.node_id.c_str(),
                 static_cast<long long>(got->epoch));
    if (on_change_) on_change_(true, got->epoch);
  }
}

}  // namespace loom::runtime
