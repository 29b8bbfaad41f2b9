// Multi-node for real: two network namespaces joined by a veth pair stand for two hosts, each
// with only loopback and its end of the link. `lockstep torchrun` runs node 0 in one and node 1
// in the other (2 nodes x 2 ranks of scenarios/programs/ddp_sage/train.py), with torchrun's
// options, the master address on the link, and GLOO_SOCKET_IFNAME naming each host's end, so
// the store and every Gloo pair go over the link as between machines. Skips, naming why,
// where namespaces cannot be made (not root, no iproute2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/config.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

using lockstep::test::quote;

const std::string kTrain = std::string(LOCKSTEP_SOURCE_DIR) + "/scenarios/programs/ddp_sage/train.py";
constexpr const char* kHostAddr[2] = {"10.213.0.1", "10.213.0.2"};

std::string python() {
  const char* p = std::getenv("LOCKSTEP_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}

class TwoHostsTest : public ::testing::Test {
 protected:
  // Runs `script` with bash in the test's folder; its exit code, stdout and stderr in `out`.
  int sh(const std::string& script, std::string* out = nullptr) {
    const test::CliResult r = test::run_cli("bash", "-c " + quote(script), tmp_.path());
    if (out) *out = r.out + r.err;
    return r.code;
  }

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: the two hosts are network namespaces (ip netns add)";
    if (sh("command -v ip") != 0) GTEST_SKIP() << "needs iproute2's ip to make the network namespaces";
    static std::atomic<int> made{0};
    const std::string tag = std::to_string(::getpid()) + "n" + std::to_string(made++);
    for (int h = 0; h < 2; ++h) {
      ns_[h] = "lockstep-" + tag + "-" + std::to_string(h);
      link_[h] = "lsv" + tag + (h == 0 ? "a" : "b");  // interface names: at most 15 characters
    }
    std::string script = "set -e; ip netns add " + ns_[0] + "; ip netns add " + ns_[1] + "; ip link add " + link_[0] +
                         " type veth peer name " + link_[1] + ";";
    for (int h = 0; h < 2; ++h) {
      script += " ip link set " + link_[h] + " netns " + ns_[h] + "; ip -n " + ns_[h] + " addr add " + kHostAddr[h] +
                "/24 dev " + link_[h] + "; ip -n " + ns_[h] + " link set " + link_[h] + " up; ip -n " + ns_[h] +
                " link set lo up;";
    }
    std::string out;
    if (sh(script, &out) != 0) {
      TearDown();
      GTEST_SKIP() << "could not make two network namespaces joined by a veth pair here: " << out;
    }
  }

  void TearDown() override {
    // Deleting a namespace deletes its end of the pair, and so the pair.
    sh("ip netns del " + ns_[0] + " 2>/dev/null; ip netns del " + ns_[1] + " 2>/dev/null; ip link del " + link_[0] +
       " 2>/dev/null; true");
  }

  // Runs node 1 in the second namespace in the background and node 0 in the first, each
  // `lockstep torchrun --nnodes 2 --nproc-per-node 2 --node-rank R --master-addr <host 0>
  // --report-dir rR train.py PROGRAM_ARGS`; output and exit code land in out_[R], rc_[R].
  void run_nodes(const std::string& program_args) {
    auto node = [&](int h) {
      const std::string n = std::to_string(h);
      return "ip netns exec " + ns_[h] + " env GLOO_SOCKET_IFNAME=" + link_[h] + " XDG_CACHE_HOME=" + quote(tmp_ / "cache") +
             " LOCKSTEP_PYTHON=" + quote(python()) + " timeout 300 " + quote(LOCKSTEP_BINARY) +
             " torchrun --nnodes 2 --nproc-per-node 2 --node-rank " + n + " --master-addr " + kHostAddr[0] +
             " --master-port 29500 --report-dir r" + n + " " + quote(kTrain) + " " + program_args + " >n" + n +
             ".out 2>&1; echo $? >n" + n + ".rc";
    };
    ASSERT_EQ(sh("cd " + quote(tmp_.path()) + "; (" + node(1) + ") & " + node(0) + "; wait"), 0);
    for (int h = 0; h < 2; ++h) {
      out_[h] = test::read_file(tmp_ / ("n" + std::to_string(h) + ".out"));
      rc_[h] = test::read_file(tmp_ / ("n" + std::to_string(h) + ".rc"));
    }
  }
  bool not_run() const { return out_[0].find("verdict: not run") != std::string::npos; }

  test::TempDir tmp_{"lockstep_two_hosts"};
  std::string ns_[2], link_[2], out_[2], rc_[2];
};

TEST_F(TwoHostsTest, CleanProgramPassesOnBothHosts) {
  run_nodes("--steps 10");
  if (not_run()) GTEST_SKIP() << out_[0];
  EXPECT_EQ(rc_[0], "0\n") << out_[0];
  EXPECT_EQ(rc_[1], "0\n") << out_[1];
  EXPECT_CONTAINS(out_[0], "verdict: pass");
  EXPECT_CONTAINS(out_[1], "verdict: pass");
  // Each host reports its own two ranks of the four.
  const auto results = nlohmann::json::parse(test::read_file(tmp_ / "r1/results.json"));
  EXPECT_EQ(results["scenarios"][0]["world_size"], 4);
  for (int r : {2, 3}) EXPECT_TRUE(fs::exists(tmp_ / ("r1/torchrun.train.node1/rank" + std::to_string(r) + ".status.json")));
  EXPECT_FALSE(fs::exists(tmp_ / "r1/torchrun.train.node1/rank0.status.json"));
}

TEST_F(TwoHostsTest, BothHostsNameTheRankThatCastItsGradientsOnTheOtherHost) {
  run_nodes("--steps 10 --sync manual --bug cast-bf16 --bug-rank 2 --bug-step 3");
  if (not_run()) GTEST_SKIP() << out_[0];
  EXPECT_EQ(rc_[0], "1\n") << out_[0];
  EXPECT_EQ(rc_[1], "1\n") << out_[1];
  for (const auto& out : out_) {
    EXPECT_CONTAINS(out, "verdict: collective_mismatch (rank 2)");
    EXPECT_CONTAINS(out, "rank 2 all_reduce bf16");
  }
}

}  // namespace
}  // namespace lockstep
