#pragma once
// Where the time goes between ranks (documented in scenarios/README.md, "Waits and stragglers"):
// from when each rank issued each collective and when it completed there, each rank's wait at each
// call, the call's skew, each rank's time between collectives (its compute), and the straggler
// rule. Pure functions over arrival times; no I/O (the launcher reads the traces:
// harness/launch/waits_check.h).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::rules {

// One collective as one rank saw it: its trace record's seq, call site and clocks (µs, one
// clock for every rank of the run).
struct Arrival {
  std::int64_t seq = 0;
  std::int64_t step = -1;
  std::string phase;  // the call site's phase: a workload phase, or a program's "file:line"
  std::string op;
  std::int64_t t_start_us = 0, t_end_us = 0;
};

// One call that every rank issued.
struct CallWait {
  std::int64_t seq = 0, step = -1;
  std::string phase, op;
  std::int64_t first_us = 0, last_us = 0;  // the first and the last rank's arrival
  int last_rank = 0;                       // the rank that arrived last (ties: the lowest)
  std::vector<std::int64_t> arrival_us;    // per rank
  std::vector<std::int64_t> end_us;        // per rank: when the call completed there
  std::vector<std::int64_t> wait_us;       // per rank: last_us - its arrival
  std::vector<std::int64_t> compute_us;    // per rank: since its previous analysed call ended (-1: none)
  std::int64_t skew_us() const { return last_us - first_us; }
  // The others' mean wait at this call (what the last rank cost each of them).
  double caused_us() const;
};

struct RankWaits {
  double wait_s = 0;     // its waits, summed
  double compute_s = 0;  // its time between collectives, summed
  int last = 0;          // calls at which it arrived last (with a skew above kMinSkewUs)
  double caused_s = 0;   // the others' mean wait at those calls, summed
  int led = 0;           // steps in which it caused the most wait (some wait)
  // The straggler rule's figures for this rank, whether or not it is named (StragglerLimits):
  double median_share = 0;  // the median step's share the others waited for it
  double explained_s = 0;   // its compute beyond the others' mean, at the calls it arrived last at
};

// One step (a run of consecutive calls, in seq order, with one step value: a value seen again
// after another is another step) and what each rank cost the others in it.
struct StepWait {
  std::int64_t step = -1;
  std::int64_t from_us = 0;  // its first call's first arrival
  std::int64_t to_us = 0;    // the next step's first arrival; the last step: its last completion
  std::vector<double> caused_us;  // per rank
  int leader = -1;                // the rank that caused the most wait (ties: the lowest); -1: none
  double duration_us() const { return static_cast<double>(to_us - from_us); }
};

// What a run's waits come to.
struct WaitReport {
  int world_size = 0;
  std::vector<CallWait> calls;  // in seq order
  std::vector<StepWait> steps;  // in seq order
  std::vector<RankWaits> ranks;
  double span_s = 0;            // first arrival to last completion over the analysed calls
  std::int64_t skipped = 0;     // calls not analysed: not on every rank, before step 0, the first
};

// A call whose skew is below this has no last rank (the clocks' and the scheduler's noise).
inline constexpr std::int64_t kMinSkewUs = 50;

// The analysis of `ranks` (one vector per rank, of its default-group collectives): the calls every
// rank issued, matched by seq, except calls of step < 0 (set-up, finalize) and the first such
// call (its wait is start-up skew). A rank's arrivals may come in any order (a trace has its calls
// in the order they completed). Throws std::invalid_argument when a rank has a seq twice or a
// call's ops differ between ranks.
WaitReport analyse_waits(const std::vector<std::vector<Arrival>>& ranks);

// The straggler rule's thresholds. A rank is the straggler when, over the analysed steps:
// it caused the most wait in `lead_share` of them or more, more often than chance (`lead_alpha`); in the median step the others waited
// for it `wait_share` of the step or more (a median, so that one long stall of a busy machine is
// not a straggler); the wait it caused in all is `dominance` times what any other rank
// caused, or more; and its longer compute explains `explained_share` of that wait.
struct StragglerLimits {
  double lead_share = 0.5;
  // ... and that it led so many steps is no chance: were every rank as likely to lead a step
  // (1 / world size), leading as many or more would have a probability (binomial) of at most
  // lead_alpha. On a busy machine each step's leader is close to a coin toss: at load average
  // 22-23, a clean program's rank led 7 and 10 of 12 steps (reports/evidence-waits-under-load.md).
  // With 2 ranks it takes 7 of 7 steps (so 7 steps at least), 11 of 12, 14 of 16, 19 of 24.
  double lead_alpha = 0.01;
  // The median step's share: at load average 20-22 on 2 cores, clean runs of a small DDP
  // program gave up to 0.29 (the scheduler giving one rank less CPU for the whole run), and the
  // stragglers of scenarios/stragglers and a program 0.43 and more
  // (reports/evidence-waits-under-load.md).
  double wait_share = 0.35;
  double dominance = 2.0;
  // Its own work must explain the wait: at the calls it arrived last at, its compute before the
  // call exceeded the others' mean by this share of the wait it caused there, or more (a clean
  // training run at load 20: 0.00; the partition-skew straggler: 0.48-0.89). A rank
  // that arrives last only because the previous collective released it later (a collective's
  // algorithm ends on some ranks first; on a busy machine the scheduler wakes them late) is
  // not slow (measured at load average 20: reports/evidence-waits-under-load.md).
  double explained_share = 0.3;
  int min_steps = 4;  // fewer analysed steps: no verdict
};

struct Straggler {
  int rank = -1;
  int led = 0, steps = 0;       // steps in which it caused the most wait, of the analysed ones
  double lead_p = 1;            // P(leading `led` or more of `steps` | each rank leads a step with 1 / world size)
  int last = 0, calls = 0;      // calls at which it arrived last, of the analysed ones
  double caused_s = 0;          // the others' mean wait it caused, in all
  double median_share = 0;      // the median step's share the others waited for it
  double explained_s = 0;       // its compute beyond the others' mean, at the calls it arrived last at
  std::string phase;            // the call site where it caused the most wait
  double phase_caused_s = 0;
  std::int64_t seq = -1, step = -1;  // the call where it caused the longest wait
  // "rank 1 kept the others waiting in 15 of 16 steps (41% of the median step); they waited
  // 1.52 s for it in all, most at train (1.50 s); it arrived last at 30 of 376 collectives;
  // compute per rank: rank 0 1.10 s, rank 1 2.96 s"
  std::string describe(const WaitReport& report) const;
};

// The straggler of `report` under `limits`, if any.
std::optional<Straggler> find_straggler(const WaitReport& report, const StragglerLimits& limits = {});

// The baseline metrics of a run's waits (reports/README.md, "The throughput rule"), one sample
// per analysed step: "waits/rank<r>/wait_s", rank r's waits summed over the step's calls, and
// "waits/skew_s", the step's calls' skews summed; beyond kMaxWaitSamples steps, consecutive
// steps are summed into one sample (as per-iteration CPU times are), so that a long run stays
// cheap to store and to judge. Judged with the throughput rule's wait options
// (harness/rules/stats.h). Empty when no step was analysed.
inline constexpr std::size_t kMaxWaitSamples = 64;
std::map<std::string, std::vector<double>> wait_samples(const WaitReport& report);

// "waits: rank 0 0.31 s, rank 1 0.02 s; compute: rank 0 1.2 s, rank 1 1.5 s; median skew 0.4 ms
// over 31 calls": one line for a person.
std::string summarize(const WaitReport& report);

}  // namespace lockstep::rules
