// Contained runs (issue 32, item 1; harness/launch/contain.h): a local run's ranks live in their
// own network namespace (loopback only) and PID namespace, so none of their sockets is in this
// machine's namespace and nothing they start survives the run, even after `kill -9` of lockstep.
// The real binary runs; the tests look at it from outside, through this machine's /proc. Where
// this machine cannot make namespaces the containment tests skip, naming why; the fallback's
// report is tested everywhere by forbidding unshare(2) with a seccomp filter, as container
// sandboxes do.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/config.h"
#include "tests/contain_test_util.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using contain_test::ns_of;
using contain_test::results;
using contain_test::start_lockstep;
using contain_test::wait_for;
using test::quote;
using test::read_file;
using test::TempDir;

// A marker no other process on this machine has in its command line.
std::string unique_marker() {
  std::random_device rd;
  return std::to_string(100000 + rd() % 800000) + "." + std::to_string(rd() % 1000000);
}

// The live (not zombie) processes of this machine whose command line contains `needle`.
std::vector<pid_t> processes_with(const std::string& needle) {
  std::vector<pid_t> found;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == getpid()) continue;
    std::string cmd = read_file("/proc/" + name + "/cmdline");
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(needle) == std::string::npos) continue;
    const std::string stat = read_file("/proc/" + name + "/stat");
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z') continue;
    found.push_back(pid);
  }
  return found;
}

void kill_all_with(const std::string& needle) {
  for (pid_t p : processes_with(needle)) kill(p, SIGKILL);
}

// The inodes of the TCP sockets (any state) in a /proc/.../net/tcp table and its tcp6 twin.
std::set<std::string> tcp_inodes(const std::string& net_dir) {
  std::set<std::string> inodes;
  for (const char* table : {"tcp", "tcp6"}) {
    std::istringstream in(read_file(net_dir + "/" + table));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::vector<std::string> cols;
      for (std::string c; f >> c;) cols.push_back(c);
      if (cols.size() > 9 && cols[9] != "0") inodes.insert(cols[9]);
    }
  }
  return inodes;
}

// Runs lockstep to its end (at most two minutes); its exit code, -1 when it did not exit.
int run_lockstep(const std::string& dir, const std::vector<std::string>& args, bool no_unshare = false,
                 const std::vector<std::string>& env = {}, bool as_nobody = false) {
  const pid_t pid = start_lockstep(dir, args, no_unshare, env, as_nobody);
  int st = 0;
  if (!wait_for([&] { return waitpid(pid, &st, WNOHANG) == pid; }, 120)) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Two of lockstep's own ranks over Gloo; rank 1 sleeps in step 1, so the run lasts until the
// timeout (3 s) while rank 0 waits in a collective.
constexpr const char* kSleeper = R"(name = "contain.sleeper"
[run]
world_size = 2
timeout_s = 3
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

// A system under test whose ranks are shell commands (`script` is run by /bin/sh -c).
std::string shell_system(const std::string& script, const std::string& expect, int timeout_s = 20) {
  return "name = \"contain.shell\"\n[system]\nname = \"shell\"\ncommand = [\"/bin/sh\", \"-c\", \"" + script +
         "\"]\n[run]\nworld_size = 2\ntimeout_s = " + std::to_string(timeout_s) +
         "\n[workload]\nkind = \"lookup\"\nnodes = 10\nnum_parts = 2\nqueries = 40\ngroups = [\"partid.valid\"]\n"
         "[expect]\noutcome = \"" + expect + "\"\n";
}

// What a rank of the sleeper's run shows from outside while it runs: its namespaces and sockets.
struct RankView {
  std::string pid;
  bool own_net = false, own_pid = false;
  std::set<std::string> sockets;  // TCP socket inodes in the rank's namespace
  std::string interfaces;         // /proc/<pid>/net/dev
};

RankView watch_sleeper(const TempDir& dir, const std::vector<std::string>& extra) {
  const std::string file = dir.write("sleeper.toml", kSleeper);
  std::vector<std::string> args{"run", file, "--report-dir", dir / "report"};
  args.insert(args.end(), extra.begin(), extra.end());
  const pid_t lockstep = start_lockstep(dir.path(), args);
  RankView v;
  // A rank: `lockstep rank <file> ...`, once it has TCP sockets (Gloo's) open.
  wait_for([&] {
    for (pid_t p : processes_with(file)) {
      const std::string pid = std::to_string(p);
      std::string cmd = read_file("/proc/" + pid + "/cmdline");
      if (cmd.find(std::string("rank") + '\0') == std::string::npos || p == lockstep) continue;
      const auto sockets = tcp_inodes("/proc/" + pid + "/net");
      if (sockets.empty()) continue;
      v.pid = pid;
      v.sockets = sockets;
      return true;
    }
    return false;
  }, 60);
  if (!v.pid.empty()) {
    v.own_net = ns_of(v.pid, "net") != ns_of("self", "net");
    v.own_pid = ns_of(v.pid, "pid") != ns_of("self", "pid");
    v.interfaces = read_file("/proc/" + v.pid + "/net/dev");
  }
  int st = 0;
  if (!wait_for([&] { return waitpid(lockstep, &st, WNOHANG) == lockstep; }, 60)) {
    kill(lockstep, SIGKILL);
    waitpid(lockstep, &st, 0);
  }
  return v;
}

// (a) During a run, none of its sockets is in this machine's network namespace: the rank's TCP
// sockets (Gloo's; the store's) are in a namespace of their own whose only interface is loopback.
TEST(ContainTest, NoSocketOfTheRunIsInThisMachinesNetworkNamespace) {
  SKIP_WITHOUT_NAMESPACES();
  TempDir dir("contain");
  const RankView v = watch_sleeper(dir, {});
  ASSERT_FALSE(v.pid.empty()) << "no rank with TCP sockets was seen; " << read_file(dir / "out") << read_file(dir / "err");
  EXPECT_TRUE(v.own_net) << "rank " << v.pid << " is in this machine's network namespace";
  EXPECT_TRUE(v.own_pid) << "rank " << v.pid << " is in this machine's PID namespace";
  const auto host = tcp_inodes("/proc/self/net");
  for (const auto& inode : v.sockets) EXPECT_EQ(host.count(inode), 0u) << "socket inode " << inode << " is visible here";
  // Only loopback: the header's two lines and "lo".
  EXPECT_CONTAINS(v.interfaces, "lo:");
  EXPECT_EQ(std::count(v.interfaces.begin(), v.interfaces.end(), '\n'), 3) << v.interfaces;
  const auto j = results(dir / "report");
  EXPECT_EQ(j["containment"]["contained"], true) << j["containment"].dump();
  EXPECT_EQ(j["scenarios"][0]["status"], "pass") << j["scenarios"][0].dump();
  EXPECT_EQ(read_file(dir / "err").find("not contained"), std::string::npos) << read_file(dir / "err");
}

// (e) The opt-out is what it says: with --no-contain the rank's sockets are this machine's, and
// results.json says the run was not contained because of the flag (no note on stderr: asked for).
TEST(ContainTest, NoContainRunsInThisMachinesNamespacesAndSaysSo) {
  TempDir dir("contain");
  const RankView v = watch_sleeper(dir, {"--no-contain"});
  ASSERT_FALSE(v.pid.empty()) << read_file(dir / "out") << read_file(dir / "err");
  EXPECT_FALSE(v.own_net);
  EXPECT_FALSE(v.own_pid);
  // (Its sockets were this machine's table while it ran; they are closed by now, so they are not
  // looked up here: own_net above is the check.)
  const auto j = results(dir / "report");
  EXPECT_EQ(j["containment"]["contained"], false);
  EXPECT_EQ(j["containment"]["reason"], "--no-contain");
  EXPECT_EQ(j["scenarios"][0]["status"], "pass");
  EXPECT_CONTAINS(read_file(dir / "out"), "not contained: --no-contain");
  EXPECT_EQ(read_file(dir / "err").find("note: this run is not contained"), std::string::npos) << read_file(dir / "err");
}

// (b) A grandchild that leaves its rank's process group and session (setsid) does not outlive
// the run. Without containment it does (the old behaviour, shown here so the check is known to see it).
TEST(ContainTest, ASetsidGrandchildDoesNotSurviveTheRun) {
  SKIP_WITHOUT_NAMESPACES();
  TempDir dir("contain");
  const std::string marker = unique_marker();
  const std::string file =
      dir.write("setsid.toml", shell_system("setsid sleep " + marker + " >/dev/null 2>&1 < /dev/null & sleep 0.5; exit 3", "rank_failure"));
  run_lockstep(dir.path(), {"run", file, "--report-dir", dir / "report"});
  const auto left = processes_with("sleep " + marker);
  kill_all_with("sleep " + marker);
  EXPECT_TRUE(left.empty()) << left.size() << " setsid sleep(s) outlived the run; " << read_file(dir / "out");
  EXPECT_EQ(results(dir / "report")["containment"]["contained"], true);

  run_lockstep(dir.path(), {"run", file, "--report-dir", dir / "report2", "--no-contain"});
  const bool survived = wait_for([&] { return !processes_with("sleep " + marker).empty(); }, 2);
  kill_all_with("sleep " + marker);
  EXPECT_TRUE(survived) << "without containment the setsid grandchild was expected to outlive the run";
}

// (c) After `kill -9` of lockstep, nothing it started survives: the ranks, and a grandchild in a
// session of its own.
TEST(ContainTest, NothingSurvivesKillNineOfTheLauncher) {
  SKIP_WITHOUT_NAMESPACES();
  TempDir dir("contain");
  const std::string marker = unique_marker();
  const std::string file = dir.write(
      "kill9.toml", shell_system("setsid sleep " + marker + " >/dev/null 2>&1 < /dev/null & exec sleep 1" + marker, "pass", 120));
  const pid_t lockstep = start_lockstep(dir.path(), {"run", file, "--report-dir", dir / "report"});
  const bool started = wait_for([&] { return processes_with("sleep " + marker).size() >= 2 && processes_with("sleep 1" + marker).size() >= 2; }, 60);
  kill(lockstep, SIGKILL);
  waitpid(lockstep, nullptr, 0);
  ASSERT_TRUE(started) << read_file(dir / "out") << read_file(dir / "err");
  const bool gone = wait_for([&] { return processes_with(marker).empty(); }, 5);
  const auto left = processes_with(marker);
  kill_all_with(marker);
  EXPECT_TRUE(gone) << left.size() << " process(es) outlived kill -9 of the launcher";
}

// (d) A clean scenario folder gives the same verdicts contained and not.
TEST(ContainTest, CleanScenariosGiveTheSameVerdictsContainedAndNot) {
  SKIP_WITHOUT_NAMESPACES();
  TempDir dir("contain");
  const std::string comm = std::string(LOCKSTEP_SOURCE_DIR) + "/scenarios/comm";
  const std::string filter = "clean_mix\\[world_size=4\\]|comm\\.crash$";
  std::map<std::string, std::string> verdicts[2];
  for (int off = 0; off < 2; ++off) {
    const std::string report = dir / ("report" + std::to_string(off));
    std::vector<std::string> args{"run", comm, "--filter", filter, "--report-dir", report};
    if (off) args.push_back("--no-contain");
    EXPECT_EQ(run_lockstep(dir.path(), args), 0) << read_file(dir / "out");
    const auto j = results(report);
    EXPECT_EQ(j["containment"]["contained"], off == 0);
    for (const auto& s : j["scenarios"]) {
      verdicts[off][s["id"]] = s["status"].get<std::string>() + " " + (s["diagnosis"].is_null() ? "clean" : s["diagnosis"]["kind"].get<std::string>());
    }
  }
  EXPECT_GE(verdicts[0].size(), 2u);
  EXPECT_EQ(verdicts[0], verdicts[1]);
}

// (e) Where unshare(2) is forbidden (a container sandbox), the run goes on uncontained, with the
// same verdict, and says why in results.json, in the summary and once on stderr;
// LOCKSTEP_CONTAIN=require refuses it instead, and other values of LOCKSTEP_CONTAIN are refused.
TEST(ContainTest, WithoutNamespacesTheRunFallsBackAndSaysWhy) {
  TempDir dir("contain");
  const std::string file = dir.write("small.toml",
                                     "name = \"contain.small\"\n[run]\nworld_size = 2\n[workload]\nkind = \"collectives\"\n"
                                     "steps = 1\ncount = 8\nops = [\"all_reduce\"]\n[expect]\noutcome = \"pass\"\n");
  ASSERT_EQ(run_lockstep(dir.path(), {"run", file, "--report-dir", dir / "report"}, /*no_unshare=*/true), 0)
      << read_file(dir / "out") << read_file(dir / "err");
  const auto j = results(dir / "report");
  EXPECT_EQ(j["containment"]["contained"], false);
  const std::string reason = j["containment"].value("reason", "");
  EXPECT_CONTAINS(reason, "namespaces unavailable");
  EXPECT_CONTAINS(reason, "Operation not permitted");
  EXPECT_EQ(j["scenarios"][0]["status"], "pass");
  EXPECT_CONTAINS(read_file(dir / "out"), "not contained: namespaces unavailable");
  const std::string err = read_file(dir / "err");
  const std::string note = "note: this run is not contained";
  ASSERT_NE(err.find(note), std::string::npos) << err;
  EXPECT_EQ(err.find(note, err.find(note) + 1), std::string::npos) << "the note is printed once: " << err;

  EXPECT_EQ(run_lockstep(dir.path(), {"run", file, "--report-dir", dir / "r2"}, true, {"LOCKSTEP_CONTAIN=require"}), 2);
  EXPECT_CONTAINS(read_file(dir / "err"), "LOCKSTEP_CONTAIN=require, but this run cannot be contained");
  EXPECT_EQ(run_lockstep(dir.path(), {"run", file, "--report-dir", dir / "r3"}, false, {"LOCKSTEP_CONTAIN=maybe"}), 2);
  EXPECT_CONTAINS(read_file(dir / "err"), "LOCKSTEP_CONTAIN must be auto, off or require, got 'maybe'");
  EXPECT_EQ(run_lockstep(dir.path(), {"run", file, "--report-dir", dir / "r4"}, false, {"LOCKSTEP_CONTAIN=off"}), 0);
  EXPECT_EQ(results(dir / "r4")["containment"]["reason"], "LOCKSTEP_CONTAIN=off");
}

// Without root, a run is contained through an unprivileged user namespace that maps only the
// user's own uid and gid (run here as uid 65534, where root can switch to it).
TEST(ContainTest, AnUnprivilegedUserIsContainedThroughAUserNamespace) {
  if (geteuid() != 0) GTEST_SKIP() << "requires root, to run lockstep as uid 65534";
  TempDir dir("contain");
  ::chmod(dir.path().c_str(), 0777);
  const std::string file = dir.write("small.toml",
                                     "name = \"contain.small\"\n[run]\nworld_size = 2\n[workload]\nkind = \"collectives\"\n"
                                     "steps = 1\ncount = 8\nops = [\"all_reduce\"]\n[expect]\noutcome = \"pass\"\n");
  ::chmod(file.c_str(), 0644);
  const int code = run_lockstep(dir.path(), {"run", file, "--report-dir", dir / "report"}, false, {"HOME=" + dir.path()}, /*as_nobody=*/true);
  if (code == 125) GTEST_SKIP() << "uid 65534 cannot run " << LOCKSTEP_BINARY << " or read its LibTorch in " LOCKSTEP_TORCH_LIBDIR;
  ASSERT_EQ(code, 0) << read_file(dir / "out") << read_file(dir / "err");
  const auto j = results(dir / "report");
  if (!j["containment"]["contained"].get<bool>()) {
    const std::string reason = j["containment"].value("reason", "");
    ASSERT_NE(reason.find("namespaces unavailable: "), std::string::npos) << reason;
    GTEST_SKIP() << "unprivileged user namespaces are unavailable here: " << reason;
  }
  EXPECT_EQ(j["containment"]["namespaces"], nlohmann::json({"network", "pid", "mount", "user"}));
  EXPECT_EQ(j["scenarios"][0]["status"], "pass");
}

// SIGINT to lockstep (what a terminal's Ctrl-C or a CI cancel sends) still cancels a contained run
// cleanly: forwarded once to the run, which writes its reports and exits 130.
TEST(ContainTest, SigintCancelsAContainedRunCleanly) {
  SKIP_WITHOUT_NAMESPACES();
  TempDir dir("contain");
  const std::string file = dir.write("sleeper.toml", std::string(kSleeper).replace(std::string(kSleeper).find("timeout_s = 3"), 13, "timeout_s = 50"));
  const pid_t lockstep = start_lockstep(dir.path(), {"run", file, "--report-dir", dir / "report"});
  ASSERT_TRUE(wait_for([&] { return fs::exists(dir / "report/contain.sleeper/rank1.log"); }, 60)) << read_file(dir / "err");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(lockstep, SIGINT);
  int st = 0;
  const bool ended = wait_for([&] { return waitpid(lockstep, &st, WNOHANG) == lockstep; }, 15);
  if (!ended) {
    kill(lockstep, SIGKILL);
    waitpid(lockstep, &st, 0);
  }
  ASSERT_TRUE(ended) << "the contained run did not end after SIGINT";
  ASSERT_TRUE(WIFEXITED(st)) << "killed by the signal instead of ending cleanly";
  EXPECT_EQ(WEXITSTATUS(st), 130) << read_file(dir / "out") << read_file(dir / "err");
  const auto j = results(dir / "report");
  EXPECT_EQ(j["cancelled_by"], "SIGINT");
  EXPECT_EQ(j["scenarios"][0]["status"], "cancelled");
}

}  // namespace
}  // namespace lockstep
