#pragma once
// The body of one rank process (`lockstep rank`). It reads torchrun-style variables (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), so the same binary runs under lockstep's
// launcher, torchrun, srun or mpirun. It writes DIR/<scenario>/rank<r>.status.json and exits:
//   0 clean, 3 diagnosed (the diagnosis is in the status file), 4 communication error (usually a
//   consequence of another rank's failure), 2 bad input, 1 internal error.
#include <string>

namespace lockstep::rank {

inline constexpr int kExitClean = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitInput = 2;
inline constexpr int kExitDiagnosed = 3;
inline constexpr int kExitCommError = 4;
inline constexpr int kExitNoStatus = 5;  // the status file could not be written (the report disk)

struct RankOptions {
  std::string scenario_file;
  std::size_t variant = 0;
  std::string report_dir = "lockstep-report";
  bool dump = false;
};

// Runs the rank and returns its exit code. Never returns normally after a hang: the launcher
// (or the engine's own timeout) ends it.
int rank_main(const RankOptions& options);

// Paths of a scenario's per-rank artifacts under the report directory.
std::string artifacts_dir(const std::string& report_dir, const std::string& slug);
std::string status_path(const std::string& dir, int rank);
std::string trace_path(const std::string& dir, int rank);
std::string log_path(const std::string& dir, int rank);

}  // namespace lockstep::rank
