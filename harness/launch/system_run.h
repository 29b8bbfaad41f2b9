#pragma once
// Runs a scenario's system under test ([system]) as the ranks: writes the capability's inputs,
// starts the system's command once per rank with the torchrun-style environment, watches the
// processes like lockstep's own ranks (a crash, an early exit without outputs or a hang ends
// the run with a diagnosis naming the rank), then judges the outputs with the capability's
// checks. Contract: scenarios/README.md, "Systems under test".
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
};

// The interpreter that replaces {python}: $LOCKSTEP_PYTHON, else python3.
std::string python_interpreter();
// Why `s` cannot run on this machine (its interpreter cannot import [system] python_modules),
// or "" when it can. Cached per interpreter and module list.
std::string system_skip_reason(const scenario::Scenario& s);
// Why the program of `s` (kind = "program") cannot run here: its interpreter lacks its
// python_modules, or cannot import this build's PyTorch backend (built against another torch,
// or not built). "" when it can.
std::string program_skip_reason(const scenario::Scenario& s);
// `command` with {python} and {dir} substituted and argv[0] found on PATH (InputError if not).
std::vector<std::string> command_argv(const scenario::Scenario& s, const std::vector<std::string>& command);
// The environment of rank `rank` of a program: torchrun's variables (the program's rank 0 hosts
// its own store on `port`), lockstep's backend on PYTHONPATH, and where to publish its progress
// (`board`), status and trace (under `dir`).
std::vector<std::string> program_env(const scenario::Scenario& s, int rank, int port, const std::string& dir, const std::string& board);
// The line of a rank's log that says why it ended (a Python traceback's exception line).
std::string log_last_line(const std::string& file);
// A TCP port on 127.0.0.1 that was free a moment ago.
int loopback_port();
// Runs `s` (which has a [system]) with artifacts in `dir`. Never throws for a failing system.
SystemOutcome run_system(const scenario::Scenario& s, const LaunchOptions& options, const std::string& dir);

}  // namespace lockstep::launch
