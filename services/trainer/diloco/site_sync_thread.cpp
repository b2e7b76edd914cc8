// site_sync, the sync thread's side: it takes the fragments the training
// thread handed over, sends their deltas, polls until their round's version
// comes and hands the new global fragments back. Every network wait, retry
// and backoff of a diloco stage happens here (site_sync.hpp).
#include "services/trainer/diloco/site_sync.hpp"

#include "loom/v1/aggregator.pb.h"

#include <algorithm>
#include <cmath>

namespace loom::trainer {

namespace {
// Between two polls of a fragment whose round is open: a round closes within
// milliseconds of its last delta, and its version is merged only at the next
// step boundary (tens of ms at least), so polling faster than 10 ms buys
// nothing; after `fast_for` the round waits for a slower site and a look every
// `slow_gap` will do. Every site polls the one aggregator thread, which also
// runs the outer steps and saves the job's state: on a box where the sites
// and the aggregator share two cores, 2 ms polls from four sites (2000
// requests a second) starved it into 2 s timeouts.
constexpr std::chrono::milliseconds fast_gap{10}, slow_gap{50}, fast_for{200};
// After a request found no aggregator: the next one no sooner than this,
// doubling to the cap (each try costs the sync thread the request timeout),
// so a returning aggregator is noticed within a few seconds.
constexpr std::chrono::milliseconds first_backoff{250}, max_backoff{4000};

double rel_error(std::span<const float> x, std::span<const float> y) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    num += double(x[i] - y[i]) * double(x[i] - y[i]);
    den += double(x[i]) * double(x[i]);
  }
  return den > 0 ? std::sqrt(num / den) : -1.0;  // -1: a zero delta (nothing trained since the last)
}
}  // namespace

void site_sync::unreachable(const error& e) {
  backoff_ = backoff_.count() == 0 ? first_backoff : std::min(max_backoff, backoff_ * 2);
  retry_at_ = clock::now() + backoff_;
  {
    std::lock_guard lock(mu_);
    ++stats_.unreachable;
    reachable_ = false;
  }
  came_back_.notify_all();  // a training thread waiting for a version trains on
  if (backoff_ == first_backoff) say("aggregator unreachable, training on: " + e.message);
}

void site_sync::answered() {
  backoff_ = std::chrono::milliseconds(0);
  std::lock_guard lock(mu_);
  reachable_ = true;
}

void site_sync::asking(bool on) {
  std::lock_guard lock(mu_);
  asking_since_ = on ? clock::now() : clock::time_point{};
}

site_sync::clock::time_point site_sync::wake_at() const {
  auto at = clock::time_point::max();
  for (const auto& j : jobs_)
    if (j.held) at = std::min(at, j.sent ? j.next_poll : clock::now());
  return std::max(at, retry_at_);
}

void site_sync::loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      auto handed = [&] {
        return std::any_of(slots_.begin(), slots_.end(), [](const slot& s) { return s.at == slot::phase::queued; });
      };
      const auto at = wake_at();
      if (at == clock::time_point::max())
        wake_.wait(lock, [&] { return quit_ || handed(); });
      else
        wake_.wait_until(lock, at, [&] { return quit_ || (handed() && clock::now() >= retry_at_); });
      if (quit_) return;
      if (!fatal_) {  // a refusal retrying cannot fix: the training thread reports it
        wake_.wait(lock, [&] { return quit_; });
        return;
      }
      for (int p = 0; p < frags_; ++p)
        if (slots_[p].at == slot::phase::queued) {
          jobs_[p] = hold{true, false, false, slots_[p].sent, slots_[p].tokens};
          slots_[p].at = slot::phase::out;
        }
    }
    if (clock::now() < retry_at_) continue;
    for (int p = 0; p < frags_ && clock::now() >= retry_at_; ++p) {
      if (!jobs_[p].held) continue;
      if (auto st = work(p, jobs_[p]); !st) {
        std::lock_guard lock(mu_);
        fatal_ = st;
        break;
      }
    }
    std::lock_guard lock(mu_);
    stats_.wire = client_->stats();
  }
}

status site_sync::work(int p, hold& j) {
  if (!j.sent) return send(p, j);
  if (clock::now() < j.next_poll) return ok_status();
  asking(true);
  auto got = client_->poll(p, shadow_);  // re-sends what a restarted aggregator lost
  asking(false);
  if (!got) {
    if (got.code() != errc::unavailable) return got.err();
    unreachable(got.err());
    return ok_status();
  }
  answered();
  if (*got && !client_->pending(p)) {
    returned(p, j);
    return ok_status();
  }
  j.next_poll = clock::now() + (clock::now() - j.sent_at < fast_for ? fast_gap : slow_gap);
  return ok_status();
}

status site_sync::send(int p, hold& j) {
  // θ_sent[p] into the scratch: Δ_p = θ_a[p] − θ_sent[p] is taken from it.
  client_->plan().scatter(p, *j.source, shadow_);
  if (!client_->pending(p)) {  // a round closed without us (deadline, stale drop): its version first
    asking(true);
    auto newer = client_->poll(p, shadow_);
    asking(false);
    if (!newer && newer.code() == errc::unavailable) {
      unreachable(newer.err());
      return ok_status();
    }
    if (!newer) return newer.err();
    answered();
  }
  if (fresh_[p]) {  // the first delta of p since joining: is this round's in already?
    asking(true);
    auto in = already_in(p);
    asking(false);
    if (!in) {
      if (in.code() != errc::unavailable) return in.err();
      unreachable(in.err());
      return ok_status();
    }
    fresh_[p] = false;
    if (*in) {  // sent before this run restarted: the round holds it; wait for its version
      say("fragment " + std::to_string(p) + ": this site's delta for round " +
          std::to_string(client_->state().version(p)) + " is in already (sent before a restart)");
      j.sent = true;
      j.sent_at = clock::now();
      j.next_poll = j.sent_at + fast_gap;
      return ok_status();
    }
  }
  measure_codec(p);
  asking(true);
  const auto bytes_before = client_->stats().payload_bytes_sent;
  const auto send_at = clock::now();
  auto ack = client_->send_delta(p, shadow_, j.tokens);
  const double send_s = std::chrono::duration<double>(clock::now() - send_at).count();
  asking(false);
  j.sent = true;  // pending in the client from here, answered or not: a poll re-sends it
  j.sent_at = clock::now();
  j.next_poll = j.sent_at + fast_gap;
  {
    std::lock_guard lock(mu_);
    ++stats_.syncs;
    if (ack) {  // acknowledged: the payload crossed the link in send_s (RTT included)
      up_rate_.add(client_->stats().payload_bytes_sent - bytes_before, send_s);
      stats_.up_bytes_per_s = up_rate_.bytes_per_s();
    }
    if (ack && ack->late) ++stats_.late;
    if (!ack && ack.code() == errc::deadline_exceeded) ++stats_.dropped;
  }
  if (ack || ack.code() == errc::deadline_exceeded) {  // stale: dropped; the next poll catches up
    answered();
    j.dropped = !ack;
    if (!ack) say("delta of fragment " + std::to_string(p) + " dropped as stale: " + ack.err().message);
    return ok_status();
  }
  if (ack.code() == errc::unavailable) {
    unreachable(ack.err());
    return ok_status();
  }
  return make_error(ack.code(), "the aggregator refused the delta of fragment " + std::to_string(p) + ": " +
                                    ack.err().message);
}

void site_sync::returned(int p, hold& j) {
  // site_state merged θ_new into the scratch and made it the anchor: hand it back.
  std::vector<float> global(client_->plan().size(p));
  client_->plan().gather(p, client_->state().anchor(), global);
  const double ms = std::chrono::duration<double, std::milli>(clock::now() - j.sent_at).count();
  {
    std::lock_guard lock(mu_);
    slot& s = slots_[p];
    s.global = std::move(global);
    s.version = client_->state().version(p);
    s.at = slot::phase::back;
    stats_.sync_ms.push_back(ms);
    if (ms > o_.sync_wait_s * 1000) ++stats_.late_merges;
    if (!j.dropped) ++stats_.rounds_joined;
  }
  j = hold{};
  came_back_.notify_all();
}

result<bool> site_sync::already_in(int p) {
  loom::v1::GlobalPull q;
  q.set_job(o_.job);
  q.set_site(o_.site);
  q.set_fragment(static_cast<std::uint32_t>(p));
  q.set_have_version(client_->state().version(p));
  auto raw = client_->request({"loom.v1.GlobalPull", q.SerializeAsString()});
  if (!raw) return raw.err();
  loom::v1::GlobalPullReply rep;
  if (raw->size() >= 2 && (*raw)[0] == "loom.v1.GlobalPullReply" && rep.ParseFromString((*raw)[1]))
    return rep.last_round() >= static_cast<std::int64_t>(client_->state().version(p));
  return false;  // a newer version (the next poll applies it) or an error status: not in this round
}

void site_sync::measure_codec(int p) {
  // The uplink codec's own error on this delta (without the residual error
  // feedback adds): one more encode and decode of model/P values, here and
  // not on the training thread.
  std::vector<float> anchor(client_->plan().size(p)), local(anchor.size());
  client_->plan().gather(p, client_->state().anchor(), anchor);
  client_->plan().gather(p, shadow_, local);
  for (std::size_t i = 0; i < anchor.size(); ++i) anchor[i] -= local[i];
  auto q = codec::encode(o_.codec, anchor);
  if (!q) return;
  if (!codec::decode(*q, local)) return;
  const double e = rel_error(anchor, local);
  if (e < 0) return;
  std::lock_guard lock(mu_);
  stats_.compression_error = e;
}

}  // namespace loom::trainer
