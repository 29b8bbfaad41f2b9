#include <iostream>

#include <CLI/CLI.hpp>

#include "harness/baseline/report.h"
#include "harness/cli/commands.h"

namespace lockstep::cli {

void add_report(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "report",
      "Write the performance baseline report: OUT/index.html (self-contained) and OUT/report.md:\n"
      "each metric over the recorded runs per environment, step-time breakdowns, per-rank timelines");
  auto db = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  cmd->add_option("--baseline", *db, "the SQLite baseline database")->required();
  cmd->add_option("--out", *out, "output directory")->required();
  cmd->callback([db, out, &exit_code] {
    baseline::Store store(*db, baseline::Access::kRead);
    baseline::write_report(store, *out);
    std::cout << "wrote " << *out << "/index.html and " << *out << "/report.md\n";
    exit_code = 0;
  });
}

}  // namespace lockstep::cli
