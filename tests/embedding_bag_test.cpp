// Embedding bags (reference/embedding/bag.h): pooling and its backward, hand-computed. The
// rows and weights are dyadic, so every sum below is exact and written out by hand; the rounding
// cases (mean's 1/k, a weighted mean's divisions) are pinned by their f32 bits, worked out
// separately (numpy float32).
#include "reference/embedding/bag.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>
#include <vector>

#include "reference/embedding/optimizer.h"

namespace lockstep::ref {
namespace {

std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Three bags over four id positions, dim 2: bag 0 = ids {2, 0, 2} (a duplicate inside the
// bag), bag 1 empty, bag 2 = id {1}. rows[p] is the row of the id at position p.
const std::vector<std::int64_t> kIds = {2, 0, 2, 1};
const std::vector<std::int64_t> kOffsets = {0, 3, 3, 4};
const std::vector<float> kRows = {1.5f, -2.0f, 0.25f, 4.0f, 1.5f, -2.0f, -1.0f, 0.5f};

TEST(EmbeddingBagTest, SumPoolsEachBagAndAnEmptyBagIsZero) {
  const auto out = pool_bags(kRows.data(), kOffsets.data(), 3, 2, BagPooling::kSum, nullptr);
  EXPECT_EQ(out, (std::vector<float>{3.25f, 0.0f, 0.0f, 0.0f, -1.0f, 0.5f}));
}

TEST(EmbeddingBagTest, MeanDividesBySizeAndAnEmptyBagIsZeroNotNan) {
  const auto out = pool_bags(kRows.data(), kOffsets.data(), 3, 2, BagPooling::kMean, nullptr);
  // 3.25 / 3 in f32 is 0x3f8aaaab (1.08333337); 0 / 3 = 0; the empty bag is 0, not 0 / 0.
  EXPECT_EQ(bits(out[0]), 0x3f8aaaabu);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_FALSE(std::isnan(out[2]));
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[4], -1.0f);
  EXPECT_EQ(out[5], 0.5f);
}

TEST(EmbeddingBagTest, WeightsScaleEachRowBeforeTheSum) {
  const std::vector<float> w = {0.5f, 2.0f, 0.25f, 4.0f};
  const auto out = pool_bags(kRows.data(), kOffsets.data(), 3, 2, BagPooling::kSum, w.data());
  // bag 0: 0.5*(1.5, -2) + 2*(0.25, 4) + 0.25*(1.5, -2) = (0.75 + 0.5 + 0.375, -1 + 8 - 0.5)
  EXPECT_EQ(out, (std::vector<float>{1.625f, 6.5f, 0.0f, 0.0f, -4.0f, 2.0f}));
}

TEST(EmbeddingBagTest, BackwardGivesEachPositionItsBagsGradient) {
  const std::vector<float> g = {1.0f, -0.5f, 8.0f, 8.0f, 0.75f, 2.0f};  // bag 1's is unused: it is empty
  EXPECT_EQ(bag_backward(g.data(), kOffsets.data(), 3, 2, BagPooling::kSum, nullptr),
            (std::vector<float>{1.0f, -0.5f, 1.0f, -0.5f, 1.0f, -0.5f, 0.75f, 2.0f}));
  const std::vector<float> w = {0.5f, 2.0f, 0.25f, 4.0f};
  EXPECT_EQ(bag_backward(g.data(), kOffsets.data(), 3, 2, BagPooling::kSum, w.data()),
            (std::vector<float>{0.5f, -0.25f, 2.0f, -1.0f, 0.25f, -0.125f, 3.0f, 8.0f}));
}

TEST(EmbeddingBagTest, MeanBackwardMultipliesByTheReciprocalAsTorchDoes) {
  // 0.625 * f32(1/3) = 0x3e555556, while 0.625 / 3 = 0x3e555555: the order is pinned.
  const std::vector<float> g = {0.625f, 3.0f};
  const std::vector<std::int64_t> offsets = {0, 3};
  const auto out = bag_backward(g.data(), offsets.data(), 1, 2, BagPooling::kMean, nullptr);
  ASSERT_EQ(out.size(), 6u);
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ(bits(out[static_cast<std::size_t>(2 * p)]), 0x3e555556u) << "position " << p;
    EXPECT_EQ(bits(out[static_cast<std::size_t>(2 * p + 1)]), bits(1.0f)) << "position " << p;  // 3 * f32(1/3) rounds to 1
  }
}

// Weighted mean (TorchRec's row-wise sharded bags): the weighted sum over the sum of the bag's
// weights (plus a declared epsilon), or over its length. Expected f32 bits from numpy float32.
TEST(EmbeddingBagTest, WeightedMeanDividesByTheSumOfTheWeights) {
  const std::vector<float> w = {0.5f, 2.0f, 0.25f, 4.0f};
  const auto out = pool_bags(kRows.data(), kOffsets.data(), 3, 2, BagPooling::kMean, w.data());
  // bag 0: (1.625, 6.5) / 2.75; bag 1 empty: zeros; bag 2: (-4, 2) / 4.
  EXPECT_EQ(bits(out[0]), 0x3f1745d1u);
  EXPECT_EQ(bits(out[1]), 0x401745d1u);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[4], -1.0f);
  EXPECT_EQ(out[5], 0.5f);
  // With an epsilon: bag 2 divides by f32(4 + 1e-6) = 0x40800002.
  const auto eps = pool_bags(kRows.data(), kOffsets.data(), 3, 2, BagPooling::kMean, w.data(), BagMean{false, 1e-6f});
  EXPECT_EQ(bits(eps[4]), 0xbf7ffffcu);
  EXPECT_EQ(bits(eps[5]), 0x3efffffcu);
  // By the bag's length instead: bag 0 (1.625, 6.5) / 3, bag 2 (-4, 2) / 1.
  const auto count = pool_bags(kRows.data(), kOffsets.data(), 3, 2, BagPooling::kMean, w.data(), BagMean{true, 0.0f});
  EXPECT_EQ(bits(count[0]), 0x3f0aaaabu);
  EXPECT_EQ(bits(count[1]), 0x400aaaabu);
  EXPECT_EQ(count[4], -4.0f);
  EXPECT_EQ(count[5], 2.0f);
}

TEST(EmbeddingBagTest, WeightedMeanBackwardScalesByEachWeightOverTheDivisor) {
  const std::vector<float> g = {1.0f, -0.5f, 8.0f, 8.0f, 0.75f, 2.0f};
  const std::vector<float> w = {0.5f, 2.0f, 0.25f, 4.0f};
  const auto out = bag_backward(g.data(), kOffsets.data(), 3, 2, BagPooling::kMean, w.data());
  ASSERT_EQ(out.size(), 8u);
  // Position p of bag 0: g * f32(w_p / 2.75).
  const std::uint32_t want[] = {0x3e3a2e8cu, 0xbdba2e8cu, 0x3f3a2e8cu, 0xbeba2e8cu, 0x3dba2e8cu, 0xbd3a2e8cu};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(bits(out[static_cast<std::size_t>(i)]), want[i]) << "value " << i;
  EXPECT_EQ(out[6], 0.75f);  // bag 2: 4 / 4 = 1
  EXPECT_EQ(out[7], 2.0f);
}

TEST(EmbeddingBagTest, DuplicatesInsideABagSumTheirWeightedGradients) {
  // Bag 0 holds id 2 twice (weights 0.5 and 0.25): its row's gradient is g0*0.5 + g0*0.25.
  const std::vector<float> g = {1.0f, -0.5f, 8.0f, 8.0f, 0.75f, 2.0f};
  const std::vector<float> w = {0.5f, 2.0f, 0.25f, 4.0f};
  const auto rows = bag_backward(g.data(), kOffsets.data(), 3, 2, BagPooling::kSum, w.data());
  const auto red = reduce_duplicates(kIds.data(), rows.data(), 4, 2, DuplicateReduce::kSum);
  EXPECT_EQ(red.ids, (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(red.counts, (std::vector<std::int64_t>{1, 1, 2}));
  EXPECT_EQ(red.grads, (std::vector<float>{2.0f, -1.0f, 3.0f, 8.0f, 0.75f, -0.375f}));
}

TEST(EmbeddingBagTest, BadBagsAreRefused) {
  const std::vector<std::int64_t> decreasing = {0, 3, 2};
  EXPECT_THROW(pool_bags(kRows.data(), decreasing.data(), 2, 2, BagPooling::kSum, nullptr), std::invalid_argument);
  const std::vector<std::int64_t> not_from_zero = {1, 3};
  EXPECT_THROW(pool_bags(kRows.data(), not_from_zero.data(), 1, 2, BagPooling::kSum, nullptr), std::invalid_argument);
  EXPECT_THROW(bag_pooling_from_string("max"), std::invalid_argument);
  EXPECT_EQ(bag_pooling_from_string("mean"), BagPooling::kMean);
}

TEST(EmbeddingBagTest, WeightsArePowersOfTwoFromAQuarterToFour) {
  std::set<float> seen;
  for (std::int64_t p = 0; p < 200; ++p) {
    const float w = embedding_bag_weight(/*seed=*/7, /*s=*/1, p);
    EXPECT_TRUE(w == 0.25f || w == 0.5f || w == 1.0f || w == 2.0f || w == 4.0f) << w;
    seen.insert(w);
  }
  EXPECT_EQ(seen.size(), 5u);
  int differ = 0;  // steps draw from their own counters
  for (std::int64_t p = 0; p < 50; ++p) differ += embedding_bag_weight(7, 1, p) != embedding_bag_weight(7, 2, p);
  EXPECT_GT(differ, 10);
}

}  // namespace
}  // namespace lockstep::ref
