#include <iostream>

#include <CLI/CLI.hpp>

#include "harness/baseline/report.h"
#include "harness/cli/commands.h"
#include "harness/core/error.h"

namespace lockstep::cli {

void add_report(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "report",
      "Write the performance baseline report: OUT/index.html (self-contained) and OUT/report.md: a\n"
      "summary first (the latest check's declared changes, the comparison of two environments), then\n"
      "each metric over the runs in recording order, marking the checks that declared a change, and each\n"
      "scenario's waits at collectives (per-step medians per rank; the latest record's timeline and heatmap)");
  cmd->footer("Examples:\n  lockstep report --baseline base.db --out perf-report   # perf-report/index.html, report.md");
  auto db = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto opts = std::make_shared<baseline::ReportOptions>();
  cmd->add_option("--baseline", *db, "the SQLite baseline database")->required();
  cmd->add_option("--out", *out, "output directory")->required();
  cmd->add_option("--from", opts->from, "the summary compares this environment ... (default: with exactly two, the first)");
  cmd->add_option("--to", opts->to, "... with this one (default: with exactly two, the second)");
  cmd->callback([db, out, opts, &exit_code] {
    if (opts->from.empty() != opts->to.empty()) throw InputError("--from and --to go together");
    baseline::Store store(*db, baseline::Access::kRead);
    baseline::write_report(store, *out, *opts);
    std::cout << "wrote " << *out << "/index.html and " << *out << "/report.md\n";
    exit_code = 0;
  });
}

}  // namespace lockstep::cli
