#pragma once
// The waits check (scenarios/README.md, "Waits and stragglers"): after a clean run, the ranks'
// traces give when each rank issued and completed each collective of the default group; the
// analysis (harness/rules/waits.h) goes to the run's waits.json and the result, and the straggler
// rule's verdict becomes a note, or the diagnosis `straggler` where the scenario sets
// [expect] straggler_share.
#include <optional>
#include <string>

#include "harness/core/diagnosis.h"
#include "harness/report/results.h"
#include "harness/rules/waits.h"
#include "harness/scenario/scenario.h"

namespace lockstep::launch {

// The format and version of waits.json.
inline constexpr const char* kWaitsFormat = "lockstep.waits";
inline constexpr int kWaitsVersion = 1;

// The arrivals in the traces of ranks [0, world_size) under `dir` (rank<r>.trace.jsonl): each
// rank's default-group collectives that completed. nullopt when a trace is missing; throws
// InputError naming file:line for a line that is not a trace record.
std::optional<std::vector<std::vector<rules::Arrival>>> read_arrivals(const std::string& dir, int world_size);

// waits.json's text for `report` and its verdict under `limits`; `analysis_s`: what reading the
// traces and analysing them took the launcher.
std::string waits_json(const rules::WaitReport& report, const rules::StragglerLimits& limits,
                       const std::optional<rules::Straggler>& straggler, double analysis_s);

// Runs the check for `s` on the traces under `dir` (nothing when there are none): writes
// dir/waits.json and dir/waits.html (waits_html.h), sets res.waits (and res.straggler, a note), and sets `diagnosis` to a straggler
// when s.straggler_share is set and one is found (only when `diagnosis` is empty).
void check_waits(const scenario::Scenario& s, const std::string& dir, report::ScenarioResult& res,
                 std::optional<Diagnosis>& diagnosis);

}  // namespace lockstep::launch
