// The split workload's injected floor-division bug, run end to end: what each rank's batches
// are when every rank counts its own (scenarios/README.md, `floor_division_split` with
// assign = "round_robin"). Expected values are worked out by hand from PyG's
// `split(n // world_size)` below, never taken from the workload.
#include <gtest/gtest.h>

#include <algorithm>
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

// 9 ids over 2 ranks cut into chunks of 9 // 2 = 4: sizes 4, 4 and 1. The third chunk goes
// round robin to rank 0, which holds 5 ids, rank 1 holds 4. With batch_size 3 each rank counts
// ceil(5/3) = ceil(4/3) = 2 batches, so the step counts agree, the pre-flight passes and the
// chunk sizes differ by one: the run passes, and the batches are rank 0 [3, 2], rank 1 [3, 1].
// Each step's all_reduce sums the batch sizes: 3 + 3, then 2 + 1, so both ranks see 9 samples.
TEST(SplitWorkloadTest, FloorSplitRoundRobinRanksCountTheirOwnBatches) {
  TempDir dir("splitwl");
  const std::string file = dir.write("s.toml",
                                     "name = \"t.floor_split\"\n[run]\nworld_size = 2\ntimeout_s = 30\n"
                                     "[workload]\nkind = \"split\"\nnum_ids = 9\nbatch_size = 3\n"
                                     "[[inject]]\nkind = \"floor_division_split\"\nassign = \"round_robin\"\n"
                                     "[expect]\noutcome = \"pass\"\n");
  const auto scenarios = lockstep::validate::load_file(file);
  ASSERT_EQ(scenarios.size(), 1u);
  const auto r = launch::run_scenario(scenarios[0], test::launch_options(dir, /*dump=*/true));
  ASSERT_EQ(r.status, report::Status::kPass) << test::describe(r);
  const std::string dump = dir / "report/dump/t.floor_split";
  EXPECT_EQ(int64s(io::read_npy(dump + "/batch_sizes.rank0.npy")), (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(int64s(io::read_npy(dump + "/batch_sizes.rank1.npy")), (std::vector<std::int64_t>{3, 1}));
  EXPECT_EQ(int64s(io::read_npy(dump + "/split_ids.rank0.npy")).size(), 5u);
  EXPECT_EQ(int64s(io::read_npy(dump + "/split_ids.rank1.npy")).size(), 4u);
  // Every id exactly once over the two ranks.
  auto all = int64s(io::read_npy(dump + "/split_ids.rank0.npy"));
  const auto one = int64s(io::read_npy(dump + "/split_ids.rank1.npy"));
  all.insert(all.end(), one.begin(), one.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

}  // namespace
}  // namespace lockstep
