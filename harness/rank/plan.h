#pragma once
// The rank contract, in: what the launcher tells each rank it starts, lockstep's own
// (`lockstep rank`) and a program's (the program runtime, harness/pytorch/). The launcher writes
// one plan per rank, DIR/<scenario>/rank<r>.plan.json, once, before the rank starts, and names it
// in LOCKSTEP_PLAN; the rank reads it once, here. Its way out is the rank status (status.h). The
// JSON form is documented in scenarios/README.md ("The rank plan"); this file is its one reader
// and writer.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "harness/core/verify_mode.h"

namespace lockstep::scenario {
struct Scenario;
}

namespace lockstep::rank {

// Version of the plan's JSON form. Bump it with any incompatible change.
inline constexpr int kPlanSchemaVersion = 1;

struct RankPlan {
  int rank = 0;
  int world_size = 1;
  std::string scenario;                  // the scenario's id
  VerifyMode mode = VerifyMode::kVerify;  // run.verify
  std::string status_path;               // where the rank writes its status ("": nowhere)
  std::string trace_path;                // where it writes its trace ("": none)
  std::string board_path;                // the run's board ("": none, ranks on several hosts)
  double timeout_s = 60;                 // run.timeout_s
  double engine_timeout_s = 90;          // the engines' and the store's own (engine_timeout_s())
  // lockstep's own ranks: `run --slowdown` ("" none), and whether the scenario's slowdowns are
  // left out (the reference side of an A/B run).
  std::string slowdown;
  bool slowdown_off = false;
  // A program's rank: the scenario's [[inject]] kind = "slow_rank" for this rank, if any
  // (lockstep's own ranks read their faults from the scenario). Key "slow_rank", optional.
  struct SlowRank {
    std::size_t index = 0;  // the [[inject]] number (the board's fired bit)
    double seconds = 0;
    std::string phase, op;  // "" any
    std::int64_t call = -1;
  };
  std::optional<SlowRank> slow_rank;
};

nlohmann::json to_json(const RankPlan& p);
// Throws InputError naming the key when `j` is not a plan of this schema version.
RankPlan plan_from_json(const nlohmann::json& j);
// Writes `p` to `path` atomically. Throws lockstep::Error.
void write_plan(const std::string& path, const RankPlan& p);
// The plan at `path`. Throws InputError naming the path and what is wrong.
RankPlan read_plan(const std::string& path);
// The plan LOCKSTEP_PLAN names; nullopt when it is unset (a rank started by another launcher).
std::optional<RankPlan> plan_from_env();
std::string plan_path(const std::string& dir, int rank);

// The plan of rank `rank` of scenario `s` whose artifacts are in `dir` (absolute paths), as the
// launcher writes it and as `lockstep rank` takes it when no launcher of lockstep's started it
// (torchrun): no board, no slowdown flag. Defined in plan_for.cpp (not in the program runtime).
RankPlan plan_for(const scenario::Scenario& s, int rank, const std::string& dir);

}  // namespace lockstep::rank
