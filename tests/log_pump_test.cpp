// The ranks' logs (harness/launch/log_pump.h): under the cap a log is exactly what the rank
// wrote; past it, the first half and the last half are kept with one line between them saying how
// many bytes were cut; a rank's lines can be echoed live after a label. Expected contents are built
// here from the bytes written, never read back from the pump.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "harness/launch/log_pump.h"
#include "harness/launch/processes.h"
#include "tests/test_util.h"

namespace lockstep::launch {
namespace {

using test::read_file;

// `n` numbered lines, "line 000000\n" (12 bytes each).
std::string numbered(int n) {
  std::string out;
  char buf[32];
  for (int i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "line %06d\n", i);
    out += buf;
  }
  return out;
}

// Writes `text` into a pipe whose read end the pump owns, from this thread, then stops the pump.
void pump_through(LogPump& pump, const std::string& path, const std::string& text) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pump.add(fds[0], path, "");
  for (std::size_t at = 0; at < text.size();) {
    const ssize_t w = ::write(fds[1], text.data() + at, std::min<std::size_t>(text.size() - at, 100000));
    ASSERT_GT(w, 0);
    at += static_cast<std::size_t>(w);
  }
  ::close(fds[1]);
  pump.stop();
}

TEST(LogPumpTest, UnderTheCapTheLogIsExactlyTheOutput) {
  test::TempDir tmp("lockstep_log_pump");
  const std::string text = numbered(50000);  // 600,000 bytes
  LogPump pump(/*cap=*/1 << 20);
  pump_through(pump, tmp.path() + "/rank0.log", text);
  EXPECT_EQ(read_file(tmp.path() + "/rank0.log"), text);
}

TEST(LogPumpTest, PastTheCapTheHeadAndTailAreKeptWithTheCutCounted) {
  test::TempDir tmp("lockstep_log_pump");
  const std::string text = numbered(500000);  // 6,000,000 bytes
  const std::size_t cap = 1 << 20, head = cap / 2, tail = cap - cap / 2;
  LogPump pump(cap);
  pump_through(pump, tmp.path() + "/rank0.log", text);
  const std::string log = read_file(tmp.path() + "/rank0.log");
  const std::size_t cut = text.size() - head - tail;
  const std::string marker = "\n[lockstep: " + std::to_string(cut) + " bytes of this rank's output were cut here; the log keeps its first " +
                             std::to_string(head) + " and last " + std::to_string(tail) + " bytes (LOCKSTEP_LOG_CAP_MB)]\n";
  EXPECT_EQ(log.size(), head + marker.size() + tail);
  EXPECT_EQ(log.substr(0, head), text.substr(0, head));
  EXPECT_EQ(log.substr(head, marker.size()), marker);
  EXPECT_EQ(log.substr(head + marker.size()), text.substr(text.size() - tail));
}

// Through RankProcesses: a child that prints 3 MiB under a 1 MiB cap leaves a log of about 1 MiB
// whose last line is its last line, complete as soon as reap() has seen the child exit.
TEST(LogPumpTest, ARankThatPrintsMegabytesLeavesACappedLogEndingInItsLastLine) {
  test::TempDir tmp("lockstep_log_pump");
  ::setenv("LOCKSTEP_LOG_CAP_MB", "1", 1);
  const std::string log = tmp.path() + "/rank0.log";
  {
    RankProcesses procs;
    procs.spawn({"/bin/sh", "-c", "i=0; while [ $i -lt 60000 ]; do echo \"a line of fifty bytes from a chatty rank: $i\"; i=$((i+1)); done; echo the-last-line"},
                inherited_env(), log);
    while (!procs.reap()) ::usleep(10000);
    const std::string text = read_file(log);
    EXPECT_LE(text.size(), (1u << 20) + 200);
    EXPECT_GT(text.size(), (1u << 20) - 200);
    EXPECT_EQ(text.substr(text.size() - 14), "the-last-line\n");
    EXPECT_NE(text.find("bytes of this rank's output were cut here"), std::string::npos);
    EXPECT_EQ(text.rfind("a line of fifty bytes from a chatty rank: 0\n", 0), 0u);
  }
  ::unsetenv("LOCKSTEP_LOG_CAP_MB");
}

TEST(LogPumpTest, ACapThatIsNotAWholePositiveNumberIsAnInputError) {
  ::setenv("LOCKSTEP_LOG_CAP_MB", "0", 1);
  EXPECT_THROW(log_cap_bytes(), InputError);
  ::setenv("LOCKSTEP_LOG_CAP_MB", "lots", 1);
  EXPECT_THROW(log_cap_bytes(), InputError);
  ::unsetenv("LOCKSTEP_LOG_CAP_MB");
  EXPECT_EQ(log_cap_bytes(), 8u << 20);
}

}  // namespace
}  // namespace lockstep::launch
