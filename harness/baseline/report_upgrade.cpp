// The comparison's "program upgrade" section of the baseline report (report_parts.h): one place a
// person reads whether an upgrade moved a program's results, and how far.
#include <algorithm>
#include <cmath>
#include <set>

#include "harness/baseline/report.h"
#include "harness/baseline/report_parts.h"

namespace lockstep::baseline::parts {
namespace {

// Most tensors listed per scenario (the largest relative differences first), most points drawn per
// curve (a longer curve is drawn every k-th step, its last step kept).
constexpr std::size_t kTensorsShown = 8, kCurvePoints = 2000;

std::vector<Point> points(const CurveValues& c) {
  std::vector<Point> out;
  const std::size_t n = std::min(c.values.size(), c.steps.size()), every = n / kCurvePoints + 1;
  for (std::size_t i = 0; i < n; ++i)
    if ((i % every == 0 || i + 1 == n) && std::isfinite(c.values[i])) out.push_back(Point{static_cast<int>(c.steps[i]), c.values[i], "", false});
  return out;
}

std::string cell(const std::string& s) { return s.empty() ? "-" : s; }

}  // namespace

void upgrade_section(const Comparison& c, std::ostringstream& h, std::ostringstream& md) {
  bool numbers = false;
  for (const auto& s : c.scenarios) numbers = numbers || !s.numbers.tensors.empty() || !s.curves.empty();
  if (!numbers && c.from_systems.empty() && c.to_systems.empty()) return;
  h << "<h3>Program upgrade: " << html_escape(c.from.name) << " to " << html_escape(c.to.name) << "</h3>";
  md << "### Program upgrade: " << md_escape(c.from.name) << " to " << md_escape(c.to.name) << "\n\n";

  // What ran, side by side: the programs' own stack first, then lockstep's build.
  h << "<table><tr><th></th><th>" << html_escape(c.from.name) << "</th><th>" << html_escape(c.to.name) << "</th></tr>";
  md << "| | " << md_escape(c.from.name) << " | " << md_escape(c.to.name) << " |\n|---|---|---|\n";
  const std::size_t n = std::max(c.from_systems.size(), c.to_systems.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::string a = i < c.from_systems.size() ? c.from_systems[i] : "", b = i < c.to_systems.size() ? c.to_systems[i] : "";
    h << "<tr><td>programs ran on</td><td>" << html_escape(cell(a)) << "</td><td>" << html_escape(cell(b)) << "</td></tr>";
    md << "| programs ran on | " << md_escape(cell(a)) << " | " << md_escape(cell(b)) << " |\n";
  }
  h << "<tr><td>lockstep's LibTorch</td><td>" << html_escape(c.from.torch + " (" + c.from.torch_line + ")") << "</td><td>"
    << html_escape(c.to.torch + " (" + c.to.torch_line + ")") << "</td></tr></table>";
  md << "| lockstep's LibTorch | " << md_escape(c.from.torch + " (" + c.from.torch_line + ")") << " | "
     << md_escape(c.to.torch + " (" + c.to.torch_line + ")") << " |\n\n";

  for (const auto& s : c.scenarios) {
    const bool has = !s.numbers.tensors.empty() || !s.curves.empty() || !s.sequence.empty() || !s.metrics.empty();
    if (!has) continue;
    h << "<h4>" << html_escape(s.scenario) << ": " << to_string(s.verdict) << "</h4><p>" << html_escape(s.detail) << "</p>";
    md << "#### " << md_escape(s.scenario) << ": " << md_escape(std::string(to_string(s.verdict))) << "\n\n" << md_escape(s.detail) << "\n\n";
    // Each logged curve of both records, overlaid, step by step.
    for (const auto& [a, b] : s.curves) {
      std::vector<std::pair<std::string, std::vector<Point>>> series(2);
      series[0].first = c.from.name;
      series[1].first = c.to.name;
      series[0].second = points(a);
      series[1].second = points(b);
      h << line_chart(s.scenario + ": " + a.name, "", series, {}, "step");
    }
    // The parameters that differ, the largest relative differences first.
    std::vector<const TensorDiff*> differ;
    for (const auto& t : s.numbers.tensors)
      if (t.differ || !t.problem.empty()) differ.push_back(&t);
    std::stable_sort(differ.begin(), differ.end(), [](const TensorDiff* x, const TensorDiff* y) {
      return !x->problem.empty() > !y->problem.empty() || (x->problem.empty() == y->problem.empty() && x->max_rel > y->max_rel);
    });
    if (!differ.empty()) {
      h << "<table><tr><th>parameter</th><th>elements differ</th><th>beyond tolerance</th><th>largest |difference|</th>"
           "<th>largest relative</th></tr>";
      md << "| parameter | elements differ | beyond tolerance | largest abs difference | largest relative |\n|---|---|---|---|---|\n";
      for (std::size_t i = 0; i < differ.size() && i < kTensorsShown; ++i) {
        const auto& t = *differ[i];
        const std::string count = t.problem.empty() ? std::to_string(t.differ) + " of " + std::to_string(t.elements) : t.problem;
        const std::string beyond = t.problem.empty() ? std::to_string(t.beyond) : "-";
        const std::string abs = t.problem.empty() ? num(t.max_abs) : "-", rel = t.problem.empty() ? num(t.max_rel) : "-";
        h << "<tr><td>" << html_escape(t.name) << "</td><td>" << html_escape(count) << "</td><td" << (t.beyond ? " class=\"bad\"" : "")
          << ">" << beyond << "</td><td>" << abs << "</td><td>" << rel << "</td></tr>";
        md << "| " << md_escape(t.name) << " | " << md_escape(count) << " | " << beyond << " | " << abs << " | " << rel << " |\n";
      }
      if (differ.size() > kTensorsShown) {
        h << "<tr><td colspan=\"5\">and " << differ.size() - kTensorsShown << " more</td></tr>";
        md << "| and " << differ.size() - kTensorsShown << " more | | | | |\n";
      }
      h << "</table>";
      md << "\n";
    }
    if (!s.sequence.empty()) {
      h << "<p>First collective sequence difference: " << html_escape(s.sequence) << "</p>";
      md << "First collective sequence difference: " << md_escape(s.sequence) << "\n\n";
    }
    // Throughput: the ratio of each judged metric's medians, with its interval.
    std::string ratios, ratios_md;
    for (const auto& [m, j] : s.metrics) {
      if (is_wait_metric(m)) continue;
      ratios += "<tr><td>" + html_escape(m) + "</td><td" + (j.slower ? " class=\"bad\"" : "") + ">" + num(j.ratio) + "x</td><td>" +
                num(j.ci_low) + "-" + num(j.ci_high) + "</td></tr>";
      ratios_md += "| " + md_escape(m) + " | " + num(j.ratio) + "x | " + num(j.ci_low) + "-" + num(j.ci_high) + " |\n";
    }
    if (!ratios.empty()) {
      h << "<table><tr><th>throughput metric</th><th>" << html_escape(c.to.name) << " / " << html_escape(c.from.name)
        << "</th><th>95% CI</th></tr>" << ratios << "</table>";
      md << "| throughput metric | ratio | 95% CI |\n|---|---|---|\n" << ratios_md << "\n";
    }
  }
}

}  // namespace lockstep::baseline::parts
