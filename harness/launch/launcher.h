#pragma once
// Runs one scenario variant: hosts the run's TCPStore on a free loopback port, starts
// world_size rank processes of the lockstep binary, and watches them. A rank that crashes,
// exits early or hangs ends the whole run within timeout + 5 s: every rank is killed and
// reaped (no orphan survives), and the outcome is one diagnosis naming the failing rank, its
// last completed collective and what the others were waiting in.
#include <string>
#include <vector>

#include "harness/report/results.h"
#include "harness/scenario/scenario.h"

namespace lockstep::launch {

struct LaunchOptions {
  std::string binary;      // the lockstep executable that runs `lockstep rank`
  std::string report_dir;  // artifacts go to report_dir/<scenario slug>/
  bool dump = false;
  int max_ranks = 16;      // scenarios that need more ranks are skipped
  // `--no-skip`: decide() (verdict.h) makes every skipped scenario a failure, its reason kept.
  bool no_skip = false;
  bool progress = false;   // run_suite: redraw a progress line on a terminal (isatty)
  // Programs: echo each rank's output lines live on stdout after "[rankN]:", as torchrun does
  // (`lockstep torchrun`), for the ranks in echo_ranks (empty: every rank). The logs are written
  // either way.
  bool echo = false;
  std::vector<int> echo_ranks;
  // run_suite prints each scenario's line but not the per-directory table and the summary line:
  // a caller that runs the suite several times (repeats) prints one summary (print_summary).
  bool quiet_summary = false;
  // `-x`/`--exitfirst`: run_suite stops after the first scenario that does not meet its
  // expectation; the rest are reported as cancelled ("not run: ...").
  bool exit_first = false;
  std::string label;       // run_suite: shown before each progress line, e.g. "repeat 2/5"
  // `run --slowdown PERCENT[:PHASE[:RANK]]`: the slowdown fault on every scenario of lockstep's
  // own workloads ("" none); a scenario where it never fires is an error.
  std::string slowdown;
  // `run --reference BINARY`: each scenario of lockstep's own workloads runs `ab_runs` times
  // under BINARY and `ab_runs` times under this binary, interleaved, and a candidate slower
  // than the reference beyond the throughput rule (iteration tolerance ab_iteration_tolerance)
  // is throughput_regression.
  std::string reference_binary;
  int ab_runs = 5;
  double ab_iteration_tolerance = 0.05;
  // Internal: the ranks leave out the scenario's own [[inject]] slowdowns (the reference half
  // of a scenario that is its own performance baseline).
  bool slowdown_off = false;
  // run_suite leaves results.json and junit.xml to its caller, whose checks (the baseline's)
  // come after the suite's and may change verdicts.
  bool defer_report = false;
  // Programs (kind = "program") only: this launcher's part of a job over `nnodes` nodes, as
  // torchrun's --nnodes, --node-rank, --master-addr and --master-port say. It starts ranks
  // node_rank * L .. node_rank * L + L - 1 of world_size (L = world_size / nnodes) and watches
  // only those; with nnodes > 1 the ranks verify over their control group
  // (LOCKSTEP_VERIFY_CHANNEL=control), since the other nodes' ranks share no board with them.
  struct ProgramNodes {
    int nnodes = 1;
    int node_rank = 0;
    std::string master_addr = "127.0.0.1";
    int master_port = 0;  // 0: a free loopback port (one node only)
  } nodes;
};

// Runs `s` and judges it against its expectation (verdict.h). Never throws for a failing scenario; a
// problem of the harness itself becomes status `error` with the reason. With a reference
// binary, and for a scenario that injects a slowdown and expects throughput_regression (its
// own reference: 3 runs with its slowdowns off), runs are A/B, interleaved (above).
report::ScenarioResult run_scenario(const scenario::Scenario& s, const LaunchOptions& options);

// Path of the running executable (/proc/self/exe).
std::string self_executable();

}  // namespace lockstep::launch
