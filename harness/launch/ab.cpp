// A/B runs: a scenario run interleaved under a reference and as asked (run --reference, and
// scenarios that inject a slowdown and expect throughput_regression), judged by the
// throughput rule on paired runs (run_scenario, launcher.cpp, picks A/B or a single run).
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "harness/rules/stats.h"
#include "harness/launch/launcher.h"
#include "harness/launch/run_once.h"
#include "harness/launch/verdict.h"

namespace lockstep::launch {

namespace fs = std::filesystem;

namespace detail {

bool self_baselined(const scenario::Scenario& s) {
  return s.expect.kind == DiagnosisKind::kThroughputRegression &&
         std::any_of(s.injections.begin(), s.injections.end(), [](const auto& i) { return i.kind == "slowdown"; });
}

report::ScenarioResult run_against_reference(const scenario::Scenario& s, const LaunchOptions& options, int runs) {
  std::map<std::string, std::vector<double>> ref, ref_runs, cand, cand_runs;
  report::ScenarioResult last;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string ab_dir = (fs::path(options.report_dir) / (s.slug() + "-ab")).string();
  // Each run expects what the scenario says, which one run alone may not give: "clean" here
  // is a run that ended without a diagnosis or an error.
  auto ran_clean = [](const report::ScenarioResult& r) {
    return !r.diagnosis && (r.status == report::Status::kPass || r.status == report::Status::kFail);
  };
  auto reference_run = [&](int i) -> std::optional<report::ScenarioResult> {
    LaunchOptions o = options;
    o.reference_binary.clear();
    if (!options.reference_binary.empty()) o.binary = options.reference_binary;
    o.slowdown.clear();
    o.slowdown_off = true;
    o.report_dir = (fs::path(ab_dir) / ("reference-" + std::to_string(i + 1))).string();
    const auto a = run_once(s, o);
    if (!ran_clean(a)) {
      report::ScenarioResult r = a;
      r.error = "the reference run did not end cleanly: " + (a.diagnosis ? a.diagnosis->message : a.reason);
      r.diagnosis.reset();
      decide(expectation_for(s, r), r);
      return r;
    }
    baseline::add_run_samples({}, a.samples, ref, ref_runs);
    return std::nullopt;
  };
  auto candidate_run = [&](int i) {
    LaunchOptions o = options;
    o.reference_binary.clear();
    // The last candidate run is the scenario's own run: its artifacts go where they always do.
    if (i + 1 < runs) o.report_dir = (fs::path(ab_dir) / ("candidate-" + std::to_string(i + 1))).string();
    last = run_once(s, o);
    if (!ran_clean(last)) return false;
    baseline::add_run_samples({}, last.samples, cand, cand_runs);
    return true;
  };
  // Pairs go AB, BA, BA, AB, ... (the last one AB), so that a drift of the machine over the
  // runs cancels out of the paired differences instead of favouring one side.
  for (int i = 0; i < runs; ++i) {
    if ((i % 4 == 1 || i % 4 == 2) && i + 1 < runs) {
      if (!candidate_run(i)) return last;
      if (auto failed = reference_run(i)) return *failed;
    } else {
      if (auto failed = reference_run(i)) return *failed;
      if (!candidate_run(i)) return last;
    }
  }
  std::string what, waits_grew;
  // Per rank, the largest slowdown among its slower per-iteration metrics ("<phase>/rank<r>/...").
  std::map<int, double> ranks;
  baseline::RuleOptions rule;
  rule.iteration_tolerance = options.ab_iteration_tolerance;
  int judged = 0;
  for (const auto& [m, xs] : cand) {
    auto it = ref.find(m);
    if (it == ref.end()) continue;
    const auto j = baseline::judge(m, it->second, xs, baseline::rule_for(m, rule), ref_runs[m], cand_runs[m], /*paired=*/true);
    judged += j.judged && !baseline::is_wait_metric(m);  // the guard below is about CPU time
    if (!j.slower) continue;
    // A wait that grew is reported beside a slower CPU-time metric, never alone: a rank's wait is
    // its peers' noise as much as its own (this binary against itself measured a rank's waits
    // 7.6x longer while a build ran beside it).
    if (baseline::is_wait_metric(m)) {
      waits_grew += (waits_grew.empty() ? "" : "; ") + m + " " + baseline::describe(j);
      continue;
    }
    what += (what.empty() ? "" : "; ") + m + " " + baseline::describe(j);
    if (const auto k = m.find("/rank"); k != std::string::npos) {
      double& worst = ranks[std::atoi(m.c_str() + k + 5)];
      worst = std::max(worst, j.slowdown);
    }
  }
  // The rank to blame: the only slower one, or the one whose slowdown is at least twice the
  // next one's (in log terms): a slowed rank makes its peers wait, and on a loaded machine
  // waiting costs them some CPU time too.
  int blamed = -1;
  if (ranks.size() == 1) blamed = ranks.begin()->first;
  if (ranks.size() > 1) {
    std::vector<std::pair<double, int>> by;
    for (const auto& [r, sd] : ranks) by.emplace_back(std::log(sd), r);
    std::sort(by.rbegin(), by.rend());
    if (by[0].first >= 2 * by[1].first) blamed = by[0].second;
  }
  last.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!what.empty() && !waits_grew.empty()) what += "; " + waits_grew;
  else if (!waits_grew.empty()) last.notes.push_back("waits grew against the reference, with no CPU-time metric slower (not a verdict): " + waits_grew);
  if (!what.empty()) {
    const std::string against = options.reference_binary.empty() ? "the same scenario without its slowdown"
                                                                  : "the reference " + options.reference_binary;
    last.diagnosis = Diagnosis{DiagnosisKind::kThroughputRegression,
                               s.id() + ": slower than " + against + " (" + std::to_string(runs) +
                                   " interleaved runs a side): " + what,
                               blamed, -1};
  }
  // A run with an injected slowdown measures the fault, not the system: its per-iteration
  // samples are not results (a baseline that recorded them would compare burnt CPU time).
  if (options.reference_binary.empty()) {
    last.samples.clear();
    // Never a silent pass: a slowdown the rule could not judge is no evidence either way.
    if (judged == 0) {
      last.error = "the throughput rule judged no per-iteration metric (each needs iterations of at least " +
                    std::to_string(static_cast<int>(rule.min_iteration_s * 1e3)) + " ms and " +
                    std::to_string(rule.min_iterations_per_run) + " a run): give the scenario longer iterations";
    }
  }
  decide(expectation_for(s, last), last);
  return last;
}

}  // namespace detail

}  // namespace lockstep::launch
