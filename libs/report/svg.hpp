// The SVG pieces of a report: a curve of one series over steps, and a stage
// timeline. Each curve carries the points it draws as data attributes
// (data-steps, data-values, %.9g), so a reader — or a test — gets the job's
// own numbers back from the page. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::report {

// Escapes & < > " ' for HTML text and attribute values.
std::string escape(const std::string& s);

struct point {
  std::uint64_t step = 0;
  double value = 0;
};

// At most `limit` of `all`, evenly spaced, the first and the last kept (a long
// run's curve stays a few hundred kB).
std::vector<point> thin(const std::vector<point>& all, std::size_t limit = 2000);

// An inline <svg class="curve"> of `pts` (non-finite values are left out of
// the line and counted in the caption), with its axis extremes labelled.
std::string curve(const std::string& series, const std::string& title, const std::vector<point>& pts);

struct span {
  std::string label;
  double from_s = 0, to_s = 0;  // seconds since the job's submission
  std::string state;
};
struct mark {
  double at_s = 0;
  std::string label;  // the event's kind and text (its tooltip)
};

// One bar per stage on a shared time axis, events as ticks with their text as tooltips.
std::string timeline(const std::vector<span>& spans, const std::vector<mark>& marks, double total_s);

}  // namespace loom::report
