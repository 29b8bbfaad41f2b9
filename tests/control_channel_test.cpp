// The verifier's control channel, end to end. Ranks on one host check each collective's
// fingerprint through the shared progress board; ranks on several hosts have no shared board,
// so each collective is preceded by an all_gather of fingerprints on a separate Gloo group
// (the `control` group). LOCKSTEP_VERIFY_CHANNEL=control forces that path on one host, which
// is how it is tested here: the same comm scenarios must meet the same expectations, clean
// collectives at 2 and 3 ranks and the mismatches named before the data collective runs.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

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
  // a dtype, an all_to_all split and a count mismatch, and a skipped collective.
  for (const char* f : {"clean_mix.toml", "dtype_mismatch.toml", "split_mismatch.toml", "count_mismatch_all_to_all.toml",
                        "skip_collective.toml"}) {
    args += " " + test::quote(comm + f);
  }
  args += " --report-dir " + test::quote(dir / "report");
  test::CliResult r;
  {
    ControlChannel control;
    r = test::run_cli(LOCKSTEP_BINARY, args, dir.path());
  }
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "7 passed, 0 failed, 0 skipped, 0 errors");
  const std::string results = test::read_file(dir / "report/results.json");
  EXPECT_CONTAINS(results, "dtype differs");
  EXPECT_CONTAINS(results, "all_to_all split sizes disagree");
}

}  // namespace
}  // namespace lockstep
