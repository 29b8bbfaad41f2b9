#include "harness/validate/validate.h"

#include "harness/comm/faults.h"
#include "harness/scenario/injections.h"
#include "harness/sut/capability.h"
#include "harness/workloads/workload.h"

namespace lockstep::validate {

void check(scenario::Scenario& s) {
  if (s.program) {
    // Read whole by the scenario loader, but for its one injection (slow_rank, the only one the
    // loader lets a program have): the communicator's fault, passed on in the rank plan.
    for (auto& inj : s.injections) inj.fault = scenario::parse_fault(inj, s.world_size);
    return;
  }
  if (s.system) {
    sut::validate(s);
  } else {
    for (auto& inj : s.injections) {
      if (comm::is_comm_fault(inj.kind)) inj.fault = scenario::parse_fault(inj, s.world_size);
      if (inj.kind == "slowdown") inj.slowdown = scenario::parse_slowdown(inj, s.world_size);
    }
    workloads::validate(s);
  }
}

std::vector<scenario::Scenario> load_file(const std::string& path) { return scenario::load_file(path, check); }

std::vector<scenario::Scenario> load_paths(const std::vector<std::string>& paths) { return scenario::load_paths(paths, check); }

}  // namespace lockstep::validate
