#pragma once
// The one place a scenario's status is decided. The checks (the run and its watchdog, the A/B
// throughput rule, [matrix] invariance, the baseline) only leave evidence in the result: a
// diagnosis, or a harness error. decide() turns that evidence and the scenario's expectation
// into the status and its reason. It is a function of the result, so it is called again after
// any later check changed the evidence; the last call is the verdict that results.json records.
#include <optional>
#include <string>

#include "harness/core/diagnosis.h"
#include "harness/report/results.h"
#include "harness/scenario/scenario.h"

namespace lockstep::launch {

// Sets r.status and r.reason, in this order: cancelled (r.cancelled); skip (r.skip), or fail when
// r.skip_fails (--no-skip); error (r.error); else pass when r.diagnosis meets `e` (kind, rank,
// seq, step, message parts), fail when it does not. No other code sets a status.
void decide(const scenario::Expectation& e, report::ScenarioResult& r);

// The expectation that applies to `r`: for a program, the scenario's [expect.torch."<prefix>"]
// matching the torch it ran on (r.system "torch <version>"), else s.expect.
const scenario::Expectation& expectation_for(const scenario::Scenario& s, const report::ScenarioResult& r);

// Whether diagnosis `d` meets expectation `e`; `why` says how it does not.
bool meets_expectation(const scenario::Expectation& e, const std::optional<Diagnosis>& d, std::string& why);

}  // namespace lockstep::launch
