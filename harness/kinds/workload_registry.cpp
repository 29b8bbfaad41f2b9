#include <algorithm>

#include "harness/comm/faults.h"
#include "harness/perf/cost.h"
#include "harness/core/error.h"
#include "harness/scenario/config.h"
#include "harness/kinds/kinds.h"
#include "harness/workloads/workload.h"

namespace lockstep::workloads {

// One factory per kind's workload (harness/kinds/<kind>/workload.cpp), from the one list.
#define LOCKSTEP_DECLARE_WORKLOAD(kind) WorkloadSpec kind##_spec();
#define LOCKSTEP_NO_CAPABILITY(kind)
LOCKSTEP_KINDS(LOCKSTEP_DECLARE_WORKLOAD, LOCKSTEP_NO_CAPABILITY)
#undef LOCKSTEP_DECLARE_WORKLOAD

const std::vector<WorkloadSpec>& all() {
  static const std::vector<WorkloadSpec> specs = [] {
    std::vector<WorkloadSpec> v;
#define LOCKSTEP_ADD_WORKLOAD(kind) v.push_back(kind##_spec());
    LOCKSTEP_KINDS(LOCKSTEP_ADD_WORKLOAD, LOCKSTEP_NO_CAPABILITY)
#undef LOCKSTEP_ADD_WORKLOAD
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return v;
  }();
  return specs;
}

const WorkloadSpec* find(std::string_view name) {
  for (const auto& s : all()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

void validate(const scenario::Scenario& s) {
  const WorkloadSpec* spec = find(s.workload);
  if (!spec) {
    std::string names;
    std::vector<std::string> kinds;
    for (const auto& w : all()) {
      names += (names.empty() ? "" : ", ") + w.name;
      kinds.push_back(w.name);
    }
    names += ", program";  // a user's program (scenario/scenario.cpp reads its keys)
    kinds.push_back("program");
    const std::string best = scenario::closest(s.workload, kinds);
    // "lookup" is a capability of systems under test; lockstep's own lookup takes a graph.
    const std::string hint = s.workload == "lookup" ? "; 'lookup' is for a system under test ([system]): lockstep's own partition lookup on a graph is 'graph_lookup'" : "";
    s.workload_config.fail("kind", "unknown workload '" + s.workload + "'" + (best.empty() ? "" : " (did you mean '" + best + "'?)") +
                                       " (known: " + names + ")" + hint);
  }
  if (s.backend == scenario::Backend::kGloo && s.device == scenario::Device::kCuda &&
      !spec->gpu_compute_host_exchange) {
    s.workload_config.fail("kind", "run.backend 'gloo' in lockstep carries host buffers only; "
                                   "use backend 'nccl' for device 'cuda' (workload '" +
                                       s.workload + "' has no GPU compute with host exchanges)");
  }
  if (s.backend == scenario::Backend::kNccl && !spec->device_exchanges) {
    s.workload_config.fail("kind", "workload '" + s.workload + "' exchanges host buffers: " +
                                       (spec->gpu_compute_host_exchange
                                            ? "with run.device 'cuda' use run.backend 'gloo' (GPU compute, exchanges over Gloo)"
                                            : "backend 'nccl' cannot carry them; run it on device 'cpu' with backend 'gloo'"));
  }
  for (const auto& inj : s.injections) {
    const bool workload_kind = std::find(spec->injections.begin(), spec->injections.end(),
                                         inj.kind) != spec->injections.end();
    // Communicator faults and slowdowns are parsed by validation (validate.h) before this.
    if (!comm::is_comm_fault(inj.kind) && inj.kind != "slowdown" && !workload_kind) {
      std::string kinds;
      for (const auto& k : comm::comm_fault_kinds()) kinds += (kinds.empty() ? "" : ", ") + k;
      kinds += ", slowdown";
      for (const auto& k : spec->injections) kinds += ", " + k;
      inj.config.fail("kind", "unknown injection '" + inj.kind + "' for workload '" + s.workload +
                                  "' (known: " + kinds + ")");
    }
  }
  spec->make(s);  // validates the workload's own keys and injections
}

}  // namespace lockstep::workloads
