#pragma once
// What `lockstep record` and `lockstep run --baseline` do around the suite runner: run the
// suite k times, record each run, or check the runs against an environment's baseline.
#include <iosfwd>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "harness/baseline/check.h"
#include "harness/baseline/store.h"
#include "harness/launch/launcher.h"
#include "harness/report/results.h"
#include "harness/scenario/scenario.h"

namespace lockstep::baseline {

struct Session {
  std::vector<report::RunSummary> runs;  // one per repeat
  std::vector<std::string> dirs;         // report dir of each repeat: DIR, DIR/repeat-2, ...
};

// Runs the suite `repeat` times, each repeat's artifacts in options.report_dir/repeat-i (one
// repeat: options.report_dir itself); the repeats print their scenarios' lines, not their own
// summaries (the caller prints one, launch::print_summary).
Session run_repeated(const std::vector<scenario::Scenario>& scenarios, const launch::LaunchOptions& options,
                     int repeat, std::ostream& out);

// Checks a session against `environment`'s baseline: digests (result_mismatch), collective
// sequences (sequence_changed) and throughput (throughput_regression; a suspect scenario is
// re-run `repeat` more times and the rule must fire again on the fresh samples). Marks the
// failing results of session.runs[0] as fail with the diagnosis, rewrites
// report_dir/results.json and junit.xml, prints a table to `out`. Returns the number of
// scenarios that failed a baseline check, and each scenario's verdict ("ok", a diagnosis kind,
// "not in baseline", ...) and detail in `verdicts` when given. Throws InputError when the
// environment has no recorded runs.
// Writes report_dir/results.json, junit.xml and report.md of the session's first run, its
// artifacts paths relative to report_dir (into repeat-1/ when there are several repeats).
void write_session_report(const Session& session, const std::string& report_dir);

int check_session(Store& store, const std::string& environment, const std::vector<scenario::Scenario>& scenarios,
                  Session& session, const launch::LaunchOptions& options, int repeat, const RuleOptions& rule,
                  std::ostream& out, std::map<std::string, std::pair<std::string, std::string>>* verdicts = nullptr);

}  // namespace lockstep::baseline
