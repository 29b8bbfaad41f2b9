#include "harness/rules/waits.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>

#include "harness/rules/stats.h"

namespace lockstep::rules {
namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s >= 10 ? "%.1f s" : "%.2f s", s);
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string per_rank(const WaitReport& report, double RankWaits::*member) {
  std::string s;
  for (std::size_t r = 0; r < report.ranks.size(); ++r) {
    s += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + " " + seconds(report.ranks[r].*member);
  }
  return s;
}

// P(X >= k) for X ~ Binomial(n, p), summed in log space (n may be thousands of steps).
double binomial_tail(int n, int k, double p) {
  if (k <= 0) return 1;
  if (k > n) return 0;
  double sum = 0;
  for (int i = k; i <= n; ++i) {
    const double log_term = std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) +
                            i * std::log(p) + (n - i) * std::log1p(-p);
    sum += std::exp(log_term);
  }
  return std::min(1.0, sum);
}

}  // namespace

double CallWait::caused_us() const {
  if (last_rank < 0 || wait_us.size() < 2) return 0;
  double sum = 0;
  for (std::size_t r = 0; r < wait_us.size(); ++r) {
    if (static_cast<int>(r) != last_rank) sum += static_cast<double>(wait_us[r]);
  }
  return sum / static_cast<double>(wait_us.size() - 1);
}

WaitReport analyse_waits(const std::vector<std::vector<Arrival>>& ranks) {
  WaitReport out;
  out.world_size = static_cast<int>(ranks.size());
  out.ranks.assign(ranks.size(), RankWaits{});
  if (ranks.empty()) return out;
  std::vector<std::map<std::int64_t, const Arrival*>> by_seq(ranks.size());
  std::set<std::int64_t> all;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    // A trace has each call when it completed: calls the program waited for out of order are
    // out of order there too.
    for (const Arrival& a : ranks[r]) {
      all.insert(a.seq);
      if (!by_seq[r].emplace(a.seq, &a).second) {
        throw std::invalid_argument("rank " + std::to_string(r) + ": collective #" + std::to_string(a.seq) + " twice");
      }
    }
    for (auto it = by_seq[r].begin(); it != by_seq[r].end();) it = it->second->step < 0 ? by_seq[r].erase(it) : std::next(it);
  }
  std::vector<std::int64_t> common;
  for (const auto& [seq, a] : by_seq[0]) {
    bool everywhere = true;
    for (std::size_t r = 1; r < ranks.size() && everywhere; ++r) everywhere = by_seq[r].count(seq) > 0;
    if (everywhere) common.push_back(seq);
  }
  if (!common.empty()) common.erase(common.begin());  // the first call's wait is start-up skew
  out.skipped = static_cast<std::int64_t>(all.size() - common.size());
  std::vector<std::int64_t> prev_end(ranks.size(), -1);
  std::int64_t span_from = 0, span_to = 0;
  for (const std::int64_t seq : common) {
    CallWait c;
    const Arrival& a0 = *by_seq[0].at(seq);
    c.seq = seq;
    c.step = a0.step;
    c.phase = a0.phase;
    c.op = a0.op;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const Arrival& a = *by_seq[r].at(seq);
      if (a.op != a0.op) {
        throw std::invalid_argument("collective #" + std::to_string(seq) + " is " + a0.op + " on rank 0 but " + a.op +
                                    " on rank " + std::to_string(r));
      }
      c.arrival_us.push_back(a.t_start_us);
      c.end_us.push_back(std::max(a.t_end_us, a.t_start_us));
      c.compute_us.push_back(prev_end[r] < 0 ? -1 : std::max<std::int64_t>(0, a.t_start_us - prev_end[r]));
      prev_end[r] = c.end_us.back();
    }
    c.first_us = *std::min_element(c.arrival_us.begin(), c.arrival_us.end());
    c.last_us = *std::max_element(c.arrival_us.begin(), c.arrival_us.end());
    c.last_rank = static_cast<int>(std::max_element(c.arrival_us.begin(), c.arrival_us.end()) - c.arrival_us.begin());
    if (c.skew_us() < kMinSkewUs) c.last_rank = -1;
    for (const std::int64_t t : c.arrival_us) c.wait_us.push_back(c.last_us - t);
    const std::int64_t end = *std::max_element(c.end_us.begin(), c.end_us.end());
    if (out.calls.empty()) span_from = c.first_us;
    span_from = std::min(span_from, c.first_us);
    span_to = std::max(span_to, end);
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      RankWaits& w = out.ranks[r];
      w.wait_s += static_cast<double>(c.wait_us[r]) * 1e-6;
      if (c.compute_us[r] > 0) w.compute_s += static_cast<double>(c.compute_us[r]) * 1e-6;
    }
    if (c.last_rank >= 0) {
      RankWaits& w = out.ranks[static_cast<std::size_t>(c.last_rank)];
      ++w.last;
      w.caused_s += c.caused_us() * 1e-6;
    }
    out.calls.push_back(std::move(c));
  }
  if (!out.calls.empty()) out.span_s = static_cast<double>(span_to - span_from) * 1e-6;
  // Steps: runs of consecutive calls (in seq order) with one step value; a value seen again after
  // another (a final evaluation labelled step 0) is a step of its own.
  for (const CallWait& c : out.calls) {
    if (out.steps.empty() || out.steps.back().step != c.step) {
      StepWait st;
      st.step = c.step;
      st.from_us = c.first_us;
      st.caused_us.assign(ranks.size(), 0.0);
      out.steps.push_back(std::move(st));
    }
    StepWait& st = out.steps.back();
    st.from_us = std::min(st.from_us, c.first_us);
    st.to_us = std::max(st.to_us, *std::max_element(c.end_us.begin(), c.end_us.end()));
    if (c.last_rank >= 0) st.caused_us[static_cast<std::size_t>(c.last_rank)] += c.caused_us();
  }
  for (std::size_t i = 0; i < out.steps.size(); ++i) {
    StepWait& st = out.steps[i];
    if (i + 1 < out.steps.size()) st.to_us = std::max(st.to_us, out.steps[i + 1].from_us);
    const auto top = std::max_element(st.caused_us.begin(), st.caused_us.end());
    if (*top > 0) {
      st.leader = static_cast<int>(top - st.caused_us.begin());
      ++out.ranks[static_cast<std::size_t>(st.leader)].led;
    }
  }
  // The rule's figures per rank: the median step's share of the wait it caused, and how much of
  // that its longer compute explains.
  for (std::size_t r = 0; r < out.ranks.size(); ++r) {
    std::vector<double> shares;
    for (const StepWait& st : out.steps) shares.push_back(st.duration_us() > 0 ? st.caused_us[r] / st.duration_us() : 0.0);
    out.ranks[r].median_share = baseline::median(std::move(shares));
  }
  for (const CallWait& c : out.calls) {
    if (c.last_rank < 0 || out.ranks.size() < 2) continue;
    const auto r = static_cast<std::size_t>(c.last_rank);
    double others = 0;
    for (std::size_t o = 0; o < out.ranks.size(); ++o) {
      if (o != r) others += static_cast<double>(std::max<std::int64_t>(0, c.compute_us[o]));
    }
    others /= static_cast<double>(out.ranks.size() - 1);
    out.ranks[r].explained_s += std::max(0.0, static_cast<double>(std::max<std::int64_t>(0, c.compute_us[r])) - others) * 1e-6;
  }
  return out;
}

std::optional<Straggler> find_straggler(const WaitReport& report, const StragglerLimits& limits) {
  const int n = static_cast<int>(report.steps.size());
  if (report.world_size < 2 || n < limits.min_steps) return std::nullopt;
  for (int r = 0; r < report.world_size; ++r) {
    const RankWaits& w = report.ranks[static_cast<std::size_t>(r)];
    double others = 0;
    for (int o = 0; o < report.world_size; ++o) {
      if (o != r) others = std::max(others, report.ranks[static_cast<std::size_t>(o)].caused_s);
    }
    if (w.led < limits.lead_share * n) continue;
    const double lead_p = binomial_tail(n, w.led, 1.0 / report.world_size);
    if (lead_p > limits.lead_alpha) continue;
    if (w.caused_s <= 0 || w.caused_s < limits.dominance * others) continue;
    if (w.median_share < limits.wait_share) continue;
    if (w.explained_s < limits.explained_share * w.caused_s) continue;
    Straggler s;
    s.rank = r;
    s.led = w.led;
    s.lead_p = lead_p;
    s.steps = n;
    s.last = w.last;
    s.calls = static_cast<int>(report.calls.size());
    s.caused_s = w.caused_s;
    s.median_share = w.median_share;
    s.explained_s = w.explained_s;
    std::map<std::string, double> by_phase;
    double longest = -1;
    for (const CallWait& c : report.calls) {
      if (c.last_rank != r) continue;
      const double us = c.caused_us();
      by_phase[c.phase] += us * 1e-6;
      if (us > longest) {
        longest = us;
        s.seq = c.seq;
        s.step = c.step;
      }
    }
    for (const auto& [phase, t] : by_phase) {
      if (t > s.phase_caused_s) {
        s.phase = phase;
        s.phase_caused_s = t;
      }
    }
    return s;
  }
  return std::nullopt;
}

std::string Straggler::describe(const WaitReport& report) const {
  return "rank " + std::to_string(rank) + " kept the others waiting in " + std::to_string(led) + " of " +
         std::to_string(steps) + " steps (" + fixed(median_share * 100, 0) + "% of the median step); they waited " +
         seconds(caused_s) + " for it in all, most at " + (phase.empty() ? std::string("-") : phase) + " (" +
         seconds(phase_caused_s) + "); it arrived last at " + std::to_string(last) + " of " + std::to_string(calls) +
         " collectives; compute per rank: " + per_rank(report, &RankWaits::compute_s);
}

std::map<std::string, std::vector<double>> wait_samples(const WaitReport& report) {
  std::map<std::string, std::vector<double>> out;
  if (report.steps.empty()) return out;
  std::vector<std::vector<double>> waits(report.ranks.size());
  std::vector<double> skews;
  for (std::size_t i = 0; i < report.calls.size(); ++i) {
    const CallWait& c = report.calls[i];
    // A new step starts where the step value changes (as analyse_waits cut them).
    if (i == 0 || c.step != report.calls[i - 1].step) {
      for (auto& w : waits) w.push_back(0);
      skews.push_back(0);
    }
    for (std::size_t r = 0; r < waits.size(); ++r) waits[r].back() += static_cast<double>(c.wait_us[r]) * 1e-6;
    skews.back() += static_cast<double>(c.skew_us()) * 1e-6;
  }
  // More steps than kMaxWaitSamples: `per` consecutive steps to a sample.
  const std::size_t per = (skews.size() + kMaxWaitSamples - 1) / kMaxWaitSamples;
  const auto folded = [per](const std::vector<double>& v) {
    std::vector<double> f((v.size() + per - 1) / per, 0.0);
    for (std::size_t i = 0; i < v.size(); ++i) f[i / per] += v[i];
    return f;
  };
  for (std::size_t r = 0; r < waits.size(); ++r) out["waits/rank" + std::to_string(r) + "/wait_s"] = folded(waits[r]);
  out["waits/skew_s"] = folded(skews);
  return out;
}

std::string summarize(const WaitReport& report) {
  std::vector<double> skews;
  for (const CallWait& c : report.calls) skews.push_back(static_cast<double>(c.skew_us()) * 1e-3);
  return "waited per rank: " + per_rank(report, &RankWaits::wait_s) + "; compute per rank: " +
         per_rank(report, &RankWaits::compute_s) + "; median skew " + fixed(baseline::median(std::move(skews)), 2) +
         " ms over " + std::to_string(report.calls.size()) + " collectives";
}

}  // namespace lockstep::rules
