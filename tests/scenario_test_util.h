#pragma once
// The fixture and helpers of the scenario schema's tests (scenario_test.cpp, the file's schema;
// scenario_errors_test.cpp, its errors; scenario_expect_test.cpp, its [expect] tables).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "harness/core/error.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
#include "tests/test_util.h"

namespace lockstep::scenario::schema_test {

// What the CLI loads: the scenario schema, then each variant's workload keys and injections
// (harness/validate). parse_only() is the schema alone, scenario::load_file without a check.
inline std::vector<Scenario> load_file(const std::string& path) { return lockstep::validate::load_file(path); }
inline std::vector<Scenario> load_paths(const std::vector<std::string>& paths) { return lockstep::validate::load_paths(paths); }
inline std::vector<Scenario> parse_only(const std::string& path) { return scenario::load_file(path, {}); }

namespace fs = std::filesystem;

class ScenarioTest : public ::testing::Test {
 protected:

  // Writes `text` to `name` under the temporary directory and returns its path.
  std::string write(const std::string& name, const std::string& text) {
    fs::path path = fs::path(dir_) / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }

  lockstep::test::TempDir tmp_{"lockstep_scenario"};
  const std::string dir_ = tmp_.path();
};

// Returns the message of the InputError that `fn` throws; fails the test when it throws none.
inline std::string input_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return "";
}

// A minimal valid file; line numbers of the error tests below count from its first line.
inline constexpr const char* kMinimal = R"(name = "comm.minimal"
[workload]
kind = "collectives"
[expect]
outcome = "pass"
)";

}  // namespace lockstep::scenario::schema_test
