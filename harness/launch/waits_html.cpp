#include "harness/launch/waits_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "harness/report/results.h"

namespace lockstep::launch {
namespace {

constexpr double kWidth = 760;  // the plot area, px
constexpr double kLeft = 64;    // the rank labels
constexpr int kRow = 22;

std::string num(double v, int digits = 1) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string esc(const std::string& s) { return report::xml_escape(s, /*attribute=*/false); }

constexpr const char* kCompute = "#9ecae1";
constexpr const char* kWait = "#fc8d59";
constexpr const char* kInCall = "#99d594";

void rect(std::ostringstream& os, double x, double y, double w, double h, const char* fill, const std::string& tip) {
  if (w <= 0) return;
  os << "<rect x=\"" << num(x, 2) << "\" y=\"" << num(y, 2) << "\" width=\"" << num(std::max(w, 0.5), 2) << "\" height=\""
     << num(h, 2) << "\" fill=\"" << fill << "\"><title>" << esc(tip) << "</title></rect>\n";
}

void timeline(std::ostringstream& os, const rules::WaitReport& report, const rules::StepWait& st) {
  const double span = std::max(1.0, st.duration_us());
  const auto x = [&](std::int64_t t) { return kLeft + kWidth * static_cast<double>(std::clamp(t, st.from_us, st.to_us) - st.from_us) / span; };
  const int ws = report.world_size;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kLeft + kWidth + 10 << "\" height=\"" << ws * kRow + 24
     << "\" role=\"img\" aria-label=\"per-rank timeline of step " << st.step << "\">\n";
  for (int r = 0; r < ws; ++r) {
    const double y = r * kRow + 2;
    os << "<text x=\"0\" y=\"" << y + 15 << "\">rank " << r << "</text>\n";
    std::int64_t prev_end = st.from_us;
    for (const auto& c : report.calls) {
      // This step's run of calls: a step value seen again later is another step.
      if (c.step != st.step || c.first_us < st.from_us || c.first_us >= st.to_us) continue;
      const auto i = static_cast<std::size_t>(r);
      const std::string what = "#" + std::to_string(c.seq) + " " + c.op + " at " + c.phase;
      rect(os, x(prev_end), y, x(c.arrival_us[i]) - x(prev_end), kRow - 4, kCompute,
           "rank " + std::to_string(r) + " computes " + num(static_cast<double>(c.arrival_us[i] - prev_end) / 1000, 2) + " ms before " + what);
      rect(os, x(c.arrival_us[i]), y, x(c.last_us) - x(c.arrival_us[i]), kRow - 4, kWait,
           "rank " + std::to_string(r) + " waits " + num(static_cast<double>(c.wait_us[i]) / 1000, 2) + " ms at " + what +
               (c.last_rank >= 0 ? " for rank " + std::to_string(c.last_rank) : ""));
      rect(os, x(c.last_us), y, x(c.end_us[i]) - x(c.last_us), kRow - 4, kInCall,
           "rank " + std::to_string(r) + " in " + what + " " + num(static_cast<double>(c.end_us[i] - c.last_us) / 1000, 2) + " ms");
      prev_end = std::max(prev_end, c.end_us[i]);
    }
  }
  os << "<text x=\"" << kLeft << "\" y=\"" << ws * kRow + 18 << "\">0 ms</text><text x=\"" << kLeft + kWidth - 60 << "\" y=\""
     << ws * kRow + 18 << "\">" << num(span / 1000, 2) << " ms</text>\n</svg>\n";
}

void heatmap(std::ostringstream& os, const rules::WaitReport& report, std::size_t max_columns) {
  const std::size_t n = report.calls.size();
  const std::size_t per = (n + max_columns - 1) / max_columns;
  const std::size_t cols = (n + per - 1) / per;
  const int ws = report.world_size;
  std::vector<std::vector<double>> cell(static_cast<std::size_t>(ws), std::vector<double>(cols, 0));
  double top = 0;
  for (std::size_t k = 0; k < n; ++k) {
    for (int r = 0; r < ws; ++r) {
      double& v = cell[static_cast<std::size_t>(r)][k / per];
      v += static_cast<double>(report.calls[k].wait_us[static_cast<std::size_t>(r)]);
      top = std::max(top, v);
    }
  }
  const double w = kWidth / static_cast<double>(cols);
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kLeft + kWidth + 10 << "\" height=\"" << ws * 16 + 24
     << "\" role=\"img\" aria-label=\"wait per rank and call\">\n";
  for (int r = 0; r < ws; ++r) {
    os << "<text x=\"0\" y=\"" << r * 16 + 13 << "\">rank " << r << "</text>\n";
    for (std::size_t c = 0; c < cols; ++c) {
      const double v = cell[static_cast<std::size_t>(r)][c];
      const int shade = top > 0 ? static_cast<int>(std::lround(255 * (1 - v / top))) : 255;
      const auto& first = report.calls[c * per];
      const auto& last = report.calls[std::min(n, (c + 1) * per) - 1];
      char fill[16];
      std::snprintf(fill, sizeof fill, "#ff%02x%02x", shade, shade);
      rect(os, kLeft + static_cast<double>(c) * w, r * 16.0, w, 15, fill,
           "rank " + std::to_string(r) + " waited " + num(v / 1000, 2) + " ms at #" + std::to_string(first.seq) +
               (per > 1 ? "..#" + std::to_string(last.seq) : " " + first.op + " at " + first.phase) + " (step " +
               std::to_string(first.step) + ")");
    }
  }
  os << "<text x=\"" << kLeft << "\" y=\"" << ws * 16 + 18 << "\">#" << report.calls.front().seq << "</text><text x=\""
     << kLeft + kWidth - 60 << "\" y=\"" << ws * 16 + 18 << "\">#" << report.calls.back().seq << "</text>\n</svg>\n";
  os << "<p class=\"k\">" << n << " collectives" << (per > 1 ? ", " + std::to_string(per) + " to a column" : "")
     << "; darkest: " << num(top / 1000, 2) << " ms of waiting.</p>\n";
}

}  // namespace

int representative_step(const rules::WaitReport& report) {
  if (report.steps.empty()) return -1;
  std::vector<int> order(report.steps.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return report.steps[static_cast<std::size_t>(a)].duration_us() < report.steps[static_cast<std::size_t>(b)].duration_us(); });
  return order[(order.size() - 1) / 2];
}

std::string waits_figures(const rules::WaitReport& report, const std::string& heading, std::size_t max_columns) {
  std::ostringstream os;
  if (report.calls.empty()) {
    os << "<p>No collective to line up.</p>\n";
    return os.str();
  }
  os << "<div class=\"waits\">\n";
  const int rep = representative_step(report);
  const auto& st = report.steps[static_cast<std::size_t>(rep)];
  os << "<" << heading << ">One step: step " << st.step << " (the median-long of " << report.steps.size() << ", "
     << num(st.duration_us() / 1000, 2) << " ms)</" << heading << ">\n<p class=\"k\"><span class=\"sw\" style=\"background:"
     << kCompute << "\"></span>compute"
     << "<span class=\"sw\" style=\"background:" << kWait << "\"></span>waiting for the last rank"
     << "<span class=\"sw\" style=\"background:" << kInCall << "\"></span>in the collective</p>\n";
  timeline(os, report, st);
  os << "<" << heading << ">Wait per rank and call</" << heading << ">\n";
  heatmap(os, report, std::max<std::size_t>(1, max_columns));
  os << "</div>\n";
  return os.str();
}

std::string waits_html(const std::string& title, const rules::WaitReport& report, const std::optional<rules::Straggler>& straggler) {
  std::ostringstream os;
  os << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>waits: " << esc(title) << "</title>\n"
     << "<style>body{font:14px system-ui,sans-serif;margin:24px;max-width:880px}svg text{font:12px system-ui,sans-serif}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
     << kWaitsCss << "</style>\n"
     << "</head><body>\n<h1>Waits at collectives: " << esc(title) << "</h1>\n";
  os << "<p><b>Straggler:</b> " << (straggler ? esc(straggler->describe(report)) : std::string("none")) << "</p>\n";
  os << "<p class=\"k\">" << esc(rules::summarize(report)) << ".</p>\n";
  os << waits_figures(report, "h2", kPageColumns);
  if (report.calls.empty()) {
    os << "</body></html>\n";
    return os.str();
  }
  os << "<h2>Per rank</h2>\n<table><tr><th>rank</th><th>waited s</th><th>compute s</th><th>arrived last</th>"
        "<th>others waited for it s</th><th>steps it led</th></tr>\n";
  for (std::size_t r = 0; r < report.ranks.size(); ++r) {
    const auto& w = report.ranks[r];
    os << "<tr><td>" << r << "</td><td>" << num(w.wait_s, 3) << "</td><td>" << num(w.compute_s, 3) << "</td><td>" << w.last
       << "</td><td>" << num(w.caused_s, 3) << "</td><td>" << w.led << "</td></tr>\n";
  }
  os << "</table>\n<p class=\"k\">Every call: waits.json beside this page (scenarios/README.md, \"Waits and stragglers\").</p>\n</body></html>\n";
  return os.str();
}

}  // namespace lockstep::launch
