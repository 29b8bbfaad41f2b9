// The wait analysis and the straggler rule (harness/rules/waits.h) on hand-made arrival times:
// every expected value below is worked out by hand from the arrivals written here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "harness/core/error.h"
#include "harness/launch/waits_check.h"
#include "harness/launch/waits_html.h"
#include "harness/rules/waits.h"
#include "harness/trace/record.h"
#include "tests/test_util.h"

namespace lockstep::rules {
namespace {

Arrival at(std::int64_t seq, std::int64_t step, std::int64_t start, std::int64_t end, std::string phase = "train",
           std::string op = "all_reduce") {
  Arrival a;
  a.seq = seq;
  a.step = step;
  a.phase = std::move(phase);
  a.op = std::move(op);
  a.t_start_us = start;
  a.t_end_us = end;
  return a;
}

// Three ranks, a start-up call (seq 0, dropped) and two calls of steps 0 and 1.
std::vector<std::vector<Arrival>> three_ranks() {
  return {
      {at(0, 0, 0, 100), at(1, 0, 1000, 1400), at(2, 1, 2000, 2600)},
      {at(0, 0, 90, 100), at(1, 0, 1300, 1400), at(2, 1, 2500, 2600)},
      {at(0, 0, 50, 100), at(1, 0, 1100, 1400), at(2, 1, 2100, 2650)},
  };
}

TEST(WaitsTest, WaitSkewAndComputePerCallFromArrivals) {
  const WaitReport w = analyse_waits(three_ranks());
  ASSERT_EQ(w.world_size, 3);
  ASSERT_EQ(w.calls.size(), 2u);
  EXPECT_EQ(w.skipped, 1);  // seq 0: start-up skew
  const CallWait& c1 = w.calls[0];
  EXPECT_EQ(c1.seq, 1);
  EXPECT_EQ(c1.first_us, 1000);
  EXPECT_EQ(c1.last_us, 1300);
  EXPECT_EQ(c1.skew_us(), 300);
  EXPECT_EQ(c1.last_rank, 1);
  EXPECT_EQ(c1.wait_us, (std::vector<std::int64_t>{300, 0, 200}));
  EXPECT_EQ(c1.compute_us, (std::vector<std::int64_t>{-1, -1, -1}));  // the first analysed call
  EXPECT_DOUBLE_EQ(c1.caused_us(), 250.0);                          // (300 + 200) / 2
  const CallWait& c2 = w.calls[1];
  EXPECT_EQ(c2.wait_us, (std::vector<std::int64_t>{500, 0, 400}));
  EXPECT_EQ(c2.compute_us, (std::vector<std::int64_t>{600, 1100, 700}));  // arrival - end of seq 1
  EXPECT_DOUBLE_EQ(c2.caused_us(), 450.0);
  // Per rank: waits 300+500, 0, 200+400 µs; rank 1 last at both, causing 250 + 450 µs.
  EXPECT_NEAR(w.ranks[0].wait_s, 800e-6, 1e-12);
  EXPECT_NEAR(w.ranks[1].wait_s, 0, 1e-12);
  EXPECT_NEAR(w.ranks[2].wait_s, 600e-6, 1e-12);
  EXPECT_NEAR(w.ranks[1].compute_s, 1100e-6, 1e-12);
  EXPECT_EQ(w.ranks[1].last, 2);
  EXPECT_EQ(w.ranks[0].last, 0);
  EXPECT_NEAR(w.ranks[1].caused_s, 700e-6, 1e-12);
  EXPECT_NEAR(w.span_s, (2650 - 1000) * 1e-6, 1e-12);  // first arrival to the last completion
}

TEST(WaitsTest, SetUpCallsAndCallsMissingOnARankAreNotAnalysed) {
  std::vector<std::vector<Arrival>> ranks = {
      {at(0, -1, 0, 10, "setup"), at(1, 0, 20, 30), at(2, 0, 40, 50), at(3, 1, 60, 70), at(4, -1, 80, 90, "finalize")},
      {at(0, -1, 0, 10, "setup"), at(1, 0, 20, 30), at(2, 0, 40, 50), at(4, -1, 80, 90, "finalize")},
  };
  const WaitReport w = analyse_waits(ranks);
  // Steps >= 0 on both ranks: 1 and 2; 1 is the first (dropped): only 2 is analysed.
  ASSERT_EQ(w.calls.size(), 1u);
  EXPECT_EQ(w.calls[0].seq, 2);
  EXPECT_EQ(w.skipped, 4);  // 0, 1, 3 and 4 of the five seqs seen
}

TEST(WaitsTest, TiesGoToTheLowestRankAndTinySkewHasNoLastRank) {
  std::vector<std::vector<Arrival>> ranks = {
      {at(0, 0, 0, 1), at(1, 0, 1000, 2000), at(2, 0, 3000, 4000)},
      {at(0, 0, 0, 1), at(1, 0, 900, 2000), at(2, 0, 3000 - (kMinSkewUs - 1), 4000)},
      {at(0, 0, 0, 1), at(1, 0, 1000, 2000), at(2, 0, 3000, 4000)},
  };
  const WaitReport w = analyse_waits(ranks);
  ASSERT_EQ(w.calls.size(), 2u);
  EXPECT_EQ(w.calls[0].last_rank, 0);   // ranks 0 and 2 tie at 1000
  EXPECT_EQ(w.calls[1].last_rank, -1);  // a skew of kMinSkewUs - 1
  EXPECT_EQ(w.calls[1].caused_us(), 0);
  EXPECT_EQ(w.ranks[0].last, 1);
  EXPECT_EQ(w.ranks[2].last, 0);
}

TEST(WaitsTest, CallsCompletedOutOfOrderAreTakenInSeqOrder) {
  // Rank 0 waited for #2 before #1 (async work): its trace has #2 first.
  const WaitReport w = analyse_waits({{at(0, 0, 0, 1), at(2, 0, 300, 400), at(1, 0, 100, 500)},
                                      {at(0, 0, 0, 1), at(1, 0, 150, 200), at(2, 0, 250, 400)}});
  ASSERT_EQ(w.calls.size(), 2u);
  EXPECT_EQ(w.calls[0].seq, 1);
  EXPECT_EQ(w.calls[0].wait_us, (std::vector<std::int64_t>{50, 0}));
  EXPECT_EQ(w.calls[1].wait_us, (std::vector<std::int64_t>{0, 50}));
}

TEST(WaitsTest, RefusesTracesThatDoNotLineUp) {
  EXPECT_THROW(analyse_waits({{at(0, 0, 0, 1), at(1, 0, 5, 6), at(1, 0, 7, 8)}, {at(0, 0, 0, 1)}}), std::invalid_argument);
  EXPECT_THROW(analyse_waits({{at(0, 0, 0, 1), at(1, 0, 5, 6)}, {at(0, 0, 0, 1), at(1, 0, 5, 6, "train", "broadcast")}}),
               std::invalid_argument);
}

// `n` steps of one call; `late` (µs) is how much later than the others rank `slow` arrives at
// each, and each step computes 1000 µs.
std::vector<std::vector<Arrival>> steps(int world, int n, int slow, std::int64_t late, std::string phase = "train") {
  std::vector<std::vector<Arrival>> ranks(static_cast<std::size_t>(world));
  for (int s = 0; s <= n; ++s) {
    const std::int64_t t0 = s * (1000 + late + 100);
    for (int r = 0; r < world; ++r) {
      const std::int64_t start = t0 + (r == slow ? late : 0);
      ranks[static_cast<std::size_t>(r)].push_back(at(s, s, start, t0 + late + 100, phase));
    }
  }
  return ranks;
}

TEST(WaitsTest, NamesTheRankTheOthersWaitForWithItsPhase) {
  // Rank 2 arrives 3000 µs late at each of 10 analysed calls: the others wait 3000 µs each time.
  const WaitReport w = analyse_waits(steps(4, 10, 2, 3000, "sample"));
  ASSERT_EQ(w.calls.size(), 10u);
  ASSERT_EQ(w.steps.size(), 10u);
  // A step runs from its arrival to the next step's (4100 µs); the last to its end (3100 µs).
  EXPECT_EQ(w.steps[0].duration_us(), 4100);
  EXPECT_EQ(w.steps[9].duration_us(), 3100);
  EXPECT_EQ(w.steps[0].leader, 2);
  EXPECT_EQ(w.ranks[2].led, 10);
  const auto s = find_straggler(w);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 2);
  EXPECT_EQ(s->led, 10);
  EXPECT_EQ(s->steps, 10);
  EXPECT_EQ(s->last, 10);
  EXPECT_EQ(s->calls, 10);
  EXPECT_NEAR(s->caused_s, 10 * 3000e-6, 1e-9);
  EXPECT_EQ(s->phase, "sample");
  // Nine steps of 3000/4100 and one of 3000/3100: the median is 3000/4100.
  EXPECT_NEAR(s->median_share, 3000.0 / 4100.0, 1e-9);
  // The span: from step 1's first arrival (4100) to step 10's end (41000 + 3000 + 100).
  EXPECT_NEAR(w.span_s, 40000e-6, 1e-9);
  const std::string text = s->describe(w);
  EXPECT_NE(text.find("rank 2 kept the others waiting in 10 of 10 steps (73% of the median step)"), std::string::npos) << text;
  EXPECT_NE(text.find("most at sample"), std::string::npos) << text;
}

TEST(WaitsTest, SmallWaitsAreNoStraggler) {
  // 200 µs late per 1300 µs step: 15% of the median step, below the 20% default; with a limit
  // of 10%
  // the same run has one.
  const WaitReport w = analyse_waits(steps(2, 10, 1, 200));
  EXPECT_FALSE(find_straggler(w).has_value());
  StragglerLimits tight;
  tight.wait_share = 0.1;
  const auto s = find_straggler(w, tight);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 1);
}

TEST(WaitsTest, OneCallAStepIsEnoughAndOneLongStallIsNot) {
  // Each 10 ms step: a first call where rank 1 arrives 3500 µs late, then 9 calls 400 µs apart
  // where a rank arrives 100 µs late (rank 0 at calls 1, 2, 3, 5, 7, 9; rank 1 at 4, 6, 8).
  // Rank 1 arrives last at 4 of 10 calls but keeps the others waiting in every step.
  auto build = [](bool stall_only) {
    std::vector<std::vector<Arrival>> ranks(2);
    std::int64_t seq = 0;
    for (int s = 0; s <= 12; ++s) {
      const std::int64_t t0 = s * 10000;
      for (int k = 0; k < 10; ++k, ++seq) {
        const std::int64_t t = k == 0 ? t0 : t0 + 4500 + k * 400;
        const int late = k == 0 || (k % 2 == 0 && k != 2) ? 1 : 0;
        const std::int64_t by = k > 0 ? 100 : !stall_only ? 3500 : s == 3 ? 4000 : 0;
        for (int r = 0; r < 2; ++r) ranks[static_cast<std::size_t>(r)].push_back(at(seq, s, t + (r == late ? by : 0), t + by + 10));
      }
    }
    return ranks;
  };
  const WaitReport w = analyse_waits(build(false));
  ASSERT_EQ(w.steps.size(), 13u);
  EXPECT_EQ(w.ranks[1].last, 12 * 4 + 3);  // step 0 lost its first call (seq 0)
  EXPECT_EQ(w.calls.size(), 129u);
  // Step 0 without its first call: rank 0 caused 600 µs, rank 1 300: rank 0 leads it.
  EXPECT_EQ(w.steps[0].leader, 0);
  EXPECT_EQ(w.steps[1].caused_us[1], 3800);
  const auto s = find_straggler(w);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->led, 12);
  EXPECT_NEAR(s->median_share, 0.38, 1e-9);  // 3800 of 10000 µs
  // One 4 ms stall of rank 1 in step 3 and 100 µs turns otherwise: rank 0 leads 12 steps with
  // 6% of each, rank 1 one: no straggler.
  const WaitReport stall = analyse_waits(build(true));
  EXPECT_EQ(stall.ranks[0].led, 12);
  EXPECT_EQ(stall.ranks[1].led, 1);
  EXPECT_FALSE(find_straggler(stall).has_value());
}

TEST(WaitsTest, TheMedianStepKeepsOneLongStallFromMakingAStraggler) {
  // Rank 1 arrives last in every step, by 50 µs of a 10000 µs step (0.5%), and once by 8000 µs:
  // it leads every step and causes 10 times what rank 0 does (nothing), but the median step's
  // share is 0.5%: no straggler. With the stall in every step, it is one.
  auto build = [](bool every_step) {
    std::vector<std::vector<Arrival>> ranks(2);
    for (int s = 0; s <= 10; ++s) {
      const std::int64_t t0 = s * 10000;
      const std::int64_t late = every_step || s == 4 ? 8000 : 50;
      ranks[0].push_back(at(s, s, t0, t0 + late + 10));
      ranks[1].push_back(at(s, s, t0 + late, t0 + late + 10));
    }
    return ranks;
  };
  const WaitReport once = analyse_waits(build(false));
  EXPECT_EQ(once.ranks[1].led, 10);
  EXPECT_EQ(once.ranks[0].caused_s, 0);
  EXPECT_FALSE(find_straggler(once).has_value());
  const auto every = find_straggler(analyse_waits(build(true)));
  ASSERT_TRUE(every.has_value());
  EXPECT_EQ(every->rank, 1);
}

TEST(WaitsTest, AStepValueSeenAgainIsAnotherStep) {
  // Steps 0, 1, 2, then a final evaluation labelled step 0 again: four steps, the last its own.
  std::vector<std::vector<Arrival>> ranks(2);
  const std::int64_t step_of[] = {0, 0, 1, 2, 0};
  for (int k = 0; k < 5; ++k) {
    for (auto& r : ranks) r.push_back(at(k, step_of[k], k * 1000, k * 1000 + 10));
  }
  const WaitReport w = analyse_waits(ranks);
  ASSERT_EQ(w.steps.size(), 4u);  // seq 0 dropped: step 0 (seq 1), 1, 2, 0 (seq 4)
  EXPECT_EQ(w.steps[0].step, 0);
  EXPECT_EQ(w.steps[3].step, 0);
  EXPECT_EQ(w.steps[0].duration_us(), 1000);  // seq 1 to seq 2's arrival, not to seq 4
  EXPECT_EQ(w.steps[3].duration_us(), 10);
}

TEST(WaitsTest, NoiseThatFallsOnEveryRankIsNoStraggler) {
  // Two ranks, each late by 3000 µs at alternate calls: half the calls each, the same wait caused.
  std::vector<std::vector<Arrival>> ranks(2);
  for (int s = 0; s <= 10; ++s) {
    const std::int64_t t0 = s * 5000;
    const int slow = s % 2;
    for (int r = 0; r < 2; ++r) ranks[static_cast<std::size_t>(r)].push_back(at(s, s, t0 + (r == slow ? 3000 : 0), t0 + 3100));
  }
  const WaitReport w = analyse_waits(ranks);
  EXPECT_EQ(w.ranks[0].last, 5);
  EXPECT_EQ(w.ranks[1].last, 5);
  EXPECT_FALSE(find_straggler(w).has_value());
  // Each leads half the steps (lead_share), with 60% of each step it leads (a median share of
  // 30%): chance (5 of 10 is a coin's P = 0.62), dominance and the share say no.
  StragglerLimits no_dominance;
  no_dominance.dominance = 1.0;
  no_dominance.wait_share = 0.2;
  EXPECT_FALSE(find_straggler(w, no_dominance).has_value());
  no_dominance.lead_alpha = 1.0;
  EXPECT_TRUE(find_straggler(w, no_dominance).has_value());
}

TEST(WaitsTest, TooFewCallsOrOneRankHaveNoVerdict) {
  EXPECT_FALSE(find_straggler(analyse_waits(steps(2, 3, 1, 3000))).has_value());  // 3 steps < min_steps
  // 6 of 6 steps is a coin's 1/64 > lead_alpha (0.01); 7 of 7 is 1/128.
  EXPECT_FALSE(find_straggler(analyse_waits(steps(2, 6, 1, 3000))).has_value());
  const auto seven = find_straggler(analyse_waits(steps(2, 7, 1, 3000)));
  ASSERT_TRUE(seven.has_value());
  EXPECT_NEAR(seven->lead_p, 1.0 / 128, 1e-12);
  // With 4 ranks each leads a step with 1/4: 4 of 4 is 1/256.
  const auto four = find_straggler(analyse_waits(steps(4, 4, 1, 3000)));
  ASSERT_TRUE(four.has_value());
  EXPECT_NEAR(four->lead_p, 1.0 / 256, 1e-12);
  EXPECT_FALSE(find_straggler(analyse_waits(steps(1, 10, 0, 3000))).has_value());
}

TEST(WaitsTest, LeadingMoreStepsThanChanceIsRequired) {
  // 12 steps of 2 ranks; rank 1 arrives 4000 µs late in the first `led` of them, rank 0 100 µs
  // late in the rest. P(X >= 11 | n = 12, p = 1/2) = (12 + 1) / 4096; >= 10: 79 / 4096.
  auto build = [](int led) {
    std::vector<std::vector<Arrival>> ranks(2);
    for (int s = 0; s <= 12; ++s) {
      const std::int64_t t0 = s * 10000;
      const int late = s >= 1 && s <= led ? 1 : 0;
      const std::int64_t by = late ? 4000 : 100;
      for (int r = 0; r < 2; ++r) ranks[static_cast<std::size_t>(r)].push_back(at(s, s, t0 + (r == late ? by : 0), t0 + by + 10));
    }
    return ranks;
  };
  const auto eleven = find_straggler(analyse_waits(build(11)));
  ASSERT_TRUE(eleven.has_value());
  EXPECT_EQ(eleven->led, 11);
  EXPECT_NEAR(eleven->lead_p, 13.0 / 4096, 1e-12);
  const WaitReport ten = analyse_waits(build(10));
  EXPECT_EQ(ten.ranks[1].led, 10);
  EXPECT_FALSE(find_straggler(ten).has_value());  // 79 / 4096 = 0.019 > 0.01
  StragglerLimits loose;
  loose.lead_alpha = 0.05;
  EXPECT_TRUE(find_straggler(ten, loose).has_value());
}

TEST(WaitsTest, ARankReleasedLateByTheLastCallIsNoStraggler) {
  // Both ranks compute 500 µs between calls, but every call ends 400 µs later on rank 1 (rank 0
  // at 1000k + 500, rank 1 at 1000k + 900): rank 1 arrives 400 µs after rank 0 at every call
  // (40% of each 1 ms step) without doing more work. What a busy machine's scheduler does.
  std::vector<std::vector<Arrival>> ranks(2);
  for (int k = 0; k < 8; ++k) {
    ranks[0].push_back(at(k, k, 1000 * k, 1000 * k + 500));
    ranks[1].push_back(at(k, k, 1000 * k + 400, 1000 * k + 900));
  }
  const WaitReport w = analyse_waits(ranks);
  ASSERT_EQ(w.calls.size(), 7u);
  EXPECT_EQ(w.ranks[1].led, 7);
  EXPECT_EQ(w.calls[3].compute_us, (std::vector<std::int64_t>{500, 500}));
  // The rule's figures, kept for every rank: 400 of each 1000 µs step; nothing explained.
  EXPECT_NEAR(w.ranks[1].median_share, 0.4, 1e-12);
  EXPECT_DOUBLE_EQ(w.ranks[1].explained_s, 0.0);
  EXPECT_DOUBLE_EQ(w.ranks[0].median_share, 0.0);
  EXPECT_FALSE(find_straggler(w).has_value());
  // Without the explanation condition the other three would name it.
  StragglerLimits no_explanation;
  no_explanation.explained_share = 0;
  const auto s = find_straggler(w, no_explanation);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 1);
  EXPECT_DOUBLE_EQ(s->explained_s, 0.0);
  // The same lateness from 400 µs more compute on rank 1 (its calls end with rank 0's) is one.
  for (int k = 0; k < 8; ++k) ranks[1][static_cast<std::size_t>(k)].t_end_us = 1000 * k + 500;
  const WaitReport busy = analyse_waits(ranks);
  EXPECT_EQ(busy.calls[3].compute_us, (std::vector<std::int64_t>{500, 900}));
  const auto t = find_straggler(busy);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->rank, 1);
  // 400 µs more at each analysed call but the first (seq 1), which has no compute before it.
  EXPECT_NEAR(t->explained_s, 6 * 400e-6, 1e-12);
}

TEST(WaitsTest, BaselineSamplesAreEachRanksWaitAndTheSkewPerStep) {
  // three_ranks(): step 0 is seq 1 (waits 300, 0, 200 µs; skew 300), step 1 is seq 2 (waits
  // 500, 0, 400 µs; arrivals 2000, 2500, 2100: skew 500).
  const auto samples = wait_samples(analyse_waits(three_ranks()));
  ASSERT_EQ(samples.size(), 4u);
  const auto near = [](const std::vector<double>& got, std::vector<double> want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  };
  near(samples.at("waits/rank0/wait_s"), {300e-6, 500e-6});
  near(samples.at("waits/rank1/wait_s"), {0, 0});
  near(samples.at("waits/rank2/wait_s"), {200e-6, 400e-6});
  near(samples.at("waits/skew_s"), {300e-6, 500e-6});
  // Two calls of one step add up; no analysed call, no sample.
  const auto two = wait_samples(analyse_waits({{at(0, 0, 0, 10), at(1, 3, 100, 900), at(2, 3, 1000, 1900)},
                                               {at(0, 0, 0, 10), at(1, 3, 700, 900), at(2, 3, 1800, 1900)}}));
  near(two.at("waits/rank0/wait_s"), {600e-6 + 800e-6});
  near(two.at("waits/skew_s"), {1400e-6});
  EXPECT_TRUE(wait_samples(analyse_waits({{at(0, 0, 0, 10)}, {at(0, 0, 0, 10)}})).empty());
  // 130 steps (131 calls, the first dropped): 3 steps to a sample, 44 samples, the last of 1
  // step; rank 0 waits 100 µs at every call.
  std::vector<std::vector<Arrival>> many(2);
  for (int k = 0; k <= 130; ++k) {
    many[0].push_back(at(k, k, 1000 * k, 1000 * k + 200));
    many[1].push_back(at(k, k, 1000 * k + 100, 1000 * k + 200));
  }
  const auto folded = wait_samples(analyse_waits(many)).at("waits/rank0/wait_s");
  ASSERT_EQ(folded.size(), 44u);
  EXPECT_NEAR(folded.front(), 300e-6, 1e-12);
  EXPECT_NEAR(folded.back(), 100e-6, 1e-12);
}

TEST(WaitsTest, SummaryNamesEveryRank) {
  const std::string s = summarize(analyse_waits(three_ranks()));
  EXPECT_NE(s.find("rank 0 0.00 s"), std::string::npos) << s;
  EXPECT_NE(s.find("rank 2"), std::string::npos) << s;
  EXPECT_NE(s.find("over 2 collectives"), std::string::npos) << s;
  EXPECT_NE(s.find("median skew 0.40 ms"), std::string::npos) << s;  // skews 300 and 500 µs
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(WaitsHtmlTest, TheTimelineShowsTheMedianLongStep) {
  // One call a step, at these times on both ranks; step 0's is the first call (dropped). Steps
  // 1..5 last 5000, 3000, 2000, 4000 µs and 10 (the last: to its end): the median is step 2's.
  const std::int64_t t[] = {0, 1000, 6000, 9000, 11000, 15000};
  std::vector<std::vector<Arrival>> ranks(2);
  for (int k = 0; k < 6; ++k) {
    for (auto& r : ranks) r.push_back(at(k, k, t[k], t[k] + 10));
  }
  const WaitReport w = analyse_waits(ranks);
  ASSERT_EQ(w.steps.size(), 5u);
  EXPECT_EQ(w.steps[0].duration_us(), 5000);
  EXPECT_EQ(w.steps[4].duration_us(), 10);
  const int rep = launch::representative_step(w);
  ASSERT_EQ(rep, 1);
  EXPECT_EQ(w.steps[1].step, 2);
  EXPECT_EQ(launch::representative_step(WaitReport{}), -1);
}

TEST(WaitsHtmlTest, ThePageHasTheVerdictTheTimelineAndOneCellPerRankAndCall) {
  const WaitReport w = analyse_waits(steps(3, 10, 2, 3000, "<sample>"));
  const auto s = find_straggler(w);
  ASSERT_TRUE(s.has_value());
  const std::string html = launch::waits_html("perf.x & y", w, s);
  EXPECT_NE(html.find("Waits at collectives: perf.x &amp; y"), std::string::npos);
  EXPECT_NE(html.find("rank 2 kept the others waiting in 10 of 10 steps"), std::string::npos);
  // A phase from the run is text, never markup.
  EXPECT_EQ(html.find("<sample>"), std::string::npos);
  EXPECT_NE(html.find("&lt;sample&gt;"), std::string::npos);
  // The heatmap: one cell per rank and call (10 calls, 3 ranks; " waited " twice more: the
  // verdict's "they waited" and the table's "others waited for it"); the timeline of one step of one call: the step starts at the first arrival,
  // so only rank 2 computes in it, ranks 0 and 1 wait, and every rank has its in-call bar.
  EXPECT_EQ(count(html, " waited "), 30u + 2u);
  EXPECT_EQ(count(html, "computes "), 1u);
  EXPECT_EQ(count(html, "fill=\"#fc8d59\""), 2u);
  EXPECT_NE(html.find("rank 0 waits 3.00 ms at #"), std::string::npos);
  // 900 calls: three to a column, 300 columns.
  const std::string many = launch::waits_html("m", analyse_waits(steps(2, 900, 1, 3000)), std::nullopt);
  EXPECT_NE(many.find("900 collectives, 3 to a column"), std::string::npos);
  EXPECT_EQ(count(many, " waited "), 600u + 1u);  // and the table's header
  EXPECT_NE(many.find("<b>Straggler:</b> none"), std::string::npos);
}

// The launcher's side: the traces a run leaves, read, analysed and turned into evidence.
class WaitsCheckTest : public ::testing::Test {
 protected:
  // rank<r>.trace.jsonl for the arrivals of steps(2, 10, 1, 3000), plus `extra` lines.
  void write_traces(const std::vector<std::string>& extra0 = {}) {
    const auto ranks = steps(2, 10, 1, 3000);
    for (int r = 0; r < 2; ++r) {
      std::ofstream out(dir_ / ("rank" + std::to_string(r) + ".trace.jsonl"));
      for (const Arrival& a : ranks[static_cast<std::size_t>(r)]) {
        trace::Record rec;
        rec.rank = r;
        rec.seq = a.seq;
        rec.kind = std::string(trace::kCollective);
        rec.op = a.op;
        rec.phase = a.phase;
        rec.step = a.step;
        rec.t_start_us = a.t_start_us;
        rec.t_end_us = a.t_end_us;
        out << trace::to_line(rec);
      }
      if (r == 0) {
        for (const auto& line : extra0) out << line << "\n";
      }
    }
  }
  scenario::Scenario scenario(std::optional<double> share) {
    scenario::Scenario s;
    s.name = "stragglers.hand";
    s.world_size = 2;
    s.straggler_share = share;
    return s;
  }
  test::TempDir dir_{"lockstep_waits"};
};

TEST_F(WaitsCheckTest, WithoutAGateTheVerdictIsANoteAndThePagesAreWritten) {
  write_traces();
  report::ScenarioResult res;
  std::optional<Diagnosis> d;
  launch::check_waits(scenario(std::nullopt), dir_.path(), res, d);
  EXPECT_FALSE(d.has_value());
  ASSERT_EQ(res.notes.size(), 1u);
  EXPECT_NE(res.notes[0].find("straggler: rank 1 kept the others waiting in 10 of 10 steps"), std::string::npos) << res.notes[0];
  EXPECT_NE(res.waits.find("over 10 collectives"), std::string::npos) << res.waits;
  const auto j = nlohmann::json::parse(test::read_file(dir_ / "waits.json"));
  EXPECT_EQ(j["format"], "lockstep.waits");
  EXPECT_EQ(j["straggler"]["rank"], 1);
  EXPECT_EQ(j["calls"].size(), 10u);
  EXPECT_EQ(j["calls"][0]["wait_us"], (std::vector<std::int64_t>{3000, 0}));
  EXPECT_NE(test::read_file(dir_ / "waits.html").find("rank 1 kept the others waiting"), std::string::npos);
}

TEST_F(WaitsCheckTest, WithAGateItIsTheDiagnosisButNeverReplacesAnother) {
  write_traces();
  report::ScenarioResult res;
  std::optional<Diagnosis> d;
  launch::check_waits(scenario(0.2), dir_.path(), res, d);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kStraggler);
  EXPECT_EQ(d->rank, 1);
  EXPECT_GE(d->step, 1);
  EXPECT_TRUE(res.notes.empty());
  // A share above what rank 1 costs (73% of the median step): no straggler.
  report::ScenarioResult quiet;
  std::optional<Diagnosis> none;
  launch::check_waits(scenario(0.8), dir_.path(), quiet, none);
  EXPECT_FALSE(none.has_value());
  EXPECT_TRUE(quiet.straggler.empty());
  // A diagnosis already there stays.
  std::optional<Diagnosis> earlier = Diagnosis{DiagnosisKind::kResultMismatch, "x", 0, -1, -1};
  report::ScenarioResult other;
  launch::check_waits(scenario(0.2), dir_.path(), other, earlier);
  EXPECT_EQ(earlier->kind, DiagnosisKind::kResultMismatch);
}

TEST_F(WaitsCheckTest, OnlyCompletedDefaultGroupCollectivesAreLinedUp) {
  // On rank 0 only: a send, a call on another group and a failed call at seqs the other rank
  // does not have, with ops that would not line up. None of them is an arrival.
  write_traces({R"({"rank":0,"seq":3,"kind":"p2p","op":"send","step":3,"t_start_us":1,"t_end_us":2})",
                R"({"rank":0,"seq":50,"kind":"collective","op":"broadcast","group":[0,1],"step":3,"t_start_us":1,"t_end_us":2})",
                R"({"rank":0,"seq":51,"kind":"collective","op":"barrier","step":3,"t_start_us":1,"error":"failed"})"});
  const auto arrivals = launch::read_arrivals(dir_.path(), 2);
  ASSERT_TRUE(arrivals.has_value());
  EXPECT_EQ((*arrivals)[0].size(), 11u);
  EXPECT_EQ((*arrivals)[1].size(), 11u);
  // A torn line is named with its file and line; without a gate it does not stop the run (the
  // launcher notes it), with one it is the run's error (board_kinds.cpp).
  { std::ofstream(dir_ / "rank1.trace.jsonl", std::ios::app) << "{\"seq\": \n"; }
  report::ScenarioResult res;
  std::optional<Diagnosis> d;
  const std::string msg = test::message_of<InputError>([&] { launch::check_waits(scenario(std::nullopt), dir_.path(), res, d); });
  EXPECT_NE(msg.find("rank1.trace.jsonl:12: not a trace record"), std::string::npos) << msg;
  // No trace at all: nothing to line up, nothing written.
  test::TempDir empty{"lockstep_waits_none"};
  report::ScenarioResult none;
  launch::check_waits(scenario(0.2), empty.path(), none, d);
  EXPECT_TRUE(none.waits.empty());
  EXPECT_FALSE(std::filesystem::exists(empty / "waits.json"));
}

}  // namespace
}  // namespace lockstep::rules
