#pragma once
// The watchdog's clock rules, apart from processes so that they can be tested with a fake
// clock. Both launchers (lockstep's own ranks, and a system under test) feed it what they see
// at each poll and act on its verdict.
//
// A run has two phases per rank. Start-up lasts from spawn to the rank's first collective
// (process start, loading libraries, building the graph); it has its own bound,
// startup_timeout_s, measured from spawn. A rank that has started is in the collective phase.
// The collective timeout (timeout_s of no progress) only runs while every live rank has
// started: a rank waiting in collective #0 for a peer that is still building its graph is not
// hung. The deadline bounds the whole run, whatever progress it makes.
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "harness/scenario/scenario.h"

namespace lockstep::launch {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  struct Limits {
    double startup_s = 120;
    double timeout_s = 60;
    double deadline_s = 900;
    double settle_s = 0.4;  // after a bad exit, how long the others get to report
    // After a bad exit, a live rank that is busy (its main thread ran or waited in a run queue
    // for at least kBusyShare of the last busy_window_s: importing, setting up or computing, not
    // in a call the board shows in flight) may be on its way to failing the same way: the settle
    // window waits for it, at most settle_grace_s after the watchdog saw the first bad exit. A
    // rank is watched for one whole window before it counts as idle, so with a rank alive the
    // window lasts about busy_window_s at the least. A rank blocked (in a collective or a
    // rendezvous, waiting for the rank that failed) is idle and not waited for; so is one whose
    // counter does not move (a kernel without schedstats, a shell that waits for the process).
    double busy_window_s = 0.5;
    double settle_grace_s = 10;
  };

  // What a launcher sees of one rank at one poll.
  struct Rank {
    bool exited = false;
    bool bad_exit = false;      // exited other than cleanly-and-finished
    bool started = false;       // issued its first collective (or reported progress)
    std::int64_t progress = 0;  // any counter that moves when the rank makes progress
    double engine_timeout_s = 0;  // the timeout the rank's program gave its own engine (0: none said)
    // The nanoseconds its main thread has run or waited to run (scheduled_ns), read while the
    // watchdog is settling and the rank is not in a call; -1: not read.
    std::int64_t cpu_ns = -1;
    // In a collective or point-to-point call the board shows in flight: waiting for its peers,
    // never busy, however its wait uses the CPU (a GPU rank spins in a stream synchronize).
    bool in_call = false;
  };

  // A program's engine gives up after its own timeout (init_process_group's `timeout`): the
  // watchdog's timeout is then at most this share of the shortest one, so that lockstep names the
  // stalled rank before the waiting ranks' engines raise.
  static constexpr double kEngineTimeoutShare = 0.75;
  // A rank is busy when its main thread ran or waited to run for this share of the wall time:
  // a runnable process does, however loaded the machine (waiting in the run queue counts).
  static constexpr double kBusyShare = 0.5;

  enum class Verdict {
    kWatch,           // keep polling
    kAllExited,       // every rank has exited
    kSettled,         // a rank ended badly and the others had the settle window to report
    kStartupTimeout,  // a rank has not started within startup_s of spawn
    kTimeout,         // every live rank has started, and none made progress for timeout_s
    kDeadline,        // the whole run took deadline_s
  };

  Watchdog(int world_size, Limits limits, Clock::time_point spawned);

  Verdict observe(const std::vector<Rank>& ranks, Clock::time_point now);

  // Whether a rank has ended badly: the settle window is open (or has closed).
  bool settling() const { return first_bad_.has_value(); }
  // When the settle window closed: the watchdog's first verdict after a bad exit (settled, all
  // exited, or a timeout or the deadline while it still waited for a busy rank). Every rank
  // reaped before it was seen by the watchdog inside the window; nullopt before such a verdict.
  std::optional<Clock::time_point> settle_until() const { return settle_until_; }

  // The live ranks that had not started at the last observation.
  const std::vector<int>& starting() const { return starting_; }
  // Seconds from spawn to the rank's start, or nullopt while it has not started.
  std::optional<double> startup_seconds(int rank) const;
  // Seconds without progress at the last observation (in the collective phase).
  double idle_seconds() const { return idle_s_; }
  // The timeout in force: limits().timeout_s, or less when a rank's program set a shorter engine
  // timeout (kEngineTimeoutShare of it).
  double timeout_s() const { return timeout_s_; }
  const Limits& limits() const { return limits_; }

 private:
  Verdict decide(const std::vector<Rank>& ranks, Clock::time_point now);
  // Whether a live rank is busy, to be waited for past settle_s (Limits::busy_window_s).
  bool still_coming(const std::vector<Rank>& ranks, Clock::time_point now);

  Limits limits_;
  Clock::time_point spawned_;
  std::vector<std::optional<Clock::time_point>> started_at_;
  std::int64_t last_total_ = -1;
  Clock::time_point last_change_;
  std::optional<Clock::time_point> first_bad_;
  std::optional<Clock::time_point> settle_until_;
  // Per rank, while settling: cpu_ns at the start of its current window, and whether it was busy
  // over the last whole one.
  struct Busy {
    std::int64_t ns = 0;
    std::optional<Clock::time_point> since;
    bool busy = true;
  };
  std::vector<Busy> busy_;
  std::vector<int> starting_;
  double idle_s_ = 0;
  double timeout_s_ = 0;
};

// The limits of a scenario's run.
Watchdog::Limits watchdog_limits(const scenario::Scenario& s);

}  // namespace lockstep::launch
