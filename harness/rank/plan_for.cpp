#include <filesystem>

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
  return p;
}

}  // namespace lockstep::rank
