// site_sync, the training thread's side: joining, handing fragments over at
// step boundaries, merging what came back, and the blocking end of the stage.
// The sync thread's side is site_sync_thread.cpp.
#include "services/trainer/diloco/site_sync.hpp"

#include "loom/v1/aggregator.pb.h"

#include <zmq.hpp>

#include <algorithm>

namespace loom::trainer {

struct site_sync_ctx {
  zmq::context_t ctx{1};
};

namespace {
// finish(): how often it looks at what came back while the last versions come.
constexpr std::chrono::milliseconds finish_look{20};
// quiet(): retry gap while the aggregator does not answer.
constexpr std::chrono::milliseconds quiet_retry{250};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
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
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  wake_.notify_all();
  ctx_->ctx.shutdown();  // a request in flight ends now (ETERM: unavailable)
  if (thread_.joinable()) thread_.join();
  client_.reset();  // its socket before the context
}

void site_sync::say(const std::string& line) const {
  if (o_.log) o_.log("diloco " + o_.site + ": " + line);
}

site_sync_stats site_sync::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

diloco::site_progress site_sync::progress() const {
  std::lock_guard lock(mu_);
  diloco::site_progress r;
  r.site = o_.site;
  r.bytes_sent = stats_.wire.payload_bytes_sent;
  r.bytes_received = stats_.wire.payload_bytes_received;
  r.stall_s = stats_.stall_s;
  r.round = slots_.empty() ? 0 : slots_[0].merged;
  r.deltas_sent = stats_.syncs;
  r.deltas_deferred = stats_.deferred;
  r.deltas_late = stats_.late;
  r.deltas_dropped = stats_.dropped;
  r.up_bytes_per_s = stats_.up_bytes_per_s;
  return r;
}

std::uint64_t site_sync::version(int p) const {
  std::lock_guard lock(mu_);
  return p >= 0 && p < static_cast<int>(slots_.size()) ? slots_[p].merged : 0;
}

void site_sync::stop_thread() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  quit_ = false;
}

namespace {
// A refusal of the aggregator's is final for this run; a lost request or an
// aggregation still being made is not.
bool worth_retrying(errc c) { return c == errc::unavailable || c == errc::deadline_exceeded; }
}  // namespace

status site_sync::start(std::span<float> params) {
  stop_thread();  // a restarted run joins anew
  client_.reset();
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
        break;
      } else {
        if (!worth_retrying(st.code())) return make_error(st.code(), "joining the aggregation " + o_.job + ": " + st.err().message);
        last = st.err().to_string();
      }
    } else {
      // Refused (no grant, not this site's, retired, past a limit): asking
      // again changes nothing. Unreachable or still being made: it may.
      if (!worth_retrying(where.code())) return where.err();
      last = where.err().to_string();
    }
    if (clock::now() + wait > until)
      return make_error(errc::unavailable, "cannot join the aggregation " + o_.job + ": " + last);
    std::this_thread::sleep_for(wait);
  }
  frags_ = client_->plan().fragments();
  const auto p = static_cast<std::size_t>(frags_);
  owed_.assign(p, 0);
  tokens_.assign(p, 0);
  jobs_.assign(p, hold{});
  fresh_.assign(p, true);
  shadow_.assign(params.begin(), params.end());
  retry_at_ = {};
  backoff_ = std::chrono::milliseconds(0);
  std::string versions;
  {
    std::lock_guard lock(mu_);
    slots_.assign(p, slot{});
    for (std::size_t i = 0; i < p; ++i) {
      slots_[i].merged = client_->state().version(static_cast<int>(i));
      versions += (i ? "," : "") + std::to_string(slots_[i].merged);
    }
    fatal_ = ok_status();
    stats_.wire = client_->stats();
  }
  say("joined " + o_.job + " (versions " + versions + "); syncing on a thread of its own");
  thread_ = std::thread([this] { loop(); });
  return ok_status();
}

// θ[p] = θ_new + (θ[p] − θ_sent[p]): diloco's keep_progress rule itself.
void site_sync::merge(int p, std::span<const float> global, const std::vector<float>& sent,
                      std::span<float> params) const {
  diloco::keep_progress(client_->plan(), p, global, sent, params);
}

void site_sync::exchange(std::span<float> params) {
  // 1. What came back. The plan is immutable, so reading it here is safe
  // while the sync thread uses the client.
  for (int p = 0; p < frags_; ++p) {
    std::vector<float> global;
    values sent;
    {
      std::lock_guard lock(mu_);
      slot& s = slots_[p];
      if (s.at != slot::phase::back) continue;
      global.swap(s.global);
      sent = std::move(s.sent);
      s.merged = s.version;
      s.at = slot::phase::idle;
    }
    merge(p, global, *sent, params);
  }
  // 2. What is owed, for fragments that are idle (only this thread moves
  // them out of idle, so the copy is made outside the lock).
  for (int p = 0; p < frags_; ++p) {
    if (owed_[p] == 0) continue;
    {
      std::lock_guard lock(mu_);
      if (slots_[p].at != slot::phase::idle) continue;
    }
    auto copy = std::make_shared<std::vector<float>>(client_->plan().size(p));
    client_->plan().gather(p, params, *copy);
    {
      std::lock_guard lock(mu_);
      slot& s = slots_[p];
      s.sent = std::move(copy);
      s.tokens = std::max<std::uint64_t>(1, tokens_[p]);
      s.at = slot::phase::queued;
    }
    tokens_[p] = 0;
    --owed_[p];
    wake_.notify_one();
  }
}

status site_sync::after_step(std::uint64_t step, std::span<float> params, std::uint64_t tokens) {
  if (!client_) return make_error(errc::conflict, "site_sync: after_step before start");
  const auto t0 = clock::now();
  for (auto& t : tokens_) t += tokens;
  const int due = client_->plan().due_after(step);
  if (due >= 0) ++owed_[due];
  exchange(params);
  if (due >= 0 && owed_[due] > 0) {  // its last delta is still out: a round ahead
    wait_lead(due, t0);
    exchange(params);
  }
  std::lock_guard lock(mu_);
  if (due >= 0 && owed_[due] > 0) ++stats_.deferred;  // trains on; handed once the version is merged
  stats_.stall_s += seconds_since(t0);
  return fatal_;
}

void site_sync::wait_lead(int p, clock::time_point t0) {
  constexpr std::chrono::milliseconds slice{10};  // the patience test is a clock, not an event
  const auto until = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o_.sync_wait_s));
  std::unique_lock lock(mu_);
  auto done = [&] {
    const bool swamped = asking_since_ != clock::time_point{} && clock::now() - asking_since_ > o_.patience;
    return slots_[p].at == slot::phase::back || !reachable_ || swamped || !fatal_ || stopped();
  };
  while (!done() && clock::now() < until) came_back_.wait_for(lock, slice);
}

bool site_sync::settled() {
  std::lock_guard lock(mu_);
  for (int p = 0; p < frags_; ++p)
    if (owed_[p] > 0 || slots_[p].at != slot::phase::idle) return false;
  return true;
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
    std::this_thread::sleep_for(quiet_retry);
  if (!d) return make_error(d.code(), "the aggregator's rounds: " + d.err().message);
  const auto span = std::min(cap, *d + margin);
  for (auto quiet_until = clock::now() + span; clock::now() < quiet_until;) {
    if (stopped() || clock::now() >= until) return make_error(errc::unavailable, "stopped while waiting for the last rounds");
    for (int p = 0; p < frags_; ++p) {
      auto got = client_->poll(p, params);
      if (got && *got) quiet_until = clock::now() + span;  // a late round closed: wait again
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return ok_status();
}

status site_sync::finish(std::uint64_t step, std::span<float> params, bool take_global) {
  if (!client_) return make_error(errc::conflict, "site_sync: finish before start");
  const auto t0 = clock::now();
  const auto until = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o_.final_wait_s));
  auto spent = [&] {
    std::lock_guard lock(mu_);
    stats_.finish_s += seconds_since(t0);
  };
  // A last delta of every fragment not due at the final step (the same at
  // every site, so every site sends as many deltas and every round can close
  // by quorum), then every delta still owed and every version still to come.
  const int due = client_->plan().due_after(step);
  for (int p = 0; p < frags_; ++p)
    if (p != due) ++owed_[p];
  for (;;) {
    exchange(params);
    if (settled()) break;
    std::unique_lock lock(mu_);
    if (!fatal_) {
      auto st = fatal_;
      lock.unlock();
      spent();
      return st;
    }
    if (stopped() || clock::now() >= until) {
      lock.unlock();
      spent();
      return make_error(errc::unavailable, stopped() ? "stopped while syncing the last rounds"
                                                     : "the last rounds did not close within " +
                                                           std::to_string(int(o_.final_wait_s)) + " s");
    }
    came_back_.wait_for(lock, finish_look);
  }
  stop_thread();  // the client is this thread's again
  {
    std::lock_guard lock(mu_);
    stats_.wire = client_->stats();
  }
  if (!take_global) {
    spent();
    return ok_status();
  }
  if (auto st = quiet(params, until); !st) {
    spent();
    return st;
  }
  // The aggregator's θ itself, every fragment as parameters: the stage's final model.
  std::vector<float> global;
  for (;;) {
    auto st = client_->join(global);
    if (st) break;
    if (st.code() != errc::unavailable || clock::now() >= until || stopped()) {
      spent();
      return make_error(st.code(), "fetching the global parameters: " + st.err().message);
    }
    std::this_thread::sleep_for(quiet_retry);
  }
  if (global.size() != params.size()) return make_error(errc::internal, "the global parameters changed size");
  std::copy(global.begin(), global.end(), params.begin());
  std::string versions;
  {
    std::lock_guard lock(mu_);
    for (int p = 0; p < frags_; ++p) {
      slots_[p].merged = client_->state().version(p);
      versions += (p ? "," : "") + std::to_string(slots_[p].merged);
    }
    stats_.wire = client_->stats();
  }
  spent();
  say("took the global parameters (versions " + versions + ") as the final model");
  return ok_status();
}

}  // namespace loom::trainer
