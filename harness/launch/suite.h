#pragma once
// Runs a list of scenario variants one after another, checks that the variants of one file
// agree where the file says they must ([matrix] invariant), and writes the report contract.
#include <iosfwd>
#include <string>
#include <vector>

#include "harness/launch/launcher.h"
#include "harness/report/results.h"
#include "harness/scenario/scenario.h"

namespace lockstep::launch {

// Marks variants whose digest differs from the first passing variant of the same file as
// failed with diagnosis `nondeterminism` (unless that is what they expect), and likewise
// variants whose per-step series (ScenarioResult::series) differ from the first variant of the
// file with that series at some step by more than the larger of the two rtols (relative), or
// in length; the message names the series, both variants and the first step that differs.
void check_invariance(const std::vector<scenario::Scenario>& scenarios,
                      std::vector<report::ScenarioResult>& results);

// Runs every scenario, printing one line per variant to `out` (with options.progress, a
// progress line that is redrawn while a scenario runs), then a summary table per scenario
// directory, and writes report_dir/results.json and report_dir/junit.xml (write_report) unless
// options.defer_report (the caller's later checks write it). Returns the summary.
report::RunSummary run_suite(const std::vector<scenario::Scenario>& scenarios,
                             const LaunchOptions& options, std::ostream& out);

// The per-directory table and the summary line of `run` ("N passed, ..."), and what the run did
// not check; `note` is added to the summary line (e.g. "repeat 1 of 5").
void print_summary(const report::RunSummary& run, const std::string& report_dir, std::ostream& out, const std::string& note = "");

// Writes report_dir/results.json, report_dir/junit.xml and report_dir/report.md (a table a person
// reads: every scenario's status, what it expected and what it got): once per run, after every check.
void write_report(const report::RunSummary& run, const std::string& report_dir);

// Keeps the scenarios whose id or a tag matches `filter` (ECMAScript regex, searched); all when
// empty. Throws InputError for an invalid regex.
std::vector<scenario::Scenario> filter_scenarios(std::vector<scenario::Scenario> scenarios, const std::string& filter);

// True when every result is pass or skip.
bool all_met(const report::RunSummary& run);

// True when at least one scenario was selected and every one of them was skipped: the run
// checked nothing, so it must not read as green.
bool all_skipped(const report::RunSummary& run);

// The exit codes of a command that runs scenarios (run, record), besides 2 (usage or input
// error) and 128 + the signal (cancelled).
inline constexpr int kExitMet = 0;          // every scenario met its expectation, at least one ran
inline constexpr int kExitUnmet = 1;        // a scenario failed, errored or was cancelled
inline constexpr int kExitNothingSelected = 5;  // no scenario selected (as pytest's 5): nothing was checked
inline constexpr int kExitAllSkipped = 6;   // every selected scenario skipped; nothing was checked

// kExitNothingSelected when the run has no scenario, else kExitUnmet unless all_met, else
// kExitAllSkipped when all_skipped, else kExitMet.
int suite_exit_code(const report::RunSummary& run);

}  // namespace lockstep::launch
