// The scenario file's [expect] tables: the outcome and its fields (kind, rank, step,
// message_contains), and [expect.torch."<version prefix>"] for programs.
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

TEST_F(ScenarioTest, UnknownOutcomeKind) {
  std::string path = write("outcome.toml", R"(name = "comm.outcome"
[workload]
kind = "collectives"
[expect]
outcome = "collective_mixup"
)");
  std::string message = input_error([&] { load_file(path); });
  EXPECT_CONTAINS(message, path + ":5: expect.outcome: unknown outcome \"collective_mixup\"");
  EXPECT_CONTAINS(message, "allowed: pass, collective_mismatch, missing_participant");
}

TEST_F(ScenarioTest, ExpectFieldsAreChecked) {
  std::string pass_with_rank = write("pass_rank.toml", R"(name = "comm.pass_rank"
[workload]
kind = "collectives"
[expect]
outcome = "pass"
rank = 0
)");
  EXPECT_CONTAINS(
      input_error([&] { load_file(pass_with_rank); }),
      pass_with_rank + ":6: expect.rank: only applies when outcome is a diagnosis kind");

  std::string rank_too_big = write("rank_big.toml", R"(name = "comm.rank_big"
[run]
world_size = 2
[workload]
kind = "collectives"
[expect]
outcome = "timeout"
rank = 2
)");
  EXPECT_CONTAINS(input_error([&] { load_file(rank_too_big); }),
                  rank_too_big + ":8: expect.rank: must be in [0, run.world_size) = [0, 2), got 2");
}

TEST_F(ScenarioTest, ExpectStepIsANonNegativeIntegerWithADiagnosis) {
  std::string good = write("step.toml", R"(name = "comm.step"
[workload]
kind = "collectives"
[expect]
outcome = "collective_mismatch"
step = 27
)");
  const auto s = load_file(good);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].expect.step, 27);

  std::string negative = write("step_negative.toml", R"(name = "comm.step_negative"
[workload]
kind = "collectives"
[expect]
outcome = "collective_mismatch"
step = -1
)");
  EXPECT_CONTAINS(input_error([&] { load_file(negative); }), negative + ":6: expect.step: must be >= 0, got -1");

  std::string not_int = write("step_string.toml", R"(name = "comm.step_string"
[workload]
kind = "collectives"
[expect]
outcome = "collective_mismatch"
step = "27"
)");
  EXPECT_CONTAINS(input_error([&] { load_file(not_int); }), not_int + ":6: expect.step: expected an integer");

  std::string with_pass = write("step_pass.toml", R"(name = "comm.step_pass"
[workload]
kind = "collectives"
[expect]
outcome = "pass"
step = 3
)");
  EXPECT_CONTAINS(input_error([&] { load_file(with_pass); }),
                  with_pass + ":6: expect.step: only applies when outcome is a diagnosis kind");
}

constexpr const char* kProgramWithTorchExpect = R"(name = "programs.x"
[run]
world_size = 2
[workload]
kind = "program"
command = ["{python}", "train.py"]
[expect]
outcome = "pass"
[expect.torch."1.13"]
outcome = "rank_failure"
message_contains = ["Invalid scalar type"]
[expect.torch."2"]
outcome = "collective_mismatch"
rank = 1
)";

TEST_F(ScenarioTest, ExpectTorchPicksTheFirstPrefixAtAComponentBoundary) {
  const auto s = parse_only(write("p.toml", kProgramWithTorchExpect)).at(0);
  ASSERT_EQ(s.expect_torch.size(), 2u);
  EXPECT_EQ(s.expectation_for("1.13.0a0").expected_label(), "rank_failure");
  EXPECT_EQ(s.expectation_for("1.13").expected_label(), "rank_failure");
  EXPECT_EQ(s.expectation_for("1.130").expected_label(), "pass");  // not 1.13
  EXPECT_EQ(s.expectation_for("2.15.0+cu132").expected_label(), "collective_mismatch");
  EXPECT_EQ(s.expectation_for("2.15.0+cu132").rank, 1);
  EXPECT_EQ(s.expectation_for("").expected_label(), "pass");
  EXPECT_EQ(s.expectation_for("3.0").expected_label(), "pass");
}

TEST_F(ScenarioTest, ExpectTorchNeedsAProgramAndAVersionPrefix) {
  const std::string not_program = write("n.toml", R"(name = "comm.x"
[workload]
kind = "collectives"
[expect]
outcome = "pass"
[expect.torch."1.13"]
outcome = "pass"
)");
  std::string msg = input_error([&] { parse_only(not_program); });
  EXPECT_NE(msg.find("n.toml:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("only applies to kind = \"program\""), std::string::npos) << msg;
  std::string bad = kProgramWithTorchExpect;
  bad.replace(bad.find("\"1.13\""), 6, "\"v1.13\"");
  msg = input_error([&] { parse_only(write("b.toml", bad)); });
  EXPECT_NE(msg.find("b.toml:9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("version prefix"), std::string::npos) << msg;
}

}  // namespace
}  // namespace lockstep::scenario
