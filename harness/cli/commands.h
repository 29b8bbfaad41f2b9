#pragma once
// One source file per subcommand. Each registers itself on the app; its callback stores the
// process exit code in `exit_code`. Errors propagate as exceptions to main().
namespace CLI {
class App;
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

}  // namespace lockstep::cli
