#pragma once
// The one rank runtime: what every rank the launcher watches runs inside, lockstep's own
// (`lockstep rank`, rank_main.cpp) and a program's (the program runtime, harness/pytorch/). It
// attaches the rank to the run's board, builds the communicator chain (engine -> Verifier ->
// Monitor -> FaultInjector), and ends the rank: its status (status.h) written once, its exit code.
// Checks live in the chain and in the launcher; the runtime only carries their verdicts.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/comm/board.h"
#include "harness/comm/communicator.h"
#include "harness/comm/faults.h"
#include "harness/comm/monitor.h"
#include "harness/core/verify_mode.h"
#include "harness/rank/status.h"

namespace lockstep::rank {

// What engines and the store wait before giving up: longer than any bound of the launcher's
// watchdog (run.startup_timeout_s, run.timeout_s), so that the watchdog always names a hang first.
inline double engine_timeout_s(double startup_timeout_s, double timeout_s) { return startup_timeout_s + timeout_s + 30; }

using lockstep::VerifyMode;  // harness/core/verify_mode.h

struct ChainSpec {
  std::unique_ptr<comm::Backend> engine;                     // carries the data (Gloo, NCCL)
  std::function<std::unique_ptr<comm::Backend>()> control;   // the verifier's own group (kVerify)
  VerifyMode mode = VerifyMode::kVerify;
  std::string trace_path;                                    // "" or mode kOff: no trace
  std::vector<comm::Fault> faults;                           // this rank's injected faults
  // Over the control group: compare each call's records on a thread of the verifier's own as soon
  // as they arrive (a program's engine runs its call beside the check, and a mismatch that hangs it
  // is still named), not only when the call is waited for.
  bool check_in_background = false;
};

class Runtime {
 public:
  // `status_path` "" writes no status. `timeout_s` is run.timeout_s: it bounds how long the
  // verifier waits for late peers and how long a failing rank looks for peers it left behind.
  Runtime(int rank, int world_size, std::string status_path, RankStatus status, double timeout_s);
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Attaches to the board at `path` ("" none) and marks this rank running; false (and no
  // board) when the board's size is not world_size.
  bool attach_board(const std::string& path);
  // Builds the chain over spec.engine; verification goes through the board when it has one of
  // this world's record size and LOCKSTEP_VERIFY_CHANNEL allows, else through spec.control.
  comm::Communicator& build(ChainSpec spec);

  RankStatus& status() { return status_; }
  comm::Communicator* communicator() { return communicator_; }
  std::int64_t collectives_issued() const;
  int rank() const { return rank_; }

  // Ends the process: the board slot's state, the status file, then _Exit(code) (kExitNoStatus
  // when the status cannot be written). The first caller ends it; a second blocks until then.
  [[noreturn]] void finish(int code);
  // Ends with the diagnosis (kExitDiagnosed).
  [[noreturn]] void diagnosed(const Diagnosis& d);
  // Ends after an engine failure (kExitCommError): usually another rank's failure.
  [[noreturn]] void comm_failed(const std::string& what);
  // Ends after this rank's own failure: missing_participant when peers wait in a collective it
  // passed (it skipped it), else outcome `outcome` with `what` and exit `code`.
  [[noreturn]] void failed(Outcome outcome, const std::string& what, int code);
  // Writes the status now and leaves the process running (a program exits on its own):
  // outcome kOk marks the slot finished, anything else failed.
  void settle();

  // Issues `call` at the current call site and waits; a diagnosis or an engine failure ends
  // the rank (diagnosed, comm_failed). `on`: another group's chain (add_group), else the default.
  void carry(comm::Call call, comm::Communicator* on = nullptr);
  // carry from `site` as given (Communicator::start_at).
  void carry_at(comm::Call call, const comm::CallSite& site, comm::Communicator* on = nullptr);
  // begin from `site` as given (Communicator::start_at).
  std::unique_ptr<comm::Pending> begin_at(comm::Call call, const comm::CallSite& site, comm::Communicator* on = nullptr);
  // carry in two halves, for a caller that does something between them (a program's wrapper
  // returns to the program): begin issues, end waits; either ends the rank as carry does.
  std::unique_ptr<comm::Pending> begin(comm::Call call, comm::Communicator* on = nullptr);
  void end(comm::Pending& pending);
  // A chain for another process group of the program (new_group): its calls are numbered apart,
  // traced in the rank's trace with the group's ranks (`members`, global, in group order), and
  // verified on the board when it verifies (in a ring each member claims for `key`, the same
  // non-zero value on every member: group_key), else through `control`, a group of lockstep's own
  // over the same ranks. `engine` and `control` speak the group's ranks.
  // After build(); the chain lives as long as the process.
  comm::Communicator& add_group(std::vector<int> members, std::unique_ptr<comm::Backend> engine,
                                std::unique_ptr<comm::Backend> control, VerifyMode mode, std::uint64_t key = 0);
  // Every rank must hold the same `value` (gathered through the chain): when they do not, ends
  // with result_mismatch "<subject>: rank 1 digest .. ; ranks 0,2 digest .. (<reason>)", blaming
  // the rank that stands alone when exactly one does.
  void check_same_value(std::int64_t value, const std::string& subject, const std::string& reason);
  // Every rank must hold the same count of `unit`s (a program's DataLoader batches in an epoch):
  // when they do not, ends with uneven_steps "<subject>: rank 0 10 <unit>, rank 1 10, rank 2 9",
  // every rank's count, blaming the rank that stands alone when exactly one does.
  void check_same_count(std::int64_t count, const std::string& subject, const std::string& unit);
  // True when the run's board carries the verification (built with one, local runs).
  bool board_verifies() const { return board_verifies_; }
  // The rank skipped a collective its peers wait in: the diagnosis that explains `failure`.
  std::optional<Diagnosis> explain(const std::string& failure);
  // Every rank's `value`, in rank order (one verified all-gather on lockstep's chain).
  std::vector<std::int64_t> gather_values(std::int64_t value);

 private:
  void mark(bool ok);
  // Every rank's `value`, gathered through the chain, grouped by value (groups in order of their
  // lowest rank), and the rank to blame: the one that stands alone when exactly one does, else -1.
  struct Groups {
    std::vector<std::int64_t> all;
    std::vector<std::pair<std::int64_t, std::vector<int>>> groups;
    int blamed = -1;
  };
  Groups gather_groups(std::int64_t value);

  int rank_, world_size_;
  std::string status_path_;
  RankStatus status_;
  double timeout_s_;
  comm::Board board_;
  comm::BoardSlot* slot_ = nullptr;
  bool board_verifies_ = false;
  comm::Monitor* monitor_ = nullptr;
  comm::Communicator* communicator_ = nullptr;
};

}  // namespace lockstep::rank
