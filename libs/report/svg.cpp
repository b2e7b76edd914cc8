#include "libs/report/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace loom::report {
namespace {

std::string num(double v, const char* f = "%.9g") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

constexpr double width = 640, height = 180, left = 80, right = 12, top = 14, bottom = 26;  // left: "1.249e+05" fits

}  // namespace

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::vector<point> thin(const std::vector<point>& all, std::size_t limit) {
  if (all.size() <= limit || limit < 2) return all;
  std::vector<point> out;
  const double stride = double(all.size() - 1) / double(limit - 1);
  for (std::size_t i = 0; i < limit; ++i) out.push_back(all[static_cast<std::size_t>(std::llround(i * stride))]);
  return out;
}

std::string curve(const std::string& series, const std::string& title, const std::vector<point>& pts) {
  std::vector<point> finite;
  for (const auto& p : pts)
    if (std::isfinite(p.value)) finite.push_back(p);
  std::string steps, values;
  for (const auto& p : pts) {
    steps += (steps.empty() ? "" : " ") + std::to_string(p.step);
    values += (values.empty() ? "" : " ") + num(p.value);
  }
  std::string svg = "<figure><svg class=\"curve\" data-series=\"" + escape(series) + "\" data-steps=\"" + steps +
                    "\" data-values=\"" + values + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
                    "\" width=\"" + num(width) + "\" height=\"" + num(height) + "\" role=\"img\" aria-label=\"" +
                    escape(title) + "\">";
  svg += "<rect class=\"plot\" x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(width - left - right) +
         "\" height=\"" + num(height - top - bottom) + "\"/>";
  if (!finite.empty()) {
    double lo = finite.front().value, hi = lo;
    for (const auto& p : finite) lo = std::min(lo, p.value), hi = std::max(hi, p.value);
    if (hi == lo) hi = lo + (lo == 0 ? 1 : std::fabs(lo) * 0.01);
    const double s0 = double(finite.front().step), s1 = std::max(double(finite.back().step), s0 + 1);
    std::string line;
    for (const auto& p : finite) {
      const double x = left + (double(p.step) - s0) / (s1 - s0) * (width - left - right);
      const double y = top + (hi - p.value) / (hi - lo) * (height - top - bottom);
      line += (line.empty() ? "" : " ") + num(x, "%.1f") + "," + num(y, "%.1f");
    }
    svg += "<polyline class=\"line\" points=\"" + line + "\"/>";
    if (finite.size() == 1)
      svg += "<circle class=\"dot\" cx=\"" + num(left) + "\" cy=\"" + num(top + (height - top - bottom) / 2) + "\" r=\"3\"/>";
    svg += "<text x=\"" + num(left - 6) + "\" y=\"" + num(top + 10) + "\" text-anchor=\"end\">" + num(hi, "%.4g") + "</text>";
    svg += "<text x=\"" + num(left - 6) + "\" y=\"" + num(height - bottom) + "\" text-anchor=\"end\">" + num(lo, "%.4g") +
           "</text>";
    svg += "<text x=\"" + num(left) + "\" y=\"" + num(height - 8) + "\">step " + std::to_string(finite.front().step) +
           "</text>";
    svg += "<text x=\"" + num(width - right) + "\" y=\"" + num(height - 8) + "\" text-anchor=\"end\">step " +
           std::to_string(finite.back().step) + "</text>";
  } else {
    svg += "<text x=\"" + num(width / 2) + "\" y=\"" + num(height / 2) + "\" text-anchor=\"middle\">no finite value</text>";
  }
  svg += "</svg><figcaption>" + escape(title) +
         (finite.size() < pts.size() ? " (" + std::to_string(pts.size() - finite.size()) + " non-finite left out)" : "") +
         "</figcaption></figure>";
  return svg;
}

std::string timeline(const std::vector<span>& spans, const std::vector<mark>& marks, double total_s) {
  const double row = 26, w = 640, label_w = 110;
  const double h = row * double(spans.size() + 1) + 10;
  const double t = std::max(total_s, 1e-3);
  auto x = [&](double s) { return label_w + std::clamp(s / t, 0.0, 1.0) * (w - label_w - 10); };
  std::string svg = "<svg class=\"timeline\" viewBox=\"0 0 " + num(w) + " " + num(h) + "\" width=\"" + num(w) +
                    "\" height=\"" + num(h) + "\" role=\"img\" aria-label=\"stage timeline\">";
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const auto& s = spans[i];
    const double y = 6 + row * double(i);
    svg += "<text x=\"4\" y=\"" + num(y + 15) + "\">" + escape(s.label) + "</text>";
    svg += "<rect class=\"bar " + escape(s.state) + "\" x=\"" + num(x(s.from_s), "%.1f") + "\" y=\"" + num(y + 3) +
           "\" width=\"" + num(std::max(2.0, x(s.to_s) - x(s.from_s)), "%.1f") + "\" height=\"16\"><title>" +
           escape(s.label + ": " + s.state) + "</title></rect>";
  }
  const double my = 6 + row * double(spans.size());
  for (const auto& m : marks)
    svg += "<line class=\"tick\" x1=\"" + num(x(m.at_s), "%.1f") + "\" x2=\"" + num(x(m.at_s), "%.1f") + "\" y1=\"" +
           num(my) + "\" y2=\"" + num(my + 14) + "\"><title>" + escape(m.label) + "</title></line>";
  svg += "<text x=\"" + num(label_w) + "\" y=\"" + num(h - 2) + "\">0 s</text><text x=\"" + num(w - 10) + "\" y=\"" +
         num(h - 2) + "\" text-anchor=\"end\">" + num(total_s, "%.1f") + " s</text></svg>";
  return svg;
}

}  // namespace loom::report
