// ingest_bench: single-threaded throughput of the ingest path on real prose, per
// core (each figure divides by this thread's CPU time, best of 3 passes: the box
// is shared). Prose: Debian's licence and copyright texts cut into paragraphs and
// reassembled with ~4% of the words replaced (services/ingest/importer/testing.hpp),
// 1-16 KB documents as ingest sees them. MB = 10^6 bytes, GB = 10^9.
//   bpe         GPT-2 encode (libs/tokenizer) of 24 MB of those documents
//   end_to_end  import_dataset on a 48 MB corpus in a temp dir (JSONL + text files):
//               read, clean, PII, quality, licence, dedup (exact + near), tokenize,
//               shards, placement, publish; MB = bytes read (decoded). Detail
//               lines first give each stage alone on the same documents.
//   fastcdc     libs/cdc chunking of 256 MiB of pseudo-random bytes, alone and
//               with SHA-256 per chunk
// Last three lines, for scripts:
//   case=bpe mb_per_s=<..>
//   case=end_to_end mb_per_s=<..>
//   case=fastcdc gb_per_s=<..> sha256_gb_per_s=<..>
#include "bench/bench_util.hpp"
#include "libs/cdc/fastcdc.hpp"
#include "libs/dedup/index.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/pii/pii.hpp"
#include "libs/shards/writer.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "services/ingest/importer/importer.hpp"
#include "services/ingest/importer/testing.hpp"
#include "services/ingest/pipeline/pipeline.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

using loom::bench::loadavg;
using loom::bench::thread_cpu_s;

namespace {

using namespace loom;
using namespace loom::ingest;

constexpr int passes = 3;
constexpr std::size_t bpe_bytes = 24'000'000;     // ~0.3 s a pass at 100 MB/s
constexpr std::size_t corpus_bytes = 48'000'000;  // ~2 s a pass at 25 MB/s
constexpr std::size_t cdc_bytes = std::size_t{256} << 20;

// Best (lowest) CPU seconds of `passes` runs of f.
double best_cpu(const std::function<void()>& f) {
  double best = 1e30;
  for (int p = 0; p < passes; ++p) {
    const double t0 = thread_cpu_s();
    f();
    best = std::min(best, thread_cpu_s() - t0);
  }
  return best;
}

double mb(std::uint64_t bytes) { return static_cast<double>(bytes) / 1e6; }

// Each stage alone, on the documents of the corpus: where the end-to-end time goes.
void stage_figures(const std::string& corpus, const tokenizer::bpe& bpe) {
  reader_options ropt;
  std::uint64_t read_bytes = 0;
  const double read_s = best_cpu([&] {
    read_callbacks cb;
    cb.on_document = [](document&) { return true; };
    read_bytes = read_path(corpus, ropt, cb).bytes_decoded;
  });
  std::vector<std::string> kept;
  std::uint64_t kept_bytes = 0;
  const double pipe_s = best_cpu([&] {
    kept.clear();
    kept_bytes = 0;
    pipeline p;
    read_callbacks cb;
    cb.on_document = [&](document& d) {
      if (p.process(d).v.kind == outcome::keep) {
        kept_bytes += d.text.size();
        kept.push_back(std::move(d.text));
      }
      return true;
    };
    read_path(corpus, ropt, cb);
  });
  auto det = pii::detector::make();
  std::vector<pii::span> spans;
  std::uint64_t found = 0;
  const double pii_s = best_cpu([&] {
    found = 0;
    for (const auto& t : kept) {
      det->find_into(t, spans);
      if (!spans.empty()) found += pii::redact(t, spans).text.size() > 0;
    }
  });
  const double dedup_s = best_cpu([&] {
    dedup::options o;
    o.memory_budget = std::size_t{512} << 20;
    auto idx = dedup::index::create(o);
    for (std::size_t i = 0; i < kept.size(); ++i) (void)idx->add({0, i}, kept[i]);
    (void)idx->finish();
  });
  std::vector<std::vector<std::uint32_t>> ids(kept.size());
  const double bpe_s = best_cpu([&] {
    for (std::size_t i = 0; i < kept.size(); ++i) {
      ids[i].assign(1, 50256);
      bpe.encode_into(kept[i], ids[i]);
    }
  });
  files::temp_dir out("loom-ingest-bench-shards");
  const double shard_s = best_cpu([&] {
    shards::writer_options o;
    o.dir = out.path();
    auto w = shards::shard_writer::create(o);
    for (const auto& d : ids) (void)w->append(d);
    (void)w->finish();
  });
  std::printf("stages (MB/s per core, each alone): read %.0f  clean+quality+licence %.1f  pii %.1f  dedup %.0f  "
              "bpe %.1f  shards %.0f  (%zu docs kept of %.1f MB, %llu with PII)\n",
              mb(read_bytes) / read_s, mb(read_bytes) / pipe_s, mb(kept_bytes) / pii_s, mb(kept_bytes) / dedup_s,
              mb(kept_bytes) / bpe_s, mb(kept_bytes) / shard_s, kept.size(), mb(read_bytes),
              static_cast<unsigned long long>(found));
}

}  // namespace

int main() {
  auto bpe = tokenizer::bpe::load_gpt2();
  if (!bpe) {
    std::fprintf(stderr, "ingest_bench: %s\n", bpe.err().to_string().c_str());
    return 1;
  }
  std::printf("load average %s\n", loadavg().c_str());

  // 1. BPE on real prose.
  importer_testing::debian_prose gen(0xB9E);
  std::vector<std::string> docs;
  std::size_t bytes = 0;
  while (bytes < bpe_bytes) {
    docs.push_back(gen.document(1024 + gen.next(15 * 1024)));
    bytes += docs.back().size();
  }
  std::vector<std::uint32_t> ids;
  std::size_t tokens = 0;
  for (std::size_t i = 0; i < 50; ++i) bpe->encode_into(docs[i], ids);  // warm the piece cache
  const double bpe_s = best_cpu([&] {
    tokens = 0;
    for (const auto& d : docs) {
      ids.clear();
      bpe->encode_into(d, ids);
      tokens += ids.size();
    }
  });
  std::printf("bpe: %zu documents, %.1f MB, %zu tokens, %.2f bytes/token\n", docs.size(), mb(bytes), tokens,
              static_cast<double>(bytes) / static_cast<double>(tokens));
  const double bpe_mbps = mb(bytes) / bpe_s;
  docs = {};

  // 2. The importer end to end, then each stage alone.
  files::temp_dir tmp("loom-ingest-bench");
  const std::string corpus = tmp.path() + "/corpus";
  importer_testing::write_debian_corpus(corpus, corpus_bytes, 0xE2E);
  import_summary last;
  const double e2e_s = best_cpu([&] {
    import_options o;
    o.source = corpus;
    o.dataset = "bench";
    o.datasets_root = tmp.path() + "/datasets";
    auto s = import_dataset(o);
    if (!s) {
      std::fprintf(stderr, "ingest_bench: %s\n", s.err().to_string().c_str());
      std::exit(1);
    }
    last = std::move(*s);
  });
  std::printf("end_to_end: %llu files, %.1f MB read, %llu documents, %llu kept, %llu duplicates, %llu rejected, "
              "%llu tokens, %zu shards; wall %.2f s (%.1f MB/s), peak RSS %.0f MiB\n",
              static_cast<unsigned long long>(last.files), mb(last.bytes_read),
              static_cast<unsigned long long>(last.documents), static_cast<unsigned long long>(last.kept),
              static_cast<unsigned long long>(last.dedup.exact + last.dedup.near),
              static_cast<unsigned long long>(last.rejected + last.quarantined + last.reader_rejections),
              static_cast<unsigned long long>(last.tokens), last.manifest.shards.size(), last.seconds, last.mb_per_s,
              static_cast<double>(last.peak_rss_bytes) / (1 << 20));
  const double e2e_mbps = mb(last.bytes_read) / e2e_s;
  stage_figures(corpus, *bpe);

  // 3. FastCDC.
  const std::string data = bench::pseudo_random(cdc_bytes, 0xcdcb3);
  const cdc::params p;
  std::size_t chunks = 0;
  const double cut_s = best_cpu([&] { chunks = cdc::chunk_lengths(data, p).size(); });
  std::uint8_t sink = 0;
  const double hashed_s = best_cpu([&] {
    for (const auto& c : cdc::chunk_data(data, p)) sink ^= c.sha256[0];
  });
  std::printf("fastcdc: %zu MiB, %zu chunks (sink %u); load average %s\n", cdc_bytes >> 20, chunks, sink,
              loadavg().c_str());

  std::printf("case=bpe mb_per_s=%.2f\n", bpe_mbps);
  std::printf("case=end_to_end mb_per_s=%.2f\n", e2e_mbps);
  std::printf("case=fastcdc gb_per_s=%.2f sha256_gb_per_s=%.2f\n", static_cast<double>(cdc_bytes) / 1e9 / cut_s,
              static_cast<double>(cdc_bytes) / 1e9 / hashed_s);
  return 0;
}
