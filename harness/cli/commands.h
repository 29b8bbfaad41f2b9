#pragma once
// One source file per subcommand. Each registers itself on the app; its callback stores the
// process exit code in `exit_code`. Errors propagate as exceptions to main().
#include <string>

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
// A CLI11 check that refuses NaN and infinity.
const CLI::Validator& finite();

}  // namespace lockstep::cli
