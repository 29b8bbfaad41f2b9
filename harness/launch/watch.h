#pragma once
// The one watch loop and its post-mortem judge, for every kind of rank the launcher starts:
// lockstep's own (`lockstep rank`), a program's (kind = "program") and a system under test's
// ([system]). What differs between them is where a rank's progress shows, which is a
// ProgressSource: the run's board (board_source) or the files a system writes (file_source).
// The watchdog (watchdog.h) turns what the loop sees into a verdict; the judge turns the verdict
// and the ranks' exits into at most one diagnosis, by these rules, in order (scenarios/README.md,
// "Blame"):
//   1. a rank that diagnosed the run itself (exit 3, its status names the diagnosis);
//   2. a rank that reported bad input (exit 2) or could not write its status (exit 5): an error;
//   3. the rank that crashed or failed on its own first: rank_failure; among the ranks that
//      failed the same way (failure_way) within the settle window of the first failure
//      (Watchdog::settle_until: settle_s, longer while a live rank was busy), the
//      lowest, so that blame does not depend on which
//      process the launcher happened to reap first;
//   4. a rank that exited cleanly without finishing: missing_participant;
//   5. a rank that only lost communication: rank_failure naming it;
//   6. the watchdog's verdict: a start-up past its bound, the deadline, or no progress (timeout).
// Rules 1, 2 and 5 apply to sources that speak the rank contract (harness/rank/status.h).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/comm/board.h"
#include "harness/core/diagnosis.h"
#include "harness/launch/processes.h"
#include "harness/launch/watchdog.h"

namespace lockstep::launch {

// Rule 3: the line that says why a rank failed, as ranks that failed the same way compare it:
// every number read as any number ("#"), so that a rank's own number ("rank 1"), and the shapes,
// indices and ids that differ per rank in one error ("invalid tensor size at index 1 (expected
// (8, 8), got (6, 8))" on one rank, "index 0 (expected (6, 8), got (8, 8))" on its peer), do not
// make one failure two.
std::string failure_words(const std::string& why);
// Whether `line` is a raised exception's line as Python prints it last ("RuntimeError: ...",
// "torch.distributed.DistBackendError: ...", "KeyboardInterrupt"): a rank that raised it and was
// then killed by a signal on its way out (an engine's thread stopped while the interpreter
// finalized: SIGABRT) failed the way the exception says, as a rank that raised it and exited 1.
bool raised_line(const std::string& line);

// Where the loop sees a rank's progress, and how the judge describes it.
class ProgressSource {
 public:
  virtual ~ProgressSource() = default;
  // Whether the ranks follow the rank contract's exit codes and status files.
  virtual bool rank_contract() const = 0;
  // The rank of the watched process with index `child` (they differ on one node of several).
  virtual int rank_of(int child) const { return child; }
  // At each poll: fills `k` (started, progress, bad_exit) from rank r's process `c`.
  virtual void poll(int r, const Child& c, Watchdog::Rank& k) = 0;
  // Whether rank r, which exited with code 0, finished what it had to do.
  virtual bool finished(int r) const = 0;
  // Rule 3: why rank r's process ended as `c` says (its message and collective number).
  virtual Diagnosis failure(int r, const Child& c, const std::vector<Child>& kids) const = 0;
  // Rule 3: how rank r's process failed, compared between ranks to find those that failed the
  // same way: the exception it raised (raised_line) when it then exited with a code or SIGABRT,
  // else the signal, or the exit code and the line that says why (its status's message, or the
  // last line of its log), read by failure_words.
  virtual std::string failure_way(int r, const Child& c) const;
  // Rule 4: rank r exited cleanly without finishing.
  virtual Diagnosis unfinished(int r, const std::vector<Child>& kids) const = 0;
  // Rule 5 (rank-contract sources): rank r only lost communication.
  virtual std::optional<Diagnosis> comm_lost(int r) const { return std::nullopt; }
  // Rule 6, by verdict.
  virtual Diagnosis startup(const Watchdog& dog, int exits) const = 0;
  virtual Diagnosis deadline(const Watchdog& dog) const = 0;
  virtual Diagnosis timeout(const std::vector<Child>& kids, double timeout_s) const = 0;
  // Whether the ranks are in a wait that no progress can end (two ranks waiting for each other in
  // calls on different groups, group_wait.h): the loop then ends with the timeout verdict once no
  // rank has made progress for kDeadlockAfterS, before timeout_s.
  virtual bool deadlocked() const { return false; }
};

// How long a wait that no progress can end (ProgressSource::deadlocked) must last before the loop
// ends it: long enough that a rank still computing after an asynchronous call has made progress.
inline constexpr double kDeadlockAfterS = 10;

// lockstep's own ranks and programs, on the run's board; their statuses and logs under `dir`.
// `exit_finishes`: a clean exit is a finished rank (a program on its own backend, which
// publishes nothing on the board). The watched processes are ranks first_rank ..
// first_rank + count - 1 (count -1: every rank of the board), one node's ranks of a multi-node
// program; the other nodes' ranks are neither watched nor named.
std::unique_ptr<ProgressSource> board_source(const comm::Board& board, std::string dir, bool exit_finishes, int first_rank = 0,
                                             int count = -1);
// A system under test's ranks: each writes `outputs`/rank<r>/progress.json as it goes and
// done.json when it finishes; `who` names the system in messages, `log_suffix` ends its logs'
// names under `dir`.
std::unique_ptr<ProgressSource> file_source(int world_size, std::string outputs, std::string dir, std::string log_suffix,
                                            std::string who, double startup_timeout_s, double deadline_s);

// A process watched only for its exit (a probe of the interpreter): it never reports a start,
// so the watchdog's start-up bound is its time limit.
std::unique_ptr<ProgressSource> exit_source();

struct WatchEnd {
  Watchdog::Verdict verdict = Watchdog::Verdict::kWatch;  // kWatch: the run was cancelled
  bool cancelled() const { return verdict == Watchdog::Verdict::kWatch; }
};

// Polls `procs` and `source` until the watchdog's verdict, or until the run is cancelled
// (cancel.h); on cancel, every process is killed before it returns.
WatchEnd watch(RankProcesses& procs, ProgressSource& source, Watchdog& dog);

struct Judgement {
  std::optional<Diagnosis> diagnosis;
  std::string error;  // a harness or input problem (status error), "" if none
};
// The post-mortem judge (the rules above) over the reaped processes (their exit_time is when the
// launcher reaped them).
Judgement judge(const std::vector<Child>& kids, const ProgressSource& source, const Watchdog& dog, WatchEnd end,
                double timeout_s, const std::string& dir);



}  // namespace lockstep::launch
