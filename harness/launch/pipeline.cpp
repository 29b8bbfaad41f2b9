// The one launch pipeline (rank_kind.h): run_once and run_ranks, for every kind of rank.
#include <algorithm>
#include <chrono>
#include <filesystem>

#include "harness/core/error.h"
#include "harness/launch/cancel.h"
#include "harness/launch/processes.h"
#include "harness/launch/rank_kind.h"
#include "harness/launch/run_once.h"
#include "harness/launch/verdict.h"
#include "harness/launch/watchdog.h"
#include "harness/rank/status.h"
#include "reference/common/device.h"

namespace lockstep::launch {

namespace fs = std::filesystem;

RanksEnd run_ranks(RankKind& kind, const scenario::Scenario& s, const std::string& dir) {
  RanksEnd out;
  RankProcesses procs;
  const auto t0 = Clock::now();
  for (int r = kind.first_rank(); r < kind.first_rank() + kind.rank_count(); ++r) {
    const RankStart rs = kind.start(r);
    procs.spawn(rs.argv, rs.env, rs.log, rs.echo);
  }
  Watchdog dog(kind.rank_count(), watchdog_limits(s), t0);
  const auto source = kind.progress();
  const WatchEnd end = watch(procs, *source, dog);
  if (end.cancelled()) throw Cancelled();
  out.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int i = 0; i < kind.rank_count(); ++i) {
    if (auto t = dog.startup_seconds(i)) out.startup_s = std::max(out.startup_s, *t);
  }
  out.judgement = judge(procs.children(), *source, dog, end, s.timeout_s, dir);
  kind.before_kill(end);
  procs.kill_all();
  return out;
}

namespace {

// Why `s` cannot run on this machine, whatever its kind ("" it can).
std::string machine_skip_reason(const scenario::Scenario& s, const LaunchOptions& options) {
  if (s.requires_cuda) {
    const int found = ref::cuda_device_count();
    if (found == 0) return "requires cuda: no CUDA device is visible";
    if (found < s.requires_cuda_devices) {
      return "needs " + std::to_string(s.requires_cuda_devices) + " CUDA devices, found " + std::to_string(found) +
             " (backend nccl puts each rank on its own GPU)";
    }
  }
  if (s.requires_ranks > options.max_ranks) {
    return "requires " + std::to_string(s.requires_ranks) + " ranks, --max-ranks is " + std::to_string(options.max_ranks);
  }
  return "";
}

std::unique_ptr<RankKind> kind_of(const scenario::Scenario& s, const LaunchOptions& options) {
  if (s.system) return system_ranks(s, options);
  if (s.program) return program_ranks(s, options);
  return own_ranks(s, options);
}

}  // namespace

namespace detail {

report::ScenarioResult run_once(const scenario::Scenario& s, const LaunchOptions& options) {
  report::ScenarioResult res;
  res.name = s.name;
  res.id = s.id();
  res.file = s.file;
  res.variant = s.variant;
  res.tags = s.tags;
  res.world_size = s.world_size;
  res.artifacts = s.slug();
  res.skip_fails = options.no_skip;
  const auto t0 = Clock::now();
  try {
    const auto kind = kind_of(s, options);
    res.skip = machine_skip_reason(s, options);
    if (res.skip.empty()) res.skip = kind->skip_reason();
    if (res.skip.empty()) {
      const std::string dir = rank::artifacts_dir(options.report_dir, s.slug());
      fs::remove_all(dir);
      fs::create_directories(dir);
      try {
        kind->prepare(dir);
      } catch (const InputError& e) {
        res.error = e.what();
      }
      if (res.error.empty()) {
        RanksEnd end = run_ranks(*kind, s, dir);
        res.startup_s = end.startup_s;
        kind->collect(std::move(end), res);
      }
    }
  } catch (const Cancelled&) {
    res.cancelled = cancelled_reason();
  } catch (const std::exception& e) {
    if (cancelled()) res.cancelled = cancelled_reason();
    else res.error = e.what();
  }
  if (res.skip.empty()) res.duration_s = std::chrono::duration<double>(Clock::now() - t0).count();
  decide(expectation_for(s, res), res);
  return res;
}

}  // namespace detail

}  // namespace lockstep::launch
