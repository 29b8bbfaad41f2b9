#include <CLI/CLI.hpp>

#include "harness/cli/commands.h"
#include "harness/rank/rank_main.h"

namespace lockstep::cli {

void add_rank(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "rank",
      "Run one rank of one scenario variant. Started by `lockstep run`; also the entry point\n"
      "under torchrun, srun or mpirun, which provide RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR\n"
      "and MASTER_PORT (LOCAL_WORLD_SIZE too, optional: the ranks on this node, default WORLD_SIZE).\n"
      "Exit: 0 clean, 3 diagnosed, 4 communication error, 2 bad input, 1 error.");
  cmd->footer("Examples:\n"
              "  torchrun --nproc-per-node 4 --nnodes 2 ... $(which lockstep) rank scenarios/comm/clean_mix.toml   # each node");
  auto opts = std::make_shared<rank::RankOptions>();
  cmd->add_option("scenario", opts->scenario_file, "the scenario file")->required();
  cmd->add_option("--variant", opts->variant, "index of the matrix variant (see `lockstep list`)");
  cmd->add_option("--report-dir", opts->report_dir, "where per-rank logs, traces and status go");
  cmd->add_flag("--dump", opts->dump, "write canonical outputs as .npy under REPORT_DIR/dump/");
  cmd->callback([opts, &exit_code] { exit_code = rank::rank_main(*opts); });
}

}  // namespace lockstep::cli
