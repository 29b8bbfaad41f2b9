#pragma once
// One source file per subcommand. Each registers itself on the app; its callback stores the
// process exit code in `exit_code`. Errors propagate as exceptions to main().
#include <string>
#include <vector>

#include "harness/scenario/scenario.h"

namespace CLI {
class App;
class Validator;
}

namespace lockstep::cli {

void add_run(CLI::App& app, int& exit_code);
void add_validate(CLI::App& app, int& exit_code);
void add_list(CLI::App& app, int& exit_code);
void add_rank(CLI::App& app, int& exit_code);
// Baselines (harness/baseline/): record, baseline check|import|export, compare, report.
void add_record(CLI::App& app, int& exit_code);
void add_baseline(CLI::App& app, int& exit_code);
void add_compare(CLI::App& app, int& exit_code);
void add_report(CLI::App& app, int& exit_code);
void add_catalog(CLI::App& app, int& exit_code);
// `lockstep torchrun [torchrun's options] train.py [args]`: a program under live verification, no scenario file.
void add_torchrun(CLI::App& app, int& exit_code);

// Shared by run and record.
// The default report folder: a new one per run, lockstep-report/run-<UTC time>-<pid>, so that
// two runs started from one directory never share one.
std::string fresh_report_dir();
// Creates `dir` and checks that a file can be written there; throws InputError (exit 2)
// naming the option and the reason when not, before anything runs.
void prepare_report_dir(const std::string& dir, const std::string& option);
// After a run into a fresh folder: points lockstep-report/latest at it (atomically).
void link_latest(const std::string& dir);
// SIGINT/SIGTERM end the run cleanly (launch/cancel.h); this is the exit code that says so
// (128 + the signal, as a shell reports it), or `code` when the run was not cancelled.
int exit_code_after(int code);
// `--no-contain`, with its help, on a command that runs scenarios locally (launch/contain.h).
void add_no_contain_flag(CLI::App* cmd, bool& no_contain);
// Contains the rest of the command's run (launch::contain_run) unless `no_contain`; `not_local`
// says why a run must reach other hosts ("" when it is local). Call it first in the callback.
void contain(bool no_contain, const std::string& not_local = "");
// `--python PATH` on a command that runs programs or systems: sets LOCKSTEP_PYTHON for them and
// keeps the value in `python` for check_python.
void add_python_option(CLI::App* cmd, std::string& python, const std::string& help_extra = "");
// Refuses (InputError, exit 2) an interpreter that cannot start: the one given with --python
// (`flag_value`, always checked), or $LOCKSTEP_PYTHON when a selected scenario runs Python.
void check_python(const std::string& flag_value, const std::vector<scenario::Scenario>& scenarios);
// The scenarios a command runs: those under `paths` (validated), kept by `filter` (regex on id or
// tag) and, with `last_failed`, only those that failed, errored or were not run in the last report
// (`report_dir`/results.json when that folder has one, else lockstep-report/latest/results.json;
// InputError when there is none).
std::vector<scenario::Scenario> select_scenarios(const std::vector<std::string>& paths, const std::string& filter,
                                                 bool last_failed, const std::string& report_dir);
// The text of the one shared note on containment, for the top-level help.
const char* containment_help();
// A CLI11 check that refuses NaN and infinity.
const CLI::Validator& finite();

}  // namespace lockstep::cli
