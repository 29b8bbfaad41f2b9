// Tests of the scenario schema: parsing, defaults, [matrix] expansion and path expansion. That
// every InputError names the file:line written in the test's own TOML text is tested in
// scenario_errors_test.cpp.
#include "tests/test_util.h"
#include "harness/scenario/scenario.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "harness/core/error.h"
#include "harness/scenario/config_internal.h"
#include "tests/scenario_test_util.h"

namespace lockstep::scenario {
namespace {

using schema_test::input_error;
using schema_test::kMinimal;
using schema_test::load_file;
using schema_test::load_paths;
using schema_test::parse_only;
using schema_test::ScenarioTest;
namespace fs = std::filesystem;

TEST_F(ScenarioTest, MinimalFileGetsDefaults) {
  std::string path = write("minimal.toml", kMinimal);
  std::vector<Scenario> scenarios = load_file(path);
  ASSERT_EQ(scenarios.size(), 1u);
  const Scenario& s = scenarios[0];
  EXPECT_EQ(s.name, "comm.minimal");
  EXPECT_EQ(s.file, path);
  EXPECT_EQ(s.variant, "");
  EXPECT_EQ(s.variant_index, 0u);
  EXPECT_EQ(s.id(), "comm.minimal");
  EXPECT_EQ(s.slug(), "comm.minimal");
  EXPECT_EQ(s.description, "");
  EXPECT_TRUE(s.tags.empty());
  EXPECT_FALSE(s.requires_cuda);
  EXPECT_EQ(s.requires_ranks, 1);
  EXPECT_EQ(s.world_size, 1);
  EXPECT_EQ(s.backend, Backend::kGloo);
  EXPECT_EQ(s.device, Device::kCpu);
  EXPECT_EQ(s.verify, VerifyMode::kVerify);
  EXPECT_DOUBLE_EQ(s.timeout_s, 60.0);
  EXPECT_EQ(s.seed, 0u);
  EXPECT_EQ(s.workload, "collectives");
  EXPECT_TRUE(s.injections.empty());
  EXPECT_FALSE(s.expect.kind.has_value());
  EXPECT_FALSE(s.expect.rank.has_value());
  EXPECT_FALSE(s.expect.seq.has_value());
  EXPECT_EQ(s.expect.expected_label(), "pass");
  EXPECT_TRUE(s.matrix_invariant);
}

// Injections are handled by workloads::validate, which this schema test leaves out.
TEST_F(ScenarioTest, AllKeysAreParsed) {
  std::string path = write("all.toml", R"(name = "comm.dtype_mismatch"
description = "one rank casts to bf16 before the allreduce"
tags = ["comm", "bug"]

[requires]
cuda = true
ranks = 4

[run]
world_size = 2
backend = "nccl"
device = "cuda"
verify = "record"
timeout_s = 12.5
seed = 7

[workload]
kind = "collectives"

[[inject]]
kind = "dtype_mismatch"
rank = 1

[[inject]]
kind = "delay"

[expect]
outcome = "collective_mismatch"
rank = 1
seq = 12
message_contains = ["bf16", "allreduce"]
)");
  std::vector<Scenario> scenarios = parse_only(path);
  ASSERT_EQ(scenarios.size(), 1u);
  const Scenario& s = scenarios[0];
  EXPECT_EQ(s.name, "comm.dtype_mismatch");
  EXPECT_EQ(s.description, "one rank casts to bf16 before the allreduce");
  EXPECT_EQ(s.tags, (std::vector<std::string>{"comm", "bug"}));
  EXPECT_TRUE(s.requires_cuda);
  EXPECT_EQ(s.requires_ranks, 4);
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.backend, Backend::kNccl);
  EXPECT_EQ(s.device, Device::kCuda);
  EXPECT_EQ(s.verify, VerifyMode::kRecord);
  EXPECT_DOUBLE_EQ(s.timeout_s, 12.5);
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.workload, "collectives");
  EXPECT_NO_THROW(s.workload_config.finish());
  ASSERT_EQ(s.injections.size(), 2u);
  EXPECT_EQ(s.injections[0].kind, "dtype_mismatch");
  EXPECT_EQ(s.injections[0].config.get_int("rank"), 1);
  EXPECT_NO_THROW(s.injections[0].config.finish());
  EXPECT_EQ(s.injections[1].kind, "delay");
  ASSERT_TRUE(s.expect.kind.has_value());
  EXPECT_EQ(*s.expect.kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(s.expect.expected_label(), "collective_mismatch");
  EXPECT_EQ(s.expect.rank, 1);
  EXPECT_EQ(s.expect.seq, 12);
  EXPECT_EQ(s.expect.message_contains, (std::vector<std::string>{"bf16", "allreduce"}));
  EXPECT_EQ(s.id(), "comm.dtype_mismatch");
}

TEST_F(ScenarioTest, InjectionKeysNotReadAreReportedByFinish) {
  std::string path = write("inject.toml", R"(name = "comm.inject"
[workload]
kind = "collectives"
[[inject]]
kind = "dtype_mismatch"
rnak = 1
[expect]
outcome = "collective_mismatch"
)");
  std::vector<Scenario> scenarios = parse_only(path);
  ASSERT_EQ(scenarios.size(), 1u);
  ASSERT_EQ(scenarios[0].injections.size(), 1u);
  const Config& config = scenarios[0].injections[0].config;
  config.get_int("rank", 0);
  std::string message = input_error([&] { config.finish(); });
  EXPECT_CONTAINS(message, path + ":6: inject.rnak: unknown key");
  EXPECT_CONTAINS(message, "did you mean 'rank'");
}

TEST_F(ScenarioTest, MatrixExpandsRunKeys) {
  std::string path = write("matrix.toml", R"(name = "comm.matrix"
[run]
world_size = 8
[workload]
kind = "collectives"
[expect]
outcome = "pass"
[matrix]
world_size = [1, 2, 4]
verify = ["off", "verify"]
invariant = false
)");
  std::vector<Scenario> scenarios = load_file(path);
  // toml++ iterates [matrix] in key order: verify, then world_size (the last varies fastest).
  const std::vector<std::string> variants = {
      "verify=off,world_size=1",    "verify=off,world_size=2",    "verify=off,world_size=4",
      "verify=verify,world_size=1", "verify=verify,world_size=2", "verify=verify,world_size=4"};
  const std::vector<int> world_sizes = {1, 2, 4, 1, 2, 4};
  ASSERT_EQ(scenarios.size(), variants.size());
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    const Scenario& s = scenarios[i];
    EXPECT_EQ(s.variant, variants[i]);
    EXPECT_EQ(s.variant_index, i);
    EXPECT_EQ(s.world_size, world_sizes[i]);
    EXPECT_EQ(s.requires_ranks, world_sizes[i]);
    EXPECT_EQ(s.verify, i < 3 ? VerifyMode::kOff : VerifyMode::kVerify);
    EXPECT_FALSE(s.matrix_invariant);
    EXPECT_EQ(s.id(), "comm.matrix[" + variants[i] + "]");
  }
  EXPECT_EQ(scenarios[1].slug(), "comm.matrix_verify_off_world_size_2_");
}

// A "workload.<key>" dimension: the collectives workload may not accept this key, so the
// schema is checked without workloads::validate.
TEST_F(ScenarioTest, MatrixOverridesWorkloadKeys) {
  std::string path = write("workers.toml", R"(name = "loader.workers"
[workload]
kind = "collectives"
num_workers = 8
[expect]
outcome = "pass"
[matrix]
"workload.num_workers" = [0, 2]
world_size = [1, 2]
)");
  std::vector<Scenario> scenarios = parse_only(path);
  const std::vector<std::string> variants = {
      "workload.num_workers=0,world_size=1", "workload.num_workers=0,world_size=2",
      "workload.num_workers=2,world_size=1", "workload.num_workers=2,world_size=2"};
  const std::vector<std::int64_t> workers = {0, 0, 2, 2};
  const std::vector<int> world_sizes = {1, 2, 1, 2};
  ASSERT_EQ(scenarios.size(), variants.size());
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    EXPECT_EQ(scenarios[i].variant, variants[i]);
    EXPECT_EQ(scenarios[i].world_size, world_sizes[i]);
    EXPECT_EQ(scenarios[i].workload, "collectives");
    EXPECT_EQ(scenarios[i].workload_config.get_int("num_workers"), workers[i]);
    EXPECT_TRUE(scenarios[i].matrix_invariant);
  }
  // The overridden key is named where the matrix sets it.
  std::string message =
      input_error([&] { scenarios[0].workload_config.get_string("num_workers"); });
  EXPECT_CONTAINS(message,
                  path + ":8: matrix.\"workload.num_workers\": expected a string, got integer 0");
}

TEST_F(ScenarioTest, MatrixValueErrorPointsAtMatrixLine) {
  std::string path = write("bad_matrix.toml", R"(name = "comm.bad_matrix"
[workload]
kind = "collectives"
[expect]
outcome = "pass"
[matrix]
world_size = [2,
  0]
)");
  std::string message = input_error([&] { load_file(path); });
  EXPECT_CONTAINS(message, path + ":8: matrix.world_size: must be in [1, 64], got 0");
}

// A [run] value that a [matrix] dimension overrides in every variant is never used, but it is
// still the file's value: it is checked by its own rule (type and range) all the same.
TEST_F(ScenarioTest, RunKeyOverriddenByMatrixIsStillValidated) {
  struct Case {
    const char* run;       // the [run] key (line 5 of the file)
    const char* matrix;    // the [matrix] line
    const char* expected;  // the message after "file:4: "
  };
  const std::vector<Case> cases = {
      {"world_size = nan", "world_size = [1, 2]", "run.world_size: expected an integer, got float nan"},
      {"world_size = 0", "world_size = [1, 2]", "run.world_size: must be in [1, 64], got 0"},
      {"world_size = \"two\"", "world_size = [2]", "run.world_size: expected an integer, got string \"two\""},
      {"backend = \"mpi\"", "backend = [\"gloo\"]", "run.backend: unknown value \"mpi\"; allowed: gloo, nccl"},
      {"device = \"tpu\"", "device = [\"cpu\"]", "run.device: unknown value \"tpu\"; allowed: cpu, cuda"},
      {"verify = \"yes\"", "verify = [\"off\"]", "run.verify: unknown value \"yes\"; allowed: off, record, verify"},
      {"timeout_s = -1", "timeout_s = [5]", "run.timeout_s: must be in (0, 3600] seconds, got -1"},
      {"timeout_s = inf", "timeout_s = [5]", "run.timeout_s: must be a finite number, got inf"},
      {"startup_timeout_s = 0", "startup_timeout_s = [5]", "run.startup_timeout_s: must be in (0, 3600] seconds, got 0"},
      {"deadline_s = 90000.5", "deadline_s = [4000]", "run.deadline_s: must be in (0, 86400] seconds, got 90000.5"},
      {"seed = -3", "seed = [1, 2]", "run.seed: must be >= 0, got -3"},
      {"ranks_per_node = 65", "ranks_per_node = [1]", "run.ranks_per_node: must be in [1, 64], got 65"},
  };
  for (const auto& c : cases) {
    const std::string path = write("overridden.toml", std::string(R"(name = "comm.overridden"
[workload]
kind = "collectives"
[run]
)") + c.run + "\n[matrix]\n" + c.matrix + "\n");
    EXPECT_EQ(input_error([&] { parse_only(path); }), path + ":5: " + c.expected) << c.run;
    EXPECT_EQ(input_error([&] { load_file(path); }), path + ":5: " + c.expected) << c.run;
  }
  // The rules between keys apply to each variant's own values: a deadline below the default
  // startup_timeout_s + timeout_s is fine when every variant lowers them.
  const std::string ok = write("between.toml", R"(name = "comm.between"
[workload]
kind = "collectives"
[run]
deadline_s = 100
backend = "nccl"
[matrix]
startup_timeout_s = [10]
timeout_s = [20, 30]
device = ["cuda"]
)");
  const auto variants = parse_only(ok);
  ASSERT_EQ(variants.size(), 2u);
  EXPECT_EQ(variants[0].deadline_s, 100.0);
  EXPECT_EQ(variants[1].timeout_s, 30.0);
}

TEST_F(ScenarioTest, MatrixUnknownKeyAndDuplicateValue) {
  std::string unknown = write("unknown_matrix.toml", std::string(kMinimal) + R"([matrix]
world_size = [1]
ranks = [1, 2]
)");
  std::string message = input_error([&] { load_file(unknown); });
  EXPECT_CONTAINS(message, unknown + ":8: matrix.ranks: unknown key");
  EXPECT_CONTAINS(message, "\"workload.<key>\"");

  std::string duplicate = write("duplicate_matrix.toml", std::string(kMinimal) + R"([matrix]
backend = ["gloo",
  "gloo"]
)");
  message = input_error([&] { load_file(duplicate); });
  EXPECT_CONTAINS(message, duplicate + ":8: matrix.backend[1]: duplicate value gloo");

  std::string empty = write("empty_matrix.toml", std::string(kMinimal) + R"([matrix]
seed = []
)");
  message = input_error([&] { load_file(empty); });
  EXPECT_CONTAINS(message, empty + ":7: matrix.seed: expected a non-empty array");
}

// [compare]: a comparison's tolerances and the curve a program logs (scenarios/README.md,
// "Comparing across environments").
constexpr const char* kProgramHead = R"(name = "programs.cmp"
[workload]
kind = "program"
command = ["{python}", "t.py"]
[compare]
)";

TEST_F(ScenarioTest, CompareDeclaresTolerancesAndTheCurveAProgramLogs) {
  const auto s = load_file(write("cmp.toml", std::string(kProgramHead) + R"(curve = 'step (\d+) loss (\S+)'
curve_rtol = 0.01
param_rtol = 1e-3
param_atol = 2e-6
sequence = "may_change"
)"));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(s[0].tolerances.declared);
  EXPECT_EQ(s[0].tolerances.curve_rtol, 0.01);
  EXPECT_EQ(s[0].tolerances.param_rtol, 1e-3);
  EXPECT_EQ(s[0].tolerances.param_atol, 2e-6);
  EXPECT_TRUE(s[0].tolerances.sequence_may_change);
  EXPECT_EQ(s[0].curve, "step (\\d+) loss (\\S+)");
  EXPECT_EQ(s[0].curve_name, "loss");
  EXPECT_FALSE(load_file(write("none.toml", kMinimal))[0].tolerances.declared) << "no [compare]: nothing declared";
}

TEST_F(ScenarioTest, CompareRefusesWhatItCannotUseNamingTheLine) {
  auto error = [&](const std::string& name, const std::string& lines) {
    const std::string path = write(name, std::string(kProgramHead) + lines);
    return std::make_pair(path, input_error([&] { load_file(path); }));
  };
  auto [p1, m1] = error("groups.toml", "curve = '(a)(b)(c)'\n");
  EXPECT_CONTAINS(m1, p1 + ":6: compare.curve: needs 1 group (the value) or 2 (the step, then the value), got 3");
  auto [p2, m2] = error("regex.toml", "curve = 'loss ([0-9'\n");
  EXPECT_CONTAINS(m2, p2 + ":6: compare.curve: not a regular expression (ECMAScript)");
  auto [p3, m3] = error("neg.toml", "param_rtol = -1\n");
  EXPECT_CONTAINS(m3, p3 + ":6: compare.param_rtol: must be in [0, 1e+30], got -1");
  auto [p4, m4] = error("seq.toml", "sequence = \"maybe\"\n");
  EXPECT_CONTAINS(m4, p4 + ":6: compare.sequence: unknown value \"maybe\"; allowed: same, may_change");
  auto [p5, m5] = error("key.toml", "loss_rtol = 0.1\n");
  EXPECT_CONTAINS(m5, p5 + ":6: compare.loss_rtol: unknown key");
  const std::string own = write("own.toml", std::string(kMinimal) + "[compare]\ncurve = '(x)'\n");
  EXPECT_CONTAINS(input_error([&] { load_file(own); }), own + ":7: compare.curve: a curve is read from a program's log");
}

TEST_F(ScenarioTest, MissingPath) {
  std::string path = dir_ + "/nope.toml";
  EXPECT_EQ(input_error([&] { load_file(path); }), "no such file or directory: " + path);
  EXPECT_EQ(input_error([&] { load_paths({path}); }), "no such file or directory: " + path);
  EXPECT_EQ(input_error([&] { expand_paths({dir_ + "/nope"}); }),
            "no such file or directory: " + dir_ + "/nope");
}

TEST_F(ScenarioTest, ExpandPathsSearchesDirectoriesSortedAndDeduplicated) {
  std::string b = write("suite/comm/b.toml", kMinimal);
  std::string a = write("suite/a.toml", kMinimal);
  std::string c = write("suite/comm/deep/c.toml", kMinimal);
  write("suite/comm/notes.md", "not a scenario");
  std::vector<std::string> files = expand_paths({dir_ + "/suite", b});
  EXPECT_EQ(files, (std::vector<std::string>{a, b, c}));

  fs::create_directories(fs::path(dir_) / "empty");
  write("empty/readme.txt", "nothing here");
  EXPECT_CONTAINS(input_error([&] { expand_paths({dir_ + "/empty"}); }), dir_ + "/empty");
}

TEST_F(ScenarioTest, LoadPathsRejectsDuplicateIds) {
  std::string first = write("suite/first.toml", kMinimal);
  std::string second = write("suite/second.toml", kMinimal);
  std::string message = input_error([&] { load_paths({dir_ + "/suite"}); });
  EXPECT_CONTAINS(message, "comm.minimal");
  EXPECT_CONTAINS(message, first);
  EXPECT_CONTAINS(message, second);
}

TEST_F(ScenarioTest, LoadPathsLoadsEveryFileInOrder) {
  write("suite/b.toml", R"(name = "comm.b"
[workload]
kind = "collectives"
[expect]
outcome = "pass"
[matrix]
world_size = [1, 2]
)");
  write("suite/a.toml", kMinimal);
  std::vector<Scenario> scenarios = load_paths({dir_ + "/suite"});
  ASSERT_EQ(scenarios.size(), 3u);
  EXPECT_EQ(scenarios[0].id(), "comm.minimal");
  EXPECT_EQ(scenarios[1].id(), "comm.b[world_size=1]");
  EXPECT_EQ(scenarios[2].id(), "comm.b[world_size=2]");
}

TEST(ScenarioStrings, ToStringAndLabels) {
  EXPECT_EQ(to_string(Backend::kGloo), "gloo");
  EXPECT_EQ(to_string(Backend::kNccl), "nccl");
  EXPECT_EQ(to_string(VerifyMode::kOff), "off");
  EXPECT_EQ(to_string(VerifyMode::kRecord), "record");
  EXPECT_EQ(to_string(VerifyMode::kVerify), "verify");
  EXPECT_EQ(to_string(Device::kCpu), "cpu");
  EXPECT_EQ(to_string(Device::kCuda), "cuda");
  Expectation expect;
  EXPECT_EQ(expect.expected_label(), "pass");
  expect.kind = DiagnosisKind::kTimeout;
  EXPECT_EQ(expect.expected_label(), "timeout");
  Scenario s;
  s.name = "a.b";
  s.variant = "world_size=2,workload.mode=x y";
  EXPECT_EQ(s.id(), "a.b[world_size=2,workload.mode=x y]");
  EXPECT_EQ(s.slug(), "a.b_world_size_2_workload.mode_x_y_");
}

TEST(ConfigDefault, EmptyTableUsesFallbacks) {
  Config config;
  EXPECT_FALSE(config.has("x"));
  EXPECT_EQ(config.get_int("x", 3), 3);
  EXPECT_EQ(config.get_string("s", "d"), "d");
  EXPECT_EQ(config.get_int_list("l", {1, 2}), (std::vector<std::int64_t>{1, 2}));
  EXPECT_FALSE(config.get_table("t").has("y"));
  EXPECT_NO_THROW(config.finish());
  EXPECT_THROW(config.get_int("x"), InputError);
}

// run.ranks_per_node (the node layout behind LOCAL_RANK): default one node, capped at
// world_size, validated, and usable as a [matrix] dimension.
TEST_F(ScenarioTest, RanksPerNode) {
  auto file = [&](const std::string& name, const std::string& run) {
    return write(name, "name = \"comm.rpn\"\n[run]\n" + run + "\n[workload]\nkind = \"collectives\"\n[expect]\noutcome = \"pass\"\n");
  };
  EXPECT_EQ(load_file(file("rpn_default.toml", "world_size = 4"))[0].ranks_per_node, 4);
  EXPECT_EQ(load_file(file("rpn_two.toml", "world_size = 4\nranks_per_node = 2"))[0].ranks_per_node, 2);
  EXPECT_EQ(load_file(file("rpn_cap.toml", "world_size = 2\nranks_per_node = 8"))[0].ranks_per_node, 2);
  const std::string bad = file("rpn_bad.toml", "world_size = 4\nranks_per_node = 0");
  EXPECT_CONTAINS(input_error([&] { load_file(bad); }), bad + ":4: run.ranks_per_node: must be in [1, 64], got 0");
  const std::string m = write("rpn_matrix.toml", "name = \"comm.rpn\"\n[run]\nworld_size = 4\n[workload]\nkind = \"collectives\"\n"
                                                 "[expect]\noutcome = \"pass\"\n[matrix]\nranks_per_node = [1, 2]\n");
  const auto variants = load_file(m);
  ASSERT_EQ(variants.size(), 2u);
  EXPECT_EQ(variants[0].ranks_per_node, 1);
  EXPECT_EQ(variants[1].ranks_per_node, 2);
}

}  // namespace
}  // namespace lockstep::scenario
