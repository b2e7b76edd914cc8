// crypt_bench: the cost of encryption at rest (libs/atrest, issue 32 item 3).
//   * aes_gcm: seal and unseal of 256 MiB of pseudo-random bytes in memory
//     (1 MiB chunks, a fresh data key per object as the product does), in
//     this thread's CPU time, best of 3 (the box is shared), GB = 10^9 bytes;
//     unseal includes the tag checks;
//   * shard_read: a 16 MiB shard file (ingest's shard size) read back from
//     the page cache, plain (files::read_file) and sealed (read_sealed_into:
//     read + unwrap + verify every chunk, buffers reused as a loader would),
//     best of 9 — the ratio is what reading a sealed shard costs over a
//     plain one; sealed_fresh_buffers_ms is read_sealed, new buffers each time;
//   * file_write: the same shard published durably (write_atomic: temp,
//     fsync, rename) plain and sealed, best of 5 — fsync dominates.
// The training throughput with sealed shards and checkpoints is not
// measured here: the trainer does not read sealed objects yet.
// Last lines, one per case:
//   case=aes_gcm seal_gb_per_s=<..> unseal_gb_per_s=<..>
//   case=shard_read plain_ms=<..> sealed_ms=<..> ratio=<..> sealed_fresh_buffers_ms=<..>
//   case=file_write plain_ms=<..> sealed_ms=<..> ratio=<..>
#include "bench/bench_util.hpp"

#include "libs/atrest/kek_store.hpp"
#include "libs/atrest/sealed.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

using namespace loom;

namespace {

double best_of(int n, const std::function<void()>& f, bool cpu) {
  double best = 1e30;
  for (int i = 0; i < n; ++i) {
    const double c0 = bench::thread_cpu_s();
    const auto w0 = std::chrono::steady_clock::now();
    f();
    const double t = cpu ? bench::thread_cpu_s() - c0
                         : std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    best = std::min(best, t);
  }
  return best;
}

}  // namespace

int main() {
  files::temp_dir dir("crypt-bench");
  const auto now = std::chrono::system_clock::now();
  auto keys = atrest::kek_store::open(dir.path() + "/keys", {}, now);
  if (!keys) {
    std::fprintf(stderr, "crypt_bench: %s\n", keys.err().to_string().c_str());
    return 1;
  }
  auto& k = **keys;

  // Buffers reused across passes, as a loader reuses them across objects:
  // the first pass pays for fresh pages, the best of 3 does not.
  const std::string big = bench::pseudo_random(256u << 20, 42);
  std::string sealed, back;
  const double seal_s = best_of(3, [&] { (void)atrest::seal_into(big, k, now, sealed); }, true);
  const double unseal_s = best_of(3, [&] { (void)atrest::unseal_into(sealed, k, "bench", back); }, true);
  if (back != big) {
    std::fprintf(stderr, "crypt_bench: the round trip differs\n");
    return 1;
  }
  const double gb = static_cast<double>(big.size()) / 1e9;
  std::printf("aes_gcm: %zu MiB sealed in %.3f s, unsealed in %.3f s (CPU, best of 3)\n", big.size() >> 20, seal_s,
              unseal_s);

  const std::string shard = big.substr(0, 16u << 20);
  const std::string plain_path = dir.path() + "/shard-plain.bin", sealed_path = dir.path() + "/shard-sealed.bin";
  const double w_plain = best_of(5, [&] { (void)files::write_atomic(plain_path, shard, 0600); }, false);
  const double w_sealed = best_of(5, [&] { (void)atrest::write_sealed(sealed_path, shard, k, now); }, false);
  std::string scratch;
  const double r_plain = best_of(9, [&] { back = files::read_file(plain_path).value(); }, false);
  const double r_fresh = best_of(9, [&] { back = atrest::read_sealed(sealed_path, k).value(); }, false);
  const double r_sealed = best_of(9, [&] { (void)atrest::read_sealed_into(sealed_path, k, scratch, back); }, false);
  if (back != shard) {
    std::fprintf(stderr, "crypt_bench: the sealed shard reads back different\n");
    return 1;
  }
  std::printf("case=aes_gcm seal_gb_per_s=%.2f unseal_gb_per_s=%.2f\n", gb / seal_s, gb / unseal_s);
  std::printf("case=shard_read plain_ms=%.2f sealed_ms=%.2f ratio=%.2f sealed_fresh_buffers_ms=%.2f\n",
              r_plain * 1e3, r_sealed * 1e3, r_sealed / r_plain, r_fresh * 1e3);
  std::printf("case=file_write plain_ms=%.2f sealed_ms=%.2f ratio=%.2f\n", w_plain * 1e3, w_sealed * 1e3,
              w_sealed / w_plain);
  return 0;
}
