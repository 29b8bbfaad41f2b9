// The training workload's schedule, end to end, against its documented contract
// (scenarios/README.md, Training): each epoch visits the train nodes in a seed-fixed order, in
// global batches of `batch_size`, the last one of an epoch short; each step's global batch is
// split over the ranks, and the schedule is the same at every world size. Read back from the
// `schedule_sizes` and `schedule_nodes` dump arrays. Expected sizes are worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "harness/launch/launcher.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
#include "reference/io/npy.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using test::TempDir;
using test::int64s;
using Ids = std::vector<std::int64_t>;

// 10 train nodes in batches of 4: 3 steps an epoch (4, 4, 2), 6 steps = 2 epochs.
constexpr int kSteps = 6;

// Per rank, per step, the nodes that rank trains.
std::vector<std::vector<Ids>> run_schedule(int world_size) {
  TempDir dir("trainsched");
  const std::string file = dir.write(
      "t.toml", "name = \"t.schedule\"\n[run]\nworld_size = " + std::to_string(world_size) +
                    "\ntimeout_s = 60\n[workload]\nkind = \"training\"\ngraph = \"erdos_renyi\"\nnodes = 64\n"
                    "num_train = 10\nnum_eval = 4\nbatch_size = 4\nsteps = " + std::to_string(kSteps) +
                    "\nhidden = 4\nfeature_dim = 4\n[expect]\noutcome = \"pass\"\n");
  const auto scenarios = lockstep::validate::load_file(file);
  EXPECT_EQ(scenarios.size(), 1u);
  std::vector<std::vector<Ids>> out(static_cast<std::size_t>(world_size));
  if (scenarios.size() != 1) return out;
  const auto r = launch::run_scenario(scenarios[0], test::launch_options(dir, /*dump=*/true));
  EXPECT_EQ(r.status, report::Status::kPass) << test::describe(r);
  const std::string dump = dir / "report/dump/t.schedule";
  for (int rank = 0; rank < world_size; ++rank) {
    const std::string suffix = ".rank" + std::to_string(rank) + ".npy";
    const Ids sizes = int64s(io::read_npy(dump + "/schedule_sizes" + suffix));
    const Ids nodes = int64s(io::read_npy(dump + "/schedule_nodes" + suffix));
    EXPECT_EQ(sizes.size(), static_cast<std::size_t>(kSteps)) << "rank " << rank;
    std::size_t at = 0;
    for (const auto n : sizes) {
      EXPECT_LE(at + static_cast<std::size_t>(n), nodes.size()) << "rank " << rank;
      if (at + static_cast<std::size_t>(n) > nodes.size()) break;
      out[static_cast<std::size_t>(rank)].emplace_back(nodes.begin() + static_cast<std::ptrdiff_t>(at),
                                                       nodes.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += static_cast<std::size_t>(n);
    }
    EXPECT_EQ(at, nodes.size()) << "rank " << rank;
  }
  return out;
}

TEST(TrainingWorkloadTest, EachEpochVisitsEveryTrainNodeOnceInBatchesOfTheGlobalSize) {
  const auto one = run_schedule(1);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(one[0].size(), static_cast<std::size_t>(kSteps));
  const std::vector<std::size_t> sizes{4, 4, 2, 4, 4, 2};
  std::vector<Ids> epochs(2);
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_EQ(one[0][static_cast<std::size_t>(s)].size(), sizes[static_cast<std::size_t>(s)]) << "step " << s;
    auto& e = epochs[static_cast<std::size_t>(s / 3)];
    e.insert(e.end(), one[0][static_cast<std::size_t>(s)].begin(), one[0][static_cast<std::size_t>(s)].end());
  }
  for (auto& e : epochs) {
    std::sort(e.begin(), e.end());
    EXPECT_EQ(std::adjacent_find(e.begin(), e.end()), e.end()) << "a train node twice in one epoch";
    EXPECT_EQ(e.size(), 10u);
    for (const auto v : e) {
      EXPECT_GE(v, 0);
      EXPECT_LT(v, 64);
    }
  }
  EXPECT_EQ(epochs[0], epochs[1]) << "the two epochs visit different node sets";
}

TEST(TrainingWorkloadTest, TwoRanksSplitEveryGlobalBatchOfTheOneRankSchedule) {
  const auto one = run_schedule(1), two = run_schedule(2);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(two.size(), 2u);
  ASSERT_EQ(one[0].size(), static_cast<std::size_t>(kSteps));
  ASSERT_EQ(two[0].size(), static_cast<std::size_t>(kSteps));
  ASSERT_EQ(two[1].size(), static_cast<std::size_t>(kSteps));
  for (std::size_t s = 0; s < static_cast<std::size_t>(kSteps); ++s) {
    // Batches of 4 split 2 + 2, the short one of 2 split 1 + 1.
    const std::size_t half = s % 3 == 2 ? 1 : 2;
    EXPECT_EQ(two[0][s].size(), half) << "step " << s;
    EXPECT_EQ(two[1][s].size(), half) << "step " << s;
    Ids both = two[0][s];
    both.insert(both.end(), two[1][s].begin(), two[1][s].end());
    Ids global = one[0][s];
    std::sort(both.begin(), both.end());
    std::sort(global.begin(), global.end());
    EXPECT_EQ(both, global) << "step " << s;
  }
}

}  // namespace
}  // namespace lockstep
