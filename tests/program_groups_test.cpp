// A program's own process groups under lockstep (scenarios/programs/groups, fsdp2): every group's
// calls are traced with the group's ranks and verified as that group's, a fault on a group names
// the group and the rank (a global rank), and a sharded program (FSDP2 over a device mesh) runs
// unchanged: its own digest of its final shards is the one it computes natively. Expected values
// come from the programs (which ranks each group holds, which rank a fault changes) and from the
// native runs, never from lockstep's output.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/program_test_util.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGroups = LOCKSTEP_SOURCE_DIR "/scenarios/programs/groups/groups.py";
constexpr const char* kTorchRec = LOCKSTEP_SOURCE_DIR "/scenarios/programs/torchrec/train.py";
constexpr const char* kTp = LOCKSTEP_SOURCE_DIR "/scenarios/programs/tp/train.py";
constexpr const char* kFsdp2 = LOCKSTEP_SOURCE_DIR "/scenarios/programs/fsdp2/train.py";

class ProgramGroupsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    python_ = test::python_for(GetParam());
    if (!test::imports(python_, "torch")) GTEST_SKIP() << "no interpreter with torch for '" << GetParam() << "' (ci/setup makes both)";
  }
  test::CliResult torchrun(const std::string& report, const std::string& script_and_args) {
    return test::again_on_torch_exit_abort(
        [&] {
          return test::run_cli(LOCKSTEP_BINARY,
                               "torchrun --nproc-per-node 4 --python '" + python_ + "' --report-dir '" + report + "' " + script_and_args,
                               tmp_.path());
        },
        report);
  }
  std::string python_;
  test::TempDir tmp_{"lockstep_program_groups"};
};

// groups.py's 3 rounds: rank 1 is in the pair (0,1) and the group of ranks 1,2,3, whose calls its
// trace holds with those ranks, numbered apart from the default group's; its send to rank 3 on the
// group of ranks 1,2,3 names the group's rank 2 (c10d's numbering), and nothing is left unverified.
TEST_P(ProgramGroupsTest, EachGroupsCallsAreTracedAsThatGroups) {
  const std::string report = tmp_.path() + "/clean";
  const auto r = torchrun(report, kGroups);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto s = test::only_result(report);
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(s.at("metrics").at("unverified_calls").get<double>(), 0) << s.dump();
  std::map<std::string, int> per_group;
  std::map<std::string, std::int64_t> last_seq;
  bool numbered_apart = true;
  std::ifstream trace(report + "/" + s.at("artifacts").get<std::string>() + "/rank1.trace.jsonl");
  ASSERT_TRUE(trace);
  for (std::string line; std::getline(trace, line);) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j.at("rank"), 1) << line;
    const std::string g = j.contains("group") ? j.at("group").dump() : "default";
    const std::string key = g + (j.at("kind") == "p2p" ? "/p2p" : "");
    // Each group's calls (and its p2p calls) are numbered 0, 1, 2, ... on their own.
    const std::int64_t seq = j.at("seq");
    numbered_apart = numbered_apart && seq == (last_seq.count(key) ? last_seq[key] + 1 : 0);
    last_seq[key] = seq;
    ++per_group[g + " " + j.at("op").get<std::string>()];
    if (j.at("op") == "send") EXPECT_EQ(j.value("peer", -1), 2) << line;
  }
  EXPECT_TRUE(numbered_apart);
  EXPECT_EQ(per_group["[0,1] all_reduce"], 3);
  EXPECT_EQ(per_group["[0,1] broadcast"], 3);
  EXPECT_EQ(per_group["[0,1] all_gather"], 3);
  EXPECT_EQ(per_group["[1,2,3] all_reduce"], 3);
  EXPECT_EQ(per_group["[1,2,3] send"], 3);
  EXPECT_EQ(per_group["[1,2,3] reduce_scatter"], GetParam() == "debian" ? 0 : 3);
  EXPECT_EQ(per_group["default all_reduce"], 3);
}

// A count that differs on the group of ranks 1,2,3 names the group and rank 2; an all-reduce issued
// on the default group where the pair's group was meant is named as such, blaming rank 1, well
// before the 300 s timeout.
TEST_P(ProgramGroupsTest, AFaultOnAGroupNamesTheGroupAndTheRank) {
  {
    const std::string report = tmp_.path() + "/count";
    const auto r = torchrun(report, std::string(kGroups) + " --bug sub-count");
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    const auto s = test::only_result(report);
    ASSERT_FALSE(s.is_null()) << r.out << r.err;
    const auto& d = s.at("diagnosis");
    EXPECT_EQ(d.at("kind"), "collective_mismatch") << d.dump();
    EXPECT_EQ(d.at("rank"), 2) << d.dump();
    EXPECT_NE(d.at("message").get<std::string>().find("on the group of ranks 1,2,3"), std::string::npos) << d.dump();
    EXPECT_NE(d.at("message").get<std::string>().find("count differs"), std::string::npos) << d.dump();
  }
  {
    const std::string report = tmp_.path() + "/wrong";
    const auto r = test::run_cli(LOCKSTEP_BINARY,
                                 "torchrun --timeout-s 300 --nproc-per-node 4 --python '" + python_ + "' --report-dir '" + report + "' " +
                                     kGroups + " --bug wrong-group",
                                 tmp_.path());
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    const auto s = test::only_result(report);
    ASSERT_FALSE(s.is_null()) << r.out << r.err;
    const auto& d = s.at("diagnosis");
    EXPECT_EQ(d.at("kind"), "collective_mismatch") << d.dump();
    EXPECT_EQ(d.at("rank"), 1) << d.dump();
    const std::string m = d.at("message");
    EXPECT_NE(m.find("on different process groups"), std::string::npos) << m;
    EXPECT_NE(m.find("on the group of ranks 0,1"), std::string::npos) << m;
    EXPECT_EQ(m.find("no progress for 300"), std::string::npos) << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Torches, ProgramGroupsTest, ::testing::Values("debian", "venv"));

// `script` (4 ranks, --digest-out) run natively by hand (torchrun's variables) and under `lockstep
// torchrun`: the program's own digests of both runs, and lockstep's result.
struct NativeAndUnder {
  std::string native, under;
  nlohmann::json result;
  std::string trace0;  // rank 0's trace
};

NativeAndUnder run_native_and_under(const std::string& script_path, const std::string& python, const test::TempDir& tmp,
                                    int world_size = 4) {
  NativeAndUnder out;
  const std::string native = tmp.path() + "/native", under = tmp.path() + "/under";
  const auto n = test::run_native(python, script_path + " --digest-out '" + native + "'", world_size, tmp.path() + "/native.log", native);
  EXPECT_EQ(n.rc, 0) << n.log;
  out.native = test::first_line(native);
  const std::string report = tmp.path() + "/r";
  const auto r = test::again_on_torch_exit_abort(
      [&] {
        return test::run_cli(LOCKSTEP_BINARY,
                             "torchrun --nproc-per-node " + std::to_string(world_size) + " --python '" + python + "' --report-dir '" + report + "' " + script_path +
                                 " --digest-out '" + under + "'",
                             tmp.path());
      },
      report);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  out.under = test::first_line(under);
  out.result = test::only_result(report);
  if (!out.result.is_null() && out.result.contains("artifacts")) {
    out.trace0 = test::read_file(report + "/" + out.result.at("artifacts").get<std::string>() + "/rank0.trace.jsonl");
  }
  return out;
}

// The calls of rank 0's trace on the group of `ranks`, by op.
std::map<std::string, int> calls_on(const std::string& trace, const nlohmann::json& ranks) {
  std::map<std::string, int> on;
  std::istringstream in(trace);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("group") && j.at("group") == ranks) ++on[j.at("op").get<std::string>()];
  }
  return on;
}

// FSDP2 over a 2x2 CPU device mesh with a ZeRO-style head (torch 2.x): the program's own digest of
// its final shards under lockstep is the one it writes natively, the run passes with every call
// verified, and FSDP2's all-gathers and reduce-scatters are in the trace on the mesh's dp group
// (rank 0's is ranks 0,2).
TEST(ProgramFsdp2Test, RunsUnchangedWithItsNativeDigestAndEveryCallVerified) {
  const std::string python = test::venv_python();
  if (!test::imports(python, "torch.distributed.tensor")) GTEST_SKIP() << "no torch 2.x venv with torch.distributed.tensor (ci/setup)";
  test::TempDir tmp("lockstep_fsdp2");
  const auto run = run_native_and_under(kFsdp2, python, tmp);
  ASSERT_FALSE(run.native.empty());
  EXPECT_EQ(run.under, run.native) << "the program's own digest changed under lockstep";
  const auto& s = run.result;
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(s.at("metrics").at("unverified_calls").get<double>(), 0) << s.dump();
  EXPECT_EQ(s.at("metrics").at("program_steps").get<double>(), 6) << s.dump();
  auto on_dp = calls_on(run.trace0, nlohmann::json::array({0, 2}));
  // 6 steps, 2 linear layers sharded (the root holds no parameter of its own): FSDP2 all-gathers
  // each in forward (and again in backward when it freed it after forward) and reduce-scatters each
  // one's gradient once per step.
  EXPECT_GE(on_dp["all_gather"], 6 * 2);
  EXPECT_EQ(on_dp["reduce_scatter"], 6 * 2);
}

// Tensor parallelism (DTensor's ColwiseParallel and RowwiseParallel over the mesh's tp pairs) under
// FSDP2 over dp: the same digest as natively, nothing unverified, and rank 0's tp pair (ranks 0,1)
// all-reduces the row-parallel block's output and the logged loss every step.
TEST(ProgramFsdp2Test, TensorParallelOverAMeshRunsUnchangedWithItsNativeDigest) {
  const std::string python = test::venv_python();
  if (!test::imports(python, "torch.distributed.tensor")) GTEST_SKIP() << "no torch 2.x venv with torch.distributed.tensor (ci/setup)";
  test::TempDir tmp("lockstep_tp");
  const auto run = run_native_and_under(kTp, python, tmp);
  ASSERT_FALSE(run.native.empty());
  EXPECT_EQ(run.under, run.native) << "the program's own digest changed under lockstep";
  const auto& s = run.result;
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(s.at("metrics").at("unverified_calls").get<double>(), 0) << s.dump();
  EXPECT_EQ(s.at("metrics").at("program_steps").get<double>(), 5) << s.dump();
  auto on_tp = calls_on(run.trace0, nlohmann::json::array({0, 1}));
  EXPECT_GE(on_tp["all_reduce"], 5 * 2) << "RowwiseParallel's output and the logged loss, 5 steps";
  EXPECT_GE(calls_on(run.trace0, nlohmann::json::array({0, 2}))["all_gather"], 5) << "FSDP2 over dp";
}

// TorchRec's DistributedModelParallel (ci/systems torchrec-1.9.2's venv; skipped without it): two
// tables sharded table-wise and row-wise, the dense part under the DDP it wraps it in. Under
// lockstep the program's own digest is the native one, nothing is unverified, the run's digest is
// there although DDP ignores the sharded tables (each rank's own), and the row-wise table's pooled
// rows come back by one reduce-scatter per step on the default group.
TEST(ProgramTorchRecTest, DistributedModelParallelRunsUnchangedWithItsNativeDigest) {
  const std::string python = test::systems_python("torchrec-1.9.2");
  if (!test::imports(python, "torchrec")) GTEST_SKIP() << "no TorchRec venv at " << python << " (ci/systems torchrec-1.9.2)";
  test::TempDir tmp("lockstep_torchrec");
  const auto run = run_native_and_under(kTorchRec, python, tmp, 2);
  ASSERT_FALSE(run.native.empty());
  EXPECT_EQ(run.under, run.native) << "the program's own digest changed under lockstep";
  const auto& s = run.result;
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(s.at("status").get<std::string>(), "pass") << s.dump();
  EXPECT_EQ(s.at("metrics").at("unverified_calls").get<double>(), 0) << s.dump();
  EXPECT_EQ(s.at("metrics").at("program_steps").get<double>(), 5) << s.dump();
  EXPECT_FALSE(s.value("digest", "").empty()) << s.dump();
  std::map<std::string, int> on_world;
  std::istringstream in(run.trace0);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("op") && !j.contains("group") && j.value("step", -1) >= 0) ++on_world[j.at("op").get<std::string>()];
  }
  EXPECT_EQ(on_world["reduce_scatter"], 5) << "one per step: the row-wise table's pooled rows";
  EXPECT_GE(on_world["all_to_all"], 5 * 2) << "ids routed and pooled rows returned, every step";
}

}  // namespace
}  // namespace lockstep
