// Multi-rank tests of what a run is expected to do: a scenario passes only when its expected
// outcome happens (the right kind on the right rank), and an injected fault that never fired is
// an error, as is an injection that cannot fire. Real rank processes, as in launcher_test.cpp.
#include "tests/test_util.h"
#include "harness/launch/launcher.h"
#include "harness/launch/verdict.h"
#include <gtest/gtest.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <atomic>
#include <set>
#include <thread>
#include <optional>
#include <sstream>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "harness/core/error.h"
#include "harness/rank/rank_main.h"
#include "harness/report/results.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
#include "lockstep/config.h"
#include "reference/embedding/embedding.h"
#include "reference/io/npy.h"

namespace lockstep::launch {
namespace {

using test::TempDir;
using test::describe;
using test::processes_mentioning;

LaunchOptions options_for(const TempDir& dir, bool dump = false) { return test::launch_options(dir, dump); }

TEST(LauncherExpectationTest, CleanRunExpectingADiagnosisFails) {
  TempDir dir("lockstep_launcher");
  const std::string file = dir.write("clean.toml", R"(name = "test.expects_mismatch"
[run]
world_size = 2
[workload]
kind = "collectives"
steps = 1
count = 8
ops = ["all_reduce"]
[expect]
outcome = "collective_mismatch"
)");
  const auto r = run_scenario(lockstep::validate::load_file(file).at(0), options_for(dir));
  EXPECT_EQ(r.status, report::Status::kFail) << describe(r);
  EXPECT_FALSE(r.diagnosis.has_value()) << describe(r);
  EXPECT_EQ(r.expected, "collective_mismatch");
  EXPECT_CONTAINS(r.reason, "expected collective_mismatch, but the run passed");
}

// ---------------------------------------------------------------------------------------------
// An injection that never fired tested nothing: the scenario is an error, never a pass.

struct UnfiredCase {
  const char* label;
  const char* workload;  // the [workload] body
  const char* inject;    // the [[inject]] body
  const char* outcome;
  std::vector<std::string> reason_parts;
};

class UnfiredInjectionTest : public ::testing::TestWithParam<UnfiredCase> {};

TEST_P(UnfiredInjectionTest, IsAnErrorNamingTheInjection) {
  const UnfiredCase& c = GetParam();
  TempDir dir("lockstep_launcher");
  std::ostringstream toml;
  toml << "name = \"test.unfired_" << c.label << "\"\n[run]\nworld_size = 2\n[workload]\n" << c.workload
       << "\n[[inject]]\n" << c.inject << "\n[expect]\noutcome = \"" << c.outcome << "\"\n";
  const std::string file = dir.write("unfired.toml", toml.str());
  const auto r = run_scenario(lockstep::validate::load_file(file).at(0), options_for(dir));
  EXPECT_EQ(r.status, report::Status::kError) << describe(r);
  EXPECT_CONTAINS(r.reason, "never fired");
  EXPECT_CONTAINS(r.reason, "unfired.toml:");
  for (const auto& part : c.reason_parts) EXPECT_CONTAINS(r.reason, part);
}

INSTANTIATE_TEST_SUITE_P(
    Injections, UnfiredInjectionTest,
    ::testing::Values(
        // A hang at step 20 of a 3-step run: it used to pass.
        UnfiredCase{"step_past_the_end", "kind = \"collectives\"\nsteps = 3\ncount = 8\nops = [\"all_reduce\"]",
                    "kind = \"sleep\"\nrank = 1\nstep = 20\nseconds = 60", "pass",
                    {"#0 (sleep", "rank 1 issued no call matching step 20", "the last step it issued a collective from was 2"}},
        // Aimed at call 1 of a step whose call 1 is another op.
        UnfiredCase{"call_of_another_op",
                    "kind = \"collectives\"\nsteps = 2\ncount = 8\nops = [\"all_reduce\", \"all_gather\"]",
                    "kind = \"dtype_mismatch\"\nrank = 0\nstep = 1\ncall = 1\nop = \"all_reduce\"\ndtype = \"f64\"",
                    "collective_mismatch", {"step 1, call 1, op all_reduce"}},
        // A workload's own bug: the cast at step 20 of a run that has fewer steps.
        UnfiredCase{"cast_after_the_last_step",
                    "kind = \"training\"\ngraph = \"erdos_renyi\"\nnodes = 500\nedges = 4000\nnum_train = 128\nnum_eval = 50\nbatch_size = 32\nsteps = 9",
                    "kind = \"cast_bf16_at_step\"\nrank = 1\nstep = 20", "collective_mismatch",
                    {"cast_bf16_at_step", "the workload never reached"}}),
    [](const ::testing::TestParamInfo<UnfiredCase>& info) { return std::string(info.param.label); });

// ---------------------------------------------------------------------------------------------
// An injection that fired but changed nothing tested nothing either: a bug that changes the
// result only with some data (duplicate ids, a row pushed by two ranks, an id that is not
// local) is an error when the run's data had none. Where the file itself says so (world size 1,
// one id per batch), the scenario is refused at load.

// The ids of step 0 of the embedding workload's batches (the reference's closed form).
std::vector<std::int64_t> embedding_step0_ids(std::uint64_t seed, std::int64_t batch, std::int64_t rows, std::int64_t hot_rows) {
  std::vector<std::int64_t> ids;
  for (std::int64_t p = 0; p < batch; ++p) ids.push_back(ref::embedding_batch_id(seed, 0, p, rows, hot_rows));
  return ids;
}

struct UnchangedCase {
  const char* label;
  int world_size;
  const char* workload;  // the [workload] body
  const char* inject;    // the [[inject]] kind
};

class FiredButUnchangedTest : public ::testing::TestWithParam<UnchangedCase> {};

TEST_P(FiredButUnchangedTest, IsAnErrorNamingTheInjection) {
  const UnchangedCase& c = GetParam();
  TempDir dir("lockstep_launcher");
  std::ostringstream toml;
  toml << "name = \"test.unchanged_" << c.label << "\"\n[run]\nworld_size = " << c.world_size << "\n[workload]\n"
       << c.workload << "\n[[inject]]\nkind = \"" << c.inject << "\"\n[expect]\noutcome = \"result_mismatch\"\n";
  const std::string file = dir.write("unchanged.toml", toml.str());
  const std::string body = c.workload;
  const int inject_line = 6 + static_cast<int>(std::count(body.begin(), body.end(), '\n'));  // [[inject]]
  const auto r = run_scenario(lockstep::validate::load_file(file).at(0), options_for(dir));
  EXPECT_EQ(r.status, report::Status::kError) << describe(r);
  EXPECT_CONTAINS(r.reason, std::string("injection #0 (") + c.inject + ", " + file + ":" + std::to_string(inject_line) + ")");
  EXPECT_CONTAINS(r.reason, "but changed nothing");
  EXPECT_TRUE(processes_mentioning(dir.path()).empty());
}

INSTANTIATE_TEST_SUITE_P(
    Injections, FiredButUnchangedTest,
    ::testing::Values(
        // Two ids per step, from 1009 rows: no row has two gradients (checked below).
        UnchangedCase{"mean_without_duplicates", 2,
                      "kind = \"embedding\"\noptimizers = [\"sgd\"]\nsteps = 1\nbatch_sizes = [2]\nrows = 1009\nhot_rows = 1009",
                      "mean_instead_of_sum"},
        // Each rank pushes one id, and they differ: no row is pushed by two ranks.
        UnchangedCase{"lost_update_without_shared_rows", 2,
                      "kind = \"embedding\"\noptimizers = [\"adam\"]\nsteps = 1\nbatch_sizes = [2]\nrows = 1009\nhot_rows = 1009",
                      "lost_update"},
        // Four nodes and 400 random edges: every node is a neighbour of every other, so each
        // rank's owned and halo nodes are the whole graph and no id maps to -1.
        UnchangedCase{"minus_one_with_every_id_halo", 2,
                      "kind = \"graph_lookup\"\ngraph = \"erdos_renyi\"\nnodes = 4\nedges = 400\nqueries = 16",
                      "minus_one_local"}),
    [](const ::testing::TestParamInfo<UnchangedCase>& info) { return std::string(info.param.label); });

// The premise of the two embedding cases above, from the reference: step 0's two ids differ.
TEST(InjectionChangeTest, EmbeddingCasesHaveNoDuplicateIds) {
  const auto ids = embedding_step0_ids(/*seed=*/0, /*batch=*/2, /*rows=*/1009, /*hot_rows=*/1009);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_NE(ids[0], ids[1]);
}

// The bug scenarios of the three injections still find their bug: the injection changed
// something, and the verdict is the expected diagnosis.
TEST(InjectionChangeTest, BugScenariosStillPass) {
  for (const char* path : {"scenarios/embedding/bug_mean_instead_of_sum.toml", "scenarios/embedding/bug_lost_update.toml",
                           "scenarios/partition/bug_minus_one_local.toml"}) {
    TempDir dir("lockstep_launcher");
    const auto r = run_scenario(lockstep::validate::load_file(std::string(LOCKSTEP_SOURCE_DIR) + "/" + path).at(0), options_for(dir));
    EXPECT_EQ(r.status, report::Status::kPass) << path << ": " << describe(r);
    ASSERT_TRUE(r.diagnosis.has_value()) << path;
    EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kResultMismatch) << path;
  }
}

// Settings that leave a bug nothing to change are refused at load, naming the [[inject]]'s
// file:line and the key that makes it impossible.
TEST(InjectionValidationTest, InjectionsThatCannotChangeAnythingAreRefusedAtLoad) {
  TempDir dir("lockstep_launcher");
  struct Case {
    const char* run;       // [run] body
    const char* workload;  // [workload] body (kind included)
    const char* inject;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"world_size = 1", "kind = \"embedding\"\noptimizers = [\"adam\"]", "lost_update",
       {"lost_update cannot change anything here", "run.world_size = 1"}},
      {"world_size = 2", "kind = \"embedding\"\noptimizers = [\"adam\"]\nbatch_sizes = [1, 0, 1]", "lost_update",
       {"lost_update cannot change anything here", "workload.batch_sizes"}},
      {"world_size = 2", "kind = \"embedding\"\noptimizers = [\"sgd\"]\nbatch_sizes = [1]", "mean_instead_of_sum",
       {"mean_instead_of_sum cannot change anything here", "at most one id", "workload.batch_sizes"}},
      {"world_size = 2", "kind = \"embedding\"\noptimizers = [\"sgd\"]\nreduce = \"mean\"", "mean_instead_of_sum",
       {"mean_instead_of_sum cannot change anything here", "workload.reduce = \"mean\""}},
      {"world_size = 1", "kind = \"graph_lookup\"\ngraph = \"erdos_renyi\"\nnodes = 100\nedges = 300", "minus_one_local",
       {"minus_one_local cannot change anything here", "run.world_size = 1", "every id is local"}},
      {"world_size = 3", "kind = \"graph_lookup\"\ngraph = \"erdos_renyi\"\nnodes = 100\nedges = 300\nnum_parts = 1",
       "minus_one_local", {"minus_one_local cannot change anything here", "workload.num_parts = 1"}},
  };
  for (const auto& c : cases) {
    const std::string text = std::string("name = \"test.bad\"\n[run]\n") + c.run + "\n[workload]\n" + c.workload +
                             "\n[[inject]]\nkind = \"" + c.inject + "\"\n[expect]\noutcome = \"result_mismatch\"\n";
    const std::string file = dir.write("bad.toml", text);
    // The line of `kind = "<inject>"`: the one after [[inject]].
    const int line = static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(text.find("[[inject]]")), '\n')) + 2;
    try {
      lockstep::validate::load_file(file);
      ADD_FAILURE() << "accepted: " << c.inject << " with " << c.run << ", " << c.workload;
    } catch (const InputError& e) {
      EXPECT_CONTAINS(std::string(e.what()), file + ":" + std::to_string(line) + ": inject.kind: ");
      for (const auto& part : c.expected) EXPECT_CONTAINS(std::string(e.what()), part);
    }
  }
  // Per variant: the world_size 1 variant of a [matrix] is refused with the file.
  const std::string matrix = dir.write("matrix.toml", R"(name = "test.matrix"
[workload]
kind = "embedding"
optimizers = ["adam"]
[[inject]]
kind = "lost_update"
[matrix]
world_size = [2, 1]
)");
  try {
    lockstep::validate::load_file(matrix);
    ADD_FAILURE() << "accepted lost_update under world_size = [2, 1]";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(std::string(e.what()), matrix + ":6: inject.kind: lost_update cannot change anything here");
  }
}

// ---------------------------------------------------------------------------------------------
// A dtype cast on either side of a send/recv pair is a collective_mismatch naming both sides.
// On the receiving side a narrower buffer than the peer sends fails the engine's transport
// thread, which also carries the rank's own send: the mismatch must still be named, not end as
// a timeout naming no collective.

struct P2pCastCase {
  const char* label;
  const char* op;     // the side that casts: "send" (rank 1) or "recv" (rank 2)
  const char* dtype;  // what it casts to
  std::vector<std::string> message_parts;
};

class P2pCastTest : public ::testing::TestWithParam<P2pCastCase> {};

TEST_P(P2pCastTest, IsACollectiveMismatchNamingBothSides) {
  const P2pCastCase& c = GetParam();
  TempDir dir("lockstep_launcher");
  // Ring of 3: rank r sends to r + 1 and receives from r - 1; rank 1 sends to rank 2.
  std::ostringstream toml;
  toml << "name = \"test.p2p_cast_" << c.label << "\"\n[run]\nworld_size = 3\ntimeout_s = 20\n[workload]\n"
       << "kind = \"collectives\"\nsteps = 3\ncount = 64\nops = [\"send_recv\", \"all_reduce\"]\n[[inject]]\n"
       << "kind = \"dtype_mismatch\"\nrank = " << (std::string(c.op) == "send" ? 1 : 2) << "\nstep = 1\nop = \"" << c.op
       << "\"\ndtype = \"" << c.dtype << "\"\n[expect]\noutcome = \"collective_mismatch\"\nstep = 1\n";
  const std::string file = dir.write("p2p.toml", toml.str());
  const auto r = run_scenario(lockstep::validate::load_file(file).at(0), options_for(dir));
  EXPECT_EQ(r.status, report::Status::kPass) << describe(r);
  ASSERT_TRUE(r.diagnosis.has_value()) << describe(r);
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kCollectiveMismatch) << describe(r);  // not a timeout
  EXPECT_EQ(r.diagnosis->step, 1);
  EXPECT_CONTAINS(r.diagnosis->message, "p2p #");
  for (const auto& part : c.message_parts) EXPECT_CONTAINS(r.diagnosis->message, part);
  EXPECT_TRUE(processes_mentioning(dir.path()).empty());
}

INSTANTIATE_TEST_SUITE_P(
    Sides, P2pCastTest,
    ::testing::Values(P2pCastCase{"send_f16", "send", "f16", {"rank 1 send f16[64]", "rank 2 recv f32[64]"}},
                      // The receive buffer is half what arrives: the engine fails on rank 2.
                      P2pCastCase{"recv_f16", "recv", "f16", {"rank 1 send f32[64]", "rank 2 recv f16[64]"}},
                      P2pCastCase{"recv_f64", "recv", "f64", {"rank 1 send f32[64]", "rank 2 recv f64[64]"}}),
    [](const ::testing::TestParamInfo<P2pCastCase>& info) { return std::string(info.param.label); });

// The receive's check runs on a thread of its own; when the sender dies before sending, the
// receiver's failure still reaches the caller (a communication error), and the run blames the
// sender, with no rank left waiting.
TEST(P2pFailureTest, SenderCrashBeforeSendIsItsRankFailure) {
  TempDir dir("lockstep_launcher");
  const std::string file = dir.write("crash.toml", R"(name = "test.p2p_crash"
[run]
world_size = 3
timeout_s = 20
[workload]
kind = "collectives"
steps = 3
count = 64
ops = ["send_recv", "all_reduce"]
[[inject]]
kind = "crash"
rank = 1
step = 1
op = "send"
exit_code = 9
[expect]
outcome = "rank_failure"
rank = 1
)");
  const auto r = run_scenario(lockstep::validate::load_file(file).at(0), options_for(dir));
  EXPECT_EQ(r.status, report::Status::kPass) << describe(r);
  ASSERT_TRUE(r.diagnosis.has_value()) << describe(r);
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kRankFailure);
  EXPECT_CONTAINS(r.diagnosis->message, "rank 1 exited with code 9");
  EXPECT_TRUE(processes_mentioning(dir.path()).empty());
}

// Combinations an injector cannot honour are refused when the file is loaded.
TEST(InjectionValidationTest, ImpossibleTargetsAreRefusedAtLoad) {
  TempDir dir("lockstep_launcher");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"kind = \"root_mismatch\"\nrank = 0\nstep = 1\nop = \"all_to_all\"", "only broadcast has a root"},
      {"kind = \"reduce_mismatch\"\nrank = 0\nop = \"all_gather\"", "only all_reduce has a reduce op"},
      {"kind = \"split_mismatch\"\nrank = 0\nop = \"broadcast\"", "only all_to_all has split sizes"},
      {"kind = \"count_mismatch\"\nrank = 0\nop = \"barrier\"", "a barrier carries no data"},
      {"kind = \"dtype_mismatch\"\nrank = 0\nop = \"barrier\"\ndtype = \"f16\"", "a barrier carries no data"},
      {"kind = \"skip_collective\"\nrank = 0\nphase = \"startup\"", "only crash, sleep and exit_early"},
      {"kind = \"crash\"\nrank = 0\nphase = \"startup\"\nstep = 1", "remove step"},
      {"kind = \"sleep\"\nrank = 0\nstep = 1\nseconds = nan", "must be a finite number, got nan"},
      {"kind = \"sleep\"\nrank = 0\nstep = 1\nseconds = inf", "must be a finite number, got inf"},
      {"kind = \"crash\"\nrank = 0\nstep = 1\nexit_code = 5", "not 2 to 5"},
  };
  for (const auto& [inject, expected] : cases) {
    const std::string file = dir.write("bad.toml", "name = \"test.bad\"\n[run]\nworld_size = 2\n[workload]\nkind = \"collectives\"\n"
                                                   "steps = 2\nops = [\"all_reduce\"]\n[[inject]]\n" + inject +
                                                   "\n[expect]\noutcome = \"pass\"\n");
    try {
      lockstep::validate::load_file(file);
      ADD_FAILURE() << "accepted: " << inject;
    } catch (const InputError& e) {
      EXPECT_CONTAINS(std::string(e.what()), expected);
      EXPECT_CONTAINS(std::string(e.what()), "bad.toml:");
    }
  }
}

// A rank whose start-up takes longer than timeout_s (here a 6 s sleep before it connects,
// as a slow graph build would) is not a collective timeout: the run passes.
TEST(MeetsExpectationTest, StepMustEqualTheDiagnosisStep) {
  scenario::Expectation e;
  e.kind = DiagnosisKind::kCollectiveMismatch;
  e.step = 27;
  std::string why;
  Diagnosis d{DiagnosisKind::kCollectiveMismatch, "collective #9 (train step 27 call 0): ...", 2, 9, 27};
  EXPECT_TRUE(meets_expectation(e, d, why)) << why;
  d.step = 26;
  EXPECT_FALSE(meets_expectation(e, d, why));
  EXPECT_CONTAINS(why, "expected the diagnosis at step 27, got step 26");
  d.step = -1;
  EXPECT_FALSE(meets_expectation(e, d, why));
  EXPECT_CONTAINS(why, "expected the diagnosis at step 27, it names no step");
  e.step.reset();
  EXPECT_TRUE(meets_expectation(e, d, why)) << why;
}

TEST(LauncherExpectationTest, RightKindWrongRankFails) {
  TempDir dir("lockstep_launcher");
  const std::string file = dir.write("rank.toml", R"(name = "test.wrong_rank"
[run]
world_size = 2
[workload]
kind = "collectives"
steps = 2
count = 8
ops = ["all_reduce"]
[[inject]]
kind = "crash"
rank = 1
step = 1
exit_code = 9
[expect]
outcome = "rank_failure"
rank = 0
)");
  const auto r = run_scenario(lockstep::validate::load_file(file).at(0), options_for(dir));
  EXPECT_EQ(r.status, report::Status::kFail) << describe(r);
  ASSERT_TRUE(r.diagnosis.has_value());
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kRankFailure);
  EXPECT_EQ(r.diagnosis->rank, 1);
  EXPECT_CONTAINS(r.reason, "expected the diagnosis to name rank 0, it names rank 1");
  EXPECT_TRUE(processes_mentioning(dir.path()).empty());
}


}  // namespace
}  // namespace lockstep::launch
