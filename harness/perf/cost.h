#pragma once
// What a rank's phases cost, measured where noise barely touches: the kernel's CPU time of the
// process (user + system, all threads), wall time, and, where perf_event_open offers them,
// hardware counters (instructions, cycles). A phase is the communicator's call-site phase; an
// iteration is one (phase, step) of it. Documented in scenarios/README.md, "Performance".
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::perf {

// Hardware counters of this process and the threads it starts after open() (inherit).
class Counters {
 public:
  // Opens instructions and cycles (user space). Events the kernel refuses are left closed and
  // availability() says why: "instructions,cycles" or "none: perf_event_open(instructions): ...".
  Counters();
  // For tests: opens the given (type, config) events, named by `names`.
  Counters(const std::vector<std::pair<std::uint32_t, std::uint64_t>>& events, std::vector<std::string> names);
  ~Counters();
  Counters(const Counters&) = delete;
  Counters& operator=(const Counters&) = delete;

  bool available() const { return !fds_.empty(); }
  const std::string& availability() const { return availability_; }
  const std::vector<std::string>& names() const { return names_; }
  // Current values, one per name; empty when unavailable.
  std::vector<double> read() const;

 private:
  std::vector<int> fds_;
  std::vector<std::string> names_;
  std::string availability_;
};

// One reading of the clocks: wall (steady), process CPU (CLOCK_PROCESS_CPUTIME_ID: user +
// system of every thread), user and system separately (getrusage), and the counters.
struct Reading {
  double wall_s = 0, cpu_s = 0, user_s = 0, sys_s = 0;
  double main_cpu_s = 0;  // the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID)
  std::vector<double> counters;
};
Reading read_clocks(const Counters* counters);

// Burns `seconds` of this thread's CPU time (CLOCK_THREAD_CPUTIME_ID) in arithmetic.
void burn_cpu(double seconds);

// [[inject]] kind = "slowdown": the phase (or every phase) on one rank (or every rank) does
// `percent`% more CPU work per iteration: its main thread burns that share of the CPU time it
// spent in the iteration.
struct Slowdown {
  double percent = 0;
  std::string phase;  // "" every phase
  int rank = -1;      // -1 every rank
  bool applies(const std::string& phase_name, int rank_id) const;
  std::string describe() const;  // "10% on phase train, rank 1"
};
// (scenario/injections.h parses a scenario's [[inject]] table of kind slowdown.)
// Parses the CLI form PERCENT[:PHASE[:RANK]] ("10", "10:train", "10::1", "10:train:1"); throws
// InputError naming `what` and the value.
Slowdown parse_slowdown_flag(const std::string& text, const std::string& what);

// The totals of one phase on one rank.
struct PhaseCost {
  std::int64_t iterations = 0;  // distinct steps >= 0 seen in this phase
  double wall_s = 0, cpu_s = 0, user_s = 0, sys_s = 0;
  double main_cpu_s = 0;  // the rank's main thread alone (the workload; not the engines' threads)
  std::vector<double> counters;  // totals, one per Counters::names(); empty when unavailable
  // Per iteration (the first excluded as warm-up, and the one the run ends in as its tail;
  // consecutive iterations summed so that there are at most kMaxSamples): CPU seconds, and
  // each counter.
  std::vector<double> cpu_samples, main_cpu_samples;
  std::vector<std::vector<double>> counter_samples;
};
inline constexpr int kMaxSamples = 64;
// A (phase, step) shorter than this is a label changed twice in a row, not an iteration.
inline constexpr double kMinIterationWallS = 50e-6;

// Attributes the rank's cost to (phase, step) as the communicator's call site changes. Not
// thread-safe: called from the rank's main thread.
class PhaseClock {
 public:
  PhaseClock(const Counters* counters, std::vector<Slowdown> slowdowns, int rank);
  // The call site changed to (phase, step): the time since the previous change is charged to
  // the previous site, after burning the slowdown that applies to it.
  void mark(const std::string& phase, std::int64_t step);
  // The workload returned: the site it ended in was closed by the end of the workload, not by
  // its next iteration, and holds whatever the rank did after its last collective (a final
  // check of the whole table). It is charged as usual but is not a sample (its tail).
  void end_workload() {
    if (!tail_) tail_ = site_;
  }
  // Charges the current site and returns the phases' totals. Without end_workload(), the
  // current site is the tail.
  std::map<std::string, PhaseCost> finish();
  bool slowdown_fired() const { return fired_; }

 private:
  struct Site {
    std::string phase;
    std::int64_t step;
  };
  struct Acc {
    double wall_s = 0, cpu_s = 0, user_s = 0, sys_s = 0, main_cpu_s = 0;
    std::vector<double> counters;
  };
  void charge();
  const Counters* counters_;
  std::vector<Slowdown> slowdowns_;
  int rank_;
  Site site_{"setup", -1};
  std::optional<Site> tail_;
  Reading last_;
  std::vector<std::pair<Site, Acc>> acc_;  // in order of first appearance
  std::map<std::pair<std::string, std::int64_t>, std::size_t> index_;
  bool fired_ = false;
};

// One phase's cost on one rank as the rank reports it (its status's perf.phases.<phase>).
struct PhaseReport {
  std::int64_t iterations = 0;
  double wall_s = 0, cpu_s = 0, main_cpu_s = 0, user_s = 0, sys_s = 0;
  std::vector<double> cpu_samples, main_cpu_samples;                 // 6 significant digits
  std::map<std::string, double> counters;                            // by Counters::names()
  std::map<std::string, std::vector<double>> counter_samples;        // by Counters::names()
};
// What a rank reports of its cost (its status's perf; harness/rank/status.h reads and writes it).
struct RankCost {
  std::string availability;            // Counters::availability()
  std::vector<std::string> counters;   // Counters::names()
  std::map<std::string, PhaseReport> phases;
  bool slowdown_fired = false;         // an injected slowdown burned time on this rank
};
RankCost report(const std::map<std::string, PhaseCost>& phases, const Counters& counters, bool slowdown_fired);

}  // namespace lockstep::perf
