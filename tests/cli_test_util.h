#pragma once
// The fixture and scenario text of the command line's end-to-end tests (cli_test.cpp, its
// subcommands; cli_hardening_test.cpp, cancellation and what must not fail silently).
#include <gtest/gtest.h>

#include <string>

#include "tests/test_util.h"

namespace lockstep::cli_test {

using lockstep::test::CliResult;
using lockstep::test::quote;

class CliTest : public ::testing::Test {
 protected:

  // Writes `text` to `name` under the temporary directory and returns its path.
  std::string write(const std::string& name, const std::string& text) { return tmp_.write(name, text); }

  // Runs `lockstep ARGS` (ARGS already shell-quoted) and captures its output.
  CliResult lockstep(const std::string& args) { return lockstep::test::run_cli(LOCKSTEP_BINARY, args, dir_); }
  // The same under `timeout`, for commands that could block.
  CliResult lockstep_with_timeout(const std::string& args, int seconds) {
    return lockstep::test::run_cli("timeout", std::to_string(seconds) + " " + quote(LOCKSTEP_BINARY) + " " + args, dir_);
  }

  lockstep::test::TempDir tmp_{"lockstep_cli"};
  const std::string dir_ = tmp_.path();
};

// A small clean scenario: two ranks, one all_reduce per step.
inline constexpr const char* kSmallPass = R"(name = "cli.small"
[run]
world_size = 2
[workload]
kind = "collectives"
steps = 1
count = 8
ops = ["all_reduce"]
[expect]
outcome = "pass"
)";

}  // namespace lockstep::cli_test
