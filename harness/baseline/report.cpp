#include "harness/baseline/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "harness/baseline/check.h"
#include "harness/launch/waits_html.h"
#include "harness/rules/waits.h"
#include "harness/rules/stats.h"
#include "harness/core/fs.h"
#include "harness/baseline/report_parts.h"

namespace lockstep::baseline {
namespace parts {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}
// 1.2M, 950k, 0.0051: axis labels that read at a glance.
std::string si(double v) {
  const double a = std::fabs(v);
  char buf[32];
  if (a >= 1e9) std::snprintf(buf, sizeof buf, "%.3gG", v / 1e9);
  else if (a >= 1e6) std::snprintf(buf, sizeof buf, "%.3gM", v / 1e6);
  else if (a >= 1e4) std::snprintf(buf, sizeof buf, "%.3gk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string md_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (std::string_view("|\\`*_<>[]#").find(ch) != std::string_view::npos) out += '\\';
    out += ch == '\n' ? ' ' : ch;
  }
  return out;
}

// 1-2-5 "nice" tick values spanning [lo, hi], about `want` of them.
std::vector<double> nice_ticks(double lo, double hi, int want) {
  const double raw = (hi - lo) / std::max(1, want);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> out;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return out;
}

// A line chart of one metric over the runs, one series per legend entry. Axes with values;
// the legend wraps under the plot so that every entry fits; marked runs get a red ring whose
// tooltip says what was declared.
std::string line_chart(const std::string& title, const std::string& unit,
                       const std::vector<std::pair<std::string, std::vector<Point>>>& series,
                       const std::vector<std::string>& run_labels, const std::string& x_axis) {
  const double W = 560, L = 58, R = 12, T = 22, plot_h = 120;
  double lo = INFINITY, hi = -INFINITY;
  int x_lo = INT32_MAX, x_hi = INT32_MIN;
  for (const auto& [_, pts] : series)
    for (const auto& p : pts) {
      lo = std::min(lo, p.y);
      hi = std::max(hi, p.y);
      x_lo = std::min(x_lo, p.x);
      x_hi = std::max(x_hi, p.x);
    }
  if (!std::isfinite(lo)) return "";
  if (hi - lo < std::fabs(hi) * 0.02 + 1e-12) {  // a flat line: show +-2% around it
    const double mid = (hi + lo) / 2, half = std::fabs(mid) * 0.02 + 1e-12;
    lo = mid - half;
    hi = mid + half;
  }
  const double pad = (hi - lo) * 0.06;
  lo -= pad;
  hi += pad;
  const auto ticks = nice_ticks(lo, hi, 4);
  // The legend: entries flow left to right and wrap.
  std::vector<std::tuple<double, double, std::size_t>> legend;  // x, row, series index
  double lx = L, rows = 1;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const double w = 16 + 6.0 * static_cast<double>(series[i].first.size()) + 14;
    if (lx + w > W - R && lx > L) {
      lx = L;
      ++rows;
    }
    legend.emplace_back(lx, rows - 1, i);
    lx += w;
  }
  const double axis_y = T + plot_h, H = axis_y + 30 + 14 * rows;
  auto X = [&](int x) {
    return L + (x_hi == x_lo ? 0.5 : static_cast<double>(x - x_lo) / (x_hi - x_lo)) * (W - L - R);
  };
  auto Y = [&](double y) { return T + (1 - (y - lo) / (hi - lo)) * plot_h; };
  std::ostringstream os;
  os << "<svg class=\"chart\" viewBox=\"0 0 " << W << ' ' << H << "\" width=\"" << W << "\" height=\"" << H
     << "\" role=\"img\"><title>" << html_escape(title) << "</title><text x=\"" << L << "\" y=\"14\" class=\"t\">"
     << html_escape(title) << (unit.empty() ? "" : " (" + html_escape(unit) + ")") << "</text>";
  for (double v : ticks) {
    const std::string y = px(Y(v));
    os << "<line x1=\"" << L << "\" y1=\"" << y << "\" x2=\"" << W - R << "\" y2=\"" << y << "\" class=\"g\"/><text x=\""
       << L - 4 << "\" y=\"" << px(Y(v) + 3) << "\" class=\"yl\">" << si(v) << "</text>";
  }
  os << "<path d=\"M" << L << ',' << T << "V" << axis_y << "H" << W - R << "\" class=\"ax\"/>";
  // x ticks: the first and last run, and about four between, labelled with their revision.
  std::set<int> xt{x_lo, x_hi};
  for (int k = 1; k < 4 && x_hi - x_lo > 4; ++k) xt.insert(x_lo + (x_hi - x_lo) * k / 4);
  for (int x : xt) {
    // The first and last labels are anchored inside the plot, so that they are never cut.
    const char* anchor = x == x_lo && x_lo != x_hi ? " style=\"text-anchor:start\"" : x == x_hi && x_lo != x_hi ? " style=\"text-anchor:end\"" : "";
    os << "<text x=\"" << px(X(x)) << "\" y=\"" << axis_y + 12 << "\" class=\"xl\"" << anchor << ">"
       << (x_axis.empty() ? "#" + std::to_string(x + 1) : std::to_string(x))
       << (static_cast<std::size_t>(x) < run_labels.size() ? " " + html_escape(run_labels[static_cast<std::size_t>(x)]) : "")
       << "</text>";
  }
  os << "<text x=\"" << W - R << "\" y=\"" << axis_y + 24 << "\" class=\"yl\">"
     << (x_axis.empty() ? "run # and lockstep revision, in recording order" : html_escape(x_axis)) << "</text>";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const std::string color = kColors[i % 8];
    std::string pts;
    for (const auto& p : series[i].second) pts += (pts.empty() ? "" : " ") + px(X(p.x)) + "," + px(Y(p.y));
    os << "<polyline points=\"" << pts << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.4\"/>";
    for (const auto& p : series[i].second) {
      const bool marked = !p.mark.empty();
      if (!marked && !p.check) continue;
      os << "<circle cx=\"" << px(X(p.x)) << "\" cy=\"" << px(Y(p.y)) << "\" r=\"" << (marked ? 4.5 : 2.5) << "\" fill=\""
         << (p.check ? "#fff" : color) << "\" stroke=\"" << (marked ? "#d00" : color) << "\" stroke-width=\""
         << (marked ? 2 : 1) << "\"><title>" << (x_axis.empty() ? "run #" + std::to_string(p.x + 1) : x_axis + " " + std::to_string(p.x)) << " " << html_escape(series[i].first) << ": " << num(p.y)
         << (marked ? "; " + html_escape(p.mark) : "") << "</title></circle>";
    }
  }
  for (const auto& [x, row, i] : legend) {
    const double y = axis_y + 34 + 14 * row;
    os << "<rect x=\"" << px(x) << "\" y=\"" << px(y - 8) << "\" width=\"10\" height=\"10\" fill=\"" << kColors[i % 8]
       << "\"/><text x=\"" << px(x + 14) << "\" y=\"" << px(y + 1) << "\" class=\"lg\">" << html_escape(series[i].first)
       << "</text>";
  }
  os << "</svg>";
  return os.str();
}

}  // namespace parts
using namespace parts;
namespace {

constexpr const char* kCss = R"css(
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}
th{background:#f3f3f3}.chart,.timeline{margin:4px 8px 4px 0;background:#fafafa;border:1px solid #e4e4e4}
.t{font-size:12px;font-weight:600}.yl{font-size:10px;text-anchor:end;fill:#555}.xl{font-size:10px;text-anchor:middle;fill:#555}
.lg{font-size:10px;fill:#333}.ax{stroke:#888;fill:none}.g{stroke:#e6e6e6}.counts span{margin-right:14px}
.bad{color:#b00;font-weight:600}.okc{color:#286}h4{margin:10px 0 4px}
section{border-top:1px solid #ddd;margin-top:18px}code{background:#f4f4f4;padding:0 3px}
)css";

}  // namespace

std::string html_escape(const std::string& s) {
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

namespace {

bool declared(const std::string& verdict) {
  return verdict == "result_mismatch" || verdict == "sequence_changed" || verdict == "throughput_regression";
}

// The summary's check part: the latest `run --baseline` check, its declared changes first.
void summarize_check(const StoredRun& run, std::ostringstream& h, std::ostringstream& md) {
  std::map<std::string, int> counts;
  std::vector<const StoredResult*> changed;
  for (const auto& r : run.results) {
    ++counts[r.verdict.empty() ? "unknown" : r.verdict];
    if (declared(r.verdict)) changed.push_back(&r);
  }
  const std::string head = "Latest check: " + run.environment + " baseline, lockstep " + run.lockstep_rev + ", " + run.started_at;
  h << "<h3>" << html_escape(head) << "</h3><p class=\"counts\">";
  md << "### " << md_escape(head) << "\n\n";
  for (const char* k : {"throughput_regression", "result_mismatch", "sequence_changed"}) {
    const int n = counts.count(k) ? counts[k] : 0;
    h << "<span class=\"" << (n ? "bad" : "okc") << "\">" << n << " " << k << "</span> ";
    md << "**" << n << " " << k << "**; ";
  }
  for (const auto& [k, n] : counts) {
    if (declared(k)) continue;
    h << "<span>" << n << " " << html_escape(k) << "</span> ";
    md << n << " " << md_escape(k) << "; ";
  }
  h << "</p>";
  md << "\n\n";
  if (!changed.empty()) {
    h << "<table><tr><th>scenario</th><th>declared</th><th>detail</th></tr>";
    md << "| scenario | declared | detail |\n|---|---|---|\n";
    for (const auto* r : changed) {
      h << "<tr><td>" << html_escape(r->scenario) << "</td><td class=\"bad\">" << html_escape(r->verdict) << "</td><td>"
        << html_escape(r->verdict_detail) << "</td></tr>";
      md << "| " << md_escape(r->scenario) << " | **" << md_escape(r->verdict) << "** | " << md_escape(r->verdict_detail)
         << " |\n";
    }
    h << "</table>";
    md << "\n";
  }
}

// The summary's comparison part: verdicts first, then how tight the CPU-time rule is.
void summarize_comparison(const Comparison& c, std::ostringstream& h, std::ostringstream& md) {
  std::map<std::string, int> counts;
  for (const auto& s : c.scenarios) ++counts[std::string(to_string(s.verdict))];
  const std::string head = "Comparison: " + c.from.name + " (" + std::to_string(c.from_runs) + " records) vs " + c.to.name +
                           " (" + std::to_string(c.to_runs) + " records)";
  h << "<h3>" << html_escape(head) << "</h3><p class=\"counts\">";
  md << "### " << md_escape(head) << "\n\n";
  for (const auto& [k, n] : counts) {
    const bool ok = k == "same" || k == "within_tolerance";
    h << "<span class=\"" << (ok ? "okc" : "bad") << "\">" << n << " " << html_escape(k) << "</span> ";
    md << (ok ? "" : "**") << n << " " << md_escape(k) << (ok ? "" : "**") << "; ";
  }
  h << "</p>";
  md << "\n\n";
  std::vector<double> tolerated;
  for (const auto& s : c.scenarios)
    for (const auto& [m, j] : s.metrics)
      if (is_iteration_metric(m) && !is_wait_metric(m)) tolerated.push_back(j.threshold);
  if (!tolerated.empty()) {
    std::sort(tolerated.begin(), tolerated.end());
    const std::string line = "Per-iteration CPU-time metrics judged: " + std::to_string(tolerated.size()) +
                             "; tolerated change: median " + num(100 * median(tolerated)) + "%, 90th percentile " +
                             num(100 * tolerated[tolerated.size() * 9 / 10]) + "%, max " + num(100 * tolerated.back()) + "%.";
    h << "<p>" << html_escape(line) << "</p>";
    md << md_escape(line) << "\n\n";
  }
  bool any = false;
  for (const auto& s : c.scenarios) {
    if (s.verdict == Verdict::kSame) continue;
    if (!any) {
      h << "<table><tr><th>scenario</th><th>verdict</th><th>detail</th></tr>";
      md << "| scenario | verdict | detail |\n|---|---|---|\n";
      any = true;
    }
    h << "<tr><td>" << html_escape(s.scenario) << "</td><td class=\"" << (s.verdict == Verdict::kWithinTolerance ? "okc" : "bad") << "\">"
      << to_string(s.verdict) << "</td><td>"
      << html_escape(s.detail) << "</td></tr>";
    const std::string v(to_string(s.verdict));
    md << "| " << md_escape(s.scenario) << " | " << (s.verdict == Verdict::kWithinTolerance ? md_escape(v) : "**" + v + "**") << " | "
       << md_escape(s.detail) << " |\n";
  }
  if (any) {
    h << "</table>";
    md << "\n";
  }
}

// The calls of a stored timeline (StoredResult::timeline) as the waits analysis takes them;
// nullopt for a timeline without seq, step and the lined-up flag (an older lockstep's) or one
// that does not parse. Only the calls the waits check lines up are taken.
std::optional<std::vector<std::vector<rules::Arrival>>> timeline_arrivals(const std::string& timeline) {
  const auto j = nlohmann::json::parse(timeline, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("ranks") || !j["ranks"].is_array()) return std::nullopt;
  std::vector<std::vector<rules::Arrival>> out;
  for (const auto& rank : j["ranks"]) {
    if (!rank.is_array()) return std::nullopt;
    auto& calls = out.emplace_back();
    for (const auto& c : rank) {
      if (!c.is_array() || c.size() < 7 || !c[1].is_number_integer() || !c[2].is_number_integer() ||
          !c[3].is_number_integer() || !c[4].is_number_integer() || !c[0].is_string() || !c[5].is_string() ||
          !c[6].is_number_integer())
        return std::nullopt;
      if (c[6].get<int>() != 1) continue;  // point to point, another group, no clocks: not lined up
      calls.push_back(rules::Arrival{c[3].get<std::int64_t>(), c[4].get<std::int64_t>(), c[5].get<std::string>(),
                                     c[0].get<std::string>(), c[1].get<std::int64_t>(), c[2].get<std::int64_t>()});
    }
  }
  return out;
}

// One scenario's waits from its latest clean record: the straggler verdict, the summary, the
// representative step's timeline and the heatmap (harness/launch/waits_html.h).
void waits_section(const std::string& environment, const std::string& rev, const std::string& timeline,
                   std::ostringstream& h, std::ostringstream& md) {
  const auto arrivals = timeline_arrivals(timeline);
  if (!arrivals || arrivals->size() < 2) return;
  rules::WaitReport report;
  try {
    report = rules::analyse_waits(*arrivals);
  } catch (const std::invalid_argument&) {
    return;  // a stored timeline that does not line up has no waits to show
  }
  if (report.calls.empty()) return;
  const auto straggler = rules::find_straggler(report);
  const std::string where = "latest record, " + environment + " at " + rev + ", its first " +
                            std::to_string(kTimelineCallsPerRank) + " calls per rank at most";
  h << "<h4>Waits at collectives (" << html_escape(where) << ")</h4><p><b>Straggler:</b> "
    << (straggler ? html_escape(straggler->describe(report)) : std::string("none")) << "</p><p class=\"k\">"
    << html_escape(rules::summarize(report)) << ".</p>" << launch::waits_figures(report, "h4", launch::kReportColumns);
  md << "Waits at collectives (" << md_escape(where) << "): " << md_escape(rules::summarize(report)) << "; straggler: "
     << (straggler ? md_escape(straggler->describe(report)) : std::string("none")) << ".\n\n";
}

}  // namespace

void write_report(Store& store, const std::string& out_dir, const ReportOptions& options) {
  const auto envs = store.environments();
  const auto runs = store.runs();
  std::vector<std::string> run_labels;
  for (const auto& r : runs) run_labels.push_back(r.lockstep_rev.substr(0, 7));

  // scenario -> chart title -> series -> points, in run order.
  struct Charts {
    std::map<std::string, std::map<std::string, std::vector<Point>>> by_metric;
    std::map<std::string, std::string> unit;
  };
  std::map<std::string, Charts> charts;
  // scenario -> metric -> env -> per-run values (the Markdown tables).
  std::map<std::string, std::map<std::string, std::map<std::string, std::vector<double>>>> values;
  std::map<std::string, std::map<std::string, std::string>> latest_status;
  std::map<std::string, std::map<std::string, std::map<std::string, std::vector<double>>>> step_times;
  // scenario -> its latest clean record's {environment, revision, timeline}.
  std::map<std::string, std::tuple<std::string, std::string, std::string>> latest_timeline;
  int checks = 0;
  const StoredRun* last_check = nullptr;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    const bool check = run.kind == "check";
    if (check) {
      ++checks;
      last_check = &run;
    }
    for (const auto& r : run.results) {
      if (!check) latest_status[r.scenario][run.environment] = r.status + (r.diagnosis.empty() ? "" : " (" + r.diagnosis + ")");
      // A check that declared a change marked its clean run as failed: it is shown, marked.
      if (r.status != "pass" && !(check && declared(r.verdict))) continue;
      const std::string mark = check && declared(r.verdict) ? r.verdict + ": " + r.verdict_detail : "";
      const Point base{static_cast<int>(i), 0, mark, check};
      auto& c = charts[r.scenario];
      for (const auto& [m, v] : r.metrics) {
        if (direction_of(m) == Direction::kNeutral) continue;
        Point p = base;
        p.y = v;
        c.by_metric[m][run.environment].push_back(p);
        values[r.scenario][m][run.environment].push_back(v);
        if (!check && m.rfind("step_time_", 0) == 0) step_times[r.scenario][run.environment][m].push_back(v);
      }
      if (!check && !r.timeline.empty()) latest_timeline[r.scenario] = {run.environment, run.lockstep_rev.substr(0, 7), r.timeline};
      // Per-iteration CPU time: per phase, the slowest rank's median iteration of this run.
      std::map<std::string, double> slowest;
      for (const auto& [m, v] : r.samples) {
        if (v.empty()) continue;
        values[r.scenario][m][run.environment].push_back(median(v));
        if (is_wait_metric(m)) {  // the run's median wait per step, per rank (and the skew)
          Point p = base;
          p.y = median(v) * 1e3;
          const std::string title = "Wait at collectives per step (the run's median)";
          c.unit[title] = "ms";
          const auto slash = m.find("/rank");
          const std::string who = slash == std::string::npos ? "skew" : m.substr(slash + 1, m.find('/', slash + 1) - slash - 1);
          c.by_metric[title][run.environment + " " + who].push_back(p);
          continue;
        }
        const auto slash = m.find("/rank");
        if (m.size() < 11 || m.compare(m.size() - 11, 11, "/main_cpu_s") != 0) continue;
        double& s = slowest[m.substr(0, slash)];
        s = std::max(s, median(v) * 1e3);
      }
      for (const auto& [phase, v] : slowest) {
        Point p = base;
        p.y = v;
        const std::string title = "CPU time per iteration, main thread, slowest rank";
        c.unit[title] = "ms";
        c.by_metric[title][run.environment + " " + phase].push_back(p);
      }
    }
  }

  std::ostringstream h, md;
  h << "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>lockstep performance baselines</title><style>"
    << kCss << launch::kWaitsCss << "</style></head><body><h1>lockstep performance baselines</h1>";
  md << "# lockstep performance baselines\n\n";

  // Summary first: what the last check and the comparison declared.
  h << "<h2>Summary</h2>";
  md << "## Summary\n\n";
  if (last_check) summarize_check(*last_check, h, md);
  std::string from = options.from, to = options.to;
  if (from.empty() && to.empty() && envs.size() == 2) {
    from = envs[0].name;
    to = envs[1].name;
  }
  if (!from.empty() && !to.empty()) {
    const Comparison c = compare(store, from, to, options.rule);
    summarize_comparison(c, h, md);
    upgrade_section(c, h, md);
  }
  if (!last_check && (from.empty() || to.empty())) {
    h << "<p>No check recorded yet (<code>lockstep run --baseline</code> keeps each check here), and no pair of "
         "environments to compare (<code>--from</code>, <code>--to</code>).</p>";
    md << "No check recorded yet, and no pair of environments to compare.\n\n";
  }

  h << "<h2>Environments</h2><table><tr><th>name</th><th>LibTorch</th><th>CUDA</th><th>NCCL</th><th>compiler</th><th>CPU</th>"
       "<th>GPU / driver</th><th>counters</th><th>lockstep</th><th>records</th><th>checks</th></tr>";
  md << "## Environments\n\n| name | LibTorch | CUDA | NCCL | compiler | CPU | GPU / driver | counters | lockstep | records | checks |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& e : envs) {
    int n = 0, k = 0;
    for (const auto& r : runs) {
      if (r.environment != e.name) continue;
      (r.kind == "check" ? k : n) += 1;
    }
    const std::string counters = e.counters.empty() ? "not recorded" : e.counters;
    h << "<tr><td>" << html_escape(e.name) << "</td><td>" << html_escape(e.torch + " (" + e.torch_line + ")") << "</td><td>"
      << html_escape(e.cuda) << "</td><td>" << html_escape(e.nccl) << "</td><td>" << html_escape(e.compiler) << "</td><td>"
      << html_escape(e.cpu) << "</td><td>" << html_escape(e.gpu + " / " + e.driver) << "</td><td>" << html_escape(counters)
      << "</td><td>" << html_escape(e.lockstep_rev) << "</td><td>" << n << "</td><td>" << k << "</td></tr>";
    md << "| " << md_escape(e.name) << " | " << md_escape(e.torch + " (" + e.torch_line + ")") << " | " << md_escape(e.cuda)
       << " | " << md_escape(e.nccl) << " | " << md_escape(e.compiler) << " | " << md_escape(e.cpu) << " | "
       << md_escape(e.gpu + " / " + e.driver) << " | " << md_escape(counters) << " | " << md_escape(e.lockstep_rev) << " | "
       << n << " | " << k << " |\n";
  }
  h << "</table>";

  // Step-time breakdowns (metrics named step_time_<part>_s).
  if (!step_times.empty()) {
    h << "<h2>Training step-time breakdown</h2>";
    md << "\n## Training step-time breakdown\n\n";
  }
  for (const auto& [scenario, by_env] : step_times) {
    h << "<h3>" << html_escape(scenario) << "</h3>";
    md << "### " << md_escape(scenario) << "\n\n| environment | part | median s | share |\n|---|---|---|---|\n";
    std::set<std::string> parts;
    for (const auto& [_, m] : by_env)
      for (const auto& [k, _2] : m) parts.insert(k);
    double widest = 0;
    for (const auto& [_, m] : by_env) {
      double tot = 0;
      for (const auto& [_2, v] : m) tot += median(v);
      widest = std::max(widest, tot);
    }
    const double W = 720, L = 110, row = 26;
    // The legend wraps: every part's name fits.
    std::vector<std::pair<double, int>> legend;  // x, row
    double lx = L;
    int legend_rows = 1;
    for (const auto& part : parts) {
      const double w = 14 + 6.2 * static_cast<double>(part.size()) + 12;
      if (lx + w > W - 8 && lx > L) {
        lx = L;
        ++legend_rows;
      }
      legend.emplace_back(lx, legend_rows - 1);
      lx += w;
    }
    const double height = row * static_cast<double>(by_env.size()) + 16 + 14.0 * legend_rows;
    h << "<svg class=\"chart\" viewBox=\"0 0 " << W << ' ' << height << "\" width=\"" << W << "\" height=\"" << height
      << "\">";
    int y = 0;
    for (const auto& [env, m] : by_env) {
      double x = L, tot = 0;
      for (const auto& [_2, v] : m) tot += median(v);
      h << "<text x=\"" << L - 6 << "\" y=\"" << y * row + 17 << "\" class=\"yl\">" << html_escape(env) << "</text>";
      int k = 0;
      for (const auto& part : parts) {
        auto it = m.find(part);
        const double v = it == m.end() ? 0 : median(it->second);
        const double w = widest > 0 ? v / widest * (W - L - 10) : 0;
        h << "<rect x=\"" << px(x) << "\" y=\"" << y * row + 4 << "\" width=\"" << px(w) << "\" height=\"" << row - 8
          << "\" fill=\"" << kColors[k % 8] << "\"><title>" << html_escape(part) << ": " << num(v) << " s</title></rect>";
        md << "| " << md_escape(env) << " | " << md_escape(part) << " | " << num(v) << " | "
           << (tot > 0 ? num(100 * v / tot) + "%" : "-") << " |\n";
        x += w;
        ++k;
      }
      ++y;
    }
    int k = 0;
    for (const auto& part : parts) {
      const auto [x, r] = legend[static_cast<std::size_t>(k)];
      const double ly = y * row + 8 + 14.0 * r;
      h << "<rect x=\"" << px(x) << "\" y=\"" << px(ly) << "\" width=\"10\" height=\"10\" fill=\"" << kColors[k % 8]
        << "\"/><text x=\"" << px(x + 14) << "\" y=\"" << px(ly + 9) << "\" class=\"lg\">" << html_escape(part)
        << "</text>";
      ++k;
    }
    h << "</svg>";
    md << "\n";
  }

  h << "<h2>History</h2><p>" << runs.size() << " runs (" << checks << " of them checks), " << charts.size()
    << " scenarios with results. Each chart shows one metric over the runs in recording order (the x axis names the "
       "lockstep revision), one line per environment. Filled line only: recorded baseline runs; hollow dots: "
       "<code>run --baseline</code> checks; a red ring marks a check that declared a change (its tooltip says what). "
       "CPU time per iteration is the median over a run's iterations of the phase's CPU time on the rank's main thread, "
       "for the slowest rank. Wait at collectives per step is the run's median of each rank's wait for the last rank "
       "to arrive (and of the skew); below the charts, the latest clean record's waits: the straggler verdict, a "
       "per-rank timeline of its median-long step and a rank-by-call heatmap of the wait. Charts are inline SVG "
       "without scripts.</p>";
  md << "## History\n\n" << runs.size() << " runs (" << checks
     << " of them checks). Per metric and environment: the per-run values (per-iteration metrics: the run's median).\n\n";
  for (const auto& [scenario, c] : charts) {
    if (c.by_metric.empty()) continue;
    h << "<section><h3>" << html_escape(scenario) << "</h3><p>";
    for (const auto& [env, st] : latest_status[scenario]) h << html_escape(env) << ": " << html_escape(st) << ". ";
    h << "</p>";
    for (const auto& [metric, by_series] : c.by_metric) {
      std::vector<std::pair<std::string, std::vector<Point>>> series(by_series.begin(), by_series.end());
      auto u = c.unit.find(metric);
      h << line_chart(metric, u == c.unit.end() ? "" : u->second, series, run_labels);
    }
    std::ostringstream waits_md;
    if (auto it = latest_timeline.find(scenario); it != latest_timeline.end()) {
      const auto& [env, rev, timeline] = it->second;
      waits_section(env, rev, timeline, h, waits_md);
    }
    h << "</section>";
    md << "### " << md_escape(scenario) << "\n\n| metric | environment | runs | median | min | max |\n|---|---|---|---|---|---|\n";
    for (const auto& [metric, by_env] : values[scenario]) {
      for (const auto& [env, v] : by_env) {
        md << "| " << md_escape(metric) << " | " << md_escape(env) << " | " << v.size() << " | " << num(median(v)) << " | "
           << num(*std::min_element(v.begin(), v.end())) << " | " << num(*std::max_element(v.begin(), v.end())) << " |\n";
      }
    }
    md << "\n" << waits_md.str();
  }
  h << "</body></html>\n";
  std::filesystem::create_directories(out_dir);
  write_file_atomically((std::filesystem::path(out_dir) / "index.html").string(), h.str());
  write_file_atomically((std::filesystem::path(out_dir) / "report.md").string(), md.str());
}

}  // namespace lockstep::baseline
