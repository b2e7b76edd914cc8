// Data-parallel runs in one process: members are threads and the all-reduce
// is an in-memory one (sums in rank order), so what is tested is the run's
// side: the split of each step's micro-batches, rank 0 alone writing, the
// agreed start after a stop, and the numbers against one trainer doing it all.
// The ZeroMQ ring itself is tested in libs/collective.
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "services/trainer/run/run_testing.hpp"
#include "services/trainer/run/training_run.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/shards/placement.hpp"
#include "libs/shards/writer.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
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

namespace {

// A dataset of ~10 small shards placed on node-a and node-b, and a copy per
// node holding manifest.json and only that node's shards (as a data.local
// fetch leaves it): root/<node>/corpus.
struct placed_corpus {
  std::vector<std::string> nodes = {"node-a", "node-b"};
  std::string whole;  // every shard
  std::vector<std::string> roots;
  std::vector<std::uint64_t> share_bytes;
};

placed_corpus make_placed(const std::string& root) {
  placed_corpus p;
  p.whole = root + "/whole/corpus";
  shards::writer_options opt;
  opt.dir = p.whole;
  opt.target_bytes = 600;
  auto w = shards::shard_writer::create(opt);
  REQUIRE(w.ok());
  append_counting_docs(*w, 60);
  auto m = w->finish();
  REQUIRE(m.ok());
  REQUIRE(m->shards.size() >= 8);
  REQUIRE(shards::place_manifest(*m, p.nodes).ok());
  REQUIRE(shards::write_manifest(p.whole, *m).ok());
  for (const auto& n : p.nodes) {
    const std::string dir = root + "/" + n + "/corpus";
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(p.whole + "/manifest.json", dir + "/manifest.json");
    std::uint64_t bytes = 0;
    for (const auto& s : m->shards)
      if (s.node == n) {
        std::filesystem::copy_file(p.whole + "/" + s.name, dir + "/" + s.name);
        bytes += s.bytes;
      }
    REQUIRE(bytes > 0);
    p.roots.push_back(root + "/" + n);
    p.share_bytes.push_back(bytes);
  }
  return p;
}

runspec::run_config dataset_config(const std::string& out, int steps, std::vector<std::string> extra = {}) {
  std::string toml = "[model]\nlayers = 2\nheads = 2\nchannels = 32\nmax_seq_len = 16\nvocab = 64\n"
                     "[data]\ndataset = \"corpus\"\n"
                     "[train]\nbatch = 2\nseq_len = 8\ngrad_accum = 4\nseed = 5\nthreads = 1\n"
                     "[optim]\nlr = 0.01\nmin_lr = 0.001\nwarmup_steps = 2\n"
                     "[checkpoint]\nevery_steps = 4\nkeep = 10\n"
                     "[output]\ndir = \"" + out + "\"\n";
  extra.push_back("train.steps=" + std::to_string(steps));
  auto c = runspec::parse_run_config(toml, "/test/run.toml", extra);
  REQUIRE_MESSAGE(c.ok(), c.err().to_string());
  return *c;
}

struct local_outcome {
  std::vector<result<run_summary>> sums;
  std::vector<std::string> locality;  // each member's data_locality notice
};

// Members of a group each on its node: data from that node's root.
local_outcome run_local_group(const runspec::run_config& cfg, const placed_corpus& p, const std::string& home,
                              std::atomic<bool>* stop = nullptr, std::uint64_t stop_in_call = 0) {
  const auto world = static_cast<std::uint32_t>(p.nodes.size());
  thread_group g(world, stop);
  if (stop_in_call) {
    g.stop_in_call = stop_in_call;
    g.stopper = stop;
  }
  local_outcome out{std::vector<result<run_summary>>(world, make_error(errc::internal, "not run")),
                    std::vector<std::string>(world)};
  std::vector<std::thread> ts;
  for (std::uint32_t r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      run_options o;
      o.data_dir = home;
      o.resume = true;
      o.stop = stop;
      o.group = g.member(r);
      o.node = p.nodes[r];
      o.dataset_root = p.roots[r];
      o.on_notice = [&, r](const std::string& kind, const std::string& text) {
        if (kind == "data_locality") out.locality[r] = text;
      };
      out.sums[r] = run_training(cfg, o);
    });
  for (auto& t : ts) t.join();
  return out;
}

}  // namespace

TEST_CASE("data.local: a two-node group reads only the shards placed on each member's node, all of its bytes locally") {
  files::temp_dir tmp("loom-group");
  const placed_corpus p = make_placed(tmp.path() + "/data");
  const std::string home = tmp.path() + "/home";
  auto cfg = dataset_config(tmp.path() + "/local", 12, {"data.local=true"});
  auto a = run_local_group(cfg, p, home);
  for (const auto& s : a.sums) REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  CHECK(a.sums[0]->params_sha256 == a.sums[1]->params_sha256);
  const auto losses = logged_losses(tmp.path() + "/local");
  REQUIRE(losses.size() == 12);
  CHECK(losses.back() < losses.front());
  for (std::size_t r = 0; r < 2; ++r) {
    MESSAGE(a.locality[r]);
    // Each copy lacks the other node's shards, so a member that read one would have failed.
    CHECK(a.locality[r].find("reads " + std::to_string(p.share_bytes[r]) + " bytes locally") != std::string::npos);
    CHECK(a.locality[r].find("and 0 bytes remotely") != std::string::npos);
    CHECK(a.locality[r].find("100.0% local") != std::string::npos);
  }
  // The same placement and world give the same run again, bitwise.
  auto again = run_local_group(dataset_config(tmp.path() + "/again", 12, {"data.local=true"}), p, home);
  REQUIRE(again.sums[0].ok());
  CHECK(again.sums[0]->params_sha256 == a.sums[0]->params_sha256);
  CHECK(logged_losses(tmp.path() + "/again") == losses);

  // Reading the whole dataset from node-a's point of view: about half of it lies elsewhere.
  run_options o;
  o.data_dir = home;
  o.node = "node-a";
  o.dataset_root = tmp.path() + "/data/whole";
  std::string whole_note;
  o.on_notice = [&](const std::string& kind, const std::string& text) {
    if (kind == "data_locality") whole_note = text;
  };
  auto one = run_training(dataset_config(tmp.path() + "/one", 2), o);
  REQUIRE_MESSAGE(one.ok(), one.err().to_string());
  MESSAGE(whole_note);
  CHECK(whole_note.find("reads " + std::to_string(p.share_bytes[0]) + " bytes locally") != std::string::npos);
  CHECK(whole_note.find(" bytes remotely (") != std::string::npos);
  CHECK(whole_note.find("and 0 bytes remotely") == std::string::npos);
  CHECK(whole_note.find("(data.local)") == std::string::npos);
}

TEST_CASE("data.local: a group stopped inside a step resumes from rank 0's snapshot, bitwise equal to an uninterrupted one") {
  files::temp_dir tmp("loom-group");
  const placed_corpus p = make_placed(tmp.path() + "/data");
  const std::string home = tmp.path() + "/home";
  auto whole = run_local_group(dataset_config(tmp.path() + "/whole", 12, {"data.local=true"}), p, home);
  REQUIRE_MESSAGE(whole.sums[0].ok(), whole.sums[0].err().to_string());
  const std::string out = tmp.path() + "/cut";
  auto cfg = dataset_config(out, 12, {"data.local=true"});
  std::atomic<bool> stop{false};
  // Calls: 1 = the start agreement, then 2 per step: call 14 is step 7's gradients.
  auto first = run_local_group(cfg, p, home, &stop, 14);
  REQUIRE_MESSAGE(first.sums[0].ok(), first.sums[0].err().to_string());
  CHECK(first.sums[0]->stopped);
  CHECK(first.sums[0]->steps == 6);
  auto rest = run_local_group(cfg, p, home);
  REQUIRE_MESSAGE(rest.sums[0].ok(), rest.sums[0].err().to_string());
  REQUIRE_MESSAGE(rest.sums[1].ok(), rest.sums[1].err().to_string());
  CHECK(rest.sums[1]->first_step == 6);
  CHECK(rest.sums[0]->params_sha256 == whole.sums[0]->params_sha256);
  CHECK(rest.sums[1]->params_sha256 == whole.sums[0]->params_sha256);
  CHECK(logged_losses(out) == logged_losses(tmp.path() + "/whole"));
}

TEST_CASE("data.local is refused without a node, on a node with no shard, and with uneven batches per member") {
  files::temp_dir tmp("loom-group");
  const placed_corpus p = make_placed(tmp.path() + "/data");
  run_options o;
  o.data_dir = tmp.path() + "/home";
  o.dataset_root = p.roots[0];
  auto no_node = run_training(dataset_config(tmp.path() + "/x", 2, {"data.local=true"}), o);
  REQUIRE_FALSE(no_node.ok());
  CHECK(no_node.err().message.find("data.local: this trainer has no node id") != std::string::npos);
  o.node = "node-c";
  auto elsewhere = run_training(dataset_config(tmp.path() + "/y", 2, {"data.local=true"}), o);
  REQUIRE_FALSE(elsewhere.ok());
  CHECK(elsewhere.err().message.find("no shard is placed on node node-c") != std::string::npos);
  // Elastic groups are checked when the group is known: 3 micro-batches do not split over 2 nodes.
  auto uneven = run_local_group(
      dataset_config(tmp.path() + "/z", 2, {"data.local=true", "train.grad_accum=3", "parallel.min_trainers=1",
                                            "parallel.max_trainers=2"}),
      p, tmp.path() + "/home");
  REQUIRE_FALSE(uneven.sums[0].ok());
  CHECK(uneven.sums[0].err().message.find("data.local in a group of 2 needs train.grad_accum a multiple of 2") !=
        std::string::npos);
}
