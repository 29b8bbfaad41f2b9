#pragma once
// The outcome of one scenario variant, and the writers of the report contract:
// DIR/results.json and DIR/junit.xml. Other tools read these files; keep them stable
// (scenarios/README.md documents the schema, and `schema_version` changes with it).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/core/diagnosis.h"
#include "harness/core/tolerances.h"

namespace lockstep::report {

// kCancelled: not finished because the run was interrupted (SIGINT/SIGTERM).
enum class Status { kPass, kFail, kSkip, kError, kCancelled };
std::string_view to_string(Status status);

// A per-step curve a workload reports (e.g. the training loss). Invariant [matrix] variants
// must agree on every point within `rtol`, relative to the larger magnitude.
struct Series {
  std::vector<double> values;
  double rtol = 0;
  // The step of each value, when the source named it (a program's logged "step 12 loss 0.31");
  // empty: value i is step i.
  std::vector<std::int64_t> steps;
};

// What one phase cost on one rank (harness/perf/cost.h): totals over the run.
struct PhaseCost {
  std::int64_t iterations = 0;
  double wall_s = 0, cpu_s = 0, user_s = 0, sys_s = 0;
  double main_cpu_s = 0;  // the rank's main thread alone
  std::map<std::string, double> counters;  // "instructions", "cycles" where available
};

struct ScenarioResult {
  std::string name;      // scenario name
  std::string id;        // name[variant]
  std::string file;
  std::string variant;   // "" when the file has no matrix
  std::vector<std::string> tags;
  Status status = Status::kError;
  std::string expected;  // "pass" or a diagnosis kind
  std::optional<Diagnosis> diagnosis;  // what the harness observed; nullopt when clean
  std::string reason;    // why it failed, was skipped or errored ("" on pass)
  // Evidence for the verdict (harness/launch/verdict.h): a problem of the harness or of the
  // input that makes the status error ("" none). The report carries it as the reason.
  std::string error;
  // Evidence too: why the scenario was not run ("" it ran), and whether that is a failure
  // (--no-skip); why the run was cancelled ("" it was not).
  std::string skip;
  bool skip_fails = false;
  std::string cancelled;
  double duration_s = 0;
  double startup_s = -1;  // the slowest rank's start-up (spawn to first collective); -1 unknown
  int world_size = 1;
  std::string digest;    // hex digest of the canonical outputs, "" when none
  std::map<std::string, double> metrics;
  std::map<std::string, Series> series;  // per-step curves, from rank 0
  Tolerances tolerances;                 // the scenario's [compare]
  // Cost per rank and phase ({} for a rank that did not end cleanly), which hardware counters
  // the ranks had ("instructions,cycles" or "none: <why>"), and the per-iteration samples the
  // baseline rule judges: "<phase>/rank<r>/main_cpu_s" (the rank's main thread: the
  // workload's own work) and, with counters, "<phase>/rank<r>/instructions" and ".../cycles";
  // after a clean run with traces, one sample per step of "waits/rank<r>/wait_s" and
  // "waits/skew_s" (harness/rules/waits.h: wait_samples).
  std::vector<std::map<std::string, PhaseCost>> perf;
  std::string counters;
  std::map<std::string, std::vector<double>> samples;
  std::string artifacts; // report-relative folder with this scenario's logs and traces
  // Systems under test: the system's identity ("dgl 2.1.0, torch 2.2.1"), and notes on what
  // it does differently by declaration, or remarks. Any scenario: the straggler verdict when it
  // is not the diagnosis (harness/launch/waits_check.h).
  std::string system;
  std::vector<std::string> notes;
  // The ranks' waits at their collectives (harness/launch/waits_check.h), from their traces, after
  // a clean run: one line ("" none analysed; the whole analysis is the artifacts' waits.json), and
  // the straggler rule's verdict ("" none).
  std::string waits, straggler;
};

// Whether a run's processes ran in their own network, PID and mount namespaces
// (harness/launch/contain.h), and if not, why.
struct Containment {
  bool contained = false;
  std::vector<std::string> namespaces;  // "network", "pid", "mount", and "user" when unprivileged
  std::string reason;                   // why not ("" when contained)
};

struct RunSummary {
  std::string lockstep_version;
  std::string torch_version;
  std::string started_at;  // ISO 8601 UTC
  double duration_s = 0;
  std::vector<ScenarioResult> results;
  std::string cancelled_by;  // "SIGINT" / "SIGTERM" when the run was interrupted, else ""
  Containment containment;
};

// 2: status "cancelled", summary.cancelled (always), cancelled_by, per-scenario startup_s.
// 3: per-scenario perf (cost per rank and phase, counters) and samples.
// 4: containment (contained, namespaces, reason).
// 5: per-scenario waits (summary, file, html, straggler); the diagnosis kind straggler.
// 6: per-scenario tolerances ([compare]) and a series' steps.
inline constexpr int kResultsSchemaVersion = 6;

// Tolerances as compact JSON ({"param_rtol":..,"param_atol":..,"curve_rtol":..,
// "sequence_may_change":..}; "" when not declared): results.json's "tolerances", the baseline
// store's column. tolerances_from_text("") is undeclared; malformed text throws InputError.
std::string tolerances_text(const Tolerances& t);
Tolerances tolerances_from_text(const std::string& text);

// Writes DIR/results.json. Throws lockstep::Error if the file cannot be written.
void write_results_json(const RunSummary& run, const std::string& path);
// Writes DIR/junit.xml: one <testcase> per scenario variant, skips as <skipped/>, fails as
// <failure/>, errors as <error/>. Every user-supplied string is XML-escaped.
void write_junit_xml(const RunSummary& run, const std::string& path);
// Writes DIR/report.md for a person: the counts, then one table row per scenario variant (status,
// with XFAIL for an expected diagnosis that was found; expected; what was observed; seconds; the
// reason), failures first. Untrusted text (messages, reasons) is escaped for Markdown tables.
void write_markdown_summary(const RunSummary& run, const std::string& path);

// Escapes markup characters (& < > " ') and replaces what XML 1.0 forbids (control characters,
// invalid UTF-8) with U+FFFD; in attributes, tab and newlines become character references. Fit
// for HTML text and attributes too.
std::string xml_escape(std::string_view s, bool attribute);

}  // namespace lockstep::report
