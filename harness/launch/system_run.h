#pragma once
// Runs a scenario's system under test ([system]) as the ranks: writes the capability's inputs,
// starts the system's command once per rank with the torchrun-style environment, watches the
// processes like lockstep's own ranks (a crash, an early exit without outputs or a hang ends
// the run with a diagnosis naming the rank), then judges the outputs with the capability's
// checks. Contract: scenarios/README.md, "Systems under test". The ranks are watched by the
// one watch loop (watch.h) over their progress files.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/diagnosis.h"
#include "harness/launch/launcher.h"
#include "harness/scenario/scenario.h"

namespace lockstep::launch {

struct SystemOutcome {
  std::optional<Diagnosis> diagnosis;
  std::string error;  // a harness or input problem (status error), "" if none
  std::string digest;
  std::map<std::string, double> metrics;
  std::vector<std::string> notes;
  std::string system;  // "dgl 2.1.0, torch 2.2.1": what the ranks reported
  bool cancelled = false;  // the run was cancelled (cancel.h) before it ended
};

// Runs `s` (which has a [system]) with artifacts in `dir`. Never throws for a failing system.
SystemOutcome run_system(const scenario::Scenario& s, const LaunchOptions& options, const std::string& dir);

}  // namespace lockstep::launch
