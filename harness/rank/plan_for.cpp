#include <filesystem>

#include "harness/comm/faults.h"
#include "harness/rank/plan.h"
#include "harness/rank/runtime.h"
#include "harness/rank/status.h"
#include "harness/scenario/scenario.h"

namespace lockstep::rank {

RankPlan plan_for(const scenario::Scenario& s, int rank, const std::string& dir) {
  namespace fs = std::filesystem;
  RankPlan p;
  p.rank = rank;
  p.world_size = s.world_size;
  p.scenario = s.id();
  p.mode = s.verify;
  p.status_path = fs::absolute(status_path(dir, rank)).string();
  p.trace_path = fs::absolute(trace_path(dir, rank)).string();
  p.timeout_s = s.timeout_s;
  p.engine_timeout_s = engine_timeout_s(s.startup_timeout_s, s.timeout_s);
  if (s.program) {
    for (const auto& inj : s.injections) {
      if (!inj.fault || inj.fault->kind != comm::Fault::Kind::kSlowRank || inj.fault->rank != rank) continue;
      RankPlan::SlowRank sr;
      sr.index = inj.index;
      sr.seconds = inj.fault->seconds;
      sr.phase = inj.fault->phase;
      sr.op = inj.fault->op ? std::string(comm::to_string(*inj.fault->op)) : "";
      sr.call = inj.fault->call;
      p.slow_rank = sr;
    }
  }
  return p;
}

}  // namespace lockstep::rank
