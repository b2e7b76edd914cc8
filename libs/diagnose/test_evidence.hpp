// For the hand-built evidence of rules.test.cpp and suggest.test.cpp: job-1, a
// succeeded pretrain-tiny job with one succeeded `pretrain` stage on `node`,
// its config an lm stage in fp32 (micro-batch 4, sequence 64, lr 2e-3, warm-up
// 5, 3 checkpoints kept) on `threads` threads for `steps` steps; no metrics,
// no roster. Each test adds the numbers its rules read.
#pragma once

#include "libs/diagnose/evidence.hpp"

#include <string>

namespace loom::diagnose::testing {

inline evidence one_stage_job(const std::string& node, int threads, int steps) {
  evidence e;
  e.job = "job-1";
  e.template_name = "pretrain-tiny";
  e.state = "succeeded";
  stage_fact s;
  s.name = "pretrain";
  s.state = "succeeded";
  s.node = node;
  auto& c = s.config;
  c.known = true, c.kind = "lm", c.precision = "fp32", c.threads = threads, c.batch = 4, c.grad_accum = 1;
  c.seq_len = 64, c.steps = steps, c.warmup_steps = 5, c.lr = 2e-3, c.keep = 3;
  e.stages.push_back(s);
  return e;
}

}  // namespace loom::diagnose::testing
