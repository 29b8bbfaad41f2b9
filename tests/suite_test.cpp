// The suite-level checks that run after every variant: [matrix] invariance.
#include <gtest/gtest.h>

#include "harness/launch/suite.h"

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

}  // namespace
}  // namespace lockstep::launch
