// cdc_bench: single-threaded FastCDC throughput (loom::cdc, 16/64/256 KiB) over
// 1 GiB of pseudo-random bytes in memory (xorshift64*, fixed seed), chunking
// only and chunking + SHA-256 per chunk (what a manifest build costs), and
// SHA-256 alone for reference (the bound on the second figure). GB =
// 10^9 bytes; figures divide by this thread's CPU time, best of 3 passes (the
// box is shared), i.e. per core. Last line, for scripts:
//   case=fastcdc gb_per_s=<..> sha256_gb_per_s=<..>
// Usage: cdc_bench [MiB]   (default 1024)
#include "bench/bench_util.hpp"
#include "libs/cdc/fastcdc.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <time.h>

using loom::bench::thread_cpu_s;

namespace {

constexpr int passes = 3;

template <class F>
double best_gb_per_s(std::size_t bytes, F&& f) {
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    double t0 = thread_cpu_s();
    f();
    double dt = thread_cpu_s() - t0;
    best = std::max(best, static_cast<double>(bytes) / dt / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const std::size_t bytes = mib << 20;
  const std::string data = loom::bench::pseudo_random(bytes, 0xcdcb3);
  const loom::cdc::params p;

  std::size_t chunks = 0;
  double cut = best_gb_per_s(bytes, [&] { chunks = loom::cdc::chunk_lengths(data, p).size(); });
  std::printf("fastcdc     %zu MiB  %zu chunks  mean %.1f KiB  %.2f GB/s\n", mib, chunks,
              static_cast<double>(bytes) / static_cast<double>(chunks) / 1024.0, cut);

  std::uint8_t sink = 0;  // keeps the hashes observable
  double sha_only = best_gb_per_s(bytes, [&] {
    for (std::size_t off = 0; off < bytes; off += 64u << 10)
      sink ^= loom::crypto::sha256(std::string_view(data).substr(off, 64u << 10))[0];
  });
  std::printf("sha256 alone (64 KiB blocks, for reference)  %.2f GB/s\n", sha_only);
  double hashed = best_gb_per_s(bytes, [&] {
    for (const auto& c : loom::cdc::chunk_data(data, p)) sink ^= c.sha256[0];
  });
  std::printf("fastcdc+sha256  %.2f GB/s  (sink %u)\n", hashed, sink);

  std::printf("case=fastcdc gb_per_s=%.2f sha256_gb_per_s=%.2f\n", cut, hashed);
  return 0;
}
