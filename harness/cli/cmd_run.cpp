#include <cstdlib>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

#include "harness/core/env.h"
#include "harness/baseline/environment.h"
#include "harness/baseline/report.h"
#include "harness/baseline/session.h"
#include "harness/cli/commands.h"
#include "harness/core/error.h"
#include "harness/launch/cancel.h"
#include "harness/launch/suite.h"
#include "harness/perf/cost.h"
#include "harness/validate/validate.h"

namespace lockstep::cli {

void add_run(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("run", "Run scenario files or directories and judge each against its expectation");
  struct Args {
    std::vector<std::string> paths;
    std::string report_dir;  // "": a fresh folder per run (fresh_report_dir)
    std::string filter;
    bool dump = false;
    bool no_skip = false;
    int max_ranks = 16;
    std::string baseline;
    std::string env;
    int repeat = 5;
    baseline::RuleOptions rule;
    std::string slowdown;
    std::string reference;
    int ab_runs = 5;
    double ab_tolerance = 0.05;
    bool no_contain = false;
    bool exit_first = false;
    bool last_failed = false;
    std::string python;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("paths", a->paths, "scenario files or directories (searched for *.toml)")->required();
  cmd->add_option("--report-dir", a->report_dir,
                  "write results.json, junit.xml and per-scenario rank logs and traces here (default: a new\n"
      "folder per run, lockstep-report/run-<UTC time>-<pid>, with lockstep-report/latest pointing at it)");
  add_python_option(cmd, a->python, ", e.g. an environment built by ci/systems");
  cmd->add_option("--filter", a->filter, "run only scenarios whose id or a tag matches this regex (ECMAScript, searched);\n"
                  "`lockstep list PATHS --filter REGEX` shows what it selects");
  cmd->add_flag("-x,--exitfirst", a->exit_first,
                "stop after the first scenario that does not meet its expectation (the rest: not run, exit 1)");
  cmd->add_flag("--last-failed", a->last_failed,
                "run only the scenarios that failed, errored or were not run in the last report (--report-dir's\n"
                "results.json when it has one, else lockstep-report/latest)");
  cmd->add_flag("--no-skip", a->no_skip,
                "count a skipped scenario as a failure (exit 1; its reason says it was skipped), for CI jobs\n"
                "that must run everything");
  cmd->add_flag("--dump", a->dump, "write each workload's canonical outputs as .npy + manifest.json under REPORT_DIR/dump/");
  cmd->add_option("--max-ranks", a->max_ranks, "skip scenarios that need more rank processes than this")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--baseline", a->baseline,
                  "check against the runs recorded in this SQLite file (lockstep record): digests exactly\n"
                  "(result_mismatch), collective sequences (sequence_changed), throughput (throughput_regression)");
  cmd->add_option("--env", a->env, "with --baseline: the recorded environment to check against (default: torch-<major>.<minor>)");
  cmd->add_option("--repeat", a->repeat, "with --baseline: run the suite this many times for the throughput rule")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--tolerance", a->rule.tolerance, "with --baseline: relative slowdown always tolerated")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0) & finite());
  cmd->add_option("--iteration-tolerance", a->rule.iteration_tolerance,
                  "with --baseline: relative slowdown always tolerated for per-iteration CPU time and counters")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0) & finite());
  cmd->add_option("--slowdown", a->slowdown,
                  "inject the slowdown fault into every scenario of lockstep's own workloads: PERCENT[:PHASE[:RANK]]\n"
                  "more CPU work per iteration (e.g. 10:train:1); with --reference (the candidate side only) or\n"
                  "--baseline it shows whether the check would declare that regression; a scenario where it never\n"
                  "fires is an error");
  cmd->add_option("--reference", a->reference,
                  "A/B: run each scenario of lockstep's own workloads --ab-runs times under this other lockstep\n"
                  "binary and as many times under this one, interleaved on this machine, and declare\n"
                  "throughput_regression when this one is slower (per-iteration CPU time and counters, paired runs).\n"
                  "BINARY must be built on the same LibTorch line: this launcher hosts the ranks' store\n"
                  "(ci/compat compares LibTorch lines)");
  cmd->add_option("--ab-runs", a->ab_runs, "with --reference: runs a side")->capture_default_str()->check(CLI::Range(3, 50));
  cmd->add_option("--ab-tolerance", a->ab_tolerance,
                  "with --reference: relative slowdown always tolerated for per-iteration metrics")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0) & finite());
  cmd->add_option("--alpha", a->rule.alpha, "with --baseline: significance level of the one-sided Mann-Whitney test")
      ->capture_default_str()
      ->check(CLI::Range(1e-9, 0.5) & finite());
  add_no_contain_flag(cmd, a->no_contain);
  cmd->footer(
      "Exit codes: 0 every scenario met its expectation; 1 one did not; 2 usage or input error; 5 no scenario\n"
      "selected; 6 every selected scenario was skipped; 130/143 interrupted.\n\n"
      "Examples:\n"
      "  lockstep run scenarios/comm --report-dir R         # run a folder; R/report.md, results.json, junit.xml\n"
      "  lockstep run scenarios --filter 'programs' --python ~/.cache/lockstep/venv-torch-2.15.0/bin/python\n"
      "  lockstep run scenarios -x --last-failed             # rerun what failed last time, stop at the first failure");
  cmd->callback([a, &exit_code] {
    contain(a->no_contain);
    if (!a->slowdown.empty()) perf::parse_slowdown_flag(a->slowdown, "--slowdown");
    if (!a->reference.empty()) {
      if (!a->baseline.empty()) throw InputError("--reference and --baseline: give one (an A/B run or a check against records)");
      if (::access(a->reference.c_str(), X_OK) != 0)
        throw InputError("--reference: '" + a->reference + "' is not an executable lockstep binary");
    }
    const auto scenarios = select_scenarios(a->paths, a->filter, a->last_failed, a->report_dir);
    check_python(a->python, scenarios);
    // Open (and validate) the store before spending time on the suite, or creating anything.
    std::optional<baseline::Store> store;
    std::string env;
    bool save_check = false;
    if (!a->baseline.empty()) {
      // The check is kept in the baseline (a run of kind "check", for the report's history)
      // when the file can be written; a read-only baseline is still checked against.
      save_check = ::access(a->baseline.c_str(), W_OK) == 0;
      store.emplace(a->baseline, save_check ? baseline::Access::kWrite : baseline::Access::kRead);
      env = a->env.empty() ? baseline::default_environment_name() : a->env;
      if (!store->environment(env)) throw InputError("--env: no environment named '" + env + "' in " + a->baseline);
    }
    launch::LaunchOptions opts;
    opts.binary = launch::self_executable();
    const bool fresh = a->report_dir.empty();
    opts.report_dir = fresh ? fresh_report_dir() : a->report_dir;
    prepare_report_dir(opts.report_dir, "--report-dir");
    launch::install_cancel_handlers();
    opts.dump = a->dump;
    opts.max_ranks = a->max_ranks;
    opts.no_skip = a->no_skip;
    opts.exit_first = a->exit_first;
    opts.progress = isatty(STDOUT_FILENO);
    opts.slowdown = a->slowdown;
    if (!a->reference.empty()) opts.reference_binary = std::filesystem::absolute(a->reference).string();
    opts.ab_runs = a->ab_runs;
    opts.ab_iteration_tolerance = a->ab_tolerance;
    if (a->baseline.empty()) {
      const auto run = launch::run_suite(scenarios, opts, std::cout);
      if (fresh) link_latest(opts.report_dir);
      exit_code = exit_code_after(launch::suite_exit_code(run));
      return;
    }
    auto session = baseline::run_repeated(scenarios, opts, a->repeat, std::cout);
    std::map<std::string, std::pair<std::string, std::string>> verdicts;
    const int failed =
        baseline::check_session(*store, env, scenarios, session, opts, a->repeat, a->rule, std::cout, &verdicts);
    if (save_check) {
      baseline::Environment checked = *store->environment(env);
      checked.lockstep_rev = baseline::detect_environment(env).lockstep_rev;  // the revision checked
      store->record_check(checked, session.runs.front(), verdicts);
    } else {
      std::cout << "(" << a->baseline << " is read-only: this check is not kept in its history)\n";
    }
    // The baseline's HTML report (charts of every metric over the recorded runs and this check)
    // beside the run's report.md: what `lockstep report` writes, for this check.
    const std::string html_dir = (std::filesystem::path(opts.report_dir) / "baseline").string();
    baseline::write_report(*store, html_dir);
    std::cout << "baseline report: " << html_dir << "/index.html\n";
    launch::print_summary(session.runs.front(), opts.report_dir, std::cout,
                          a->repeat > 1 ? "repeat 1 of " + std::to_string(a->repeat) + ", after the baseline checks" : "after the baseline checks");
    if (fresh) link_latest(opts.report_dir);
    exit_code = exit_code_after(failed == 0 ? launch::suite_exit_code(session.runs.front()) : launch::kExitUnmet);
  });
}

}  // namespace lockstep::cli
