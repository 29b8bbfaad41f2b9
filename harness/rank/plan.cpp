#include "harness/rank/plan.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "harness/comm/types.h"
#include "harness/core/env.h"
#include "harness/core/error.h"
#include "harness/core/fs.h"

namespace lockstep::rank {

nlohmann::json to_json(const RankPlan& p) {
  nlohmann::json j = {{"schema_version", kPlanSchemaVersion},
          {"rank", p.rank},
          {"world_size", p.world_size},
          {"scenario", p.scenario},
          {"verify", std::string(to_string(p.mode))},
          {"status", p.status_path},
          {"trace", p.trace_path},
          {"board", p.board_path},
          {"timeout_s", p.timeout_s},
          {"engine_timeout_s", p.engine_timeout_s},
          {"slowdown", p.slowdown},
          {"slowdown_off", p.slowdown_off}};
  if (p.slow_rank) {
    j["slow_rank"] = {{"index", p.slow_rank->index}, {"seconds", p.slow_rank->seconds}, {"phase", p.slow_rank->phase},
                      {"op", p.slow_rank->op}, {"call", p.slow_rank->call}};
  }
  return j;
}

RankPlan plan_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw InputError("a rank plan must be a JSON object");
  const int version = j.value("schema_version", 0);
  if (version != kPlanSchemaVersion) {
    throw InputError("a rank plan of schema_version " + std::to_string(version) + ", this lockstep reads " +
                     std::to_string(kPlanSchemaVersion) + ": the launcher and the rank come from different builds");
  }
  const char* key = "";
  try {
    RankPlan p;
    p.rank = j.at(key = "rank").get<int>();
    p.world_size = j.at(key = "world_size").get<int>();
    p.scenario = j.at(key = "scenario").get<std::string>();
    const auto verify = j.at(key = "verify").get<std::string>();
    const auto mode = verify_mode_from_string(verify);
    if (!mode) throw InputError("a rank plan's verify must be off, record or verify, got '" + verify + "'");
    p.mode = *mode;
    p.status_path = j.at(key = "status").get<std::string>();
    p.trace_path = j.at(key = "trace").get<std::string>();
    p.board_path = j.at(key = "board").get<std::string>();
    p.timeout_s = j.at(key = "timeout_s").get<double>();
    p.engine_timeout_s = j.at(key = "engine_timeout_s").get<double>();
    p.slowdown = j.at(key = "slowdown").get<std::string>();
    p.slowdown_off = j.at(key = "slowdown_off").get<bool>();
    if (j.contains("slow_rank") && !j["slow_rank"].is_null()) {
      const auto& sr = j.at(key = "slow_rank");
      RankPlan::SlowRank s;
      s.index = (key = "slow_rank.index", sr.at("index")).get<std::size_t>();
      s.seconds = (key = "slow_rank.seconds", sr.at("seconds")).get<double>();
      s.phase = (key = "slow_rank.phase", sr.at("phase")).get<std::string>();
      s.op = (key = "slow_rank.op", sr.at("op")).get<std::string>();
      s.call = (key = "slow_rank.call", sr.at("call")).get<std::int64_t>();
      if (!(s.seconds > 0 && s.seconds <= 60)) throw InputError("a rank plan's slow_rank.seconds must be in (0, 60]");
      if (!s.op.empty() && !comm::op_from_string(s.op)) throw InputError("a rank plan's slow_rank.op is not an op: '" + s.op + "'");
      p.slow_rank = s;
    }
    if (p.world_size < 1 || p.rank < 0 || p.rank >= p.world_size) {
      throw InputError("a rank plan's rank " + std::to_string(p.rank) + " is not in [0, world_size " + std::to_string(p.world_size) + ")");
    }
    if (!(p.timeout_s > 0) || !(p.engine_timeout_s > 0)) throw InputError("a rank plan's timeouts must be positive");
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("a rank plan's '") + key + "' is missing or of the wrong type: " + e.what());
  }
}

void write_plan(const std::string& path, const RankPlan& p) { write_file_atomically(path, to_json(p).dump(2) + "\n"); }

RankPlan read_plan(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot read the rank plan " + path);
  try {
    return plan_from_json(nlohmann::json::parse(in));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not JSON: " + e.what());
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
}

std::optional<RankPlan> plan_from_env() {
  const std::string path = env::str(env::kPlan);
  if (path.empty()) return std::nullopt;
  return read_plan(path);
}

std::string plan_path(const std::string& dir, int rank) { return dir + "/rank" + std::to_string(rank) + ".plan.json"; }

}  // namespace lockstep::rank
