// pii_bench: single-threaded throughput of loom::pii (find + redact, as the
// ingest PII stage runs it) on real prose with sprinkled PII. Prose: Debian's
// /usr/share/common-licenses and the copyright files of essential packages,
// repeated to 24 MB; one PII item of a random type every ~1 KB (fixed seed),
// written in the prose's own lines; split into documents of 1-16 KB as ingest
// sees them. MB = 10^6 bytes of input; mb_per_s divides by this thread's CPU
// time (best of 3 passes), i.e. per core. Then each type alone, to show where
// the time goes. Last line, for scripts:
//   case=pii mb_per_s=<..> spans_per_mb=<..>
#include "bench/bench_util.hpp"
#include "libs/pii/pii.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <time.h>

using loom::bench::loadavg;
using loom::bench::slurp;
using loom::bench::thread_cpu_s;

namespace {

constexpr std::size_t corpus_bytes = 24'000'000;  // one pass ~0.2 s at 100 MB/s
constexpr int passes = 3;                         // best of 3: the box is shared
constexpr std::size_t mean_gap = 1000;            // bytes of prose between two PII items

std::string prose() {
  const std::vector<std::string> files = loom::bench::debian_prose_files();
  std::string all;
  for (const auto& f : files) all += slurp(f);
  return all;
}

std::string random_chars(std::mt19937_64& rng, std::string_view alphabet, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
  return s;
}

// Items of every type; token-shaped ones are assembled here (no literal keys in the tree).
std::vector<std::string> items(std::mt19937_64& rng) {
  constexpr std::string_view b62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::vector<std::string> v = {
      "jane.doe@example.com",  "m.mueller+news@mail.example.co.uk", "(650) 253-0000", "+44 20 7031 3000",
      "+49 30 901820",         "10.20.30.40",  "192.168.1.254",     "2001:db8::8a2e:370:7334", "fe80::1ff:fe23:4567:890a",
      "4111 1111 1111 1111",   "5500-0055-5555-5559", "378282246310005", "DE89 3704 0044 0532 0130 00",
      "GB82WEST12345698765432", "123-45-6789", "665-01-0001"};
  for (int i = 0; i < 4; ++i) {
    v.push_back(std::string("AK") + "IA" + random_chars(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16));
    v.push_back(std::string("gh") + "p_" + random_chars(rng, b62, 36));
    v.push_back(random_chars(rng, b62, 40));
  }
  return v;
}

std::vector<std::string> make_corpus() {
  std::mt19937_64 rng(0x9115);
  const std::string text = prose();
  const auto pool = items(rng);
  std::vector<std::string> docs;
  std::size_t total = 0, pos = 0;
  while (total < corpus_bytes) {
    std::string d;
    const std::size_t target = 1000 + rng() % 15000;
    while (d.size() < target) {
      const std::size_t end = pos + mean_gap / 2 + rng() % mean_gap;
      const std::size_t cut = end < text.size() ? text.find(' ', end) : std::string::npos;
      if (cut == std::string::npos) {  // the prose ends: start it over
        d.append(text, pos, std::string::npos);
        pos = 0;
        continue;
      }
      d.append(text, pos, cut - pos);  // then " ITEM" before the prose's next " word"
      d += ' ';
      d += pool[rng() % pool.size()];
      pos = cut;
    }
    total += d.size();
    docs.push_back(std::move(d));
  }
  return docs;
}

struct run_result {
  double cpu_s = 1e9, wall_s = 1e9;
  std::size_t spans = 0;
  loom::pii::type_counts counts{};
};

run_result measure(const loom::pii::detector& d, const std::vector<std::string>& docs, bool redact) {
  run_result r;
  std::vector<loom::pii::span> spans;
  for (int pass = 0; pass < passes; ++pass) {
    r.spans = 0;
    r.counts = {};
    const double c0 = thread_cpu_s();
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& doc : docs) {
      d.find_into(doc, spans);
      r.spans += spans.size();
      if (redact) {
        const auto red = loom::pii::redact(doc, spans);
        for (std::size_t k = 0; k < loom::pii::type_count; ++k) r.counts[k] += red.counts[k];
      }
    }
    r.cpu_s = std::min(r.cpu_s, thread_cpu_s() - c0);
    r.wall_s = std::min(r.wall_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return r;
}

}  // namespace

int main() {
  using namespace loom::pii;
  const auto docs = make_corpus();
  std::size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  const double mb = static_cast<double>(bytes) / 1e6;

  auto all = detector::make();
  if (!all) {
    std::fprintf(stderr, "pii_bench: %s\n", all.err().to_string().c_str());
    return 1;
  }
  (void)measure(*all, std::vector<std::string>(docs.begin(), docs.begin() + 20), true);  // warm libphonenumber
  const run_result r = measure(*all, docs, true);
  std::printf("corpus: %zu documents, %.1f MB of Debian prose with PII every ~%zu bytes; load average %s\n",
              docs.size(), mb, mean_gap, loadavg().c_str());
  std::printf("found:");
  for (pii_type t : all_types) std::printf(" %s=%llu", std::string(to_string(t)).c_str(),
                                           static_cast<unsigned long long>(r.counts[static_cast<std::size_t>(t)]));
  std::printf("\n");
  for (pii_type t : all_types) {
    options o;
    o.enabled.fill(false);
    o.enabled[static_cast<std::size_t>(t)] = true;
    const auto one = detector::make(o);
    const run_result x = measure(*one, docs, false);
    std::printf("  %-12s alone: %8.1f MB/s\n", std::string(to_string(t)).c_str(), mb / x.cpu_s);
  }
  std::printf("wall clock: %.2f MB/s (best of %d; lower than per-core when the box is shared)\n", mb / r.wall_s,
              passes);
  std::printf("case=pii mb_per_s=%.2f spans_per_mb=%.0f\n", mb / r.cpu_s, static_cast<double>(r.spans) / mb);
  return 0;
}
