// The training workload in the harness: the suite's tolerance-based comparison of per-step
// series across variants, the workload's keys (errors name file:line and the key), and the
// shipped training scenarios, which learn in every precision.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "harness/core/error.h"
#include "harness/launch/launcher.h"
#include "harness/launch/suite.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"

// ---- suite: per-step series compared within a tolerance --------------------------------------
namespace lockstep::launch {
namespace {

scenario::Scenario curve_variant(const std::string& v) {
  scenario::Scenario s;
  s.name = "t.curve";
  s.file = "t.toml";
  s.variant = v;
  s.matrix_invariant = true;
  return s;
}

report::ScenarioResult with_curve(std::vector<double> values, double rtol) {
  report::ScenarioResult r;
  r.status = report::Status::kPass;
  r.series["loss_curve"] = report::Series{std::move(values), rtol};
  return r;
}

TEST(SuiteSeriesTest, WithinToleranceStaysPassing) {
  std::vector<scenario::Scenario> s = {curve_variant("world_size=1"), curve_variant("world_size=2")};
  std::vector<report::ScenarioResult> r = {with_curve({1.0, 0.5}, 1e-5), with_curve({1.000009, 0.500004}, 1e-5)};
  check_invariance(s, r);
  EXPECT_EQ(r[1].status, report::Status::kPass);
  EXPECT_FALSE(r[1].diagnosis.has_value());
}

TEST(SuiteSeriesTest, BeyondToleranceNamesTheFirstStepAndBothVariants) {
  std::vector<scenario::Scenario> s = {curve_variant("world_size=1"), curve_variant("world_size=2"), curve_variant("world_size=4")};
  std::vector<report::ScenarioResult> r = {with_curve({1.0, 0.5, 0.25, 0.2}, 1e-5), with_curve({1.0, 0.5, 0.25, 0.2}, 1e-5),
                                           with_curve({1.0, 0.5, 0.2501, 0.3}, 1e-5)};
  check_invariance(s, r);
  EXPECT_EQ(r[1].status, report::Status::kPass);
  ASSERT_EQ(r[2].status, report::Status::kFail);
  ASSERT_TRUE(r[2].diagnosis.has_value());
  EXPECT_EQ(r[2].diagnosis->kind, DiagnosisKind::kNondeterminism);
  const std::string& m = r[2].diagnosis->message;
  EXPECT_NE(m.find("loss_curve"), std::string::npos) << m;
  EXPECT_NE(m.find("step 2:"), std::string::npos) << m;
  EXPECT_NE(m.find("world_size=4"), std::string::npos) << m;
  EXPECT_NE(m.find("world_size=1"), std::string::npos) << m;
}

TEST(SuiteSeriesTest, TheLargerToleranceAppliesAndLengthsMustMatch) {
  std::vector<scenario::Scenario> s = {curve_variant("a=1"), curve_variant("a=2"), curve_variant("a=3")};
  std::vector<report::ScenarioResult> r = {with_curve({1.0, 1.0}, 1e-5), with_curve({1.0, 1.001}, 1e-2), with_curve({1.0}, 1e-5)};
  check_invariance(s, r);
  EXPECT_EQ(r[1].status, report::Status::kPass);
  ASSERT_EQ(r[2].status, report::Status::kFail);
  EXPECT_NE(r[2].diagnosis->message.find("1 vs 2 steps"), std::string::npos) << r[2].diagnosis->message;
}

}  // namespace
}  // namespace lockstep::launch

// ---- the training workload's keys: errors name file:line and the key -------------------------
namespace lockstep::workloads {
namespace {

class TrainingConfigTest : public ::testing::Test {
 protected:

  // Writes a training scenario whose [workload] gets `extra` appended (line 7 on) and whose
  // file ends with `tail`; returns its path.
  std::string write(const std::string& extra, const std::string& tail = "") {
    const std::string path = dir_ + "/t.toml";
    std::ofstream(path) << "name = \"t.training\"\n[run]\nworld_size = 2\n[workload]\nkind = \"training\"\ngraph = \"erdos_renyi\"\n"
                        << extra << "[expect]\noutcome = \"pass\"\n" << tail;
    return path;
  }

  static std::string error_of(const std::string& path) {
    try {
      (void)lockstep::validate::load_file(path);
    } catch (const InputError& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an InputError for " << path;
    return "";
  }

  test::TempDir tmp_{"lockstep-training-test"};
  const std::string dir_ = tmp_.path();
};

TEST_F(TrainingConfigTest, EmbeddingDimIsCheckedNamingTheKey) {
  const std::string path = write("embedding_dim = 2000\n");
  const std::string m = error_of(path);
  EXPECT_NE(m.find(path + ":7: workload.embedding_dim"), std::string::npos) << m;
  EXPECT_NE(m.find("0..1024"), std::string::npos) << m;
}

TEST_F(TrainingConfigTest, BadValuesNameTheKey) {
  EXPECT_NE(error_of(write("fanouts = [5, 5, 5]\n")).find("workload.fanouts: needs one fanout per layer (2), got 3"), std::string::npos);
  EXPECT_NE(error_of(write("precision = \"fp16\"\n")).find("unknown precision 'fp16'"), std::string::npos);
  EXPECT_NE(error_of(write("feature_device = \"cuda\"\n")).find("needs [requires] cuda = true"), std::string::npos);
  EXPECT_NE(error_of(write("nodes = 100\nnum_train = 90\nnum_eval = 20\n")).find("exceed the graph's 100 nodes"), std::string::npos);
  EXPECT_NE(error_of(write("bucket_bytes = 2\n")).find("workload.bucket_bytes"), std::string::npos);
}

TEST_F(TrainingConfigTest, CastInjectionNeedsARankOutsideCollateAndNoneInCollate) {
  EXPECT_NE(error_of(write("", "[[inject]]\nkind = \"cast_bf16_at_step\"\n")).find("rank"), std::string::npos);
  EXPECT_NE(error_of(write("", "[[inject]]\nkind = \"cast_bf16_at_step\"\nwhere = \"collate\"\nrank = 1\n")).find("casts on every rank"), std::string::npos);
  EXPECT_NE(error_of(write("", "[[inject]]\nkind = \"cast_bf16_at_step\"\nrank = 2\n")).find("must be in [0, world_size)"), std::string::npos);
  EXPECT_NO_THROW(lockstep::validate::load_file(write("", "[[inject]]\nkind = \"cast_bf16_at_step\"\nrank = 1\nstep = 3\n")));
}

// The training workload learns in every precision, whatever carries the gradients: at 2 ranks
// (so the gradient all-reduce runs), fp32, bf16 and bf16_reduce (gradients summed in bf16) all
// reach well above chance (4 classes: 0.25; scenarios/README.md says about 0.85 after 40 steps),
// and bf16_reduce ends within 2% of fp32's final loss (measured: 0.02%).
TEST(TrainingScenariosTest, EveryPrecisionLearnsAtTwoRanks) {
  test::TempDir dir("lockstep-train-learn");
  std::map<std::string, report::ScenarioResult> got;
  for (const char* precision : {"fp32", "bf16", "bf16_reduce"}) {
    const std::string file = dir.write(std::string(precision) + ".toml",
                                       std::string("name = \"t.learn_") + precision + "\"\n[run]\nworld_size = 2\n"
                                       "[workload]\nkind = \"training\"\ngraph = \"erdos_renyi\"\nnodes = 2000\nedges = 16000\n"
                                       "num_train = 1024\nnum_eval = 500\nbatch_size = 64\nsteps = 40\nprecision = \"" + precision +
                                       "\"\n[expect]\noutcome = \"pass\"\n");
    auto r = launch::run_scenario(lockstep::validate::load_file(file).at(0), test::launch_options(dir));
    ASSERT_EQ(r.status, report::Status::kPass) << precision << ": " << test::describe(r);
    EXPECT_GE(r.metrics.at("accuracy"), 0.5) << precision;
    EXPECT_GT(r.metrics.at("accuracy"), r.metrics.at("accuracy_initial") + 0.2) << precision;
    got.emplace(precision, std::move(r));
  }
  const double fp32 = got.at("fp32").metrics.at("final_loss"), bf16 = got.at("bf16_reduce").metrics.at("final_loss");
  EXPECT_LT(std::fabs(bf16 - fp32), 0.02 * fp32) << "final loss fp32 " << fp32 << ", bf16_reduce " << bf16;
}

TEST(TrainingScenariosTest, ShippedScenariosLoad) {
  const auto all = lockstep::validate::load_paths({std::string(LOCKSTEP_SOURCE_DIR) + "/scenarios/training"});
  EXPECT_GE(all.size(), 20u);
  for (const auto& s : all) EXPECT_EQ(s.workload, "training") << s.id();
}

}  // namespace
}  // namespace lockstep::workloads
