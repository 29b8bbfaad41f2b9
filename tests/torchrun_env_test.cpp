// Ranks started the way torchrun, srun or mpirun start them: no lockstep launcher, only the
// RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT variables; rank 0 hosts the store.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "harness/launch/launcher.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"

namespace {

namespace fs = std::filesystem;

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

pid_t start_rank(int rank, int world_size, int port, const std::string& file, const std::string& report,
                 const std::string& extra_env = "") {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(world_size).c_str(), 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    unsetenv("LOCKSTEP_PLAN");
    unsetenv("LOCKSTEP_STORE_HOSTED");
    if (!extra_env.empty()) putenv(const_cast<char*>(extra_env.c_str()));
    const std::string log = report + "/stdout" + std::to_string(rank) + ".log";
    freopen(log.c_str(), "w", stdout);
    freopen(log.c_str(), "a", stderr);
    execl(LOCKSTEP_BINARY, LOCKSTEP_BINARY, "rank", file.c_str(), "--report-dir", report.c_str(), nullptr);
    _exit(127);
  }
  return pid;
}

// Waits for `pid` up to `seconds`; kills it after that. Returns the wait status.
int wait_for(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int st = 0;
  while (waitpid(pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return st;
}

class TorchrunEnvTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  lockstep::test::TempDir tmp_{"lockstep-torchrun"};
  const std::string dir_ = tmp_.path();
};

TEST_F(TorchrunEnvTest, TwoRanksRunFromEnvironmentVariables) {
  const std::string file = write("mix.toml",
                                 "name = \"env.mix\"\n[run]\nworld_size = 2\ntimeout_s = 30\n"
                                 "[workload]\nkind = \"collectives\"\nsteps = 2\ncount = 32\n[expect]\noutcome = \"pass\"\n");
  const int port = free_port();
  const pid_t r0 = start_rank(0, 2, port, file, dir_);
  const pid_t r1 = start_rank(1, 2, port, file, dir_);
  const int s0 = wait_for(r0, 60), s1 = wait_for(r1, 60);
  ASSERT_TRUE(WIFEXITED(s0) && WEXITSTATUS(s0) == 0) << "rank 0 status " << s0;
  ASSERT_TRUE(WIFEXITED(s1) && WEXITSTATUS(s1) == 0) << "rank 1 status " << s1;
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(dir_ + "/env.mix/rank" + std::to_string(r) + ".status.json");
    ASSERT_TRUE(in) << "rank " << r << " wrote no status";
    const auto st = nlohmann::json::parse(in);
    EXPECT_EQ(st["outcome"], "ok");
    // 2 steps x 6 ops + one end-of-step barrier each + the final barrier.
    EXPECT_GT(st["collectives"].get<int>(), 10);
  }
}

TEST_F(TorchrunEnvTest, MismatchIsDiagnosedThroughTheControlGroupWithoutABoard) {
  const std::string file = write("bad.toml",
                                 "name = \"env.bad\"\n[run]\nworld_size = 2\ntimeout_s = 30\n"
                                 "[workload]\nkind = \"collectives\"\nsteps = 3\ncount = 32\nops = [\"all_reduce\"]\n"
                                 "[[inject]]\nkind = \"dtype_mismatch\"\nrank = 1\nstep = 1\ndtype = \"f64\"\n"
                                 "[expect]\noutcome = \"collective_mismatch\"\n");
  const int port = free_port();
  const pid_t r0 = start_rank(0, 2, port, file, dir_);
  const pid_t r1 = start_rank(1, 2, port, file, dir_);
  const int s0 = wait_for(r0, 60), s1 = wait_for(r1, 60);
  for (int st : {s0, s1}) {
    ASSERT_TRUE(WIFEXITED(st)) << "a rank did not exit by itself: " << st;
    EXPECT_EQ(WEXITSTATUS(st), 3);  // diagnosed
  }
  std::ifstream in(dir_ + "/env.bad/rank0.status.json");
  const auto st = nlohmann::json::parse(in);
  EXPECT_EQ(st["diagnosis"]["kind"], "collective_mismatch");
  EXPECT_EQ(st["diagnosis"]["rank"], 1);
  EXPECT_NE(st["diagnosis"]["message"].get<std::string>().find("f64"), std::string::npos);
}

// Two launchers at once on one machine: each hosts its own TCPStore on an OS-chosen port.
TEST_F(TorchrunEnvTest, ParallelRunsOnOneMachineDoNotCollide) {
  const std::string file = write("par.toml",
                                 "name = \"env.parallel\"\n[run]\nworld_size = 2\ntimeout_s = 60\n"
                                 "[workload]\nkind = \"collectives\"\nsteps = 2\ncount = 32\n[expect]\noutcome = \"pass\"\n");
  const auto s = lockstep::validate::load_file(file).at(0);
  lockstep::report::ScenarioResult results[2];
  std::thread runs[2];
  for (int i = 0; i < 2; ++i) {
    runs[i] = std::thread([&, i] {
      lockstep::launch::LaunchOptions opts;
      opts.binary = LOCKSTEP_BINARY;
      opts.report_dir = dir_ + "/report" + std::to_string(i);
      results[i] = lockstep::launch::run_scenario(s, opts);
    });
  }
  for (auto& t : runs) t.join();
  for (const auto& r : results) {
    EXPECT_EQ(r.status, lockstep::report::Status::kPass) << r.reason;
    EXPECT_FALSE(r.diagnosis.has_value());
  }
}

}  // namespace

#include "harness/launch/processes.h"

namespace {

bool has(const std::vector<std::string>& env, const std::string& kv) {
  return std::find(env.begin(), env.end(), kv) != env.end();
}

// As torchrun does: ranks sharing a node get one intra-op thread each, unless the environment
// already says how many.
TEST(TorchrunVariablesTest, RanksSharingANodeGetOneIntraOpThreadUnlessTold) {
  const char* saved = std::getenv("OMP_NUM_THREADS");
  const std::string keep = saved ? saved : "";
  unsetenv("OMP_NUM_THREADS");
  EXPECT_TRUE(has(lockstep::launch::torchrun_env(1, 4, 4, 29500), "OMP_NUM_THREADS=1"));
  EXPECT_TRUE(has(lockstep::launch::torchrun_env(1, 4, 2, 29500), "OMP_NUM_THREADS=1"));
  EXPECT_FALSE(has(lockstep::launch::torchrun_env(0, 1, 4, 29500), "OMP_NUM_THREADS=1")) << "one rank on the node";
  EXPECT_FALSE(has(lockstep::launch::torchrun_env(2, 4, 1, 29500), "OMP_NUM_THREADS=1")) << "one rank per node";
  setenv("OMP_NUM_THREADS", "3", 1);
  for (const auto& kv : lockstep::launch::torchrun_env(1, 4, 4, 29500))
    EXPECT_NE(kv.rfind("OMP_NUM_THREADS=", 0), 0u) << "the user's setting is inherited, not replaced: " << kv;
  if (saved) setenv("OMP_NUM_THREADS", keep.c_str(), 1);
  else unsetenv("OMP_NUM_THREADS");
}

}  // namespace
