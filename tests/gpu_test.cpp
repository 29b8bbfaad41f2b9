// GPU paths. Without a CUDA device these tests skip with the reason; they never pass silently.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "reference/common/device.h"
#include "harness/core/diagnosis.h"
#include "harness/launch/launcher.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
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
    auto scenarios = lockstep::validate::load_file(std::string(LOCKSTEP_SOURCE_DIR) + "/" + file);
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

TEST_F(GpuTest, MultiRankNcclNeedsOneGpuPerRank) {
  if (!LOCKSTEP_HAVE_NCCL) GTEST_SKIP() << "requires NCCL: this build has no NCCL backend";
  const int devices = ref::cuda_device_count();
  if (devices == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  const auto r = run("scenarios/comm/nccl_two_ranks.toml");
  if (devices >= 2) {
    EXPECT_EQ(r.status, report::Status::kPass) << r.reason;
  } else {
    // Two ranks of one NCCL communicator cannot share the one GPU: skip, naming the counts.
    EXPECT_EQ(r.status, report::Status::kSkip) << r.reason;
    EXPECT_NE(r.reason.find("needs 2 CUDA devices, found 1"), std::string::npos) << r.reason;
  }
}

TEST_F(GpuTest, LookupOnCudaIdsMatchesTheReference) {
  if (!LOCKSTEP_HAVE_NCCL) GTEST_SKIP() << "requires NCCL: this build has no NCCL backend";
  if (ref::cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  auto scenarios = lockstep::validate::load_file(std::string(LOCKSTEP_SOURCE_DIR) + "/scenarios/partition/lookup_cuda_ids.toml");
  ASSERT_EQ(scenarios.size(), 2u);  // int32 and int64 ids
  for (const auto& s : scenarios) {
    launch::LaunchOptions opts;
    opts.binary = LOCKSTEP_BINARY;
    opts.report_dir = dir_;
    const auto r = launch::run_scenario(s, opts);
    EXPECT_EQ(r.status, report::Status::kPass) << s.id() << ": " << r.reason;
  }
}

TEST_F(GpuTest, HostOnlyLookupOnCudaIdsIsDiagnosed) {
  if (!LOCKSTEP_HAVE_NCCL) GTEST_SKIP() << "requires NCCL: this build has no NCCL backend";
  if (ref::cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  const auto r = run("scenarios/partition/bug_host_only_lookup.toml");
  EXPECT_EQ(r.status, report::Status::kPass) << r.reason;
  ASSERT_TRUE(r.diagnosis.has_value());
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kDeviceMismatch) << r.diagnosis->message;
}

TEST(CudaDeviceTest, IdArraysRoundTripThroughTheGpu) {
  if (ref::cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  const ref::Device gpu{ref::DeviceKind::kCuda, 0};
  const std::vector<std::int64_t> values = {7, -3, 2147483647, 0, -2147483648LL};
  for (ref::IdType type : {ref::IdType::kI32, ref::IdType::kI64}) {
    const ref::IdArray a = ref::IdArray::from_host(values, type, gpu);
    EXPECT_TRUE(a.device().is_cuda());
    EXPECT_EQ(a.to_host(), values) << ref::to_string(type);
  }
  const std::vector<std::int64_t> wide = {std::int64_t{1} << 40, -(std::int64_t{1} << 40)};
  EXPECT_EQ(ref::IdArray::from_host(wide, ref::IdType::kI64, gpu).to_host(), wide);
  EXPECT_THROW(ref::IdArray::from_host(wide, ref::IdType::kI32, gpu), std::out_of_range);
  EXPECT_TRUE(ref::cuda_initialised());
}

// The premise of the loader's refuse-after-CUDA rule, and why cuda_device_count() marks the
// process: once a parent has only counted devices, CUDA fails in a child it forks. All of it
// happens in a forked child, so this test process never touches CUDA.
TEST(CudaDeviceTest, CountingDevicesBreaksCudaInForkedChildren) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (ref::cuda_device_count() == 0) std::_Exit(10);
    if (!ref::cuda_initialised()) std::_Exit(11);
    const pid_t grandchild = ::fork();
    if (grandchild < 0) std::_Exit(12);
    if (grandchild == 0) {
      try {
        ref::cuda_free(ref::cuda_alloc(16));
        std::_Exit(0);  // CUDA worked in the forked child
      } catch (const std::exception&) {
        std::_Exit(1);
      }
    }
    int st = 0;
    if (::waitpid(grandchild, &st, 0) != grandchild || !WIFEXITED(st)) std::_Exit(13);
    std::_Exit(WEXITSTATUS(st) == 1 ? 0 : 14);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 10) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "11: counting did not mark CUDA as initialised; 14: CUDA worked in the "
                                       "forked child; 12/13: fork/wait failed";
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
