#include "libs/diagnose/signals.hpp"

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cmath>
#include <cstdio>

namespace loom::diagnose {

std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

bool mentions(std::string_view text, const std::vector<std::string_view>& needles) {
  auto lower = [](unsigned char c) { return static_cast<char>(std::tolower(c)); };
  for (auto n : needles) {
    if (n.empty() || n.size() > text.size()) continue;
    for (std::size_t i = 0; i + n.size() <= text.size(); ++i) {
      std::size_t k = 0;
      while (k < n.size() && lower(text[i + k]) == lower(n[k])) ++k;
      if (k == n.size()) return true;
    }
  }
  return false;
}

std::vector<failure_text> failures(const evidence& e) {
  std::vector<failure_text> out;
  if (!e.message.empty()) out.push_back({"", e.message});
  for (const auto& ev : e.events)
    if (ev.kind == "stage_failed" || ev.kind == "stage_crashed") out.push_back({ev.stage, ev.text});
  return out;
}

std::optional<failure_text> failure_mentioning(const evidence& e, const std::vector<std::string_view>& needles) {
  std::optional<failure_text> job_wide;
  for (auto& f : failures(e)) {
    if (!mentions(f.text, needles)) continue;
    if (!f.stage.empty()) return f;  // a stage's own event names the stage
    if (!job_wide) job_wide = f;
  }
  if (job_wide)  // the job's message: "stage NAME: ..." names it
    for (const auto& s : e.stages)
      if (job_wide->text.starts_with("stage " + s.name + ":") || s.state == "failed") job_wide->stage = s.name;
  return job_wide;
}

std::vector<const event_fact*> events_mentioning(const evidence& e, const std::vector<std::string_view>& kinds,
                                                 const std::vector<std::string_view>& needles) {
  std::vector<const event_fact*> out;
  for (const auto& ev : e.events) {
    if (!kinds.empty() && std::find(kinds.begin(), kinds.end(), ev.kind) == kinds.end()) continue;
    if (needles.empty() || mentions(ev.text, needles)) out.push_back(&ev);
  }
  return out;
}

const stage_fact* find_stage(const evidence& e, std::string_view name) {
  for (const auto& s : e.stages)
    if (s.name == name) return &s;
  return nullptr;
}

double mean_loss(const std::vector<step_point>& s, std::size_t first, std::size_t n) {
  if (n == 0 || first + n > s.size()) return std::nan("");
  double sum = 0;
  for (std::size_t i = first; i < first + n; ++i) sum += s[i].loss;
  return sum / static_cast<double>(n);
}

double median_speed(const std::vector<step_point>& s, std::size_t first, std::size_t n) {
  if (n == 0 || first + n > s.size()) return std::nan("");
  std::vector<double> v;
  for (std::size_t i = first; i < first + n; ++i) v.push_back(s[i].tokens_per_s);
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

std::string resubmit(const evidence& e, const std::vector<std::string>& sets) {
  std::string line = "loom job submit --template " + (e.template_name.empty() ? "TEMPLATE" : e.template_name);
  for (const auto& s : sets) line += " --set " + s;
  return line;
}

std::string num(double v) { return fmt("%.3g", v); }

double stage_lr(const stage_fact& s) {
  if (s.config.known && s.config.lr > 0) return s.config.lr;
  double most = 0;
  for (const auto& p : s.steps) most = std::max(most, p.lr);
  return most;
}

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 300) line = line.substr(0, 297) + "...";
  return line;
}

}  // namespace loom::diagnose
