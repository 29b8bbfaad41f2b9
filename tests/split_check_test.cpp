// The split contract's judgement (harness/kinds/split/check.h) and the step-count judgement
// (preflight.h), as lockstep's split workload and a system's split capability both use them:
// hand-made shares and counts, each problem with the diagnosis and blamed rank it must give.
#include <gtest/gtest.h>

#include <algorithm>

#include "harness/workloads/preflight.h"
#include "harness/kinds/split/check.h"
#include "tests/test_util.h"

namespace lockstep::workloads {
namespace {

using Shares = std::vector<std::vector<std::int64_t>>;

TEST(SplitCoverTest, AnExactCoverWithinOnePasses) {
  EXPECT_FALSE(split_cover(7, Shares{{0, 3, 6}, {1, 4}, {2, 5}}));
  EXPECT_FALSE(split_cover(0, Shares{{}, {}, {}}));
  EXPECT_FALSE(split_cover(5, Shares{{4}, {3}, {2}, {1}, {0}, {}, {}, {}}));  // 5 over 8: three ranks idle
}

TEST(SplitCoverTest, EachProblemIsSplitCoverageBlamingTheRankThatShowsIt) {
  // 1000 over 3 with chunks of 333: the last id on no rank, nobody blamed.
  Shares floor3(3);
  for (std::int64_t id = 0; id < 999; ++id) floor3[static_cast<std::size_t>(id / 333)].push_back(id);
  auto d = split_cover(1000, floor3);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->kind, DiagnosisKind::kSplitCoverage);
  EXPECT_EQ(d->message, "id 999 is on no rank (1 of 1000 ids are on none)");
  EXPECT_EQ(d->rank, -1);

  d = split_cover(4, Shares{{0, 1}, {2, 1}, {3}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message, "id 1 is on rank 0 and rank 1");
  EXPECT_EQ(d->rank, 1);

  d = split_cover(4, Shares{{0, 0}, {1, 2, 3}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message, "id 0 is twice on rank 0");

  d = split_cover(4, Shares{{0, 1}, {2, -1}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message, "rank 1 holds id -1, outside [0, 4)");
  EXPECT_EQ(d->rank, 1);

  d = split_cover(6, Shares{{0}, {1, 2, 3, 4, 5}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->message, "chunk sizes differ by more than one: rank 1 has 5, rank 0 has 1");
  EXPECT_EQ(d->rank, 1);
}

TEST(SplitCoverTest, TheIdsToSplitAreAPermutationFixedByTheSeed) {
  const auto a = split_ids(1000, 7);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(split_ids(1000, 7), a);
  EXPECT_NE(split_ids(1000, 8), a);
  EXPECT_TRUE(split_ids(0, 7).empty());
}

TEST(UnevenStepsTest, NamesEveryCountAndBlamesTheFirstRankOffTheCommonOne) {
  EXPECT_FALSE(uneven_steps({3, 3, 3}, "x"));
  EXPECT_FALSE(uneven_steps({}, "x"));
  auto d = uneven_steps({4, 3, 3}, "each rank's own count");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->kind, DiagnosisKind::kUnevenSteps);
  EXPECT_EQ(d->message, "ranks would run different numbers of steps (each rank's own count): rank 0 4, rank 1 3, rank 2 3");
  EXPECT_EQ(d->rank, 0);
  // A tie between counts: the smaller one is taken as the common one.
  d = uneven_steps({5, 2}, "x");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 0);
}

}  // namespace
}  // namespace lockstep::workloads
