// The embedding capability's model (harness/kinds/embedding/model.cpp, embedding_bad_ids.cpp): the
// tolerance unit, the worst deviation a run reports per check, and the extra steps on ids
// outside the table. Expected values are worked by hand from the unit's
// definition: 2^-23 * max(scale, 2^-6), scale = |want| unless given.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "harness/sut/capability.h"
#include "harness/kinds/embedding/model.h"

namespace lockstep::sut::embedding {
namespace {

const float kUlp1 = std::ldexp(1.0f, -23);  // one unit at |value| 1

TEST(EmbeddingToleranceTest, UnitsCountStepsOfTheValuesOwnPrecision) {
  EXPECT_EQ(units(1.0f, 1.0f), 0);
  EXPECT_DOUBLE_EQ(units(1.0f, 1.0f + kUlp1), 1.0);
  EXPECT_DOUBLE_EQ(units(1.0f, 1.0f + 3 * kUlp1), 3.0);
  EXPECT_DOUBLE_EQ(units(-2.0f, -2.0f - 4 * kUlp1), 2.0);  // at 2, a unit is 2^-22
  // A pooled bag's scale (its rows' magnitudes pooled, 4 here) makes a unit four times larger.
  EXPECT_DOUBLE_EQ(units(1.0f, 1.0f + 3 * kUlp1, 4.0), 0.75);
  // Near zero the unit stops shrinking at 2^-6 * 2^-23.
  EXPECT_DOUBLE_EQ(units(0.0f, std::ldexp(1.0f, -29)), 1.0);
  EXPECT_TRUE(std::isinf(units(1.0f, std::numeric_limits<float>::quiet_NaN())));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(units(nan, nan), 0) << "the same bits are no deviation";
}

TEST(EmbeddingToleranceTest, CloseIsUnitsWithinTheTolerance) {
  EXPECT_TRUE(close(1.0f, 1.0f + 3 * kUlp1, 3));
  EXPECT_FALSE(close(1.0f, 1.0f + 3 * kUlp1, 2.9));
  EXPECT_FALSE(close(1.0f, 1.0f + kUlp1, 0)) << "no tolerance: only the same bits";
  EXPECT_TRUE(close(0.5f, 0.5f, 0));
}

TEST(EmbeddingToleranceTest, TheWorstDeviationIsAMetricPerCheckAndSaysWhatTheRunNeeds) {
  CheckResult res;
  note_worst_deviation({{"table", 3.75}, {"pooled", 0.8333}}, 8, res);
  EXPECT_DOUBLE_EQ(res.metrics.at("worst_ulps.table"), 3.75);
  EXPECT_DOUBLE_EQ(res.metrics.at("worst_ulps.pooled"), 0.8333);
  ASSERT_EQ(res.notes.size(), 1u);
  EXPECT_EQ(res.notes[0], "worst deviation per check, in units (each step replayed from the system's own state): pooled 0.833, table 3.75 (declared tolerance_ulps 8; the run needs 3.75)");

  CheckResult exact;
  note_worst_deviation({{"table", 0}, {"pulled", 0}}, 0, exact);
  ASSERT_EQ(exact.notes.size(), 1u);
  EXPECT_NE(exact.notes[0].find("bit-identical"), std::string::npos) << exact.notes[0];
  EXPECT_EQ(exact.metrics.at("worst_ulps.table"), 0);

  CheckResult none;
  note_worst_deviation({}, 4, none);
  EXPECT_TRUE(none.notes.empty());
  EXPECT_TRUE(none.metrics.empty());
}

// Each bad-id group is stepped whole, then id by id, each id with its row of the group's
// gradients: the documented ids ([-1, -2, -N, -(N+1)], [N, N+1, N+7, 2N]) in order.
TEST(EmbeddingBadIdsTest, EachGroupIsSteppedWholeThenIdById) {
  Options o;
  o.rows = 10;
  o.dim = 3;
  o.steps = 2;
  o.bad_groups = {"past_end", "negative"};
  EXPECT_EQ(bad_steps(o), (std::vector<std::string>{"past_end", "past_end.0", "past_end.1", "past_end.2", "past_end.3", "negative",
                                                   "negative.0", "negative.1", "negative.2", "negative.3"}));
  const BadGroup whole = bad_group(o, 7, "negative");
  EXPECT_EQ(whole.ids, (I64{-1, -2, -10, -11}));
  EXPECT_EQ(bad_group(o, 7, "past_end").ids, (I64{10, 11, 17, 20}));
  ASSERT_EQ(whole.grads.size(), 4u * 3u);
  for (std::size_t i = 0; i < 4; ++i) {
    const BadGroup one = bad_group(o, 7, "negative." + std::to_string(i));
    EXPECT_EQ(one.ids, (I64{whole.ids[i]}));
    EXPECT_EQ(one.grads, F32(whole.grads.begin() + static_cast<std::ptrdiff_t>(3 * i), whole.grads.begin() + static_cast<std::ptrdiff_t>(3 * i + 3)));
  }
}

}  // namespace
}  // namespace lockstep::sut::embedding
