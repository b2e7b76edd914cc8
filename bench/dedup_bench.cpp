// dedup_bench: single-threaded throughput of loom::dedup on real prose. Prose:
// Debian's /usr/share/common-licenses and /usr/share/doc/*/copyright (distinct
// texts), repeated to 32 MB and cut into documents of 1-16 KB at spaces, as
// ingest sees them. MB = 10^6 bytes of input; MB/s divides by this thread's CPU
// time (best of 3 passes: the box is shared), i.e. per core.
//   exact   - whitespace normalisation + SHA-256 -> content key
//   minhash - words, 5-gram hashes, 112 permutations -> signature
//   index   - add() (both fingerprints, band keys, buffering) + finish(), all
//             in memory, then with a 1 MiB budget that spills runs to disk
//             (wall time shown too: it includes the file I/O); every 10th
//             document is an exact copy of an earlier one
//   index of 500k synthetic fingerprints: the sort/merge/cluster machinery
//             alone, in memory (1 GiB) and spilling (64 MiB)
// Last lines, for scripts:
//   case=exact mb_per_s=<..> docs_per_s=<..>
//   case=minhash mb_per_s=<..> docs_per_s=<..>
#include "bench/bench_util.hpp"
#include "libs/dedup/index.hpp"
#include "libs/dedup/testing.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <time.h>

using loom::bench::loadavg;
using loom::bench::thread_cpu_s;

namespace {

constexpr std::size_t corpus_bytes = 32'000'000;  // one minhash pass ~0.2-0.5 s
constexpr int passes = 3;

double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<std::string> make_corpus() {
  std::string text;
  for (const auto& t : loom::dedup::testing::debian_texts()) text += t;
  std::mt19937_64 rng(0xdedb);
  std::vector<std::string> docs;
  std::size_t total = 0, pos = 0;
  while (total < corpus_bytes) {
    const std::size_t want = 1000 + rng() % 15000;
    std::string d;
    while (d.size() < want) {
      std::size_t end = text.find(' ', pos + (want - d.size()));
      if (end == std::string::npos) {  // the prose ends: start it over
        d.append(text, pos, std::string::npos);
        pos = 0;
        continue;
      }
      d.append(text, pos, end - pos);
      pos = end;
    }
    total += d.size();
    docs.push_back(std::move(d));
    if (docs.size() % 10 == 0) {  // every 10th document again: exact duplicates for finish() to find
      docs.push_back(docs[rng() % docs.size()]);
      total += docs.back().size();
    }
  }
  return docs;
}

// Synthetic fingerprints for the index at scale (no text to hash): 80% unique,
// 10% exact copies, 10% near copies (8 of 112 entries changed: J ~ 0.93).
std::vector<loom::dedup::fingerprint> synthetic(std::size_t n) {
  std::mt19937_64 rng(0x51);
  std::vector<loom::dedup::fingerprint> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto& f = out[i];
    const auto k = rng() % 10;
    if (i > 0 && k == 0) {
      f = out[rng() % i];
    } else if (i > 0 && k == 1) {
      f = out[rng() % i];
      f.content = {rng(), rng()};
      for (int j = 0; j < 8; ++j) f.minhash[rng() % loom::dedup::permutations] = static_cast<std::uint32_t>(rng());
    } else {
      f.content = {rng(), rng()};
      for (auto& m : f.minhash) m = static_cast<std::uint32_t>(rng());
      f.shingles = 500;
    }
  }
  return out;
}

struct timing {
  double cpu = 1e9, wall = 1e9;
};

template <class F>
timing best_of(F&& f) {
  timing t;
  for (int p = 0; p < passes; ++p) {
    const double c0 = thread_cpu_s(), w0 = wall_s();
    f();
    t.cpu = std::min(t.cpu, thread_cpu_s() - c0);
    t.wall = std::min(t.wall, wall_s() - w0);
  }
  return t;
}

}  // namespace

int main() {
  using namespace loom::dedup;
  const auto docs = make_corpus();
  std::size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  const double mb = static_cast<double>(bytes) / 1e6, n = static_cast<double>(docs.size());
  std::printf("dedup_bench: %zu documents, %.1f MB, loadavg %s\n", docs.size(), mb, loadavg().c_str());
  std::printf("cpu: avx512f=%d avx2=%d (the MinHash kernel picks its clone by these)\n",
              __builtin_cpu_supports("avx512f") ? 1 : 0, __builtin_cpu_supports("avx2") ? 1 : 0);

  fingerprinter f;
  std::uint64_t sink = 0;
  const timing exact = best_of([&] {
    for (const auto& d : docs) sink += f.content(d).lo;
  });
  signature sig;
  std::uint64_t shingles = 0;
  const timing minhash = best_of([&] {
    shingles = 0;
    for (const auto& d : docs) {
      shingles += f.minhash(d, sig);
      sink += sig[0];
    }
  });
  std::printf("exact:   %7.1f MB/s %9.0f docs/s\n", mb / exact.cpu, n / exact.cpu);
  std::printf("minhash: %7.1f MB/s %9.0f docs/s (%.1f ns per shingle, %.2f M shingles)\n", mb / minhash.cpu,
              n / minhash.cpu, minhash.cpu * 1e9 / static_cast<double>(shingles), static_cast<double>(shingles) / 1e6);

  for (std::size_t budget : {std::size_t{256} << 20, std::size_t{1} << 20}) {
    summary st;
    double finish_cpu = 1e9;
    const timing all = best_of([&] {
      options o;
      o.memory_budget = budget;
      auto ix = index::create(o);
      if (!ix) std::abort();
      for (std::size_t i = 0; i < docs.size(); ++i)
        if (!ix->add({i / 1000, i % 1000}, docs[i])) std::abort();
      const double c0 = thread_cpu_s();
      auto v = ix->finish();
      if (!v) {
        std::fprintf(stderr, "finish: %s\n", v.err().to_string().c_str());
        std::abort();
      }
      finish_cpu = std::min(finish_cpu, thread_cpu_s() - c0);
      st = v->stats();
    });
    std::printf(
        "index, %3zu MiB budget: %7.1f MB/s %9.0f docs/s cpu (wall %.1f MB/s); finish %.3f s cpu; "
        "exact %llu near %llu dropped, %llu candidate pairs, %llu runs, %.1f MB spilled\n",
        budget >> 20, mb / all.cpu, n / all.cpu, mb / all.wall, finish_cpu,
        static_cast<unsigned long long>(st.exact_dropped), static_cast<unsigned long long>(st.near_dropped),
        static_cast<unsigned long long>(st.candidate_pairs), static_cast<unsigned long long>(st.runs_written),
        static_cast<double>(st.bytes_spilled) / 1e6);
  }
  // The index alone at scale: add() of ready fingerprints, then finish().
  const std::size_t many = 500'000;
  const auto fps = synthetic(many);
  for (std::size_t budget : {std::size_t{1} << 30, std::size_t{64} << 20}) {
    options o;
    o.memory_budget = budget;
    auto ix = index::create(o);
    if (!ix) std::abort();
    const double c0 = thread_cpu_s(), w0 = wall_s();
    for (std::size_t i = 0; i < many; ++i)
      if (!ix->add({i / 1000, i % 1000}, fps[i])) std::abort();
    const double c1 = thread_cpu_s(), w1 = wall_s();
    auto v = ix->finish();
    if (!v) {
      std::fprintf(stderr, "finish: %s\n", v.err().to_string().c_str());
      std::abort();
    }
    const double c2 = thread_cpu_s(), w2 = wall_s();
    const auto& st = v->stats();
    std::printf(
        "index of %zu fingerprints, %4zu MiB budget: add %.0f docs/s, finish %.0f docs/s cpu (wall %.2f + %.2f s); "
        "exact %llu near %llu dropped, %llu runs, %.0f MB spilled, tracked peak %.0f MB\n",
        many, budget >> 20, static_cast<double>(many) / (c1 - c0), static_cast<double>(many) / (c2 - c1), w1 - w0,
        w2 - w1, static_cast<unsigned long long>(st.exact_dropped), static_cast<unsigned long long>(st.near_dropped),
        static_cast<unsigned long long>(st.runs_written), static_cast<double>(st.bytes_spilled) / 1e6,
        static_cast<double>(st.tracked_peak_bytes) / 1e6);
  }

  std::printf("loadavg after: %s (checksum %llu)\n", loadavg().c_str(), static_cast<unsigned long long>(sink & 0xff));
  std::printf("case=exact mb_per_s=%.1f docs_per_s=%.0f\n", mb / exact.cpu, n / exact.cpu);
  std::printf("case=minhash mb_per_s=%.1f docs_per_s=%.0f\n", mb / minhash.cpu, n / minhash.cpu);
}
