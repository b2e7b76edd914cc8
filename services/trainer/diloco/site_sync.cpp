#include "services/trainer/diloco/site_sync.hpp"

#include "loom/v1/aggregator.pb.h"

#include <zmq.hpp>

#include <algorithm>
#include <cstdio>
#include <thread>

namespace loom::trainer {

struct site_sync_ctx {
  zmq::context_t ctx{1};
};

namespace {
// Between two polls of a fragment whose round is open: a loopback answer
// takes well under a millisecond, so this is what a waiting site costs.
constexpr std::chrono::milliseconds poll_gap{2};
// After a request found no aggregator: the next one no sooner than this,
// doubling to the cap, so a cut site trains on (each try blocks it for the
// request timeout: at the cap, a third of its time) and still notices the
// aggregator within a few seconds of its return.
constexpr std::chrono::milliseconds first_backoff{250}, max_backoff{4000};
}  // namespace

result<std::unique_ptr<site_sync>> site_sync::make(site_sync_options o) {
  if (!o.locate) return make_error(errc::invalid_argument, "site_sync: no way to locate the aggregator");
  if (!wire::valid_z85_key(o.keys.public_z85) || !wire::valid_z85_key(o.keys.secret_z85))
    return make_error(errc::invalid_argument, "site_sync: the site's keypair is not a CURVE keypair");
  if (o.job.empty() || o.site.empty()) return make_error(errc::invalid_argument, "site_sync: no job or site name");
  return std::unique_ptr<site_sync>(new site_sync(std::move(o)));
}

site_sync::site_sync(site_sync_options o) : o_(std::move(o)), ctx_(std::make_unique<site_sync_ctx>()) {}

site_sync::~site_sync() {
  client_.reset();  // its socket before the context
}

void site_sync::say(const std::string& line) const {
  if (o_.log) o_.log("diloco " + o_.site + ": " + line);
}

const site_sync_stats& site_sync::stats() {
  if (client_) stats_.wire = client_->stats();
  return stats_;
}

std::uint64_t site_sync::version(int p) const { return client_ ? client_->state().version(p) : 0; }
int site_sync::fragments() const { return client_ ? client_->plan().fragments() : 0; }

void site_sync::unreachable(const error& e) {
  ++stats_.unreachable;
  backoff_ = backoff_.count() == 0 ? first_backoff : std::min(max_backoff, backoff_ * 2);
  retry_at_ = clock::now() + backoff_;
  if (backoff_ == first_backoff) say("aggregator unreachable, training on: " + e.message);
}

status site_sync::start(std::span<float> params) {
  const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o_.join_wait_s));
  std::string last = "not tried";
  for (auto wait = std::chrono::milliseconds(200);; wait = std::min(wait * 2, std::chrono::milliseconds(2000))) {
    if (stopped()) return make_error(errc::unavailable, "stopped while joining the aggregation " + o_.job);
    auto where = o_.locate();
    if (where) {
      diloco::client_options co;
      co.endpoint = where->endpoint;
      co.server_public = where->public_key;
      co.keys = o_.keys;
      co.job = o_.job;
      co.site = o_.site;
      co.codec = o_.codec;
      co.timeout = o_.timeout;
      co.attempts = 1;
      co.link = o_.link;
      auto c = diloco::site_client::make(ctx_->ctx, co);
      if (!c) return c.err();
      std::vector<float> global;
      if (auto st = (*c)->join(global); st) {
        if (global.size() != params.size())
          return make_error(errc::invalid_argument,
                            "aggregation " + o_.job + " holds " + std::to_string(global.size()) +
                                " parameters, this stage's model " + std::to_string(params.size()));
        std::copy(global.begin(), global.end(), params.begin());
        client_ = std::move(*c);
        const auto p = static_cast<std::size_t>(client_->plan().fragments());
        tokens_.assign(p, 0);
        owed_.assign(p, 0);
        sent_at_.assign(p, clock::now());
        std::string versions;
        for (std::size_t i = 0; i < p; ++i) versions += (i ? "," : "") + std::to_string(version(static_cast<int>(i)));
        say("joined " + o_.job + " at " + where->endpoint + " (versions " + versions + ")");
        return ok_status();
      } else {
        last = st.err().to_string();
      }
    } else {
      last = where.err().to_string();  // e.g. site 0 has not written the initial snapshot yet
    }
    if (clock::now() + wait > until)
      return make_error(errc::unavailable, "cannot join the aggregation " + o_.job + ": " + last);
    std::this_thread::sleep_for(wait);
  }
}

status site_sync::send(int p, std::span<float> params) {
  if (!client_->pending(p)) {  // a round closed without us (deadline, stale drop): merge it first
    auto newer = client_->poll(p, params);
    if (!newer && newer.code() == errc::unavailable) {
      unreachable(newer.err());
      return ok_status();
    }
    if (!newer) return newer.err();
  }
  auto ack = client_->send_delta(p, params, std::max<std::uint64_t>(1, tokens_[p]));
  tokens_[p] = 0;  // counted in the delta (pending until its version comes, even when unanswered)
  sent_at_[p] = clock::now();
  --owed_[p];
  ++stats_.syncs;
  if (ack || ack.code() == errc::deadline_exceeded) {  // stale: dropped; the next poll catches up
    backoff_ = std::chrono::milliseconds(0);
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

result<bool> site_sync::wait_merged(int p, std::span<float> params, clock::time_point until) {
  while (client_->pending(p)) {
    if (backing_off() || stopped()) return false;
    auto got = client_->poll(p, params);
    if (!got) {
      if (got.code() != errc::unavailable) return got.err();
      unreachable(got.err());
      return false;
    }
    backoff_ = std::chrono::milliseconds(0);
    if (*got) break;
    if (clock::now() >= until) return false;
    std::this_thread::sleep_for(poll_gap);
  }
  return true;
}

status site_sync::step_fragment(int p, bool due, std::span<float> params) {
  const auto wait = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o_.sync_wait_s));
  if (client_->pending(p)) {  // the version of an earlier delta: a look, or the wait when this one is due
    auto got = wait_merged(p, params, due ? clock::now() + wait : clock::now());
    if (!got) return got.err();
    if (*got) ++stats_.late_merges;
  }
  if (owed_[p] == 0 || client_->pending(p) || backing_off()) {
    if (due && owed_[p] > 0) ++stats_.deferred;
    return ok_status();
  }
  if (auto st = send(p, params); !st) return st;
  auto got = wait_merged(p, params, clock::now() + wait);
  if (!got) return got.err();
  if (*got) stats_.sync_ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - sent_at_[p]).count());
  return ok_status();
}

status site_sync::after_step(std::uint64_t step, std::span<float> params, std::uint64_t tokens) {
  if (!client_) return make_error(errc::conflict, "site_sync: after_step before start");
  const auto t0 = clock::now();
  for (auto& t : tokens_) t += tokens;
  const int due = client_->plan().due_after(step);
  if (due >= 0) ++owed_[due];
  for (int p = 0; p < fragments(); ++p)
    if (auto st = step_fragment(p, p == due, params); !st) return st;
  stats_.stall_s += std::chrono::duration<double>(clock::now() - t0).count();
  return ok_status();
}

result<std::chrono::milliseconds> site_sync::longest_deadline() {
  loom::v1::RoundStatusQuery q;
  q.set_job(o_.job);
  auto raw = client_->request({"loom.v1.RoundStatusQuery", q.SerializeAsString()});
  if (!raw) return raw.err();
  loom::v1::RoundStatusList list;
  if (raw->size() < 2 || (*raw)[0] != "loom.v1.RoundStatusList" || !list.ParseFromString((*raw)[1]))
    return make_error(errc::corruption, "the aggregator's answer to RoundStatusQuery is not a RoundStatusList");
  std::uint64_t ms = 0;
  for (const auto& f : list.fragments()) ms = std::max(ms, f.deadline_ms());
  return std::chrono::milliseconds(ms);
}

status site_sync::quiet(std::span<float> params, clock::time_point until) {
  // A round closed by its deadline leaves the missing sites' deltas late:
  // folded into the next round, which closes by its deadline once it holds
  // them. So the global moves until no round can close any more; wait until
  // no version has moved for the longest open deadline (+ a margin).
  constexpr auto margin = std::chrono::milliseconds(250), cap = std::chrono::milliseconds(15000);
  auto d = longest_deadline();
  for (; !d && d.code() == errc::unavailable && clock::now() < until && !stopped(); d = longest_deadline())
    std::this_thread::sleep_for(first_backoff);
  if (!d) return make_error(d.code(), "the aggregator's rounds: " + d.err().message);
  const auto span = std::min(cap, *d + margin);
  for (auto quiet_until = clock::now() + span; clock::now() < quiet_until;) {
    if (stopped() || clock::now() >= until) return make_error(errc::unavailable, "stopped while waiting for the last rounds");
    for (int p = 0; p < fragments(); ++p) {
      auto got = client_->poll(p, params);
      if (got && *got) quiet_until = clock::now() + span;  // a late round closed: wait again
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return ok_status();
}

status site_sync::finish(std::uint64_t step, std::span<float> params, bool take_global) {
  if (!client_) return make_error(errc::conflict, "site_sync: finish before start");
  const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o_.final_wait_s));
  // A last delta of every fragment not due at the final step (the same at
  // every site, so every site sends as many deltas and every round can close
  // by quorum), then every delta still owed and every version still to come.
  const int due = client_->plan().due_after(step);
  for (int p = 0; p < fragments(); ++p)
    if (p != due) ++owed_[p];
  for (;;) {
    bool settled = true;
    for (int p = 0; p < fragments(); ++p) {
      if (!client_->pending(p) && owed_[p] == 0) continue;
      settled = false;
      if (stopped()) return make_error(errc::unavailable, "stopped while syncing the last rounds");
      if (clock::now() >= until)
        return make_error(errc::unavailable, "the last rounds of fragment " + std::to_string(p) + " did not close within " +
                                                 std::to_string(int(o_.final_wait_s)) + " s");
      if (client_->pending(p)) {
        auto got = wait_merged(p, params, until);
        if (!got) return got.err();
      } else if (!backing_off()) {
        if (auto st = send(p, params); !st) return st;
      }
    }
    if (settled) break;
    if (backing_off()) std::this_thread::sleep_for(poll_gap * 10);
  }
  if (!take_global) return ok_status();
  if (auto st = quiet(params, until); !st) return st;
  // The aggregator's θ itself, every fragment as parameters: the stage's final model.
  std::vector<float> global;
  for (;;) {
    auto st = client_->join(global);
    if (st) break;
    if (st.code() != errc::unavailable || clock::now() >= until || stopped())
      return make_error(st.code(), "fetching the global parameters: " + st.err().message);
    std::this_thread::sleep_for(first_backoff);
  }
  if (global.size() != params.size()) return make_error(errc::internal, "the global parameters changed size");
  std::copy(global.begin(), global.end(), params.begin());
  std::string versions;
  for (int p = 0; p < fragments(); ++p) versions += (p ? "," : "") + std::to_string(version(p));
  say("took the global parameters (versions " + versions + ") as the final model");
  return ok_status();
}

}  // namespace loom::trainer
