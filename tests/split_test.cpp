// Tests of rank splitting and step agreement (reference/split/split.h). Expected sizes and
// step counts are worked out by hand in the comments; the property tests check the three
// separate properties (exact cover, exactly world_size chunks, equal step counts) and the
// bounds that define each policy, not the library's own formulas.
#include "reference/split/split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace lockstep::ref {
namespace {

using Ids = std::vector<std::int64_t>;

Ids iota_ids(std::int64_t n, std::int64_t first = 0) {
  Ids ids(static_cast<std::size_t>(n));
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

Ids sizes_of(const std::vector<Ids>& chunks) {
  Ids sizes;
  for (const auto& c : chunks) sizes.push_back(static_cast<std::int64_t>(c.size()));
  return sizes;
}

Ids concat(const std::vector<Ids>& chunks) {
  Ids all;
  for (const auto& c : chunks) all.insert(all.end(), c.begin(), c.end());
  return all;
}

using test::message_of;

// ---- rank_split ---------------------------------------------------------------------------

TEST(SplitTest, ThousandOverThree) {
  const Ids ids = iota_ids(1000, 50);
  const auto chunks = rank_split(ids, 3);
  ASSERT_EQ(sizes_of(chunks), (Ids{334, 333, 333}));
  EXPECT_EQ(chunks[0].front(), 50);
  EXPECT_EQ(chunks[0].back(), 383);  // 50 + 333
  EXPECT_EQ(chunks[1].front(), 384);
  EXPECT_EQ(chunks[2].back(), 1049);
  EXPECT_EQ(concat(chunks), ids);
}

TEST(SplitTest, UnevenSizes) {
  // 4097 = 4 * 1024 + 1; 5 = 4 * 1 + 1; 7 = 8 * 0 + 7.
  EXPECT_EQ(sizes_of(rank_split(iota_ids(4097), 4)), (Ids{1025, 1024, 1024, 1024}));
  EXPECT_EQ(sizes_of(rank_split(iota_ids(5), 4)), (Ids{2, 1, 1, 1}));
  EXPECT_EQ(rank_split(iota_ids(5), 4), (std::vector<Ids>{{0, 1}, {2}, {3}, {4}}));
  EXPECT_EQ(sizes_of(rank_split(iota_ids(7), 8)), (Ids{1, 1, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(sizes_of(rank_split(iota_ids(8), 4)), (Ids{2, 2, 2, 2}));
  EXPECT_EQ(sizes_of(rank_split(iota_ids(3), 1)), (Ids{3}));
}

TEST(SplitTest, NoIdsGiveEmptyChunks) {
  EXPECT_EQ(rank_split({}, 3), (std::vector<Ids>{{}, {}, {}}));
  EXPECT_EQ(rank_split({}, 1), (std::vector<Ids>{{}}));
}

TEST(SplitTest, WorldSizeBelowOneThrows) {
  EXPECT_EQ(message_of<std::invalid_argument>([] {
              rank_split({1, 2}, 0);
            }),
            "world_size must be >= 1, got 0");
  EXPECT_EQ(message_of<std::invalid_argument>([] {
              floor_division_split({1, 2}, -2);
            }),
            "world_size must be >= 1, got -2");
}

// ---- the known bug ------------------------------------------------------------------------

TEST(SplitTest, FloorDivisionSplitMakesAnExtraChunk) {
  // 1000 // 3 = 333: chunks 333, 333, 333 and the remainder 1.
  const auto chunks = floor_division_split(iota_ids(1000), 3);
  EXPECT_EQ(sizes_of(chunks), (Ids{333, 333, 333, 1}));
  EXPECT_EQ(chunks[3], (Ids{999}));
  // 4097 // 4 = 1024: four chunks of 1024 and one of 1.
  EXPECT_EQ(sizes_of(floor_division_split(iota_ids(4097), 4)), (Ids{1024, 1024, 1024, 1024, 1}));
  // 11 // 4 = 2: five chunks of 2 and one of 1, two more than world_size.
  EXPECT_EQ(sizes_of(floor_division_split(iota_ids(11), 4)), (Ids{2, 2, 2, 2, 2, 1}));
  // Divisible: exactly world_size chunks.
  EXPECT_EQ(sizes_of(floor_division_split(iota_ids(8), 4)), (Ids{2, 2, 2, 2}));
  // 5 // 4 = 1: five chunks of one.
  EXPECT_EQ(sizes_of(floor_division_split(iota_ids(5), 4)), (Ids{1, 1, 1, 1, 1}));
  // 3 // 8 = 0, taken as 1: three chunks for eight ranks.
  EXPECT_EQ(sizes_of(floor_division_split(iota_ids(3), 8)), (Ids{1, 1, 1}));
  // torch.split of an empty tensor gives one empty chunk.
  EXPECT_EQ(floor_division_split({}, 3), (std::vector<Ids>{{}}));
}

// ---- step policies ------------------------------------------------------------------------

TEST(StepsTest, PolicyNames) {
  EXPECT_EQ(to_string(StepPolicy::kDropLast), "drop_last");
  EXPECT_EQ(to_string(StepPolicy::kPad), "pad");
  EXPECT_EQ(to_string(StepPolicy::kEven), "even");
  for (auto p : {StepPolicy::kDropLast, StepPolicy::kPad, StepPolicy::kEven}) {
    EXPECT_EQ(step_policy_from_string(to_string(p)), p);
  }
  EXPECT_EQ(message_of<std::invalid_argument>([] { step_policy_from_string("uneven"); }),
            "unknown step policy 'uneven' (expected drop_last, pad or even)");
}

TEST(StepsTest, AgreedStepsByHand) {
  // 334, 333, 333 in batches of 10: drop_last 333 / 10 = 33; pad ceil(334 / 10) = 34;
  // even ceil(ceil(1000 / 3) / 10) = ceil(334 / 10) = 34.
  const Ids sizes{334, 333, 333};
  EXPECT_EQ(agreed_steps(StepPolicy::kDropLast, sizes, 10), 33);
  EXPECT_EQ(agreed_steps(StepPolicy::kPad, sizes, 10), 34);
  EXPECT_EQ(agreed_steps(StepPolicy::kEven, sizes, 10), 34);
  // 2, 1, 1, 1 in batches of 2: drop_last 0; pad 1; even ceil(ceil(5 / 4) / 2) = 1.
  EXPECT_EQ(agreed_steps(StepPolicy::kDropLast, {2, 1, 1, 1}, 2), 0);
  EXPECT_EQ(agreed_steps(StepPolicy::kPad, {2, 1, 1, 1}, 2), 1);
  EXPECT_EQ(agreed_steps(StepPolicy::kEven, {2, 1, 1, 1}, 2), 1);
  // In batches of 1: 1, 2, 2.
  EXPECT_EQ(agreed_steps(StepPolicy::kDropLast, {2, 1, 1, 1}, 1), 1);
  EXPECT_EQ(agreed_steps(StepPolicy::kPad, {2, 1, 1, 1}, 1), 2);
  EXPECT_EQ(agreed_steps(StepPolicy::kEven, {2, 1, 1, 1}, 1), 2);
  // The floor-division chunks 333, 333, 333, 1 (four "ranks"): drop_last 0 steps of 10.
  EXPECT_EQ(agreed_steps(StepPolicy::kDropLast, {333, 333, 333, 1}, 10), 0);
  // No ids: 0 steps under every policy; an empty rank among others.
  for (auto p : {StepPolicy::kDropLast, StepPolicy::kPad, StepPolicy::kEven}) {
    EXPECT_EQ(agreed_steps(p, {0, 0, 0}, 4), 0) << to_string(p);
  }
  // 7 over 8 in batches of 1: drop_last 0 (rank 7 is empty); pad 1; even ceil(7 / 8) = 1.
  const Ids seven{1, 1, 1, 1, 1, 1, 1, 0};
  EXPECT_EQ(agreed_steps(StepPolicy::kDropLast, seven, 1), 0);
  EXPECT_EQ(agreed_steps(StepPolicy::kPad, seven, 1), 1);
  EXPECT_EQ(agreed_steps(StepPolicy::kEven, seven, 1), 1);
}

TEST(StepsTest, AgreedStepsRejectsBadArguments) {
  EXPECT_EQ(message_of<std::invalid_argument>([] { agreed_steps(StepPolicy::kPad, {3}, 0); }),
            "batch_size must be >= 1, got 0");
  EXPECT_EQ(message_of<std::invalid_argument>([] { agreed_steps(StepPolicy::kPad, {}, 2); }),
            "chunk_sizes must hold one size per rank, got none");
  EXPECT_EQ(message_of<std::invalid_argument>([] {
              agreed_steps(StepPolicy::kEven, {3, -1}, 2);
            }),
            "chunk_sizes[1] = -1 is negative");
}

TEST(StepsTest, BatchesByHand) {
  const Ids all = iota_ids(5);
  // 5 over 4 is {0, 1}, {2}, {3}, {4}.
  // drop_last, batch 1: 1 step, one full batch each.
  EXPECT_EQ(batches({0, 1}, 1, 1, StepPolicy::kDropLast, all, 4), (std::vector<Ids>{{0}}));
  EXPECT_EQ(batches({4}, 1, 1, StepPolicy::kDropLast, all, 4), (std::vector<Ids>{{4}}));
  // pad, batch 1: 2 steps; the short ranks' second batch is empty.
  EXPECT_EQ(batches({0, 1}, 2, 1, StepPolicy::kPad, all, 4), (std::vector<Ids>{{0}, {1}}));
  EXPECT_EQ(batches({2}, 2, 1, StepPolicy::kPad, all, 4), (std::vector<Ids>{{2}, {}}));
  // pad, batch 2: 1 step; a partial batch.
  EXPECT_EQ(batches({2}, 1, 2, StepPolicy::kPad, all, 4), (std::vector<Ids>{{2}}));
  // even, batch 1: ceil(5 / 4) = 2 ids each; {2} wraps to {2, 2}.
  EXPECT_EQ(batches({2}, 2, 1, StepPolicy::kEven, all, 4), (std::vector<Ids>{{2}, {2}}));
  EXPECT_EQ(batches({0, 1}, 2, 1, StepPolicy::kEven, all, 4), (std::vector<Ids>{{0}, {1}}));
  // even, 7 over 8: ceil(7 / 8) = 1 id each; the empty rank 7 takes the first id, 0.
  EXPECT_EQ(batches({}, 1, 1, StepPolicy::kEven, iota_ids(7), 8), (std::vector<Ids>{{0}}));
  // even, 10 over 3 in batches of 3: ceil(10 / 3) = 4 ids, 2 steps; {7, 8, 9} pads to
  // {7, 8, 9, 7}: batches {7, 8, 9} and {7}.
  EXPECT_EQ(batches({7, 8, 9}, 2, 3, StepPolicy::kEven, iota_ids(10), 3),
            (std::vector<Ids>{{7, 8, 9}, {7}}));
  // No ids and no steps.
  EXPECT_EQ(batches({}, 0, 4, StepPolicy::kEven, {}, 3), std::vector<Ids>{});
}

TEST(StepsTest, BatchesRejectsBadArguments) {
  const Ids all = iota_ids(5);
  EXPECT_EQ(
      message_of<std::invalid_argument>([&] { batches({2}, 2, 1, StepPolicy::kDropLast, all, 4); }),
      "drop_last: step 1 needs ids [1, 2) but the chunk has 1 ids");
  EXPECT_EQ(message_of<std::invalid_argument>([&] {
              batches({0, 1, 2}, 1, 1, StepPolicy::kEven, all, 4);
            }),
            "even: a chunk of 3 ids exceeds ceil(n / world_size) = ceil(5 / 4) = 2");
  EXPECT_EQ(
      message_of<std::invalid_argument>([&] { batches({2}, -1, 1, StepPolicy::kPad, all, 4); }),
      "steps must be >= 0, got -1");
  EXPECT_EQ(
      message_of<std::invalid_argument>([&] { batches({2}, 1, 0, StepPolicy::kPad, all, 4); }),
      "batch_size must be >= 1, got 0");
  EXPECT_EQ(
      message_of<std::invalid_argument>([&] { batches({2}, 1, 1, StepPolicy::kPad, all, 0); }),
      "world_size must be >= 1, got 0");
}

// ---- properties over random sizes ---------------------------------------------------------

TEST(SplitPropertyTest, RandomSizesAndWorldSizes) {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 600; ++trial) {
    const auto n = static_cast<std::int64_t>(rng() % 5001);
    const int ws = 1 + static_cast<int>(rng() % 16);
    const std::int64_t batch = 1 + static_cast<std::int64_t>(rng() % 64);
    // Distinct, unordered ids, so a dropped or repeated id cannot hide.
    Ids ids = iota_ids(n, 1000);
    std::shuffle(ids.begin(), ids.end(), rng);
    SCOPED_TRACE("n=" + std::to_string(n) + " ws=" + std::to_string(ws) +
                 " batch=" + std::to_string(batch));

    const auto chunks = rank_split(ids, ws);
    ASSERT_EQ(chunks.size(), static_cast<std::size_t>(ws));  // exactly world_size chunks
    ASSERT_EQ(concat(chunks), ids);                          // every id once, in order
    const Ids sizes = sizes_of(chunks);
    const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
    ASSERT_LE(*hi - *lo, 1);
    for (int r = 0; r + 1 < ws; ++r) ASSERT_GE(sizes[r], sizes[r + 1]);  // larger ones first

    // The bug keeps every id but gets the count wrong whenever ws does not divide n.
    const auto buggy = floor_division_split(ids, ws);
    ASSERT_EQ(concat(buggy), ids);
    if (n >= ws && n % ws == 0) {
      ASSERT_EQ(buggy.size(), static_cast<std::size_t>(ws));
    } else if (n >= ws) {
      ASSERT_GT(buggy.size(), static_cast<std::size_t>(ws));
    } else if (n > 0) {
      ASSERT_EQ(buggy.size(), static_cast<std::size_t>(n));  // chunks of one: too few
    }

    for (auto policy : {StepPolicy::kDropLast, StepPolicy::kPad, StepPolicy::kEven}) {
      SCOPED_TRACE(to_string(policy));
      const std::int64_t steps = agreed_steps(policy, sizes, batch);
      ASSERT_GE(steps, 0);
      const std::int64_t per_rank = (n + ws - 1) / ws;
      if (policy == StepPolicy::kDropLast) {
        // The most full batches the smallest rank has.
        ASSERT_LE(steps * batch, *lo);
        ASSERT_GT((steps + 1) * batch, *lo);
      } else {
        // The fewest batches that hold the largest rank (kEven: its padded size).
        const std::int64_t need = policy == StepPolicy::kPad ? *hi : per_rank;
        ASSERT_GE(steps * batch, need);
        if (steps > 0) {
          ASSERT_LT((steps - 1) * batch, need);
        }
      }
      Ids seen;
      for (int r = 0; r < ws; ++r) {
        const auto b = batches(chunks[static_cast<std::size_t>(r)], steps, batch, policy, ids, ws);
        ASSERT_EQ(static_cast<std::int64_t>(b.size()), steps) << "rank " << r;
        std::int64_t count = 0;
        for (const auto& one : b) {
          ASSERT_LE(static_cast<std::int64_t>(one.size()), batch);
          if (policy == StepPolicy::kDropLast) {
            ASSERT_EQ(static_cast<std::int64_t>(one.size()), batch);  // full
          }
          count += static_cast<std::int64_t>(one.size());
          seen.insert(seen.end(), one.begin(), one.end());
        }
        if (policy == StepPolicy::kEven) {
          ASSERT_EQ(count, per_rank) << "rank " << r;
        }
      }
      Ids sorted_ids = ids;
      std::sort(sorted_ids.begin(), sorted_ids.end());
      std::sort(seen.begin(), seen.end());
      if (policy == StepPolicy::kPad) {
        ASSERT_EQ(seen, sorted_ids);  // every id exactly once
      } else if (policy == StepPolicy::kEven) {
        // Every id at least once; the extras are padding repeats of real ids.
        ASSERT_EQ(static_cast<std::int64_t>(seen.size()), per_rank * ws);
        seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
        ASSERT_EQ(seen, sorted_ids);
      } else {
        // Only ids, each at most once.
        ASSERT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
        ASSERT_TRUE(std::includes(sorted_ids.begin(), sorted_ids.end(), seen.begin(), seen.end()));
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::ref
