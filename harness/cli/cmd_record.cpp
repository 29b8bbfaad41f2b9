#include <cstdlib>
#include <unistd.h>

#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

#include "harness/core/env.h"
#include "harness/baseline/environment.h"
#include "harness/baseline/store.h"
#include "harness/cli/commands.h"
#include "harness/launch/cancel.h"
#include "harness/launch/suite.h"
#include "harness/validate/validate.h"

namespace lockstep::cli {

void add_record(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "record",
      "Run scenarios --repeat times and record results, digests, collective sequences and metric samples\n"
      "into a baseline database (SQLite), under an environment name");
  struct Args {
    std::vector<std::string> paths;
    std::string baseline;
    std::string env;
    int repeat = 5;
    std::string report_dir;  // "": a fresh folder per run (fresh_report_dir)
    std::string filter;
    int max_ranks = 16;
    bool no_skip = false;
    bool no_contain = false;
    std::string python;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("paths", a->paths, "scenario files or directories (searched for *.toml)")->required();
  cmd->add_option("--baseline", a->baseline, "the SQLite baseline database (created when missing)")->required();
  cmd->add_option("--env", a->env,
                  "environment name (default: torch-<major>.<minor> of this build); a name is bound to one\n"
                  "engine stack and machine, and each scenario under it to what it ran on (a program's torch):\n"
                  "a run on another torch is refused, exit 2");
  cmd->add_option("--repeat", a->repeat, "record the suite this many times (samples for the throughput rule)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--report-dir", a->report_dir,
                  "where each run's report goes, overwritten by the next repeat once recorded (default: a new\n"
                  "folder per run, lockstep-report/run-<UTC time>-<pid>, with lockstep-report/latest pointing at it)");
  add_python_option(cmd, a->python, ", e.g. an environment built by ci/systems");
  cmd->add_option("--filter", a->filter, "record only scenarios whose id or a tag matches this regex");
  cmd->add_option("--max-ranks", a->max_ranks, "skip scenarios that need more rank processes than this")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--no-skip", a->no_skip,
                "count a skipped scenario as a failure (exit 1; its reason says it was skipped); it is\n"
                "recorded as failed");
  add_no_contain_flag(cmd, a->no_contain);
  cmd->footer(
      "Examples:\n"
      "  lockstep record scenarios/training --baseline base.db --repeat 5\n"
      "  lockstep run scenarios/training --baseline base.db            # later: check against the records");
  cmd->callback([a, &exit_code] {
    contain(a->no_contain);
    const auto scenarios = select_scenarios(a->paths, a->filter, /*last_failed=*/false, "");
    check_python(a->python, scenarios);
    if (scenarios.empty()) {
      std::cout << "no scenario selected: nothing to record (exit " << launch::kExitNothingSelected << ")\n";
      exit_code = launch::kExitNothingSelected;
      return;
    }
    baseline::Store store(a->baseline, baseline::Access::kCreate);
    const auto env = baseline::detect_environment(a->env);
    store.put_environment(env);  // refuses a name bound to another stack before running anything
    launch::LaunchOptions opts;
    opts.binary = launch::self_executable();
    const bool fresh = a->report_dir.empty();
    opts.report_dir = fresh ? fresh_report_dir() : a->report_dir;
    prepare_report_dir(opts.report_dir, "--report-dir");
    launch::install_cancel_handlers();
    opts.max_ranks = a->max_ranks;
    opts.no_skip = a->no_skip;
    opts.progress = isatty(STDOUT_FILENO);
    int code = launch::kExitMet;  // the worst of the repeats: unmet, then all skipped
    opts.quiet_summary = a->repeat > 1;  // one summary, after the last repeat
    std::optional<report::RunSummary> last;
    for (int i = 0; i < a->repeat; ++i) {
      // Each repeat is recorded as soon as it ends (an interrupted session keeps what it
      // measured); its artifacts are read now, so every repeat can reuse REPORT_DIR.
      launch::LaunchOptions o = opts;
      if (a->repeat > 1) {
        o.label = "repeat " + std::to_string(i + 1) + "/" + std::to_string(a->repeat);
        std::cout << "== " << o.label << " ==\n";
      }
      const auto run = launch::run_suite(scenarios, o, std::cout);
      if (launch::cancelled()) {
        // An interrupted repeat is not a measurement: nothing of it goes into the baseline.
        std::cout << "cancelled by " << launch::cancel_signal_name() << ": repeat " << i + 1 << " was not recorded\n";
        break;
      }
      const std::string uid = store.record(env, run, o.report_dir, i);
      const int repeat_code = launch::suite_exit_code(run);
      if (code != launch::kExitUnmet && repeat_code != launch::kExitMet) code = repeat_code;
      std::cout << "recorded run " << uid << " (" << env.name << ", repeat " << i + 1 << "/" << a->repeat << ") in "
                << a->baseline << '\n';
      last = run;
    }
    if (opts.quiet_summary && last) {
      launch::print_summary(*last, opts.report_dir, std::cout, "the last of " + std::to_string(a->repeat) + " repeats");
    }
    if (fresh) link_latest(opts.report_dir);
    exit_code = exit_code_after(code);
  });
}

}  // namespace lockstep::cli
