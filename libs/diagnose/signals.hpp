// Small readers of the evidence the rules share: text search in the job's
// failure and events, a stage's loss and speed curve, and the command line
// that resubmits the job with changed settings. Pure functions.
#pragma once

#include "libs/diagnose/evidence.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::diagnose {

// printf into a std::string.
std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));

// Case-insensitive: does `text` hold any of `needles`?
bool mentions(std::string_view text, const std::vector<std::string_view>& needles);

// The texts that say why the job or a stage failed: the job's message and
// every stage_failed / stage_crashed event (each with its stage).
struct failure_text {
  std::string stage, text;
};
std::vector<failure_text> failures(const evidence& e);

// The first failure text, then event of kind `kinds` (any when empty), that
// mentions any of `needles`; nullopt when none does.
std::optional<failure_text> failure_mentioning(const evidence& e, const std::vector<std::string_view>& needles);
std::vector<const event_fact*> events_mentioning(const evidence& e, const std::vector<std::string_view>& kinds,
                                                 const std::vector<std::string_view>& needles);

const stage_fact* find_stage(const evidence& e, std::string_view name);

// The mean loss of a stage's first / last `n` logged steps (NaN when it has fewer than n).
double mean_loss(const std::vector<step_point>& s, std::size_t first, std::size_t n);
// The median of tokens_per_s over [first, first + n) of the log.
double median_speed(const std::vector<step_point>& s, std::size_t first, std::size_t n);

// "loom job submit --template T --set k=v ..." for this job with `sets`
// (the template is the job's; "TEMPLATE" when unknown).
std::string resubmit(const evidence& e, const std::vector<std::string>& sets);

// A short number: 2e-05, 0.003, 8.
std::string num(double v);

// The stage's learning rate: its config's, else the highest its log shows (0 when neither).
double stage_lr(const stage_fact& s);

// The first line of `text`, at most 300 bytes.
std::string first_line(const std::string& text);

}  // namespace loom::diagnose
