// The communicator faults' keys (scenarios/README.md, "Communicator faults"), at load time: each
// documented value is accepted, and each value outside what the table allows is refused with an
// input error naming file:line, the key and the offending value. The cases are written from the
// document (world_size 2: ranks 0 and 1), never from the parser.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "harness/core/error.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

struct FaultCase {
  std::string name;
  std::string inject;   // the [[inject]] lines after `kind = ...` (kind first)
  std::string refused;  // "" when accepted; else what the message must hold after "file:LINE: "
  int line = 0;         // the line the error names
};

void PrintTo(const FaultCase& c, std::ostream* os) { *os << c.name; }

// Lines 1-5 hold name, [run], world_size, [workload], kind; [[inject]] is line 6, its kind line 7.
std::vector<FaultCase> cases() {
  return {
      {"rank_last", "kind = \"crash\"\nrank = 1\n", "", 0},
      {"rank_world_size", "kind = \"crash\"\nrank = 2\n", "inject.rank: must be in [0, 2), got 2", 8},
      {"rank_negative", "kind = \"crash\"\nrank = -1\n", "inject.rank: must be in [0, 2), got -1", 8},
      {"root_default", "kind = \"root_mismatch\"\nrank = 0\nroot = -1\n", "", 0},
      {"root_last", "kind = \"root_mismatch\"\nrank = 0\nroot = 1\n", "", 0},
      {"root_world_size", "kind = \"root_mismatch\"\nrank = 0\nroot = 2\n", "inject.root: out of range: 2", 9},
      {"root_below_default", "kind = \"root_mismatch\"\nrank = 0\nroot = -2\n", "inject.root: out of range: -2", 9},
      {"reduce_max", "kind = \"reduce_mismatch\"\nrank = 0\nreduce = \"max\"\n", "", 0},
      {"reduce_avg", "kind = \"reduce_mismatch\"\nrank = 0\nreduce = \"avg\"\n",
       "inject.reduce: unknown reduce op 'avg' (sum, max, min)", 9},
      {"reduce_prod", "kind = \"reduce_mismatch\"\nrank = 0\nreduce = \"prod\"\n",
       "inject.reduce: unknown reduce op 'prod' (sum, max, min)", 9},
      // A program's reduce op lockstep compares, but its own faults do not inject.
      {"reduce_product", "kind = \"reduce_mismatch\"\nrank = 0\nreduce = \"product\"\n",
       "inject.reduce: unknown reduce op 'product' (sum, max, min)", 9},
      {"dtype_unknown", "kind = \"dtype_mismatch\"\nrank = 0\ndtype = \"f8\"\n", "inject.dtype: unknown dtype 'f8'", 9},
      {"count_delta_1", "kind = \"count_mismatch\"\nrank = 0\ndelta = 1\n", "", 0},
      {"count_delta_0", "kind = \"count_mismatch\"\nrank = 0\ndelta = 0\n", "inject.delta: must be >= 1", 9},
      {"split_delta_0", "kind = \"split_mismatch\"\nrank = 0\ndelta = 0\n", "inject.delta: must be >= 1", 9},
      {"element_last", "kind = \"corrupt_output\"\nrank = 0\nelement = -1\n", "", 0},
      {"element_below_last", "kind = \"corrupt_output\"\nrank = 0\nelement = -2\n", "inject.element: must be >= 0", 9},
      {"exit_code_1", "kind = \"crash\"\nrank = 0\nexit_code = 1\n", "", 0},
      {"exit_code_6", "kind = \"crash\"\nrank = 0\nexit_code = 6\n", "", 0},
      {"exit_code_255", "kind = \"crash\"\nrank = 0\nexit_code = 255\n", "", 0},
      {"exit_code_0", "kind = \"crash\"\nrank = 0\nexit_code = 0\n", "inject.exit_code: must be in 1..255 and not 2 to 5", 9},
      {"exit_code_2", "kind = \"crash\"\nrank = 0\nexit_code = 2\n", "inject.exit_code: must be in 1..255 and not 2 to 5", 9},
      {"exit_code_5", "kind = \"crash\"\nrank = 0\nexit_code = 5\n", "inject.exit_code: must be in 1..255 and not 2 to 5", 9},
      {"exit_code_256", "kind = \"crash\"\nrank = 0\nexit_code = 256\n", "inject.exit_code: must be in 1..255 and not 2 to 5", 9},
      {"signal_unknown", "kind = \"crash\"\nrank = 0\nsignal = \"SIGFOO\"\n", "inject.signal: unknown signal 'SIGFOO'", 9},
      {"sleep_zero", "kind = \"sleep\"\nrank = 0\nseconds = 0.0\n", "inject.seconds: must be > 0", 9},
      {"step_0", "kind = \"skip_collective\"\nrank = 0\nstep = 0\n", "", 0},
      {"step_negative", "kind = \"skip_collective\"\nrank = 0\nstep = -1\n", "inject.step: must be >= 0", 9},
      {"call_negative", "kind = \"skip_collective\"\nrank = 0\ncall = -1\n", "inject.call: must be >= 0", 9},
      {"op_unknown", "kind = \"skip_collective\"\nrank = 0\nop = \"allreduce\"\n", "inject.op: unknown op 'allreduce'", 9},
      {"startup_sleep", "kind = \"sleep\"\nrank = 0\nphase = \"startup\"\nseconds = 1.0\n", "", 0},
      {"startup_dtype", "kind = \"dtype_mismatch\"\nrank = 0\nphase = \"startup\"\ndtype = \"bf16\"\n",
       "inject.phase: phase 'startup' is before the first collective", 9},
      {"startup_with_step", "kind = \"crash\"\nrank = 0\nphase = \"startup\"\nstep = 0\n",
       "inject.step: phase 'startup' has no collectives to match", 10},
  };
}

class FaultConfigTest : public ::testing::TestWithParam<FaultCase> {
 protected:
  test::TempDir tmp_{"lockstep-fault-config"};
};

TEST_P(FaultConfigTest, DocumentedValuesAreAcceptedOthersRefusedNamingFileLineKeyAndValue) {
  const FaultCase& c = GetParam();
  const std::string path = tmp_.write("f.toml", "name = \"t.fault\"\n[run]\nworld_size = 2\n[workload]\nkind = \"collectives\"\n"
                                                "[[inject]]\n" + c.inject + "[expect]\noutcome = \"pass\"\n");
  std::string error;
  try {
    (void)lockstep::validate::load_file(path);
  } catch (const InputError& e) {
    error = e.what();
  }
  if (c.refused.empty()) {
    EXPECT_EQ(error, "");
  } else {
    EXPECT_CONTAINS(error, path + ":" + std::to_string(c.line) + ": " + c.refused);
  }
}

INSTANTIATE_TEST_SUITE_P(CommFaults, FaultConfigTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<FaultCase>& info) { return info.param.name; });

}  // namespace
}  // namespace lockstep
