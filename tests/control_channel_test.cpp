// The verifier's control channel, end to end. Ranks on one host check each collective's
// fingerprint through the shared progress board; ranks on several hosts have no shared board,
// so each collective is preceded by an all_gather of fingerprints on a separate Gloo group
// (the `control` group). LOCKSTEP_VERIFY_CHANNEL=control forces that path on one host, which
// is how it is tested here: the same comm scenarios must meet the same expectations, clean
// collectives at 2 and 3 ranks and the mismatches named before the data collective runs.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "harness/comm/verifier.h"
#include "harness/core/error.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using test::TempDir;

class ControlChannel {
 public:
  ControlChannel() { setenv("LOCKSTEP_VERIFY_CHANNEL", "control", 1); }
  ~ControlChannel() { unsetenv("LOCKSTEP_VERIFY_CHANNEL"); }
};

TEST(ControlChannelTest, CommScenariosMeetTheirExpectationsThroughTheControlGroup) {
  TempDir dir("lockstep_control");
  const std::string comm = std::string(LOCKSTEP_SOURCE_DIR) + "/scenarios/comm/";
  std::string args = "run";
  // clean_mix runs at world sizes 2, 3 and 4: every op, f32, bf16 and i64; the others inject
  // a dtype, an all_to_all split and a count mismatch, a skipped collective, and a cast of a
  // receive buffer.
  for (const char* f : {"clean_mix.toml", "dtype_mismatch.toml", "split_mismatch.toml", "count_mismatch_all_to_all.toml",
                        "skip_collective.toml", "recv_dtype_mismatch.toml"}) {
    args += " " + test::quote(comm + f);
  }
  args += " --report-dir " + test::quote(dir / "report");
  test::CliResult r;
  {
    ControlChannel control;
    r = test::run_cli(LOCKSTEP_BINARY, args, dir.path());
  }
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "8 passed, 0 failed, 0 skipped, 0 errors");
  const std::string results = test::read_file(dir / "report/results.json");
  EXPECT_CONTAINS(results, "dtype differs");
  EXPECT_CONTAINS(results, "all_to_all split sizes disagree");
  EXPECT_CONTAINS(results, "rank 1 send f32[64] tag=1, rank 2 recv f16[64] tag=1");
}

class ScopedChannel {
 public:
  explicit ScopedChannel(const char* value) {
    if (value) setenv("LOCKSTEP_VERIFY_CHANNEL", value, 1);
    else unsetenv("LOCKSTEP_VERIFY_CHANNEL");
  }
  ~ScopedChannel() { unsetenv("LOCKSTEP_VERIFY_CHANNEL"); }
};

TEST(ControlChannelTest, OnlyAutoAndControlAreAccepted) {
  {
    ScopedChannel unset(nullptr);
    EXPECT_EQ(comm::verify_channel_from_env(), comm::VerifyChannel::kAuto);
  }
  {
    ScopedChannel empty("");
    EXPECT_EQ(comm::verify_channel_from_env(), comm::VerifyChannel::kAuto);
  }
  {
    ScopedChannel autos("auto");
    EXPECT_EQ(comm::verify_channel_from_env(), comm::VerifyChannel::kAuto);
  }
  {
    ScopedChannel control("control");
    EXPECT_EQ(comm::verify_channel_from_env(), comm::VerifyChannel::kControl);
  }
  for (const char* bad : {"board", "Control", "control ", "1"}) {
    ScopedChannel channel(bad);
    try {
      comm::verify_channel_from_env();
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("LOCKSTEP_VERIFY_CHANNEL must be 'auto' or 'control', got '") + bad + "'");
    }
  }
}

// A misspelt channel must not silently verify through the board: the run is refused with exit
// code 2 before any rank starts, naming the value.
TEST(ControlChannelTest, RunRefusesAnUnknownChannelBeforeStartingRanks) {
  TempDir dir("lockstep_control_bad");
  const std::string args = "run " + test::quote(std::string(LOCKSTEP_SOURCE_DIR) + "/scenarios/comm/clean_mix.toml") +
                           " --report-dir " + test::quote(dir / "report");
  test::CliResult r;
  {
    ScopedChannel channel("contrl");
    r = test::run_cli(LOCKSTEP_BINARY, args, dir.path());
  }
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_CONTAINS(r.err, "LOCKSTEP_VERIFY_CHANNEL must be 'auto' or 'control', got 'contrl'");
  EXPECT_FALSE(std::filesystem::exists(dir / "report/results.json"));
}

}  // namespace
}  // namespace lockstep
