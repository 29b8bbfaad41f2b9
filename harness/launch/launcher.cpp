#include "harness/launch/launcher.h"

#include <filesystem>

#include "harness/launch/run_once.h"

namespace lockstep::launch {

namespace fs = std::filesystem;

std::string self_executable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("lockstep") : p.string();
}


report::ScenarioResult run_scenario(const scenario::Scenario& s, const LaunchOptions& options) {
  const bool own_ranks = !s.requires_cuda && s.requires_ranks <= options.max_ranks && !s.system && !s.program;
  if (own_ranks && !options.reference_binary.empty()) return detail::run_against_reference(s, options, options.ab_runs);
  if (own_ranks && detail::self_baselined(s)) return detail::run_against_reference(s, options, detail::kSelfBaselineRuns);
  return detail::run_once(s, options);
}

}  // namespace lockstep::launch
