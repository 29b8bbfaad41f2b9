// End-to-end tests of the `lockstep` command line's hardening (trustworthy verdicts): a signal
// ends a run cleanly, concurrent runs keep their own reports, bad report folders, option values
// and inputs are refused, and a rank that cannot write its status ends instead of hanging.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_test_util.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

using cli_test::CliTest;
using cli_test::kSmallPass;
using lockstep::test::quote;
using lockstep::test::read_file;

// A rank that hangs for a minute: the run is still going when the signal arrives.
constexpr const char* kHang = R"(name = "cli.hang"
[run]
world_size = 2
timeout_s = 50
[workload]
kind = "collectives"
steps = 2
count = 8
ops = ["all_reduce"]
[[inject]]
kind = "sleep"
rank = 1
step = 1
seconds = 60
[expect]
outcome = "timeout"
)";

// SIGINT (a terminal's Ctrl-C) and SIGTERM (a CI cancel) end the run cleanly: ranks reaped,
// reports written with the rest marked cancelled, an exit code that says so, and no report
// of an earlier run left in place.
class CliCancelTest : public CliTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(CliCancelTest, WritesTheReportsMarksTheRestCancelledAndExitsWith128PlusTheSignal) {
  const std::string sig = GetParam();
  write("s/a_small.toml", kSmallPass);
  write("s/b_hang.toml", kHang);
  write("s/c_small.toml", std::string(kSmallPass).replace(std::string(kSmallPass).find("cli.small"), 9, "cli.small2"));
  const std::string report = dir_ + "/report";
  write("report/results.json", "{\"stale\": true}\n");
  write("report/junit.xml", "<stale/>\n");
  // Started directly, and signalled once the hanging scenario's ranks are running (their
  // logs exist), however slow this machine is.
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string out = dir_ + "/out";
    freopen(out.c_str(), "w", stdout);
    freopen(out.c_str(), "a", stderr);
    execl(LOCKSTEP_BINARY, LOCKSTEP_BINARY, "run", (dir_ + "/s").c_str(), "--report-dir", report.c_str(), nullptr);
    _exit(127);
  }
  const std::string started = report + "/cli.hang/rank1.log";
  while (!fs::exists(started) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(fs::exists(started)) << read_file(dir_ + "/out");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t_signal = std::chrono::steady_clock::now();
  kill(pid, sig == "INT" ? SIGINT : SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_signal).count();
  ASSERT_TRUE(WIFEXITED(status)) << "killed by the signal instead of ending cleanly";
  EXPECT_EQ(WEXITSTATUS(status), sig == "INT" ? 130 : 143) << read_file(dir_ + "/out");
  EXPECT_LT(wall, 10.0) << "the run took this long to end after the signal";
  const auto j = nlohmann::json::parse(read_file(report + "/results.json"));
  EXPECT_FALSE(j.contains("stale"));
  EXPECT_EQ(j["cancelled_by"], "SIG" + sig);
  EXPECT_EQ(j["summary"]["pass"], 1);
  EXPECT_EQ(j["summary"]["cancelled"], 2);
  ASSERT_EQ(j["scenarios"].size(), 3u);
  EXPECT_EQ(j["scenarios"][0]["status"], "pass");
  EXPECT_EQ(j["scenarios"][1]["status"], "cancelled");
  EXPECT_CONTAINS(j["scenarios"][1].value("reason", ""), "cancelled by SIG" + sig + " while running");
  EXPECT_EQ(j["scenarios"][2]["status"], "cancelled");
  EXPECT_CONTAINS(j["scenarios"][2].value("reason", ""), "not run");
  const std::string xml = read_file(report + "/junit.xml");
  EXPECT_CONTAINS(xml, "tests=\"3\" failures=\"0\" errors=\"0\" skipped=\"2\"");
  // No rank of the cancelled run survives it.
  const std::string ps = "ps -eo args | grep -F -- " + quote(report) + " | grep -v grep >/dev/null";
  EXPECT_NE(std::system(ps.c_str()) == 0, true) << "a rank process outlived the cancelled run";
}

INSTANTIATE_TEST_SUITE_P(Signals, CliCancelTest, ::testing::Values("INT", "TERM"));

// Two runs started at once from one working directory, without --report-dir, each get their
// own report folder; lockstep-report/latest points at one of them.
TEST_F(CliTest, ConcurrentRunsWithoutReportDirGetTheirOwnFolders) {
  const std::string file = write("small.toml", kSmallPass);
  const std::string work = dir_ + "/work";
  fs::create_directories(work);
  const std::string one = quote(LOCKSTEP_BINARY) + " run " + quote(file) + " >/dev/null 2>&1";
  const int status = std::system(("cd " + quote(work) + " && (" + one + " & " + one + " & wait)").c_str());
  ASSERT_EQ(status, 0);
  std::vector<std::string> runs;
  for (const auto& e : fs::directory_iterator(work + "/lockstep-report")) {
    if (e.path().filename().string().rfind("run-", 0) == 0) runs.push_back(e.path().string());
  }
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& r : runs) {
    const auto j = nlohmann::json::parse(read_file(r + "/results.json"));
    EXPECT_EQ(j["summary"]["pass"], 1) << r;
  }
  EXPECT_TRUE(fs::is_symlink(work + "/lockstep-report/latest"));
  EXPECT_TRUE(fs::exists(work + "/lockstep-report/latest/results.json"));
}

TEST_F(CliTest, AnUnwritableReportDirIsAnInputError) {
  const std::string file = write("small.toml", kSmallPass);
  write("plain_file", "x");
  const auto r = lockstep("run " + quote(file) + " --report-dir " + quote(dir_ + "/plain_file/sub"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "--report-dir " + dir_ + "/plain_file/sub: cannot create it");
}

TEST_F(CliTest, NonFiniteOptionValuesAreRefused) {
  const std::string file = write("small.toml", kSmallPass);
  for (const char* v : {"nan", "inf"}) {
    const auto r = lockstep("run " + quote(file) + " --baseline " + quote(dir_ + "/b.db") + " --tolerance " + v);
    EXPECT_EQ(r.code, 2) << v;
    EXPECT_CONTAINS(r.err, std::string("must be a finite number, got ") + v);
  }
}

// validate applies run's rules: ids duplicated across files, and only regular files.
TEST_F(CliTest, ValidateRefusesWhatRunRefuses) {
  write("d/a.toml", kSmallPass);
  write("d/b.toml", kSmallPass);  // the same name, so the same id
  const auto dup = lockstep("validate " + quote(dir_ + "/d"));
  EXPECT_EQ(dup.code, 2);
  EXPECT_CONTAINS(dup.err, "duplicate scenario id \"cli.small\"");
  const std::string fifo = dir_ + "/pipe.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto f = lockstep_with_timeout("validate " + quote(fifo), 20);
  EXPECT_EQ(f.code, 2);
  EXPECT_CONTAINS(f.err, fifo + ": not a regular file");
}

// A rank that cannot write its status file (here the path is taken by a directory; a full or
// read-only report disk does the same) ends with exit code 5 and says why. It used to deadlock:
// write_status threw while finish() held its lock, and the handler called finish() again.
TEST_F(CliTest, ARankThatCannotWriteItsStatusEndsInsteadOfDeadlocking) {
  const std::string file = write("one.toml", R"(name = "cli.one"
[run]
world_size = 1
[workload]
kind = "collectives"
steps = 1
count = 8
ops = ["all_reduce"]
[expect]
outcome = "pass"
)");
  const std::string report = dir_ + "/report";
  fs::create_directories(report + "/cli.one/rank0.status.json");  // a directory where the file goes
  const std::string cmd = "RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=0 timeout 120 " +
                          quote(LOCKSTEP_BINARY) + " rank " + quote(file) + " --report-dir " + quote(report) + " >" +
                          quote(dir_ + "/rank.out") + " 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 5) << "124 means it hung: " << read_file(dir_ + "/rank.out");
  EXPECT_CONTAINS(read_file(dir_ + "/rank.out"), "cannot write " + report + "/cli.one/rank0.status.json");
}

}  // namespace
}  // namespace lockstep
