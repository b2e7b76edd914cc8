// bpe_train_bench: byte-level BPE training (libs/tokenizer/train) from raw text
// to merges, and encoding with the trained tokenizer, single-threaded, on a
// generated English-like corpus (20 MB by default, fixed seed): Zipf-distributed
// words whose lexicon is the words of Debian's own prose files (licences and
// copyright files) followed by made-up words for the long tail, in sentences,
// paragraphs and documents of 1-16 KB. MB = 10^6 bytes of input text; mb_per_s
// divides by this thread's CPU time, i.e. per core.
//   bpe_train_bench [VOCAB [MB]]        (defaults 8192 and 20)
// Last two lines, for scripts:
//   case=train mb_per_s=<..> vocab=<..> seconds=<..>      (count pieces + learn merges)
//   case=encode_trained mb_per_s=<..> bytes_per_token=<..>
#include "bench/bench_util.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/train/bpe_train.hpp"
#include "libs/tokenizer/train/hf_json.hpp"
#include "libs/tokenizer/train/piece_counts.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

using loom::bench::loadavg;
using loom::bench::thread_cpu_s;

namespace {

using clk = std::chrono::steady_clock;
// Zipf (s = 1) over 200k types: 20 MB then has ~210k distinct pieces, about as
// many as real English web text; training time grows with them.
constexpr std::size_t lexicon_size = 200'000;
constexpr int encode_passes = 3;              // best of 3: the box is shared

std::vector<std::string> make_lexicon(std::mt19937_64& rng) {
  std::set<std::string> seen;
  std::vector<std::string> lex;
  for (const auto& f : loom::bench::debian_prose_files()) {
    const std::string text = loom::bench::slurp(f);
    std::string w;
    for (char c : text + " ") {
      if (std::isalpha(static_cast<unsigned char>(c))) {
        w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else {
        if (w.size() > 1 && seen.insert(w).second) lex.push_back(w);
        w.clear();
      }
    }
  }
  static const char* syllables[] = {"ka", "ter", "mon", "ri", "sol", "pre", "ston", "ing", "ver", "de", "lu", "ous",
                                    "an", "ex", "pro", "ment", "tra", "bi", "ble", "ca", "ly", "un", "vo", "ty"};
  while (lex.size() < lexicon_size) {
    std::string w;
    for (int k = 0, n = 2 + static_cast<int>(rng() % 3); k < n; ++k) w += syllables[rng() % std::size(syllables)];
    if (seen.insert(w).second) lex.push_back(w);
  }
  std::shuffle(lex.begin() + 200, lex.end(), rng);  // keep the first (frequent) prose words at the head
  return lex;
}

std::vector<std::string> make_corpus(std::size_t bytes) {
  std::mt19937_64 rng(0x7A1);
  const auto lex = make_lexicon(rng);
  std::vector<double> cdf(lex.size());
  double sum = 0;
  for (std::size_t i = 0; i < lex.size(); ++i) cdf[i] = sum += 1.0 / (i + 1.0);
  auto word = [&] {
    const double u = std::uniform_real_distribution<double>(0, sum)(rng);
    return lex[static_cast<std::size_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin())];
  };
  std::vector<std::string> docs;
  std::size_t total = 0;
  while (total < bytes) {
    std::string d;
    const std::size_t target = 1000 + rng() % 15000;
    while (d.size() < target) {
      for (int s = 0, ns = 2 + static_cast<int>(rng() % 5); s < ns; ++s) {
        for (int w = 0, nw = 5 + static_cast<int>(rng() % 20); w < nw; ++w) {
          std::string x = rng() % 50 == 0 ? std::to_string(rng() % 10000) : word();
          if (w == 0) x[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(x[0])));
          else if (rng() % 70 == 0) x += "'s";
          if (w > 0) d += ' ';
          d += x;
          if (w + 1 < nw && rng() % 10 == 0) d += rng() % 4 ? "," : ";";
        }
        d += rng() % 8 ? ". " : "? ";
      }
      d.back() = '\n';
      d += '\n';
    }
    total += d.size();
    docs.push_back(std::move(d));
  }
  return docs;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t vocab = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 8192;
  const std::size_t mb = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20;
  const auto docs = make_corpus(mb * 1'000'000);
  std::size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();

  // Training: pieces counted from the raw text, then merges.
  const double c0 = thread_cpu_s();
  const auto t0 = clk::now();
  loom::tokenizer::piece_counts counts;
  for (const auto& d : docs) counts.add_document(d);
  const double count_cpu = thread_cpu_s() - c0;
  loom::tokenizer::train_options o;
  o.vocab_size = vocab;
  auto trained = loom::tokenizer::train_bpe(counts, o);
  if (!trained) {
    std::fprintf(stderr, "bpe_train_bench: %s\n", trained.err().to_string().c_str());
    return 1;
  }
  const double train_cpu = thread_cpu_s() - c0;
  const double train_wall = std::chrono::duration<double>(clk::now() - t0).count();

  auto enc = loom::tokenizer::encoder_of(loom::tokenizer::spec_of(*trained), "trained");
  if (!enc) {
    std::fprintf(stderr, "bpe_train_bench: %s\n", enc.err().to_string().c_str());
    return 1;
  }
  std::vector<std::uint32_t> ids;
  for (std::size_t i = 0; i < std::min<std::size_t>(50, docs.size()); ++i) enc->encode_into(docs[i], ids);
  double best = 1e9;
  std::size_t tokens = 0;
  for (int pass = 0; pass < encode_passes; ++pass) {
    tokens = 0;
    const double e0 = thread_cpu_s();
    for (const auto& d : docs) {
      ids.clear();
      enc->encode_into(d, ids);
      tokens += ids.size();
    }
    best = std::min(best, thread_cpu_s() - e0);
  }

  std::printf("corpus: %zu documents, %.1f MB, %llu pieces (%zu distinct); load average %s\n", docs.size(),
              bytes / 1e6, static_cast<unsigned long long>(counts.total_pieces()), counts.distinct(),
              loadavg().c_str());
  std::printf("counting pieces: %.2f s CPU (%.1f MB/s); learning %zu merges: %.2f s CPU; wall %.2f s%s\n", count_cpu,
              bytes / 1e6 / count_cpu, trained->merges.size(), train_cpu - count_cpu, train_wall,
              trained->stopped_early ? " (stopped early: min_frequency)" : "");
  std::printf("case=train mb_per_s=%.2f vocab=%zu seconds=%.2f\n", bytes / 1e6 / train_cpu, trained->vocab_size(),
              train_cpu);
  std::printf("case=encode_trained mb_per_s=%.2f bytes_per_token=%.2f\n", bytes / 1e6 / best,
              static_cast<double>(bytes) / static_cast<double>(tokens));
  return 0;
}
