// GPU paths. Without a CUDA device these tests skip with the reason; they never pass silently.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "reference/common/device.h"
#include "harness/launch/launcher.h"
#include "harness/scenario/scenario.h"
#include "lockstep/config.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "lockstep-gpu-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { fs::remove_all(dir_); }
  report::ScenarioResult run(const std::string& file) {
    auto scenarios = scenario::load_file(std::string(LOCKSTEP_SOURCE_DIR) + "/" + file);
    launch::LaunchOptions opts;
    opts.binary = LOCKSTEP_BINARY;
    opts.report_dir = dir_;
    return launch::run_scenario(scenarios.at(0), opts);
  }
  std::string dir_;
};

TEST_F(GpuTest, NcclCollectivesMatchClosedForms) {
  if (!LOCKSTEP_HAVE_NCCL) GTEST_SKIP() << "requires NCCL: this build has no NCCL backend";
  if (ref::cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  const auto r = run("scenarios/comm/nccl_mix.toml");
  EXPECT_EQ(r.status, report::Status::kPass) << r.reason;
  EXPECT_FALSE(r.diagnosis.has_value());
}

TEST_F(GpuTest, CudaScenarioIsSkippedNotPassedWithoutGpu) {
  if (ref::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible; this checks the CPU-only path";
  const auto r = run("scenarios/comm/nccl_mix.toml");
  EXPECT_EQ(r.status, report::Status::kSkip);
  EXPECT_NE(r.reason.find("requires cuda"), std::string::npos) << r.reason;
}

TEST(CudaDeviceTest, AllocationFailsClearlyWithoutGpu) {
  if (ref::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible";
  EXPECT_THROW(ref::CudaBuffer(16), std::exception);
}

}  // namespace
}  // namespace lockstep
