#pragma once
// The body of one rank process (`lockstep rank`). It reads torchrun-style variables (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), so the same binary runs under lockstep's
// launcher, torchrun, srun or mpirun. It runs inside the rank runtime (runtime.h): it writes
// DIR/<scenario>/rank<r>.status.json and exits with status.h's codes.
#include <cstddef>
#include <string>

#include "harness/rank/status.h"

namespace lockstep::rank {

struct RankOptions {
  std::string scenario_file;
  std::size_t variant = 0;
  std::string report_dir = "lockstep-report";
  bool dump = false;
};

// Runs the rank and returns its exit code. Never returns normally after a hang: the launcher
// (or the engine's own timeout) ends it.
int rank_main(const RankOptions& options);

}  // namespace lockstep::rank
