// textq_bench: the learned text filters of libs/textq (issue 33) per core.
// Trains the filter the tests train (2 OpenMP threads, its wall time printed),
// then on one thread: perplexity scoring of a mixed 400-document corpus
// (batched), the quality head one document per call (the importer's path),
// semantic dedup (embedding + exact-scan index), the scan alone at 10^4 kept
// documents, and the LM-head cost of bytes against GPT-2's vocabulary.
// OMP_WAIT_POLICY=passive is set by re-executing unless the caller set one.
// Last lines, for scripts:
//   case=ppl_filter mb_per_s=<..>
//   case=quality_classifier mb_per_s=<..>
//   case=semantic_dedup docs_per_s=<..>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "bench/textq_cases.hpp"

int main(int, char** argv) {
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    std::perror("textq_bench: re-exec with OMP_WAIT_POLICY=passive failed; continuing");
  }
  namespace c = loom::bench::textq_cases;
  double train_s = 0;
  const auto m = c::train_default(&train_s);
  std::printf("case=train_filter seconds=%.1f params=%zu load=%s\n", train_s, m->params.size(),
              loom::bench::loadavg().c_str());
  const auto docs = c::corpus(400);
  c::vocab_case(*m);
  c::ppl_filter_case(m, docs);
  c::quality_case(m, docs);
  c::semantic_dedup_case(m, docs);
  return 0;
}
