#pragma once
// One launch pipeline for every kind of rank the launcher starts: lockstep's own ranks
// (`lockstep rank`), a program's (kind = "program") and a system under test's ([system]).
// run_once (pipeline.cpp) reads the same for each: skip -> prepare -> spawn -> watch -> judge ->
// collect -> decide() (verdict.h). A RankKind supplies only what differs: why it cannot run here,
// what it prepares, each rank's argv and environment, where a rank's progress shows (watch.h's
// ProgressSource), and how what the ranks left becomes evidence in the result. Spawning,
// watching, judging and killing are written once, in run_ranks.
#include <memory>
#include <string>
#include <vector>

#include "harness/launch/launcher.h"
#include "harness/launch/watch.h"
#include "harness/report/results.h"
#include "harness/scenario/scenario.h"

namespace lockstep::launch {

// How to start one rank's process.
struct RankStart {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string log;   // its log file
  std::string echo;  // "" or the prefix its output lines are echoed with on stdout
};

struct RanksEnd {
  Judgement judgement;
  double wall_s = 0;      // from the first spawn to the watchdog's verdict
  double startup_s = -1;  // the slowest rank's start-up; -1 unknown
};
class RankKind {
 public:
  virtual ~RankKind() = default;
  // Why the scenario cannot run on this machine ("" it can): the result's skip.
  virtual std::string skip_reason() const = 0;
  // Prepares the run's folder `dir` (plans, the board, the store, a system's inputs). An
  // InputError becomes the result's error.
  virtual void prepare(const std::string& dir) = 0;
  // This launcher's ranks: [first_rank(), first_rank() + rank_count()).
  virtual int first_rank() const { return 0; }
  virtual int rank_count() const = 0;
  virtual RankStart start(int rank) = 0;
  virtual std::unique_ptr<ProgressSource> progress() = 0;
  // Called after the judge, before the ranks are killed (a node that timed out keeps its ranks
  // a moment: pipeline.cpp).
  virtual void before_kill(const WatchEnd&) {}
  // After the ranks are killed: what they left, and how they ended, as evidence in `res`
  // (diagnosis, error, digest, metrics, notes, ...). May run the ranks again (run_ranks).
  virtual void collect(RanksEnd end, report::ScenarioResult& res) = 0;
};

// The kind of `s`'s ranks.
std::unique_ptr<RankKind> own_ranks(const scenario::Scenario& s, const LaunchOptions& options);
std::unique_ptr<RankKind> program_ranks(const scenario::Scenario& s, const LaunchOptions& options);
std::unique_ptr<RankKind> system_ranks(const scenario::Scenario& s, const LaunchOptions& options);

// Spawns `kind`'s ranks, watches them (watch.h) and judges how they ended (rank statuses under
// `dir`), then kills and reaps them all. Throws Cancelled (cancel.h) when the run is cancelled
// (every rank killed).
RanksEnd run_ranks(RankKind& kind, const scenario::Scenario& s, const std::string& dir);

}  // namespace lockstep::launch
