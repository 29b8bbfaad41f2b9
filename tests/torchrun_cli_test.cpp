// `lockstep torchrun`: a plain PyTorch program (scenarios/programs/ddp_sage/train.py) run with
// torchrun's options and no scenario file, through the built CLI: exit codes, the verdict, the
// report folder, the probe cache, and one program over two "nodes" of this machine.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/config.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

using lockstep::test::CliResult;
using lockstep::test::quote;

const std::string kTrain = std::string(LOCKSTEP_SOURCE_DIR) + "/scenarios/programs/ddp_sage/train.py";

// The interpreter of the program scenarios: $LOCKSTEP_PYTHON, else Debian's (python3-torch 1.13).
std::string python() {
  const char* p = std::getenv("LOCKSTEP_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

class TorchrunCliTest : public ::testing::Test {
 protected:
  // `lockstep torchrun ARGS` (shell-quoted) under a time limit, with the probe cache in the
  // test's own folder.
  CliResult torchrun(const std::string& args, int seconds = 300) {
    const std::string env = "XDG_CACHE_HOME=" + quote(tmp_ / "cache") + " LOCKSTEP_PYTHON=" + quote(python()) + " ";
    return test::run_cli("env", env + "timeout " + std::to_string(seconds) + " " + quote(LOCKSTEP_BINARY) + " torchrun " + args,
                         tmp_.path());
  }
  // Skips when the program could not run here (no torch, or a build without the backend): the
  // command then exits 1 with "verdict: not run (...)".
  bool not_run(const CliResult& r) { return r.out.find("verdict: not run") != std::string::npos; }

  test::TempDir tmp_{"lockstep_torchrun"};
};

TEST_F(TorchrunCliTest, CleanDdpProgramPassesAndExitsZero) {
  const std::string report = tmp_ / "report";
  const auto r = torchrun("--nproc-per-node 2 --report-dir " + quote(report) + " " + quote(kTrain) + " --steps 10");
  if (not_run(r)) GTEST_SKIP() << r.out;
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "verdict: pass; report: " + report);
  const auto results = nlohmann::json::parse(test::read_file(report + "/results.json"));
  ASSERT_EQ(results["scenarios"].size(), 1u);
  EXPECT_EQ(results["scenarios"][0]["status"], "pass");
  EXPECT_EQ(results["scenarios"][0]["world_size"], 2);
  // Every collective was recorded: both ranks' traces and status files are there.
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(fs::exists(report + "/torchrun.train/rank" + std::to_string(r) + ".trace.jsonl"));
    EXPECT_TRUE(fs::exists(report + "/torchrun.train/rank" + std::to_string(r) + ".status.json"));
  }
  // The interpreter probes that passed are cached for the next run.
  EXPECT_FALSE(fs::is_empty(tmp_ / "cache/lockstep/python-probes"));
  // Who waited for whom: a line per run, and the analysis of every step's calls in waits.json.
  EXPECT_CONTAINS(r.out, "waited per rank: rank 0 ");
  EXPECT_CONTAINS(r.out, "\nstraggler: ");
  const auto& waits = results["scenarios"][0]["waits"];
  ASSERT_TRUE(waits.is_object()) << results.dump();
  EXPECT_EQ(waits["file"], "torchrun.train/waits.json");
  const auto w = nlohmann::json::parse(test::read_file(report + "/torchrun.train/waits.json"));
  EXPECT_EQ(w["format"], "lockstep.waits");
  EXPECT_EQ(w["version"], 1);
  EXPECT_EQ(w["world_size"], 2);
  // 10 steps, each with at least one collective on both ranks; the first analysed call is dropped.
  EXPECT_GE(w["calls"].size(), 9u);
  EXPECT_GE(w["steps"].size(), 9u);
  // Each call's arrivals are the ranks' own trace records of it, and each wait is the last
  // arrival minus the rank's own.
  std::map<std::pair<int, std::int64_t>, std::int64_t> started;  // (rank, seq) -> t_start_us
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(report + "/torchrun.train/rank" + std::to_string(rank) + ".trace.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto rec = nlohmann::json::parse(line);
      if (rec.value("kind", "") == "collective" && !rec.contains("group")) started[{rank, rec["seq"].get<std::int64_t>()}] = rec["t_start_us"];
    }
  }
  for (const auto& c : w["calls"]) {
    ASSERT_EQ(c["wait_us"].size(), 2u);
    const std::int64_t seq = c["seq"];
    const std::int64_t a0 = started.at({0, seq}), a1 = started.at({1, seq});
    EXPECT_EQ(c["arrival_us"][0], a0);
    EXPECT_EQ(c["arrival_us"][1], a1);
    EXPECT_EQ(c["wait_us"][0], std::max(a0, a1) - a0);
    EXPECT_EQ(c["wait_us"][1], std::max(a0, a1) - a1);
  }
}

TEST_F(TorchrunCliTest, Bf16CastOnRank1IsACollectiveMismatchNamingRank1) {
  const auto r = torchrun("--nproc_per_node=2 --report-dir " + quote(tmp_ / "report") + " " + quote(kTrain) +
                          " --steps 10 --bug cast-bf16 --bug-rank 1 --bug-step 3 --sync manual");
  if (not_run(r)) GTEST_SKIP() << r.out;
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "verdict: collective_mismatch (rank 1)");
  EXPECT_CONTAINS(r.out, "rank 1 all_reduce bf16");
  EXPECT_CONTAINS(r.out, "step 3");
}

TEST_F(TorchrunCliTest, UnsupportedOrBadOptionsExit2NamingThem) {
  auto r = torchrun("--rdzv-backend c10d " + quote(kTrain), 60);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_CONTAINS(r.err, "'--rdzv-backend'");
  r = torchrun("--nproc-per-node 2 --max-restarts=3 " + quote(kTrain), 60);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_CONTAINS(r.err, "'--max-restarts=3'");
  r = torchrun("--nnodes 1:4 " + quote(kTrain), 60);
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "elastic ranges are not supported");
  r = torchrun("--standalone --nnodes 2 " + quote(kTrain), 60);
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "--standalone");
  r = torchrun("--nnodes 2 --node-rank 2 " + quote(kTrain), 60);
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "--node-rank");
  r = torchrun("--nproc-per-node 0 " + quote(kTrain), 60);
  EXPECT_EQ(r.code, 2);
  r = torchrun("--nproc-per-node 2", 60);
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "no training script");
  r = torchrun(quote(tmp_ / "missing.py"), 60);
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "no such script");
}

TEST_F(TorchrunCliTest, HelpNamesTorchrunsOptions) {
  const auto r = torchrun("--help", 60);
  EXPECT_EQ(r.code, 0);
  for (const char* option : {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port", "--standalone",
                             "--python", "--report-dir", "--timeout-s"}) {
    EXPECT_CONTAINS(r.out, option);
  }
}

// Two "nodes" of one rank each on this machine: each lockstep starts and watches its own rank,
// and the ranks verify over their control group.
class TorchrunTwoNodesTest : public TorchrunCliTest {
 protected:
  // Runs node 1 in the background and node 0, each `lockstep torchrun OPTIONS --node-rank R
  // --report-dir rR train.py PROGRAM_ARGS`; their output and exit codes land in nR.out, nR.rc.
  void run_nodes(const std::string& options, const std::string& program_args) {
    const std::string common = "--nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port " + std::to_string(free_port()) +
                               " " + options + " ";
    const std::string env = "XDG_CACHE_HOME=" + quote(tmp_ / "cache") + " LOCKSTEP_PYTHON=" + quote(python()) + " ";
    const std::string bin = "timeout 300 " + quote(LOCKSTEP_BINARY) + " torchrun ";
    auto node = [&](int r) {
      const std::string n = std::to_string(r);
      return env + bin + common + "--node-rank " + n + " --report-dir r" + n + " " + quote(kTrain) + " " + program_args + " >n" + n +
             ".out 2>&1; echo $? >n" + n + ".rc";
    };
    const std::string script = "cd " + quote(tmp_.path()) + "; (" + node(1) + ") & " + node(0) + "; wait";
    ASSERT_EQ(std::system(("bash -c " + quote(script)).c_str()), 0);
    out0_ = test::read_file(tmp_ / "n0.out");
    out1_ = test::read_file(tmp_ / "n1.out");
  }
  std::string out0_, out1_;
};

TEST_F(TorchrunTwoNodesTest, EachNodeRunsItsRanksAndBothNameTheMismatchedRank) {
  run_nodes("", "--steps 10 --sync manual --bug cast-bf16 --bug-rank 1 --bug-step 3");
  if (not_run(CliResult{1, out0_, ""})) GTEST_SKIP() << out0_;
  EXPECT_EQ(test::read_file(tmp_ / "n0.rc"), "1\n") << out0_;
  EXPECT_EQ(test::read_file(tmp_ / "n1.rc"), "1\n") << out1_;
  for (const auto& out : {out0_, out1_}) {
    EXPECT_CONTAINS(out, "verdict: collective_mismatch (rank 1)");
    EXPECT_CONTAINS(out, "rank 1 all_reduce bf16");
  }
  // Each node reports only its own rank.
  EXPECT_TRUE(fs::exists(tmp_ / "r0/torchrun.train.node0/rank0.status.json"));
  EXPECT_FALSE(fs::exists(tmp_ / "r0/torchrun.train.node0/rank1.status.json"));
  EXPECT_TRUE(fs::exists(tmp_ / "r1/torchrun.train.node1/rank1.status.json"));
}

TEST_F(TorchrunTwoNodesTest, CleanRunPassesOnBothNodes) {
  run_nodes("", "--steps 10");
  if (not_run(CliResult{1, out0_, ""})) GTEST_SKIP() << out0_;
  EXPECT_EQ(test::read_file(tmp_ / "n0.rc"), "0\n") << out0_;
  EXPECT_EQ(test::read_file(tmp_ / "n1.rc"), "0\n") << out1_;
  EXPECT_CONTAINS(out0_, "verdict: pass");
  EXPECT_CONTAINS(out1_, "verdict: pass");
}

// Rank 1 (node 1) sleeps at step 3: node 1 blames it; node 0 sees only its own rank waiting and
// says the cause is on another node, blaming nobody.
TEST_F(TorchrunTwoNodesTest, AHangIsBlamedByTheNodeOfTheRankThatHangs) {
  run_nodes("--timeout-s 5", "--steps 10 --bug sleep --bug-rank 1 --bug-step 3");
  if (not_run(CliResult{1, out0_, ""})) GTEST_SKIP() << out0_;
  EXPECT_EQ(test::read_file(tmp_ / "n0.rc"), "1\n") << out0_;
  EXPECT_EQ(test::read_file(tmp_ / "n1.rc"), "1\n") << out1_;
  EXPECT_CONTAINS(out1_, "verdict: timeout (rank 1)");
  EXPECT_CONTAINS(out1_, "rank 1 is not in a collective");
  EXPECT_CONTAINS(out0_, "verdict: timeout; report");
  EXPECT_CONTAINS(out0_, "rank 0 is waiting in collective");
  EXPECT_CONTAINS(out0_, "the rank that holds them up is on another node");
}

}  // namespace
}  // namespace lockstep
