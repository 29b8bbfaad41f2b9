#pragma once
// The fault-injecting decorator: the outermost layer of the chain, so that what it changes
// is what the rank really issues. Each fault fires once, on its rank, at the first call whose
// site matches (step, and optionally phase, call index and op).
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/comm/backend.h"

namespace lockstep::comm {

struct Fault {
  enum class Kind { kDtype, kCount, kRoot, kReduce, kSplit, kCorrupt, kSkip, kCrash, kSleep, kExitEarly, kSlowRank };
  Kind kind = Kind::kSkip;
  std::size_t index = 0;        // the scenario's [[inject]] number (the board's fired bit)
  int rank = 0;
  std::int64_t step = -1;       // -1 matches any step
  std::string phase;            // "" matches any; "startup" fires before the rank connects
  std::int64_t call = -1;       // -1 matches any call index
  std::optional<Op> op;         // nullopt matches any op the fault applies to
  DType dtype = DType::kBF16;   // kDtype
  std::int64_t delta = 1;       // kCount: elements removed; kSplit: elements moved
  std::int64_t element = -1;    // kCorrupt: the output element changed (-1: the last)
  int root = -1;                // kRoot: -1 means (root + 1) % world_size
  std::optional<ReduceOp> reduce;  // kReduce: nullopt means max for sum, else sum
  double seconds = 0;           // kSleep; kSlowRank: per step
  int signal = 0;               // kCrash: signal to raise, or 0 to exit with exit_code
  int exit_code = 1;
};

// The [[inject]] kinds handled here: dtype_mismatch, count_mismatch, root_mismatch,
// reduce_mismatch, split_mismatch, corrupt_output, skip_collective, crash, sleep, exit_early,
// slow_rank. Each fires once, except slow_rank: the rank sleeps `seconds` before the first
// matching call of every step (step >= 0), so that the others wait for it there.
const std::vector<std::string>& comm_fault_kinds();
bool is_comm_fault(std::string_view kind);
// (scenario/injections.h parses a scenario's [[inject]] table into a Fault.)
// Whether `f` can change a call of `op` (a dtype on a barrier cannot, ...).
bool applies_to(const Fault& f, Op op);
// "step 20, op all_to_all" / "phase preflight" / "any call": what a call must match.
std::string describe_target(const Fault& f);
// Fires the faults of this rank that target phase "startup" (before the rank connects).
void fire_startup_faults(const std::vector<Fault>& faults, int rank);

class FaultInjector final : public Backend {
 public:
  FaultInjector(std::unique_ptr<Backend> inner, std::vector<Fault> faults);

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string name() const override { return inner_->name(); }
  std::unique_ptr<Pending> start(Call& call) override;

 private:
  std::unique_ptr<Backend> inner_;
  std::vector<Fault> faults_;  // this rank's faults
  std::vector<bool> fired_;
  std::vector<std::int64_t> slow_step_;  // kSlowRank: the step it last slept in (-1: none)
};

}  // namespace lockstep::comm
