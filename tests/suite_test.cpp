// The suite-level checks that run after every variant ([matrix] invariance), and the exit code
// a suite's results give (an all-skipped run, --no-skip).
#include <gtest/gtest.h>

#include <sstream>

#include "harness/launch/suite.h"
#include "tests/test_util.h"

namespace lockstep::launch {
namespace {

scenario::Scenario variant(const std::string& v, bool invariant, std::optional<DiagnosisKind> expect = std::nullopt) {
  scenario::Scenario s;
  s.name = "x.matrix";
  s.file = "x.toml";
  s.variant = v;
  s.matrix_invariant = invariant;
  s.expect.kind = expect;
  return s;
}

report::ScenarioResult passed(const std::string& digest) {
  report::ScenarioResult r;
  r.status = report::Status::kPass;
  r.digest = digest;
  return r;
}

TEST(SuiteInvarianceTest, EqualDigestsStayPassing) {
  std::vector<scenario::Scenario> s = {variant("world_size=1", true), variant("world_size=2", true)};
  std::vector<report::ScenarioResult> r = {passed("aa"), passed("aa")};
  check_invariance(s, r);
  EXPECT_EQ(r[1].status, report::Status::kPass);
  EXPECT_FALSE(r[1].diagnosis.has_value());
}

TEST(SuiteInvarianceTest, DifferentDigestIsNondeterminismNamingBothVariants) {
  std::vector<scenario::Scenario> s = {variant("world_size=1", true), variant("world_size=2", true),
                                       variant("world_size=4", true)};
  std::vector<report::ScenarioResult> r = {passed("aa"), passed("aa"), passed("bb")};
  check_invariance(s, r);
  EXPECT_EQ(r[1].status, report::Status::kPass);
  ASSERT_EQ(r[2].status, report::Status::kFail);
  ASSERT_TRUE(r[2].diagnosis.has_value());
  EXPECT_EQ(r[2].diagnosis->kind, DiagnosisKind::kNondeterminism);
  EXPECT_NE(r[2].diagnosis->message.find("world_size=4"), std::string::npos);
  EXPECT_NE(r[2].diagnosis->message.find("world_size=1"), std::string::npos);
}

TEST(SuiteInvarianceTest, NotInvariantFilesAreNotCompared) {
  std::vector<scenario::Scenario> s = {variant("a=1", false), variant("a=2", false)};
  std::vector<report::ScenarioResult> r = {passed("aa"), passed("bb")};
  check_invariance(s, r);
  EXPECT_EQ(r[1].status, report::Status::kPass);
}

TEST(SuiteInvarianceTest, ExpectedNondeterminismPasses) {
  std::vector<scenario::Scenario> s = {variant("a=1", true, DiagnosisKind::kNondeterminism),
                                       variant("a=2", true, DiagnosisKind::kNondeterminism)};
  std::vector<report::ScenarioResult> r = {passed("aa"), passed("bb")};
  check_invariance(s, r);
  EXPECT_EQ(r[1].status, report::Status::kPass);
  EXPECT_EQ(r[1].diagnosis->kind, DiagnosisKind::kNondeterminism);
}

report::RunSummary with_statuses(std::initializer_list<report::Status> statuses) {
  report::RunSummary run;
  for (auto status : statuses) {
    report::ScenarioResult r;
    r.status = status;
    run.results.push_back(r);
  }
  return run;
}

TEST(SuiteExitCodeTest, EveryStatusMapsToItsDocumentedCode) {
  using report::Status;
  EXPECT_EQ(suite_exit_code(with_statuses({Status::kPass})), 0);
  EXPECT_EQ(suite_exit_code(with_statuses({Status::kPass, Status::kSkip})), 0);
  EXPECT_EQ(suite_exit_code(with_statuses({Status::kSkip})), 6);
  EXPECT_EQ(suite_exit_code(with_statuses({Status::kSkip, Status::kSkip, Status::kSkip})), 6);
  EXPECT_EQ(suite_exit_code(with_statuses({Status::kSkip, Status::kFail})), 1);
  EXPECT_EQ(suite_exit_code(with_statuses({Status::kPass, Status::kError})), 1);
  EXPECT_EQ(suite_exit_code(with_statuses({Status::kSkip, Status::kCancelled})), 1);
  // Nothing selected is not "every selected scenario skipped": it has its own code, 5 (pytest's).
  EXPECT_EQ(suite_exit_code(with_statuses({})), 5);
  EXPECT_FALSE(all_skipped(with_statuses({})));
}

// Two-rank scenarios under --max-ranks 1: skipped before any process starts.
std::vector<scenario::Scenario> two_rank_scenarios(int n) {
  std::vector<scenario::Scenario> out;
  for (int i = 0; i < n; ++i) {
    scenario::Scenario s;
    s.name = "x.skipped" + std::to_string(i);
    s.file = "x" + std::to_string(i) + ".toml";
    s.world_size = 2;
    s.requires_ranks = 2;
    s.workload = "collectives";
    out.push_back(s);
  }
  return out;
}

TEST(SuiteExitCodeTest, ARunWhereEveryScenarioSkippedExitsSixAndSaysSo) {
  test::TempDir dir("lockstep_suite");
  LaunchOptions options;
  options.report_dir = dir.path();
  options.max_ranks = 1;
  std::ostringstream out;
  const auto run = run_suite(two_rank_scenarios(2), options, out);
  ASSERT_EQ(run.results.size(), 2u);
  for (const auto& r : run.results) EXPECT_EQ(r.status, report::Status::kSkip) << r.reason;
  EXPECT_TRUE(all_met(run));
  EXPECT_TRUE(all_skipped(run));
  EXPECT_EQ(suite_exit_code(run), kExitAllSkipped);
  EXPECT_CONTAINS(out.str(), "every selected scenario was skipped: nothing was checked");
}

TEST(SuiteExitCodeTest, NoSkipTurnsEverySkipIntoAFailureThatSaysWhy) {
  test::TempDir dir("lockstep_suite");
  LaunchOptions options;
  options.report_dir = dir.path();
  options.max_ranks = 1;
  options.no_skip = true;
  std::ostringstream out;
  const auto run = run_suite(two_rank_scenarios(1), options, out);
  ASSERT_EQ(run.results.size(), 1u);
  EXPECT_EQ(run.results[0].status, report::Status::kFail);
  EXPECT_CONTAINS(run.results[0].reason, "skipped, and --no-skip makes a skip a failure: requires 2 ranks, --max-ranks is 1");
  EXPECT_FALSE(all_skipped(run));
  EXPECT_EQ(suite_exit_code(run), kExitUnmet);
  EXPECT_CONTAINS(out.str(), "--no-skip");
}

}  // namespace
}  // namespace lockstep::launch
