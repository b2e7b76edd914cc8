// Data-parallel runs in one process: members are threads and the all-reduce
// is an in-memory one (sums in rank order), so what is tested is the run's
// side: the split of each step's micro-batches, rank 0 alone writing, the
// agreed start after a stop, and the numbers against one trainer doing it all.
// The ZeroMQ ring itself is tested in libs/collective.
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "services/trainer/run/run_testing.hpp"
#include "services/trainer/run/training_run.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

using namespace loom;
using namespace loom::trainer;
using namespace loom::trainer::testing;

namespace {

// An all-reduce among `world` threads: each call waits for every member's
// buffer, then the last to arrive sums them in rank order and all copy it.
// Like the ring, a wait ends with unavailable once `stop` is set.
class thread_group {
 public:
  explicit thread_group(std::uint32_t world, const std::atomic<bool>* stop = nullptr)
      : world_(world), stop_(stop), bufs_(world) {}
  // Tests: at this call number rank 1 sets `stop` and leaves (stopped inside the exchange).
  std::uint64_t stop_in_call = 0;
  std::atomic<bool>* stopper = nullptr;

  status all_reduce_sum(std::uint32_t rank, std::span<float> data) {
    std::unique_lock lock(mu_);
    if (rank == 1 && stopper && ++calls_ == stop_in_call) {
      *stopper = true;
      return make_error(errc::unavailable, "stopped");
    }
    const std::uint64_t round = round_;
    bufs_[rank] = data;
    if (++arrived_ == world_) {
      sum_.assign(data.size(), 0.0f);
      for (std::uint32_t r = 0; r < world_; ++r) {
        if (bufs_[r].size() != data.size()) return make_error(errc::conflict, "sizes differ");
        for (std::size_t i = 0; i < data.size(); ++i) sum_[i] += bufs_[r][i];
      }
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else {
      // A member that failed never arrives: the ring would time out, so does this.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (!cv_.wait_for(lock, std::chrono::milliseconds(5), [&] { return round_ != round; })) {
        if (stop_ && stop_->load()) return make_error(errc::unavailable, "stopped");
        if (std::chrono::steady_clock::now() > deadline) return make_error(errc::deadline_exceeded, "no peer");
      }
    }
    std::copy(sum_.begin(), sum_.end(), data.begin());
    return ok_status();
  }
  run_options::group_member member(std::uint32_t rank) {
    return {rank, world_, [this, rank](std::span<float> d) { return all_reduce_sum(rank, d); }};
  }

 private:
  std::uint32_t world_;
  const std::atomic<bool>* stop_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::span<float>> bufs_;
  std::vector<float> sum_;
  std::uint32_t arrived_ = 0;
  std::uint64_t calls_ = 0;
  std::uint64_t round_ = 0;
};

std::vector<float> logged_losses(const std::string& out) {
  std::ifstream in(out + "/metrics.jsonl");
  std::vector<float> v;
  for (std::string line; std::getline(in, line);) v.push_back(nlohmann::json::parse(line)["loss"].get<float>());
  return v;
}

// Runs `world` members of one run over `cfg` (threads = 1 each); returns their summaries.
std::vector<result<run_summary>> run_group(const runspec::run_config& cfg, std::uint32_t world, const std::string& home,
                                           const std::atomic<bool>* stop = nullptr, std::uint64_t stop_in_call = 0) {
  thread_group g(world, stop);
  if (stop_in_call) {
    g.stop_in_call = stop_in_call;
    g.stopper = const_cast<std::atomic<bool>*>(stop);
  }
  std::vector<result<run_summary>> out(world, make_error(errc::internal, "not run"));
  std::vector<std::thread> ts;
  for (std::uint32_t r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      run_options o;
      o.data_dir = home;
      o.resume = true;
      o.stop = stop;
      o.group = g.member(r);
      out[r] = run_training(cfg, o);
    });
  for (auto& t : ts) t.join();
  return out;
}

}  // namespace

TEST_CASE("a group of two splits each step's micro-batches: the numbers of one trainer, rank 0 alone writes") {
  files::temp_dir tmp("loom-group");
  const std::string data = make_shards(tmp.path() + "/shards");
  const std::string home = tmp.path() + "/home";
  auto one_cfg = small_config(data, tmp.path() + "/one", 12, {"train.threads=1", "train.grad_accum=4"});
  run_options o;
  o.data_dir = home;
  auto one = run_training(one_cfg, o);
  REQUIRE(one.ok());

  auto cfg = small_config(data, tmp.path() + "/two", 12, {"train.threads=1", "train.grad_accum=4"});
  auto two = run_group(cfg, 2, home);
  REQUIRE(two[0].ok());
  REQUIRE(two[1].ok());
  CHECK(two[0]->params_sha256 == two[1]->params_sha256);  // every member holds the same parameters
  const auto a = logged_losses(tmp.path() + "/one"), b = logged_losses(tmp.path() + "/two");
  REQUIRE(a.size() == 12);
  REQUIRE(b.size() == 12);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::fabs(a[i] - b[i]) <= 1e-4f * std::fabs(a[i]));
  CHECK(b.back() < b.front());
  // Snapshots and metrics come from rank 0 only; rank 1 has nothing of its own to write here (shards input).
  CHECK(std::filesystem::exists(tmp.path() + "/two/checkpoints/LATEST"));
  CHECK(!std::filesystem::exists(tmp.path() + "/two/rank-1"));

  // Three members over four micro-batches (2 + 1 + 1) give the same numbers too.
  auto three = run_group(small_config(data, tmp.path() + "/three", 12, {"train.threads=1", "train.grad_accum=4"}), 3,
                         home);
  REQUIRE(three[2].ok());
  const auto c = logged_losses(tmp.path() + "/three");
  REQUIRE(c.size() == 12);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::fabs(a[i] - c[i]) <= 1e-4f * std::fabs(a[i]));
}

TEST_CASE("a stopped group resumes from rank 0's snapshot, bitwise equal to an uninterrupted group") {
  files::temp_dir tmp("loom-group");
  const std::string data = make_shards(tmp.path() + "/shards");
  const std::string home = tmp.path() + "/home";
  auto whole = run_group(small_config(data, tmp.path() + "/whole", 16, {"train.threads=1"}), 2, home);
  INFO((whole[0].ok() ? std::string("ok") : whole[0].err().to_string()));
  INFO((whole[1].ok() ? std::string("ok") : whole[1].err().to_string()));
  REQUIRE(whole[0].ok());

  // Stop both members after step 6 (not a snapshot step: every_steps = 4): rank 0 snapshots there.
  const std::string out = tmp.path() + "/stopped";
  auto cfg = small_config(data, out, 16, {"train.threads=1"});
  std::atomic<bool> stop{false};
  std::thread watch([&] {
    for (int i = 0; i < 20000 && logged_losses(out).size() < 6; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop = true;
  });
  auto first = run_group(cfg, 2, home, &stop);
  watch.join();
  INFO((first[0].ok() ? std::string("ok") : first[0].err().to_string()));
  INFO((first[1].ok() ? std::string("ok") : first[1].err().to_string()));
  REQUIRE(first[0].ok());
  REQUIRE(first[1].ok());
  CHECK(first[0]->stopped);
  CHECK(first[0]->steps < 16);
  // Rank 1's copy of an older snapshot does not matter: everyone takes rank 0's.
  auto rest = run_group(cfg, 2, home);
  INFO((rest[0].ok() ? std::string("ok") : rest[0].err().to_string()));
  INFO((rest[1].ok() ? std::string("ok") : rest[1].err().to_string()));
  REQUIRE(rest[0].ok());
  REQUIRE(rest[1].ok());
  CHECK(rest[1]->first_step == first[0]->steps);
  CHECK(rest[0]->params_sha256 == whole[0]->params_sha256);
  CHECK(rest[1]->params_sha256 == whole[0]->params_sha256);
  CHECK(logged_losses(out) == logged_losses(tmp.path() + "/whole"));
}

TEST_CASE("a group refuses members with different configs and a group larger than grad_accum, naming why") {
  files::temp_dir tmp("loom-group");
  const std::string data = make_shards(tmp.path() + "/shards");
  thread_group g(2);
  std::vector<result<run_summary>> out(2, make_error(errc::internal, "not run"));
  std::thread t0([&] {
    run_options o;
    o.data_dir = tmp.path() + "/home";
    o.group = g.member(0);
    out[0] = run_training(small_config(data, tmp.path() + "/x", 4, {"train.threads=1"}), o);
  });
  std::thread t1([&] {
    run_options o;
    o.data_dir = tmp.path() + "/home";
    o.group = g.member(1);
    out[1] = run_training(small_config(data, tmp.path() + "/x", 4, {"train.threads=1", "optim.lr=0.02"}), o);
  });
  t0.join();
  t1.join();
  REQUIRE(!out[0].ok());
  CHECK(out[0].code() == errc::conflict);
  CHECK(out[1].err().message.find("differs from another member's") != std::string::npos);

  run_options o;
  o.data_dir = tmp.path() + "/home";
  thread_group big(3);
  o.group = big.member(0);
  auto too_big = run_training(small_config(data, tmp.path() + "/y", 4, {"train.threads=1"}), o);  // grad_accum 2
  REQUIRE(!too_big.ok());
  CHECK(too_big.err().message.find("trainer group of 3 but train.grad_accum is 2") != std::string::npos);
}

TEST_CASE("a group stopped inside a step's exchange snapshots the step before it and resumes bitwise equal") {
  files::temp_dir tmp("loom-group");
  const std::string data = make_shards(tmp.path() + "/shards");
  const std::string home = tmp.path() + "/home";
  auto whole = run_group(small_config(data, tmp.path() + "/whole", 12, {"train.threads=1"}), 2, home);
  REQUIRE(whole[0].ok());
  const std::string out = tmp.path() + "/cut";
  auto cfg = small_config(data, out, 12, {"train.threads=1"});
  std::atomic<bool> stop{false};
  // Calls: 1 = the start agreement, then 2 per step (gradients, loss): call 14 is step 7's gradients.
  auto first = run_group(cfg, 2, home, &stop, 14);
  REQUIRE(first[0].ok());
  CHECK(first[0]->stopped);
  CHECK(first[0]->steps == 6);
  CHECK(std::filesystem::exists(out + "/checkpoints/step-000006"));  // not a snapshot step: written by the stop
  auto rest = run_group(cfg, 2, home);
  REQUIRE(rest[0].ok());
  CHECK(rest[0]->first_step == 6);
  CHECK(rest[0]->params_sha256 == whole[0]->params_sha256);
  CHECK(logged_losses(out) == logged_losses(tmp.path() + "/whole"));
}
