// The watchdog's clock rules on a fake clock: start-up has its own bound, the collective
// timeout only runs once every live rank has started, progress restarts it, a bad exit
// settles, and the deadline bounds everything.
#include "harness/launch/watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace lockstep::launch {
namespace {

using V = Watchdog::Verdict;
using Rank = Watchdog::Rank;

class WatchdogTest : public ::testing::Test {
 protected:
  Watchdog::Clock::time_point t0 = Watchdog::Clock::now();
  Watchdog::Clock::time_point at(double s) const {
    return t0 + std::chrono::duration_cast<Watchdog::Clock::duration>(std::chrono::duration<double>(s));
  }
  static Watchdog::Limits limits(double startup, double timeout, double deadline = 1000) {
    Watchdog::Limits l;
    l.startup_s = startup;
    l.timeout_s = timeout;
    l.deadline_s = deadline;
    l.settle_s = 0.4;
    return l;
  }
  static Rank started(std::int64_t progress) { return Rank{false, false, true, progress}; }
  static Rank starting() { return Rank{false, false, false, 0}; }
};

// The false alarm of the issue: rank 1 builds its graph for 8 s while rank 0 waits in
// collective #0. With timeout_s = 2 that is not a hang; start-up has its own bound.
TEST_F(WatchdogTest, ARankStillStartingIsNotACollectiveTimeout) {
  Watchdog dog(2, limits(30, 2), t0);
  for (double s = 0; s <= 8.0; s += 0.5) {
    EXPECT_EQ(dog.observe({started(1), starting()}, at(s)), V::kWatch) << "at " << s << " s";
  }
  EXPECT_EQ(dog.starting(), std::vector<int>{1});
  ASSERT_TRUE(dog.startup_seconds(0).has_value());
  EXPECT_DOUBLE_EQ(*dog.startup_seconds(0), 0.0);
  EXPECT_FALSE(dog.startup_seconds(1).has_value());
}

TEST_F(WatchdogTest, StartUpPastItsBoundIsAStartUpTimeoutNamingWhoIsStarting) {
  Watchdog dog(3, limits(10, 2), t0);
  EXPECT_EQ(dog.observe({starting(), starting(), starting()}, at(1)), V::kWatch);
  EXPECT_EQ(dog.observe({started(1), starting(), started(1)}, at(3)), V::kWatch);
  EXPECT_EQ(dog.observe({started(1), starting(), started(1)}, at(9.9)), V::kWatch);
  EXPECT_EQ(dog.observe({started(1), starting(), started(1)}, at(10.1)), V::kStartupTimeout);
  EXPECT_EQ(dog.starting(), std::vector<int>{1});
  EXPECT_NEAR(*dog.startup_seconds(0), 3.0, 1e-9);
}

// Once the last rank starts, the idle clock counts from that start, not from spawn.
TEST_F(WatchdogTest, TheTimeoutCountsFromTheLastStart) {
  Watchdog dog(2, limits(60, 2), t0);
  EXPECT_EQ(dog.observe({started(1), starting()}, at(0.5)), V::kWatch);
  EXPECT_EQ(dog.observe({started(1), started(1)}, at(20)), V::kWatch);   // started at 20 s
  EXPECT_EQ(dog.observe({started(1), started(1)}, at(21.9)), V::kWatch);
  EXPECT_EQ(dog.observe({started(1), started(1)}, at(22.1)), V::kTimeout);
  EXPECT_NEAR(dog.idle_seconds(), 2.1, 1e-9);
}

TEST_F(WatchdogTest, ProgressRestartsTheIdleClock) {
  Watchdog dog(2, limits(60, 2), t0);
  std::int64_t p = 1;
  for (double s = 0; s < 30; s += 1.5) {
    ++p;  // some rank moves every 1.5 s: never idle for 2 s
    EXPECT_EQ(dog.observe({started(p), started(1)}, at(s)), V::kWatch) << "at " << s << " s";
  }
  EXPECT_EQ(dog.observe({started(p), started(1)}, at(30.4)), V::kWatch);  // last move at 28.5 s
  EXPECT_EQ(dog.observe({started(p), started(1)}, at(30.6)), V::kTimeout);
}

TEST_F(WatchdogTest, ABadExitSettlesAfterTheSettleTime) {
  Watchdog dog(2, limits(60, 100), t0);
  EXPECT_EQ(dog.observe({started(3), started(3)}, at(1)), V::kWatch);
  EXPECT_EQ(dog.observe({Rank{true, true, true, 3}, started(3)}, at(2)), V::kWatch);
  EXPECT_EQ(dog.observe({Rank{true, true, true, 3}, started(3)}, at(2.3)), V::kWatch);
  EXPECT_EQ(dog.observe({Rank{true, true, true, 3}, started(3)}, at(2.5)), V::kSettled);
}

// A rank that exits during start-up has ended its start-up: it does not hold the others in
// the start-up phase, so the collective timeout applies to them.
TEST_F(WatchdogTest, AnExitedRankIsNotStarting) {
  Watchdog dog(2, limits(60, 2), t0);
  EXPECT_EQ(dog.observe({started(1), Rank{true, false, false, 0}}, at(1)), V::kWatch);
  EXPECT_TRUE(dog.starting().empty());
  EXPECT_EQ(dog.observe({started(1), Rank{true, false, false, 0}}, at(3.1)), V::kTimeout);
}

TEST_F(WatchdogTest, AllExitedEndsTheWatch) {
  Watchdog dog(2, limits(60, 2), t0);
  EXPECT_EQ(dog.observe({Rank{true, false, true, 5}, Rank{true, false, true, 5}}, at(1)), V::kAllExited);
}

// Rank 0 still importing (its main thread running or runnable: its scheduled time moves as fast
// as the clock) when rank 1 fails: the settle window waits for it, and counts its failure 2.2 s
// later as the same failure's.
TEST_F(WatchdogTest, ABusyRankIsWaitedForPastTheSettleTime) {
  Watchdog dog(2, limits(60, 100), t0);
  const Rank failed{true, true, false, 0};
  auto busy = [](std::int64_t ns) { Rank k{false, false, false, 0}; k.cpu_ns = ns; return k; };
  EXPECT_EQ(dog.observe({starting(), failed}, at(3)), V::kWatch);
  EXPECT_TRUE(dog.settling());
  std::int64_t ns = 1000;
  for (double s = 3.1; s < 5.2; s += 0.1) EXPECT_EQ(dog.observe({busy(ns += 90'000'000), failed}, at(s)), V::kWatch) << "at " << s << " s";
  EXPECT_EQ(dog.observe({Rank{true, true, false, 0}, failed}, at(5.2)), V::kAllExited);
  ASSERT_TRUE(dog.settle_until().has_value());
  EXPECT_EQ(*dog.settle_until(), at(5.2));
}

// A rank that barely runs (blocked in a collective or a rendezvous, waiting for the rank that
// failed; a poll now and then) is watched for one busy_window_s and then not waited for, started
// or not. As the watch loop does, its counter is read from the poll after the failure was seen.
TEST_F(WatchdogTest, ARankBlockedIsNotWaitedFor) {
  const Rank failed{true, true, true, 1};
  for (const bool has_started : {false, true}) {
    Watchdog dog(2, limits(60, 100), t0);
    Rank blocked = has_started ? started(4) : starting();
    std::int64_t ns = 5'000;
    auto at_ns = [&](std::int64_t add) { blocked.cpu_ns = ns += add; return blocked; };
    EXPECT_EQ(dog.observe({blocked, failed}, at(3)), V::kWatch);  // cpu_ns not read yet
    EXPECT_EQ(dog.observe({at_ns(0), failed}, at(3.005)), V::kWatch);
    EXPECT_EQ(dog.observe({at_ns(2'000'000), failed}, at(3.1)), V::kWatch);
    EXPECT_EQ(dog.observe({at_ns(2'000'000), failed}, at(3.45)), V::kWatch);  // past settle_s, not yet a whole window
    EXPECT_EQ(dog.observe({at_ns(2'000'000), failed}, at(3.51)), V::kSettled) << has_started;
    ASSERT_TRUE(dog.settle_until().has_value());
    EXPECT_EQ(*dog.settle_until(), at(3.51));
  }
}

// A rank in a call the board shows in flight waits for its peers, however it waits (a GPU rank
// spins in a stream synchronize, its counter moving with the clock): not waited for.
TEST_F(WatchdogTest, ARankInACallIsNotWaitedForThoughItSpins) {
  Watchdog dog(2, limits(60, 100), t0);
  const Rank failed{true, true, true, 1};
  Rank spinning = started(4);
  spinning.in_call = true;
  std::int64_t ns = 0;
  for (double s = 3; s < 3.4; s += 0.1) {
    spinning.cpu_ns = ns += 100'000'000;
    EXPECT_EQ(dog.observe({spinning, failed}, at(s)), V::kWatch);
  }
  spinning.cpu_ns = ns += 100'000'000;
  EXPECT_EQ(dog.observe({spinning, failed}, at(3.41)), V::kSettled);
}

// Another verdict while the watchdog waits for a busy rank (here the collective timeout, brought
// down by a program's engine timeout) closes the settle window there too.
TEST_F(WatchdogTest, AVerdictWhileWaitingForABusyRankClosesTheWindow) {
  Watchdog dog(3, limits(60, 100), t0);
  const Rank failed{true, true, true, 1};
  Rank waiting = started(4);
  waiting.engine_timeout_s = 2;  // the watchdog's timeout: 1.5 s
  Rank busy = started(4);
  std::int64_t ns = 0;
  double s = 1;
  for (; s < 2.4; s += 0.1) {
    busy.cpu_ns = ns += 100'000'000;
    ASSERT_EQ(dog.observe({waiting, busy, failed}, at(s)), V::kWatch) << "at " << s << " s";
  }
  busy.cpu_ns = ns += 100'000'000;
  EXPECT_EQ(dog.observe({waiting, busy, failed}, at(2.6)), V::kTimeout);
  ASSERT_TRUE(dog.settle_until().has_value());
  EXPECT_EQ(*dog.settle_until(), at(2.6));
}

// A rank busy for ever (computing, or spinning in a wait) is waited for at most settle_grace_s
// after the first failure.
TEST_F(WatchdogTest, TheWaitForABusyRankIsBounded) {
  Watchdog dog(2, limits(600, 100), t0);
  const Rank failed{true, true, false, 0};
  std::int64_t ns = 0;
  double s = 1;
  Rank k = started(1);
  for (; s <= 11.0; s += 0.25) {
    k.cpu_ns = ns += 250'000'000;
    EXPECT_EQ(dog.observe({k, failed}, at(s)), V::kWatch) << "at " << s << " s";
  }
  k.cpu_ns = ns + 1;
  EXPECT_EQ(dog.observe({k, failed}, at(11.1)), V::kSettled);
  ASSERT_TRUE(dog.settle_until().has_value());
  EXPECT_EQ(*dog.settle_until(), at(11.1));
}

TEST_F(WatchdogTest, TheDeadlineBoundsARunThatKeepsMoving) {
  Watchdog dog(1, limits(60, 2, 10), t0);
  std::int64_t p = 0;
  for (double s = 0; s < 10; s += 1) EXPECT_EQ(dog.observe({started(++p)}, at(s)), V::kWatch);
  EXPECT_EQ(dog.observe({started(++p)}, at(10.5)), V::kDeadline);
}

}  // namespace
}  // namespace lockstep::launch
