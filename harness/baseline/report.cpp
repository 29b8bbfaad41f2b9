#include "harness/baseline/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/baseline/stats.h"
#include "harness/core/fs.h"

namespace lockstep::baseline {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
constexpr int kTimelineCallsShown = 96;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
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

std::string op_color(const std::string& op) {
  static const std::map<std::string, std::string> kOp = {
      {"all_reduce", "#1f77b4"}, {"all_gather", "#2ca02c"}, {"all_to_all", "#ff7f0e"}, {"broadcast", "#9467bd"},
      {"barrier", "#7f7f7f"},    {"send", "#8c564b"},       {"recv", "#e377c2"}};
  auto it = kOp.find(op);
  return it == kOp.end() ? "#17becf" : it->second;
}

struct Point {
  int x;  // global run ordinal
  double y;
};

// A line chart: one series per environment over the global run ordinal.
std::string line_chart(const std::string& title, const std::map<std::string, std::vector<Point>>& series,
                       const std::map<std::string, int>& env_color, int runs) {
  const double W = 520, H = 170, L = 64, R = 12, T = 22, B = 26;
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& [_, pts] : series)
    for (const auto& p : pts) {
      lo = std::min(lo, p.y);
      hi = std::max(hi, p.y);
    }
  if (!std::isfinite(lo)) return "";
  if (hi == lo) {
    hi += std::fabs(hi) * 0.05 + 1e-12;
    lo -= std::fabs(lo) * 0.05 + 1e-12;
  }
  const double pad = (hi - lo) * 0.08;
  lo -= pad;
  hi += pad;
  auto X = [&](int x) { return L + (runs <= 1 ? 0.5 : static_cast<double>(x) / (runs - 1)) * (W - L - R); };
  auto Y = [&](double y) { return T + (1 - (y - lo) / (hi - lo)) * (H - T - B); };
  std::ostringstream os;
  os << "<svg class=\"chart\" viewBox=\"0 0 " << W << ' ' << H << "\" width=\"" << W << "\" height=\"" << H
     << "\" role=\"img\"><title>" << html_escape(title) << "</title>";
  os << "<text x=\"" << L << "\" y=\"14\" class=\"t\">" << html_escape(title) << "</text>";
  os << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B << "\" class=\"ax\"/>";
  os << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - B << "\" class=\"ax\"/>";
  for (int k = 0; k <= 2; ++k) {
    const double v = lo + (hi - lo) * (k + 0.5) / 3;
    os << "<text x=\"" << L - 4 << "\" y=\"" << px(Y(v) + 4) << "\" class=\"yl\">" << num(v) << "</text>";
  }
  os << "<text x=\"" << (W + L) / 2 << "\" y=\"" << H - 6 << "\" class=\"xl\">recorded run (oldest to newest)</text>";
  for (const auto& [env, pts] : series) {
    const std::string color = kColors[env_color.at(env) % 8];
    std::string path;
    for (const auto& p : pts) path += (path.empty() ? "M" : " L") + px(X(p.x)) + "," + px(Y(p.y));
    os << "<path d=\"" << path << "\" fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\"/>";
    for (const auto& p : pts)
      os << "<circle cx=\"" << px(X(p.x)) << "\" cy=\"" << px(Y(p.y)) << "\" r=\"2.5\" fill=\"" << color
         << "\"><title>" << html_escape(env) << ": " << num(p.y) << "</title></circle>";
  }
  os << "</svg>";
  return os.str();
}

std::string timeline_svg(const std::string& title, const nlohmann::json& t) {
  const auto& ranks = t.at("ranks");
  double end = 1;
  for (const auto& rank : ranks) {
    int i = 0;
    for (const auto& span : rank) {
      if (i++ >= kTimelineCallsShown) break;
      end = std::max(end, span.at(2).get<double>());
    }
  }
  const double W = 720, L = 56, R = 10, row = 18, T = 20;
  const double H = T + row * static_cast<double>(ranks.size()) + 18;
  std::ostringstream os;
  os << "<svg class=\"timeline\" viewBox=\"0 0 " << W << ' ' << px(H) << "\" width=\"" << W << "\" height=\"" << px(H)
     << "\" role=\"img\"><title>" << html_escape(title) << "</title>";
  os << "<text x=\"" << L << "\" y=\"13\" class=\"t\">" << html_escape(title) << "</text>";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const double y = T + row * static_cast<double>(r);
    os << "<text x=\"" << L - 6 << "\" y=\"" << px(y + 12) << "\" class=\"yl\">rank " << r << "</text>";
    int i = 0;
    for (const auto& span : ranks[r]) {
      if (i++ >= kTimelineCallsShown) break;
      const std::string op = span.at(0).get<std::string>();
      const double s = span.at(1).get<double>(), e = span.at(2).get<double>();
      const double x0 = L + s / end * (W - L - R), x1 = L + e / end * (W - L - R);
      os << "<rect x=\"" << px(x0) << "\" y=\"" << px(y + 2) << "\" width=\"" << px(std::max(0.8, x1 - x0))
         << "\" height=\"" << row - 4 << "\" fill=\"" << op_color(op) << "\"><title>" << html_escape(op) << " "
         << num(s) << "-" << num(e) << " us</title></rect>";
    }
  }
  os << "<text x=\"" << W - R << "\" y=\"" << px(H - 4) << "\" class=\"yl\">" << num(end / 1000) << " ms</text></svg>";
  return os.str();
}

constexpr const char* kCss = R"css(
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}
th{background:#f3f3f3}.chart,.timeline{margin:4px 8px 4px 0;background:#fafafa;border:1px solid #e4e4e4}
.t{font-size:12px;font-weight:600}.yl{font-size:10px;text-anchor:end;fill:#555}.xl{font-size:10px;text-anchor:middle;fill:#777}
.ax{stroke:#999}.sw{display:inline-block;width:12px;height:12px;margin:0 4px 0 10px;vertical-align:-2px}
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

void write_report(Store& store, const std::string& out_dir) {
  const auto envs = store.environments();
  const auto runs = store.runs();
  std::map<std::string, int> env_color;
  for (const auto& e : envs) env_color.emplace(e.name, static_cast<int>(env_color.size()));

  // scenario -> metric -> env -> points; scenario -> env -> latest timeline.
  std::map<std::string, std::map<std::string, std::map<std::string, std::vector<Point>>>> series;
  std::map<std::string, std::map<std::string, std::string>> timeline;
  std::map<std::string, std::map<std::string, std::map<std::string, std::vector<double>>>> step_times;
  std::map<std::string, std::map<std::string, std::string>> latest_status;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    for (const auto& r : runs[i].results) {
      latest_status[r.scenario][runs[i].environment] = r.status + (r.diagnosis.empty() ? "" : " (" + r.diagnosis + ")");
      if (r.status != "pass") continue;
      for (const auto& [m, v] : r.metrics) {
        series[r.scenario][m][runs[i].environment].push_back({static_cast<int>(i), v});
        if (m.rfind("step_time_", 0) == 0) step_times[r.scenario][runs[i].environment][m].push_back(v);
      }
      series[r.scenario]["scenario_wall_s"][runs[i].environment].push_back({static_cast<int>(i), r.duration_s});
      if (!r.timeline.empty()) timeline[r.scenario][runs[i].environment] = r.timeline;
    }
  }

  std::ostringstream h, md;
  h << "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>lockstep performance baselines</title><style>"
    << kCss << "</style></head><body><h1>lockstep performance baselines</h1>";
  md << "# lockstep performance baselines\n\n";
  h << "<p>" << runs.size() << " recorded runs, " << series.size() << " scenarios with results. Charts: each metric over the "
    << "recorded runs (oldest to newest), one line per environment. Direction: <code>*_per_s</code> higher is better; "
    << "<code>*_s</code>, <code>us_per_*</code>, <code>step_time_*</code> lower is better. <code>scenario_wall_s</code> is the whole scenario including process start. Charts are inline SVG: no script, so the file works where scripts are blocked.</p>";
  md << runs.size() << " recorded runs, " << series.size() << " scenarios with results.\n\n";

  h << "<h2>Environments</h2><table><tr><th>name</th><th>LibTorch</th><th>CUDA</th><th>NCCL</th><th>compiler</th><th>CPU</th>"
       "<th>GPU</th><th>driver</th><th>lockstep</th><th>runs</th></tr>";
  md << "## Environments\n\n| name | LibTorch | CUDA | NCCL | compiler | CPU | GPU | driver | lockstep | runs |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& e : envs) {
    int n = 0;
    for (const auto& r : runs) n += r.environment == e.name;
    h << "<tr><td><span class=\"sw\" style=\"background:" << kColors[env_color[e.name] % 8] << "\"></span>"
      << html_escape(e.name) << "</td><td>" << html_escape(e.torch + " (" + e.torch_line + ")") << "</td><td>"
      << html_escape(e.cuda) << "</td><td>" << html_escape(e.nccl) << "</td><td>" << html_escape(e.compiler) << "</td><td>"
      << html_escape(e.cpu) << "</td><td>" << html_escape(e.gpu) << "</td><td>" << html_escape(e.driver) << "</td><td>"
      << html_escape(e.lockstep_rev) << "</td><td>" << n << "</td></tr>";
    md << "| " << md_escape(e.name) << " | " << md_escape(e.torch + " (" + e.torch_line + ")") << " | " << md_escape(e.cuda)
       << " | " << md_escape(e.nccl) << " | " << md_escape(e.compiler) << " | " << md_escape(e.cpu) << " | "
       << md_escape(e.gpu) << " | " << md_escape(e.driver) << " | " << md_escape(e.lockstep_rev) << " | " << n << " |\n";
  }
  h << "</table>";

  // Step-time breakdowns (metrics named step_time_<part>_s).
  h << "<h2>Training step-time breakdown</h2>";
  md << "\n## Training step-time breakdown\n\n";
  if (step_times.empty()) {
    h << "<p>No recorded scenario reports <code>step_time_*_s</code> metrics.</p>";
    md << "No recorded scenario reports `step_time_*_s` metrics.\n";
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
    h << "<svg class=\"chart\" viewBox=\"0 0 " << W << ' ' << row * static_cast<double>(by_env.size()) + 40 << "\" width=\"" << W
      << "\" height=\"" << row * static_cast<double>(by_env.size()) + 40 << "\">";
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
    double lx = L;
    for (const auto& part : parts) {
      h << "<rect x=\"" << px(lx) << "\" y=\"" << y * row + 8 << "\" width=\"10\" height=\"10\" fill=\"" << kColors[k++ % 8]
        << "\"/><text x=\"" << px(lx + 14) << "\" y=\"" << y * row + 17 << "\" style=\"font-size:10px\">" << html_escape(part)
        << "</text>";
      lx += 14 + 6.5 * static_cast<double>(part.size()) + 12;
    }
    h << "</svg>";
    md << "\n";
  }

  h << "<h2>Scenarios</h2>";
  md << "\n## Scenarios\n\n";
  for (const auto& [scenario, metrics] : series) {
    h << "<section><h3>" << html_escape(scenario) << "</h3><p>";
    md << "### " << md_escape(scenario) << "\n\n";
    for (const auto& [env, st] : latest_status[scenario]) h << html_escape(env) << ": " << html_escape(st) << ". ";
    h << "</p>";
    md << "| metric | direction | environment | samples | median | min | max |\n|---|---|---|---|---|---|---|\n";
    for (const auto& [metric, by_env] : metrics) {
      h << line_chart(metric, by_env, env_color, static_cast<int>(runs.size()));
      for (const auto& [env, pts] : by_env) {
        std::vector<double> v;
        for (const auto& p : pts) v.push_back(p.y);
        md << "| " << md_escape(metric) << " | " << to_string(direction_of(metric)) << " | " << md_escape(env) << " | "
           << v.size() << " | " << num(median(v)) << " | " << num(*std::min_element(v.begin(), v.end())) << " | "
           << num(*std::max_element(v.begin(), v.end())) << " |\n";
      }
    }
    auto tl = timeline.find(scenario);
    if (tl != timeline.end()) {
      h << "<h4>Per-rank collective timeline (latest recorded run; first " << kTimelineCallsShown << " calls per rank)</h4>";
      md << "\nCollective timeline (latest recorded run):\n\n| environment | rank | calls stored | in calls ms | span ms |\n|---|---|---|---|---|\n";
      for (const auto& [env, text] : tl->second) {
        const auto t = nlohmann::json::parse(text);
        h << timeline_svg(env, t);
        int r = 0;
        for (const auto& rank : t.at("ranks")) {
          double busy = 0, span = 0;
          for (const auto& s : rank) {
            busy += s.at(2).get<double>() - s.at(1).get<double>();
            span = std::max(span, s.at(2).get<double>());
          }
          md << "| " << md_escape(env) << " | " << r++ << " | " << rank.size() << " | " << num(busy / 1000) << " | "
             << num(span / 1000) << " |\n";
        }
      }
    }
    h << "</section>";
    md << "\n";
  }
  h << "<p style=\"color:#777\">Colours in timelines: ";
  for (const char* op : {"all_reduce", "all_gather", "all_to_all", "broadcast", "barrier", "send", "recv"})
    h << "<span class=\"sw\" style=\"background:" << op_color(op) << "\"></span>" << op;
  h << "</p></body></html>\n";
  std::filesystem::create_directories(out_dir);
  write_file_atomically((std::filesystem::path(out_dir) / "index.html").string(), h.str());
  write_file_atomically((std::filesystem::path(out_dir) / "report.md").string(), md.str());
}

}  // namespace lockstep::baseline
