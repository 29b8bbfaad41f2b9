#pragma once
// The noise-aware throughput rule (documented in reports/README.md#the-throughput-rule).
// Pure functions over samples; no I/O.
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::baseline {

// Which way a metric improves, from its name: `*_per_s`, `*_bw`, `*bandwidth*` are higher-is-
// better; `*_s`, `*_ms`, `*_us`, `us_per_*`, `*latency*`, `step_time_*` are lower-is-better;
// `*instructions`, `*cycles` are lower-is-better; anything else (counts such as `steps`) is
// neutral and never judged.
enum class Direction { kHigherIsBetter, kLowerIsBetter, kNeutral };
Direction direction_of(std::string_view metric);
std::string_view to_string(Direction direction);

double median(std::vector<double> values);

// The waits at collectives, one sample per step ("waits/rank<r>/wait_s", "waits/skew_s": harness/
// rules/waits.h): judged with RuleOptions' wait options, not the iteration ones.
bool is_wait_metric(std::string_view metric);

// Per-iteration cost samples of a rank's phase ("<phase>/rank<r>/cpu_s", ".../instructions"):
// judged with RuleOptions::iteration_tolerance.
bool is_iteration_metric(std::string_view metric);

// One-sided Mann-Whitney U test. Returns P(U >= observed U of x over y) under H0 (x and y from
// one distribution): small when x tends to be larger than y. Exact (ties count 1/2 and are
// then approximated) when both samples have at most 30 values, normal with tie correction
// otherwise. Returns 1 when either sample is empty.
double mann_whitney_greater(const std::vector<double>& x, const std::vector<double>& y);

// The rule's constants.
struct RuleOptions {
  double alpha = 0.01;        // one-sided significance level of each test
  double tolerance = 0.10;    // relative slowdown of the medians that is always tolerated
  double iteration_tolerance = 0.03;  // the same for per-iteration CPU time and counters
  double noise_factor = 3.0;  // the tolerated slowdown grows to noise_factor standard errors of
                              // the difference of the log medians (robust, pooled spread)
  int min_samples = 3;        // fewer samples on either side: not judged
  // Per-iteration times whose baseline median is shorter are not judged: below 2 ms an
  // iteration's CPU time on a shared machine is the scheduler's and the caches' as much as the
  // work's (ci/compat, 3 paired rounds: iterations of 2-15 ms tolerated 4-7%, of 1.1-1.5 ms
  // 13-14%, of 1 ms 27%).
  double min_iteration_s = 2e-3;
  // Per-iteration metrics of runs that gave fewer iterations each (on average) are not judged:
  // a phase of a few iterations belongs to a scenario that checks correctness, and its cost is
  // start-up's. Throughput scenarios (scenarios/perf) give 20 or more.
  int min_iterations_per_run = 8;
  // Waits at collectives (is_wait_metric). How long a rank waits for the others is the others'
  // noise as much as its own: on the shared 2-core machine the paired rule's own noise term
  // tolerated 50-450% for waits (reports/evidence-wait-sensitivity.md). So a wait is judged worse
  // only when its median per step grew by wait_tolerance (relative, before the noise
  // adjustment) and by min_wait_increase_s (absolute: from 20 µs to 80 µs a step is 4x and
  // nothing); samples below wait_floor_s (a rank that never waits) count as wait_floor_s.
  // min_iterations_per_run applies to them as to per-iteration metrics; min_iteration_s does not.
  double wait_tolerance = 0.5;
  double min_wait_increase_s = 2e-3;
  double wait_floor_s = 1e-5;
};

// The comparison of one metric's observed samples with its baseline samples, in "cost" terms
// (the metric itself when lower is better, its reciprocal when higher is better), so that a
// slowdown is always cost ratio > 1.
struct Judgement {
  bool judged = false;        // false: neutral metric or too few samples
  double ratio = 1;           // median(observed) / median(baseline) of the metric itself
  double slowdown = 1;        // median cost ratio: > 1 means slower
  double ci_low = 0, ci_high = 0;  // 95% confidence interval of `ratio` (Hodges-Lehmann on logs)
  double p_slower = 1;        // one-sided MWU p-value that observed is slower
  double p_faster = 1;        // one-sided MWU p-value that observed is faster
  double threshold = 0;       // the tolerated relative slowdown after the noise adjustment
  bool slower = false;        // p_slower < alpha and slowdown > 1 + threshold
  bool faster = false;        // p_faster < alpha and 1/slowdown > 1 + threshold
};
// The rule's options for `metric`: `tolerance` is iteration_tolerance for iteration metrics,
// wait_tolerance for wait metrics.
RuleOptions rule_for(std::string_view metric, const RuleOptions& options);
// For metrics sampled per iteration, `baseline_runs` and `observed_runs` hold the median of
// each run's iterations: runs drift as a whole (memory layout, the machine's load), so the
// tolerated slowdown also grows to noise_factor standard errors of the run-to-run spread
// (pooled over both sides, when at least 3 runs are given). `paired`: run i of one side was
// recorded beside run i of the other (interleaved, as ci/compat does), so the spread is that of
// their differences, from which the drift they share has gone (at least 3 pairs).
Judgement judge(std::string_view metric, const std::vector<double>& baseline,
                const std::vector<double>& observed, const RuleOptions& options = {},
                const std::vector<double>& baseline_runs = {}, const std::vector<double>& observed_runs = {},
                bool paired = false);

// "0.78x (95% CI 0.74-0.81, p=0.004)".
std::string describe(const Judgement& j);

// Adds one clean run's samples to `samples` (its metrics, one value each, and its
// per-iteration samples) and the median of each per-iteration metric to `run_medians`.
void add_run_samples(const std::map<std::string, double>& metrics,
                     const std::map<std::string, std::vector<double>>& iterations,
                     std::map<std::string, std::vector<double>>& samples,
                     std::map<std::string, std::vector<double>>& run_medians);

}  // namespace lockstep::baseline
