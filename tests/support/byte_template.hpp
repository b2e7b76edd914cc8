// A small GPT job template, byte-level by default, for the cross-process tests that run real
// jobs through `loom up` (diagnose, report, suggest): vocab 256, the
// "bytes" tokenizer, fp32, one pretrain stage. Each test names what it
// changes; the rest is one text, so the tests cannot drift apart.
#pragma once

#include <string>

namespace loom::test {

struct byte_gpt {
  std::string name = "byte-tiny";
  int layers = 2, heads = 4, channels = 64, seq_len = 32;
  int batch = 8, steps = 30, threads = 1, seed = 7;
  std::string lr = "3e-3", min_lr = "1e-5";
  int warmup_steps = 5;
  int every_steps = 10, keep = 2;  // checkpoints
  bool gpt2 = false;  // GPT-2 token ids instead of bytes (a dataset's shards hold GPT-2 ids)
};

inline std::string byte_template(const byte_gpt& g) {
  const auto n = [](int v) { return std::to_string(v); };
  return "# " + g.name + ": a " + n(g.layers) + "-layer GPT, steps of a few ms (tests/support/byte_template.hpp)\n" +
         "[job]\nname = \"" + g.name + "\"\nstages = [\"pretrain\"]\n\n" +
         "[model]\nlayers = " + n(g.layers) + "\nheads = " + n(g.heads) + "\nchannels = " + n(g.channels) +
         "\nmax_seq_len = " + n(g.seq_len) +
         (g.gpt2 ? "\nvocab = 50257\npadded_vocab = 50304\n\n" : "\nvocab = 256\npadded_vocab = 256\n\n") +
         (g.gpt2 ? "" : "[data]\ntokenizer = \"bytes\"\n\n") +
         "[train]\nprecision = \"fp32\"\nbatch = " + n(g.batch) + "\nseq_len = " + n(g.seq_len) +
         "\nsteps = " + n(g.steps) + "\nseed = " + n(g.seed) + "\nthreads = " + n(g.threads) + "\n\n" +
         "[optim]\nlr = " + g.lr + "\nmin_lr = " + g.min_lr + "\nwarmup_steps = " + n(g.warmup_steps) +
         "\nweight_decay = 0.1\ngrad_clip = 1.0\n\n" +
         "[checkpoint]\nevery_steps = " + n(g.every_steps) + "\nkeep = " + n(g.keep) + "\n";
}

}  // namespace loom::test
