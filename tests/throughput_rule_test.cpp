// The noise-aware throughput rule (harness/rules/stats.h) on synthetic samples: directions from
// metric names, the exact Mann-Whitney test, false alarms and detections over seeded trials, and
// how waits at collectives are judged (reports/README.md, "The throughput rule").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "harness/rules/stats.h"

namespace lockstep::baseline {
namespace {

TEST(ThroughputRuleTest, DirectionFollowsTheDocumentedNames) {
  EXPECT_EQ(direction_of("sampled_edges_per_s"), Direction::kHigherIsBetter);
  EXPECT_EQ(direction_of("bus_bw"), Direction::kHigherIsBetter);
  EXPECT_EQ(direction_of("us_per_op"), Direction::kLowerIsBetter);
  EXPECT_EQ(direction_of("step_time_forward_s"), Direction::kLowerIsBetter);
  EXPECT_EQ(direction_of("latency_p50_us"), Direction::kLowerIsBetter);
  EXPECT_EQ(direction_of("steps"), Direction::kNeutral);
  EXPECT_EQ(direction_of("sampled_edges"), Direction::kNeutral);
}

TEST(ThroughputRuleTest, ExactMannWhitneyMatchesClosedForms) {
  // Complete separation of 5 and 5: one ordering of C(10,5) = 252 is at least as extreme.
  EXPECT_NEAR(mann_whitney_greater({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5}), 1.0 / 252, 1e-12);
  EXPECT_NEAR(mann_whitney_greater({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}), 1.0, 1e-12);
  // U = 2 of 2x2 (x above both): 1 of C(4,2) = 6; U >= 1 (x = {2, 4} over y = {1, 3} gives U = 3):
  // orderings with U >= 3 are U = 3 (1) and U = 4 (1): 2/6.
  EXPECT_NEAR(mann_whitney_greater({2, 4}, {1, 3}), 2.0 / 6, 1e-12);
  // 3 and 4: C(7,3) = 35 orderings; complete separation has probability 1/35.
  EXPECT_NEAR(mann_whitney_greater({10, 11, 12}, {1, 2, 3, 4}), 1.0 / 35, 1e-12);
}

struct Trials {
  int declared = 0, first_stage = 0;
};

// `trials` seeded draws of a baseline of `baseline_n` samples, and an observation and a
// confirmation of 5 samples each, lognormal with coefficient of variation `cv`; the
// observation and confirmation are `slowdown` times slower. Declared = the rule fired on both
// (what `run --baseline --repeat 5` does).
Trials simulate(const std::string& metric, double slowdown, double cv, int trials, std::uint64_t seed,
                int baseline_n) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> noise(0.0, cv);
  const bool higher = direction_of(metric) == Direction::kHigherIsBetter;
  auto draw = [&](double slow, int n = 5) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) {
      const double cost = 100.0 * slow * std::exp(noise(gen));
      v.push_back(higher ? 1e6 / cost : cost);
    }
    return v;
  };
  Trials t;
  for (int i = 0; i < trials; ++i) {
    const auto base = draw(1.0, baseline_n);
    const auto first = judge(metric, base, draw(slowdown));
    if (!first.judged) ADD_FAILURE() << "5 vs 5 samples must be judged";
    if (!first.slower) continue;
    ++t.first_stage;
    if (judge(metric, base, draw(slowdown)).slower) ++t.declared;
  }
  return t;
}

TEST(ThroughputRuleTest, NoFalseAlarmOnIdenticalDistributions) {
  // Two recording sessions of 5 (reports/README.md recommends at least 10 baseline samples).
  for (const char* metric : {"items_per_s", "us_per_op"}) {
    for (double cv : {0.02, 0.05, 0.15, 0.30}) {
      const Trials t = simulate(metric, 1.0, cv, 2000, 1234, /*baseline_n=*/10);
      EXPECT_EQ(t.declared, 0) << metric << " cv " << cv;
      // Each stage alone stays below its alpha (0.01) as well.
      EXPECT_LE(t.first_stage, 20) << metric << " cv " << cv;
    }
  }
  // One session of 5: each stage still stays below alpha.
  const Trials five = simulate("us_per_op", 1.0, 0.15, 2000, 77, /*baseline_n=*/5);
  EXPECT_LE(five.first_stage, 20);
  EXPECT_LE(five.declared, 2);
}

TEST(ThroughputRuleTest, DetectsATwentyPercentSlowdown) {
  for (const char* metric : {"items_per_s", "us_per_op"}) {
    const Trials t = simulate(metric, 1.2, 0.03, 500, 99, /*baseline_n=*/5);
    EXPECT_GE(t.declared, 475) << metric << ": detected " << t.declared << " of 500";
  }
}

TEST(ThroughputRuleTest, FasterIsNotARegressionAndReportsAConfidenceInterval) {
  const std::vector<double> base = {100, 101, 99, 100.5, 99.5};
  const std::vector<double> fast = {70, 71, 69, 70.5, 69.5};  // lower-is-better metric, 30% less time
  const Judgement j = judge("us_per_op", base, fast);
  ASSERT_TRUE(j.judged);
  EXPECT_FALSE(j.slower);
  EXPECT_TRUE(j.faster);
  EXPECT_NEAR(j.ratio, 0.70, 0.01);
  EXPECT_LE(j.ci_low, j.ratio);
  EXPECT_GE(j.ci_high, j.ratio);
  EXPECT_FALSE(judge("steps", base, fast).judged) << "neutral metrics are never judged";
  EXPECT_FALSE(judge("us_per_op", {1, 2}, fast).judged) << "fewer than 3 baseline samples";
}

TEST(ThroughputRuleTest, AWaitIsWorseOnlyWhenItGrewByMoreThanTheAbsoluteFloor) {
  EXPECT_TRUE(is_wait_metric("waits/rank0/wait_s"));
  EXPECT_TRUE(is_wait_metric("waits/skew_s"));
  EXPECT_FALSE(is_wait_metric("train/rank0/main_cpu_s"));
  EXPECT_DOUBLE_EQ(rule_for("waits/rank1/wait_s", RuleOptions{}).tolerance, 0.5);
  // A clean baseline: ~25 µs of waiting per step, ten steps.
  const std::vector<double> base = {20e-6, 30e-6, 25e-6, 22e-6, 28e-6, 24e-6, 26e-6, 21e-6, 29e-6, 25e-6};
  // Four times as long is far beyond any relative tolerance, but 75 µs a step is nothing.
  std::vector<double> fourfold;
  for (double v : base) fourfold.push_back(4 * v);
  const Judgement small = judge("waits/rank0/wait_s", base, fourfold);
  ASSERT_TRUE(small.judged) << "waits are judged although they are far below min_iteration_s";
  EXPECT_LT(small.p_slower, 0.01);
  EXPECT_FALSE(small.slower);
  // A straggler: 40 ms a step.
  std::vector<double> straggler;
  for (double v : base) straggler.push_back(40e-3 + v);
  const Judgement big = judge("waits/rank0/wait_s", base, straggler);
  EXPECT_TRUE(big.slower) << describe(big);
  EXPECT_GT(big.ratio, 100);
  // A rank that never waited (all zeros) that now waits 40 ms a step: zeros count as the floor.
  const std::vector<double> zeros(10, 0.0);
  EXPECT_TRUE(judge("waits/rank1/wait_s", zeros, straggler).slower);
  EXPECT_FALSE(judge("waits/rank1/wait_s", zeros, zeros).slower);
  // The straggler gone: faster, by the same floor.
  EXPECT_TRUE(judge("waits/rank0/wait_s", straggler, base).faster);
  EXPECT_FALSE(judge("waits/rank0/wait_s", fourfold, base).faster);
}

}  // namespace
}  // namespace lockstep::baseline
