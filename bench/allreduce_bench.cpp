// allreduce_bench: loom::collective's ring all-reduce, W = 2 and 4 members as
// threads of this process, each with its own ZeroMQ context (its own I/O
// thread, as separate trainer processes have) over loopback TCP with CURVE,
// on buffers of 1, 16 and 128 MiB of floats. Per case: one warm-up call, then
// `reps` calls; a call's time is the slowest member's, from a common start.
// algbw = buffer bytes / time; busbw = algbw * 2(W-1)/W (nccl-tests' bus
// bandwidth: the bytes each link carries). GB = 10^9 bytes. An untimed
// W=2 16 MiB case runs first (process warm-up, see main). Before them, the
// relay a stage's child process uses for its group's all-reduce
// (libs/collective/relay.hpp): a forked child exchanges 16 and 128 MiB over a
// socketpair with this process, which answers at once (no group: the relay's
// own cost, to set beside the ring's); gb_per_s counts both directions. The
// last lines, one per case, for scripts:
//   case=w2_16mib bus_gb_per_s=<..> algo_gb_per_s=<..> ms=<..>
//   case=relay_128mib gb_per_s=<..> ms=<..>
#include "bench/bench_util.hpp"
#include "libs/collective/relay.hpp"
#include "libs/collective/ring.hpp"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace loom;
using clk = std::chrono::steady_clock;

namespace {

struct figures {
  std::string name;
  double bus_gb_per_s, algo_gb_per_s, ms;
};

// One member: a context with its ZAP handler admitting every member, and an inbox.
struct member_process {
  zmq::context_t ctx;
  wire::curve_keypair keys = wire::generate_keypair();
  std::unique_ptr<wire::zap_handler> zap;
  std::unique_ptr<collective::inbox> in;
};

figures run_case(std::uint32_t w, std::size_t mib, int reps, std::uint64_t generation) {
  const std::size_t n = (mib << 20) / sizeof(float);
  std::vector<std::unique_ptr<member_process>> procs;
  for (std::uint32_t r = 0; r < w; ++r) procs.push_back(std::make_unique<member_process>());
  wire::allow_list allowed;
  for (std::uint32_t r = 0; r < w; ++r) allowed[procs[r]->keys.public_z85] = "trainer-" + std::to_string(r);
  std::vector<collective::member> members;
  for (auto& p : procs) {
    p->zap = std::make_unique<wire::zap_handler>(p->ctx, allowed, "loom");
    auto in = collective::inbox::bind(p->ctx, p->keys, "loom", "tcp://127.0.0.1:*");
    if (!in) {
      std::fprintf(stderr, "allreduce_bench: %s\n", in.err().to_string().c_str());
      std::exit(1);
    }
    p->in = std::move(*in);
    members.push_back({p->in->endpoint(), p->in->public_key()});
  }

  std::barrier sync(static_cast<std::ptrdiff_t>(w));
  std::vector<std::vector<double>> secs(w, std::vector<double>(reps));
  std::vector<std::string> errors(w);
  std::vector<std::thread> threads;
  for (std::uint32_t r = 0; r < w; ++r)
    threads.emplace_back([&, r] {
      collective::group_options o{r, w, members, generation, std::chrono::seconds(60), nullptr};
      auto g = collective::group::join(procs[r]->ctx, procs[r]->keys, *procs[r]->in, o);
      std::vector<float> buf(n, 1.0f);
      for (int i = -1; i < reps && g && errors[r].empty(); ++i) {
        sync.arrive_and_wait();
        const auto t0 = clk::now();
        if (auto st = (*g)->all_reduce_sum(buf); !st) errors[r] = st.err().to_string();
        if (i >= 0) secs[r][i] = std::chrono::duration<double>(clk::now() - t0).count();
      }
      if (!g) errors[r] = g.err().to_string();
      if (errors[r].empty() && n > 0 &&
          buf[n / 2] != std::pow(static_cast<float>(w), static_cast<float>(reps + 1)))
        errors[r] = "wrong sum";
    });
  for (auto& t : threads) t.join();
  for (std::uint32_t r = 0; r < w; ++r)
    if (!errors[r].empty()) {
      std::fprintf(stderr, "allreduce_bench: w=%u %zu MiB rank %u: %s\n", w, mib, r, errors[r].c_str());
      std::exit(1);
    }
  double total = 0;
  for (int i = 0; i < reps; ++i) {
    double slowest = 0;
    for (std::uint32_t r = 0; r < w; ++r) slowest = std::max(slowest, secs[r][i]);
    total += slowest;
  }
  const double s = total / reps;
  const double algo = static_cast<double>(n * sizeof(float)) / s / 1e9;
  const double bus = algo * 2.0 * (w - 1) / w;
  return {"w" + std::to_string(w) + "_" + std::to_string(mib) + "mib", bus, algo, s * 1e3};
}

// The relay between a stage's child and its trainer: `reps` exchanges of
// `mib` MiB from a forked child (forked before any thread of this process
// exists), each answered at once. A call's time is the child's, request to sums.
struct relay_figures {
  std::string name;
  double gb_per_s, ms;
};
relay_figures run_relay(std::size_t mib, int reps) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::exit(1);
  int timing[2];
  if (::pipe(timing) != 0) std::exit(1);
  const std::size_t n = mib * 1024 * 1024 / sizeof(float);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[1]);
    std::vector<float> v(n, 1.0f);
    (void)collective::relay::exchange(fds[0], v);  // untimed: page faults of the first buffers
    double total = 0;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = clk::now();
      if (!collective::relay::exchange(fds[0], v)) ::_exit(1);
      total += std::chrono::duration<double>(clk::now() - t0).count();
    }
    (void)!::write(timing[1], &total, sizeof total);
    ::_exit(0);
  }
  ::close(fds[0]);
  for (int i = 0; i < reps + 1; ++i)
    if (!collective::relay::serve_one(fds[1], [](std::span<float>) { return ok_status(); })) std::exit(1);
  double total = 0;
  if (::read(timing[0], &total, sizeof total) != static_cast<ssize_t>(sizeof total)) std::exit(1);
  int st = 0;
  ::waitpid(pid, &st, 0);
  for (int fd : {fds[1], timing[0], timing[1]}) ::close(fd);
  const double s = total / reps;
  return {"relay_" + std::to_string(mib) + "mib", 2.0 * static_cast<double>(n * sizeof(float)) / s / 1e9, s * 1e3};
}

}  // namespace

int main() {
  std::printf("allreduce_bench: ring all-reduce over loopback TCP + CURVE, %u cores, load %s\n",
              std::thread::hardware_concurrency(), loom::bench::loadavg().c_str());
  struct spec {
    std::uint32_t w;
    std::size_t mib;
    int reps;
  };
  const spec cases[] = {{2, 1, 20}, {2, 16, 5}, {2, 128, 2}, {4, 1, 20}, {4, 16, 5}, {4, 128, 2}};
  // Untimed: the process's first 4 MiB frames make glibc malloc adapt its mmap
  // threshold (until then every frame is a fresh mmap + page faults + munmap,
  // 2-4x slower); a trainer process is past this after its first steps.
  // The relay first: its child is forked while this process has one thread.
  std::vector<relay_figures> relayed{run_relay(16, 5), run_relay(128, 3)};
  for (const auto& r : relayed) std::printf("  %s  %8.1f ms  %.3f GB/s both ways\n", r.name.c_str(), r.ms, r.gb_per_s);
  std::uint64_t generation = 1;
  run_case(2, 16, 4, generation++);
  std::vector<figures> out;
  for (const auto& c : cases) {
    out.push_back(run_case(c.w, c.mib, c.reps, generation++));
    std::printf("  W=%u %4zu MiB  %8.1f ms  algbw %.3f GB/s  busbw %.3f GB/s\n", c.w, c.mib, out.back().ms,
                out.back().algo_gb_per_s, out.back().bus_gb_per_s);
  }
  for (const auto& f : out)
    std::printf("case=%s bus_gb_per_s=%.3f algo_gb_per_s=%.3f ms=%.1f\n", f.name.c_str(), f.bus_gb_per_s,
                f.algo_gb_per_s, f.ms);
  for (const auto& r : relayed) std::printf("case=%s gb_per_s=%.3f ms=%.1f\n", r.name.c_str(), r.gb_per_s, r.ms);
  return 0;
}
