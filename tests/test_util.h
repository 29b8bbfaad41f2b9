#pragma once
// Helpers shared by the tests.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <sstream>
#include <system_error>
#include <vector>

#include "harness/launch/launcher.h"
#include "harness/report/results.h"
#include "reference/io/npy.h"

// Expects `needle` in the string `haystack`, printing the whole text when it is missing.
#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "text: " << (haystack)

namespace lockstep::test {

// A fresh directory under the system temporary directory (mkdtemp), removed with everything in
// it when the object goes. Movable, so that helpers can return one.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "lockstep") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempDir& operator=(TempDir&&) = delete;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside the directory.
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  // Writes `text` to `name` in the directory (creating its parent folders) and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = *this / name;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  std::string path_;
};

// `s` quoted for the shell.
inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The whole content of the file at `path` ("" when it cannot be read).
// The values of an int64 .npy array (dtype '<i8', which it expects).
inline std::vector<std::int64_t> int64s(const io::NpyArray& a) {
  EXPECT_EQ(a.descr, "<i8");
  std::vector<std::int64_t> v(a.data.size() / 8);
  std::memcpy(v.data(), a.data.data(), v.size() * 8);
  return v;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct CliResult {
  int code = -1;  // exit status; -1 when the binary did not exit normally
  std::string out;
  std::string err;
};

// Runs `binary ARGS` (ARGS already shell-quoted) through the shell, its stdout and stderr
// captured in files under `dir`.
inline CliResult run_cli(const std::string& binary, const std::string& args, const std::string& dir) {
  const std::string out = dir + "/cli.stdout";
  const std::string err = dir + "/cli.stderr";
  const int status = std::system((quote(binary) + " " + args + " >" + quote(out) + " 2>" + quote(err)).c_str());
  return CliResult{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
}

// Launcher options for a run of the CLI binary under test, reporting into `dir`/report.
inline launch::LaunchOptions launch_options(const TempDir& dir, bool dump = false) {
  launch::LaunchOptions o;
  o.binary = LOCKSTEP_BINARY;
  o.report_dir = dir / "report";
  o.dump = dump;
  return o;
}

// A scenario result in one line, for failure messages.
inline std::string describe(const report::ScenarioResult& r) {
  std::ostringstream os;
  os << "status " << report::to_string(r.status) << ", reason: " << r.reason;
  if (r.diagnosis) {
    os << ", diagnosis " << to_string(r.diagnosis->kind) << " rank " << r.diagnosis->rank << ": " << r.diagnosis->message;
  }
  return os.str();
}

// The value the collectives workload gives element i of call c at `step` on `rank`, as
// documented in scenarios/README.md: (rank+1)*(i%3+1) + (step+c)%2.
inline double workload_value(int rank, std::int64_t step, std::int64_t c, std::int64_t i) {
  return static_cast<double>((rank + 1) * (i % 3 + 1) + (step + c) % 2);
}

// The pids of every live process whose command line mentions `needle`.
inline std::vector<pid_t> processes_mentioning(const std::string& needle) {
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    if (cmdline.find(needle) != std::string::npos) found.push_back(pid);
  }
  return found;
}

// Returns the message of the exception of type E that fn throws; fails the test otherwise.
template <class E, class Fn>
inline std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception";
  return {};
}

}  // namespace lockstep::test
