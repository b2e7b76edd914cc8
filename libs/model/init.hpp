// init: GPT-2's initialisation of a parameter buffer from a seed, reproducible
// on any thread count (each value depends only on the seed, its tensor and its
// index). The engine initialises with it; the aggregator (next) starts a
// global model with it, so both sides draw the same numbers.
#pragma once

#include "libs/model/gpt_config.hpp"

#include <cstdint>
#include <span>

namespace loom::model {

// N(0, 0.02) for wte (real rows), wpe, qkvw and fcw; N(0, 0.02/sqrt(2L)) for
// attprojw and fcprojw; LayerNorm weights 1; biases and wte's padding rows 0.
// REQUIRES: params.size() == make_param_layout(cfg).total. OpenMP inside.
void init_params(const gpt2_config& cfg, std::span<float> params, std::uint64_t seed);

}  // namespace loom::model
