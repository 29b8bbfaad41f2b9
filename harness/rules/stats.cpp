#include "harness/rules/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lockstep::baseline {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// count[u] = number of the C(m+n, m) orderings of m x-values and n y-values in which exactly u
// (x, y) pairs have x > y (no ties).
std::vector<double> u_distribution(int m, int n) {
  // f[i][j][u] via the recurrence f(i,j,u) = f(i-1,j,u-j) + f(i,j-1,u).
  const int max_u = m * n;
  std::vector<std::vector<std::vector<double>>> f(
      static_cast<std::size_t>(m + 1),
      std::vector<std::vector<double>>(static_cast<std::size_t>(n + 1)));
  for (int i = 0; i <= m; ++i) {
    for (int j = 0; j <= n; ++j) {
      auto& cur = f[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
      cur.assign(static_cast<std::size_t>(i * j + 1), 0.0);
      if (i == 0 || j == 0) {
        cur[0] = 1;
        continue;
      }
      const auto& a = f[static_cast<std::size_t>(i - 1)][static_cast<std::size_t>(j)];  // largest is x
      const auto& b = f[static_cast<std::size_t>(i)][static_cast<std::size_t>(j - 1)];  // largest is y
      for (int u = 0; u <= i * j; ++u) {
        double v = 0;
        if (u - j >= 0 && u - j < static_cast<int>(a.size())) v += a[static_cast<std::size_t>(u - j)];
        if (u < static_cast<int>(b.size())) v += b[static_cast<std::size_t>(u)];
        cur[static_cast<std::size_t>(u)] = v;
      }
    }
  }
  auto out = f[static_cast<std::size_t>(m)][static_cast<std::size_t>(n)];
  out.resize(static_cast<std::size_t>(max_u + 1));
  return out;
}

constexpr int kExactMax = 30;

// The largest c with P(U <= c) <= tail under H0, or -1 when even U = 0 is more likely.
int lower_critical(int m, int n, double tail) {
  if (m <= kExactMax && n <= kExactMax) {
    const auto dist = u_distribution(m, n);
    double total = 0;
    for (double d : dist) total += d;
    double cum = 0;
    int c = -1;
    for (int u = 0; u < static_cast<int>(dist.size()); ++u) {
      cum += dist[static_cast<std::size_t>(u)];
      if (cum / total > tail) break;
      c = u;
    }
    return c;
  }
  const double mu = m * n / 2.0;
  const double sigma = std::sqrt(m * n * (m + n + 1) / 12.0);
  // z for the tail (0.025 -> 1.96); Acklam-free: the only tail used is 0.025.
  const double z = tail <= 0.025 ? 1.959964 : 1.644854;
  return static_cast<int>(std::floor(mu - z * sigma - 0.5));
}

// Pooled sample standard deviation of log samples (each side about its own mean). Not robust
// on purpose: an outlier widens the tolerance, which can only make the rule more conservative.
double pooled_sd(const std::vector<double>& a, const std::vector<double>& b) {
  double ss = 0;
  for (const auto* v : {&a, &b}) {
    double mean = 0;
    for (double x : *v) mean += x;
    mean /= static_cast<double>(v->size());
    for (double x : *v) ss += (x - mean) * (x - mean);
  }
  const double dof = static_cast<double>(a.size() + b.size()) - 2;
  return dof > 0 ? std::sqrt(ss / dof) : 0;
}

}  // namespace

Direction direction_of(std::string_view m) {
  if (ends_with(m, "_per_s") || ends_with(m, "_per_sec") || ends_with(m, "_bw") || contains(m, "bandwidth") ||
      contains(m, "throughput") || ends_with(m, "_gbps"))
    return Direction::kHigherIsBetter;
  if (ends_with(m, "_s") || ends_with(m, "_ms") || ends_with(m, "_us") || ends_with(m, "_ns") ||
      starts_with(m, "us_per_") || starts_with(m, "ms_per_") || starts_with(m, "s_per_") ||
      starts_with(m, "step_time_") || starts_with(m, "time_") || contains(m, "latency") ||
      ends_with(m, "instructions") || ends_with(m, "cycles"))
    return Direction::kLowerIsBetter;
  return Direction::kNeutral;
}

std::string_view to_string(Direction d) {
  switch (d) {
    case Direction::kHigherIsBetter: return "higher_is_better";
    case Direction::kLowerIsBetter: return "lower_is_better";
    case Direction::kNeutral: return "neutral";
  }
  return "?";
}

bool is_wait_metric(std::string_view m) { return starts_with(m, "waits/"); }

bool is_iteration_metric(std::string_view m) {
  const auto slash = m.find("/rank");
  return slash != std::string_view::npos && m.find('/', slash + 1) != std::string_view::npos;
}

RuleOptions rule_for(std::string_view metric, const RuleOptions& options) {
  RuleOptions o = options;
  if (is_wait_metric(metric)) {
    o.tolerance = options.wait_tolerance;
  } else if (is_iteration_metric(metric)) {
    o.tolerance = options.iteration_tolerance;
  }
  return o;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mann_whitney_greater(const std::vector<double>& x, const std::vector<double>& y) {
  const int m = static_cast<int>(x.size()), n = static_cast<int>(y.size());
  if (m == 0 || n == 0) return 1;
  double u = 0;
  bool ties = false;
  for (double a : x) {
    for (double b : y) {
      if (a > b) u += 1;
      else if (a == b) {
        u += 0.5;
        ties = true;
      }
    }
  }
  if (m <= kExactMax && n <= kExactMax) {
    const auto dist = u_distribution(m, n);
    double total = 0, tail = 0;
    // With ties U is a half-integer; counting from ceil(U) keeps the test conservative.
    const int from = static_cast<int>(std::ceil(u - 1e-9));
    for (int k = 0; k < static_cast<int>(dist.size()); ++k) {
      total += dist[static_cast<std::size_t>(k)];
      if (k >= from) tail += dist[static_cast<std::size_t>(k)];
    }
    (void)ties;
    return tail / total;
  }
  // Normal approximation with tie correction and continuity correction.
  std::vector<double> all(x);
  all.insert(all.end(), y.begin(), y.end());
  std::sort(all.begin(), all.end());
  double tie_term = 0;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  const double N = m + n;
  const double mu = m * n / 2.0;
  const double var = m * n / 12.0 * ((N + 1) - tie_term / (N * (N - 1)));
  if (var <= 0) return 1;
  const double z = (u - mu - 0.5) / std::sqrt(var);
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

Judgement judge(std::string_view metric, const std::vector<double>& baseline, const std::vector<double>& observed,
                const RuleOptions& o, const std::vector<double>& baseline_runs, const std::vector<double>& observed_runs,
                bool paired) {
  Judgement j;
  const Direction dir = direction_of(metric);
  if (dir == Direction::kNeutral) return j;
  const bool wait = is_wait_metric(metric);
  // A wait of 0 (a rank that never waits) is a wait, at the floor of what a trace resolves.
  const auto floored = [&](double v) { return wait && std::isfinite(v) ? std::max(v, o.wait_floor_s) : v; };
  std::vector<double> b, x;  // log cost
  for (double v : baseline)
    if (floored(v) > 0 && std::isfinite(v)) b.push_back(dir == Direction::kLowerIsBetter ? std::log(floored(v)) : -std::log(v));
  for (double v : observed)
    if (floored(v) > 0 && std::isfinite(v)) x.push_back(dir == Direction::kLowerIsBetter ? std::log(floored(v)) : -std::log(v));
  if (static_cast<int>(b.size()) < o.min_samples || static_cast<int>(x.size()) < o.min_samples) return j;
  if (!wait && is_iteration_metric(metric) && metric.size() >= 2 && metric.substr(metric.size() - 2) == "_s" &&
      median(baseline) < o.min_iteration_s)
    return j;
  if ((wait || is_iteration_metric(metric)) &&
      baseline.size() < static_cast<std::size_t>(o.min_iterations_per_run) * std::max<std::size_t>(1, baseline_runs.size()))
    return j;
  j.judged = true;
  const double log_slowdown = median(x) - median(b);
  j.slowdown = std::exp(log_slowdown);
  j.ratio = dir == Direction::kLowerIsBetter ? j.slowdown : 1 / j.slowdown;
  // Hodges-Lehmann 95% interval of the shift, from the sorted pairwise differences.
  std::vector<double> d;
  for (double a : x)
    for (double c : b) d.push_back(a - c);
  std::sort(d.begin(), d.end());
  const int c = lower_critical(static_cast<int>(x.size()), static_cast<int>(b.size()), 0.025);
  const double lo = c >= 0 ? d[static_cast<std::size_t>(c)] : d.front();
  const double hi = c >= 0 ? d[d.size() - 1 - static_cast<std::size_t>(c)] : d.back();
  // In metric terms (ratio of the metric itself).
  const double r1 = std::exp(dir == Direction::kLowerIsBetter ? lo : -lo);
  const double r2 = std::exp(dir == Direction::kLowerIsBetter ? hi : -hi);
  j.ci_low = std::min(r1, r2);
  j.ci_high = std::max(r1, r2);
  j.p_slower = mann_whitney_greater(x, b);
  j.p_faster = mann_whitney_greater(b, x);
  // The standard error of a difference of two medians is about sqrt(pi/2) x sigma x
  // sqrt(1/n1 + 1/n2) (sigma: pooled SD of the log samples); tolerate noise_factor of those.
  const double se = std::sqrt(M_PI / 2) * pooled_sd(b, x) *
                    std::sqrt(1.0 / static_cast<double>(b.size()) + 1.0 / static_cast<double>(x.size()));
  j.threshold = std::max(o.tolerance, std::exp(o.noise_factor * se) - 1);
  std::vector<double> br, xr;  // log run medians
  for (double v : baseline_runs)
    if (floored(v) > 0 && std::isfinite(v)) br.push_back(std::log(floored(v)));
  for (double v : observed_runs)
    if (floored(v) > 0 && std::isfinite(v)) xr.push_back(std::log(floored(v)));
  if (paired && br.size() == xr.size() && br.size() >= 3) {
    std::vector<double> d;
    for (std::size_t i = 0; i < br.size(); ++i) d.push_back(xr[i] - br[i]);
    double mean = 0, ss = 0;
    for (double v : d) mean += v / static_cast<double>(d.size());
    for (double v : d) ss += (v - mean) * (v - mean);
    const double run_se = std::sqrt(ss / static_cast<double>(d.size() - 1) / static_cast<double>(d.size()));
    j.threshold = std::max(j.threshold, std::exp(o.noise_factor * run_se) - 1);
  } else if (br.size() + xr.size() >= 3 && !br.empty() && !xr.empty()) {
    const double run_se = pooled_sd(br, xr) * std::sqrt(1.0 / static_cast<double>(br.size()) +
                                                        1.0 / static_cast<double>(xr.size()));
    j.threshold = std::max(j.threshold, std::exp(o.noise_factor * run_se) - 1);
  }
  j.slower = j.p_slower < o.alpha && j.slowdown > 1 + j.threshold;
  j.faster = j.p_faster < o.alpha && 1 / j.slowdown > 1 + j.threshold;
  if (wait) {
    // The medians in seconds (floored), as a person reads them.
    const double grew = std::exp(median(x)) - std::exp(median(b));
    j.slower = j.slower && grew > o.min_wait_increase_s;
    j.faster = j.faster && -grew > o.min_wait_increase_s;
  }
  return j;
}

std::string describe(const Judgement& j) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.3gx (95%% CI %.3g-%.3g, p=%.2g, tolerated %.0f%%)", j.ratio, j.ci_low, j.ci_high,
                std::min(j.p_slower, j.p_faster), j.threshold * 100);
  return buf;
}

void add_run_samples(const std::map<std::string, double>& metrics,
                     const std::map<std::string, std::vector<double>>& iterations,
                     std::map<std::string, std::vector<double>>& samples,
                     std::map<std::string, std::vector<double>>& run_medians) {
  for (const auto& [k, v] : metrics) samples[k].push_back(v);
  for (const auto& [k, v] : iterations) {
    if (v.empty()) continue;
    samples[k].insert(samples[k].end(), v.begin(), v.end());
    run_medians[k].push_back(median(v));
  }
}

}  // namespace lockstep::baseline
