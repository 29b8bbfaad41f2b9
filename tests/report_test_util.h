#pragma once
// What the tests of the report contract share (report_test.cpp, results.json, junit.xml and the
// Chrome trace; report_dump_test.cpp, .npy dumps and their manifest): whole-file reads and
// writes, and running a python3 check script.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/test_util.h"

namespace lockstep::report::report_test {

using lockstep::test::TempDir;

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

// Runs `script` with python3 and returns its exit code.
inline int run_python(const TempDir& dir, const std::string& script) {
  const std::string path = dir / "check.py";
  write_text(path, script);
  return exit_code(std::system(("python3 '" + path + "'").c_str()));
}

}  // namespace lockstep::report::report_test
