#include "libs/audit/emitter.hpp"

#include "libs/audit/spool.hpp"
#include "libs/retry/backoff.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "libs/wire/limits.hpp"
#include "loom/v1/audit.pb.h"

#include <zmq.hpp>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace loom::audit {
namespace {
using clock = std::chrono::steady_clock;

// Records pushed per pass: bounds the time the thread spends away from its queue.
constexpr std::size_t push_batch = 512;
}  // namespace

result<std::unique_ptr<emitter>> emitter::start(zmq::context_t& ctx, emitter_options opts) {
  auto sp = spool::open(opts.spool_dir);
  if (!sp) return sp.err();
  return std::unique_ptr<emitter>(new emitter(ctx, std::move(opts), std::move(*sp)));
}

emitter::emitter(zmq::context_t& ctx, emitter_options opts, std::unique_ptr<spool> sp)
    : ctx_(ctx), opts_(std::move(opts)), spool_(std::move(sp)) {
  last_seq_ = spool_->last_seq();
  confirmed_ = spool_->confirmed_seq();
  thread_ = std::thread([this] { run(); });
}

emitter::~emitter() {
  wait_spooled(std::chrono::milliseconds(1000));
  stop_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::uint64_t emitter::emit(record r) {
  auto bytes = encode(r);
  std::uint64_t ordinal;
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(bytes));
    ordinal = ++emitted_;
  }
  cv_.notify_all();
  return ordinal;
}

std::uint64_t emitter::spooled() const { return spooled_; }

void emitter::on_spooled(std::function<void()> fn) {
  std::lock_guard lock(notify_mu_);
  notify_ = std::move(fn);
}

std::uint64_t emitter::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}
std::uint64_t emitter::pending() const { return last_seq_ - confirmed_; }
std::uint64_t emitter::confirmed() const { return confirmed_; }
std::uint64_t emitter::last_seq() const { return last_seq_; }

bool emitter::wait_spooled(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return queue_.empty() && spooled_ == emitted_; });
}

bool emitter::wait_confirmed(std::chrono::milliseconds timeout) {
  auto until = clock::now() + timeout;
  if (!wait_spooled(timeout)) return false;
  while (clock::now() < until) {
    if (confirmed_ >= last_seq_) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return confirmed_ >= last_seq_;
}

void emitter::run() {
  // Replicas: the PULL paired with the ROUTER that answered last.
  const bool replicated = opts_.replicas.size() > 1;
  std::vector<std::string> rpcs;
  for (const auto& [r, p] : opts_.replicas) rpcs.push_back(r);
  auto pull_of = [&](const std::string& rpc_ep) {
    for (const auto& [r, p] : opts_.replicas)
      if (r == rpc_ep) return p;
    return opts_.push_endpoint;
  };
  std::string push_to = replicated ? opts_.replicas.front().second : opts_.push_endpoint;
  auto open_push = [&](const std::string& endpoint) {
    auto s = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::push);
    wire::apply_common_options(*s);
    // Queue only to completed connections: while audit is down, records stay in
    // the spool instead of piling up in a pipe that dies with the connection.
    s->set(zmq::sockopt::immediate, 1);
    wire::make_curve_client(*s, opts_.mine, opts_.server_public);
    s->connect(endpoint);
    return s;
  };
  auto push = open_push(push_to);
  auto rpc = replicated ? std::make_unique<wire::client>(ctx_, rpcs, opts_.server_public, opts_.mine,
                                                         wire::client_options{std::chrono::milliseconds(500), 0})
                        : std::make_unique<wire::client>(ctx_, opts_.rpc_endpoint, opts_.server_public, opts_.mine,
                                                         wire::client_options{std::chrono::milliseconds(500), 0});

  std::uint64_t sent_upto = confirmed_;
  auto last_progress = clock::now();
  auto next_poll = clock::now();
  std::uint64_t last_confirmed = confirmed_;

  // A failing spool (disk full, fsync errors) is retried with backoff, and
  // said once when it starts failing and once when it works again: retrying
  // at once, and logging each try, filled the disk it was waiting on.
  retry::backoff write_delay{std::chrono::milliseconds(20), std::chrono::seconds(1)};
  auto write_again_at = clock::now();
  std::uint64_t write_failures = 0;

  while (!stop_) {
    // 1. Queue -> spool, one durable write per batch.
    std::vector<std::string> batch;
    {
      std::unique_lock lock(mu_);
      const auto wait = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(write_again_at - clock::now()),
                                   std::chrono::milliseconds(0), std::chrono::milliseconds(50));
      if (write_failures > 0)  // backing off: only stop ends the wait early
        cv_.wait_for(lock, wait, [&] { return stop_.load(); });
      else
        cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stop_ || !queue_.empty(); });
      if (clock::now() >= write_again_at) {
        batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
        queue_.clear();
      }
    }
    if (!batch.empty()) {
      auto first = spool_->append_batch(batch);
      if (!first) {
        if (write_failures++ == 0)
          std::fprintf(stderr, "audit emitter: spool write failed, retrying with backoff: %s\n",
                       first.err().to_string().c_str());
        write_again_at = clock::now() + write_delay.next();
        std::lock_guard lock(mu_);  // put them back; retried after the backoff
        for (auto it = batch.rbegin(); it != batch.rend(); ++it) queue_.push_front(std::move(*it));
      } else if (write_failures > 0) {
        std::fprintf(stderr, "audit emitter: spool writable again after %llu failed tries\n",
                     static_cast<unsigned long long>(write_failures));
        write_failures = 0;
        write_delay.reset();
      }
    }
    if (!batch.empty() && write_failures == 0) {
      last_seq_ = spool_->last_seq();
      {
        std::lock_guard lock(mu_);
        spooled_ += batch.size();
      }
      cv_.notify_all();
      std::lock_guard lock(notify_mu_);
      if (notify_) notify_();
    }

    // 2. Push what audit has not been sent yet.
    if (sent_upto < last_seq_) {
      auto recs = spool_->read_after(sent_upto, push_batch);
      if (recs) {
        for (auto& [seq, bytes] : *recs) {
          loom::v1::AuditEvent ev;
          if (!ev.ParseFromString(bytes)) {
            std::fprintf(stderr, "audit emitter: spool record %llu unreadable, skipped\n",
                         static_cast<unsigned long long>(seq));
            sent_upto = seq;
            continue;
          }
          ev.set_source(opts_.source);
          ev.set_source_seq(seq);
          auto wire_bytes = ev.SerializeAsString();
          zmq::send_result_t ok;
          try {
            ok = push->send(zmq::buffer(wire_bytes), zmq::send_flags::dontwait);
          } catch (const zmq::error_t&) {
            ok = {};
          }
          if (!ok) break;  // no connected audit service: keep it in the spool
          sent_upto = seq;
        }
      }
    }

    // 3. Watermark: trim what is stored; re-send what was lost in flight.
    auto now = clock::now();
    if (confirmed_ < last_seq_ && now >= next_poll) {
      next_poll = now + opts_.poll_every;
      loom::v1::AuditWatermarkRequest q;
      q.set_source(opts_.source);
      auto rep = wire::call_typed<loom::v1::AuditWatermarkReply>(*rpc, q, opts_.token ? opts_.token() : "");
      if (rep && replicated && pull_of(rpc->endpoint()) != push_to) {
        // The lead moved: push to the new leader, from its watermark on
        // (what went to the old one after its last commit is sent again).
        push_to = pull_of(rpc->endpoint());
        push = open_push(push_to);
        sent_upto = std::min<std::uint64_t>(rep->stored_seq(), last_seq_);
        last_progress = now;
      }
      if (rep) {
        std::uint64_t wm = std::min<std::uint64_t>(rep->stored_seq(), last_seq_);
        if (wm > confirmed_) {
          if (auto st = spool_->trim_through(wm); !st)
            std::fprintf(stderr, "audit emitter: spool trim failed: %s\n", st.err().to_string().c_str());
          confirmed_ = wm;
        }
        if (confirmed_ != last_confirmed) {
          last_confirmed = confirmed_;
          last_progress = now;
        } else if (sent_upto > confirmed_ && now - last_progress > opts_.resend_after) {
          sent_upto = confirmed_;  // lost in flight: send again from the watermark
          last_progress = now;
        }
        if (sent_upto < confirmed_) sent_upto = confirmed_;
      } else if (sent_upto > confirmed_ && now - last_progress > opts_.resend_after) {
        sent_upto = confirmed_;
        last_progress = now;
      }
    } else if (confirmed_ >= last_seq_) {
      last_progress = now;
    }
  }
}

}  // namespace loom::audit
