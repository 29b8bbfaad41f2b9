#pragma once
// The launcher's ways of running a scenario, which run_scenario (launcher.h) picks from: one run
// (launcher.cpp), or A/B runs against a reference (ab.cpp). Not for other callers.
#include "harness/launch/launcher.h"
#include "harness/report/results.h"
#include "harness/scenario/scenario.h"

namespace lockstep::launch::detail {

// Runs `s` once (no A/B); the result is decided (verdict.h).
report::ScenarioResult run_once(const scenario::Scenario& s, const LaunchOptions& options);
// A/B: the reference (options.reference_binary, or this binary with every slowdown off) and the
// candidate (as asked) run interleaved, `runs` times each, and the throughput rule judges the
// candidate's per-iteration metrics against the reference's, paired run by run.
report::ScenarioResult run_against_reference(const scenario::Scenario& s, const LaunchOptions& options, int runs);
// A scenario that injects a slowdown and expects throughput_regression: its own reference.
bool self_baselined(const scenario::Scenario& s);
inline constexpr int kSelfBaselineRuns = 5;

}  // namespace lockstep::launch::detail
