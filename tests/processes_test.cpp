// RankProcesses::kill_all: when it returns, nothing a rank started is still alive (gone, or a
// zombie waiting for init), whether the rank itself was still running or had already exited.
// Under load a SIGKILLed process can keep running for a while before it is torn down, so a
// check that only sent the signal would leave it running into the next scenario.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "harness/launch/processes.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using test::TempDir;

// Waits up to 20 s for the pid a shell wrote to `path`.
std::string wait_for_pid(const std::string& path) {
  for (int i = 0; i < 2000; ++i) {
    const std::string pid = test::read_file(path);
    if (!pid.empty() && pid.back() == '\n') return pid.substr(0, pid.size() - 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

// '\0' when the process is gone, else its state letter from /proc/<pid>/stat.
char state_of(const std::string& pid) {
  const std::string stat = test::read_file("/proc/" + pid + "/stat");
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '\0' : stat[close + 2];
}

// A rank (the shell) still running, with two children of its own.
TEST(RankProcessesTest, KillAllReturnsOnceEveryProcessOfTheGroupIsGone) {
  TempDir dir("procs");
  const std::string a = dir / "a", b = dir / "b";
  launch::RankProcesses procs;
  procs.spawn({"/bin/sh", "-c", "sleep 600 & echo $! > " + a + "; sleep 600 & echo $! > " + b + "; wait"},
              {"PATH=/usr/bin:/bin"}, dir / "log");
  const std::string pa = wait_for_pid(a), pb = wait_for_pid(b);
  ASSERT_FALSE(pa.empty());
  ASSERT_FALSE(pb.empty());
  EXPECT_NE(state_of(pa), '\0');  // running (sleeping) before kill_all
  procs.kill_all();
  for (const auto& pid : {pa, pb}) {
    const char st = state_of(pid);
    EXPECT_TRUE(st == '\0' || st == 'Z') << "sleep " << pid << " is still alive, state " << st;
  }
  ASSERT_EQ(procs.children().size(), 1u);
  EXPECT_TRUE(procs.children()[0].exited);
  EXPECT_TRUE(WIFSIGNALED(procs.children()[0].status));
}

// A rank that exited on its own, leaving a child behind.
TEST(RankProcessesTest, KillAllReachesWhatAnExitedRankLeftBehind) {
  TempDir dir("procs");
  const std::string a = dir / "a";
  launch::RankProcesses procs;
  procs.spawn({"/bin/sh", "-c", "sleep 600 & echo $! > " + a + "; exit 0"}, {"PATH=/usr/bin:/bin"}, dir / "log");
  const std::string pa = wait_for_pid(a);
  ASSERT_FALSE(pa.empty());
  for (int i = 0; i < 2000 && !procs.reap(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(procs.children()[0].exited);
  EXPECT_TRUE(WIFEXITED(procs.children()[0].status) && WEXITSTATUS(procs.children()[0].status) == 0);
  EXPECT_NE(state_of(pa), '\0');  // the orphan still sleeps
  procs.kill_all();
  const char st = state_of(pa);
  EXPECT_TRUE(st == '\0' || st == 'Z') << "sleep " << pa << " is still alive, state " << st;
}

}  // namespace
}  // namespace lockstep
