#pragma once
// A workload is a small unit that the driver plans, runs, checks and reports, as each
// collective is in nccl-tests. It runs inside every rank process, talks only through the
// Communicator, and reports problems by throwing DiagnosisError.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "harness/core/diagnosis.h"
#include "harness/report/results.h"
#include "harness/scenario/scenario.h"

namespace lockstep::comm {
class Communicator;
}
namespace lockstep::report {
class DumpWriter;
}

namespace lockstep::workloads {

struct RankContext {
  const scenario::Scenario& scenario;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  comm::Communicator& comm;
  report::DumpWriter& dump;
  std::map<std::string, double> metrics;  // reported from rank 0
  std::string digest;  // hex digest of the canonical output; set on rank 0, "" if none
  int local_world_size = 1;  // ranks on this rank's node (LOCAL_WORLD_SIZE)
  std::map<std::string, report::Series> series;  // per-step curves; reported from rank 0
};

// Ends the rank with a diagnosis blaming `rank` (-1: none). Checks in workloads call this.
[[noreturn]] inline void fail_with(DiagnosisKind kind, int rank, std::string message, std::int64_t seq = -1) {
  throw DiagnosisError(Diagnosis{kind, std::move(message), rank, seq});
}

class Workload {
 public:
  virtual ~Workload() = default;
  virtual void run(RankContext& ctx) = 0;
};

struct WorkloadSpec {
  std::string name;
  std::string summary;
  // Validates scenario.workload_config and the injections this workload handles (consuming
  // every key it reads) and builds the workload. Throws InputError naming file:line.
  std::function<std::unique_ptr<Workload>(const scenario::Scenario&)> make;
  // The [[inject]] kinds this workload handles itself (beyond the communicator's faults).
  std::vector<std::string> injections;
  // With run.device "cuda" and backend gloo: computes on the GPU and exchanges host buffers
  // (otherwise that pair is refused: lockstep's Gloo carries host buffers only).
  bool gpu_compute_host_exchange = false;
  // Its exchanges carry CUDA buffers with backend nccl (device "cuda"); otherwise backend nccl
  // is refused, naming the workload.
  bool device_exchanges = false;
};

// The registered workloads, sorted by name.
const std::vector<WorkloadSpec>& all();
// Returns the workload named `name`, or nullptr.
const WorkloadSpec* find(std::string_view name);
// Validates the workload, its config and every injection of `s`. Throws InputError.
void validate(const scenario::Scenario& s);

}  // namespace lockstep::workloads
