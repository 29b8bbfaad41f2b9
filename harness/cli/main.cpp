// lockstep: the one place that catches exceptions and maps them to exit codes.
//   0 every scenario met its expectation, 1 at least one did not, 2 usage or input error,
//   6 every selected scenario was skipped (launch/suite.h), 128 + signal when cancelled.
#include <iostream>

#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "harness/comm/engines.h"
#include "harness/core/error.h"
#include "lockstep/config.h"

int main(int argc, char** argv) {
  // Before anything touches LibTorch: a foreign libtorch fails later in unrelated ways.
  if (const std::string why = lockstep::comm::loaded_torch_mismatch(); !why.empty()) {
    std::cerr << "lockstep: " << why << '\n';
    return 2;
  }
  CLI::App app{
      "lockstep: reproducibility and correctness harness for distributed GNN training.\n"
      "Runs scenario files (TOML) over real rank processes and real collective engines (Gloo via\n"
      "LibTorch c10d, NCCL), checks results, collective sequences and throughput, and writes\n"
      "results.json, junit.xml and per-rank logs and traces. `lockstep torchrun` runs a PyTorch program the\n"
      "same way without a scenario file.\n\n"
      "Exit codes: 0 every scenario met its expectation; 1 at least one did not (with --no-skip, a\n"
      "skipped one counts as not met); 2 usage or input error (the message names file:line and the\n"
      "key); 5 no scenario was selected; 6 every selected scenario was skipped, so nothing was checked;\n"
      "130/143 interrupted by SIGINT/SIGTERM."};
  app.set_version_flag("--version", std::string("lockstep ") + LOCKSTEP_VERSION + " (" + LOCKSTEP_GIT_REV +
                                        "), LibTorch " + LOCKSTEP_TORCH_VERSION + " [" + LOCKSTEP_TORCH_LINE + "]");
  app.require_subcommand(1);
  app.footer(std::string(lockstep::cli::containment_help()) +
             "\n\nExamples:\n"
             "  lockstep torchrun --nproc-per-node 2 --python /path/to/venv/bin/python train.py   # your script, checked\n"
             "  lockstep run scenarios/comm --report-dir R                                        # a suite; R/report.md\n"
             "  lockstep SUBCOMMAND --help                                                        # each one's options");
  int exit_code = 0;
  lockstep::cli::add_run(app, exit_code);
  lockstep::cli::add_validate(app, exit_code);
  lockstep::cli::add_list(app, exit_code);
  lockstep::cli::add_rank(app, exit_code);
  lockstep::cli::add_record(app, exit_code);
  lockstep::cli::add_baseline(app, exit_code);
  lockstep::cli::add_compare(app, exit_code);
  lockstep::cli::add_report(app, exit_code);
  lockstep::cli::add_catalog(app, exit_code);
  lockstep::cli::add_torchrun(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const lockstep::InputError& e) {
    std::cerr << "lockstep: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "lockstep: error: " << e.what() << '\n';
    return 1;
  }
  return exit_code;
}
