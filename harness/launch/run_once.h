#pragma once
// The launcher's single run of a scenario, shared with the A/B runner (ab.cpp). Not for
// other callers: use run_scenario (launcher.h).
#include <optional>
#include <string>

#include "harness/core/diagnosis.h"
#include "harness/launch/launcher.h"
#include "harness/report/results.h"
#include "harness/scenario/scenario.h"

namespace lockstep::launch::detail {

// Runs `s` once (no A/B) and judges it against its expectation.
report::ScenarioResult run_once(const scenario::Scenario& s, const LaunchOptions& options);
// Whether diagnosis `d` meets expectation `e`; `why` says how it does not.
bool meets_expectation(const scenario::Expectation& e, const std::optional<Diagnosis>& d, std::string& why);

}  // namespace lockstep::launch::detail
