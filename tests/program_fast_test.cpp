// lockstep_fast (harness/pytorch/fast/fast_calls.cpp): under a torch it is built for (the wheel's
// 2.15.0), the program's frequent collectives begin and start in C++, and what lockstep records and
// diagnoses is exactly what the Python path records: the same trace, call by call, and the same
// diagnosis of an injected fault. Expected values come from the Python path's run of the same
// program (LOCKSTEP_FAST=0) and from ops.py's bugs, not from the fast path itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/program_test_util.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

constexpr const char* kOps = LOCKSTEP_SOURCE_DIR "/scenarios/programs/ops/ops.py";
constexpr const char* kPackage = LOCKSTEP_SOURCE_DIR "/harness/pytorch/python";

class ProgramFastTest : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = test::python_for("venv");
    if (!test::imports(python_)) GTEST_SKIP() << "no torch 2.15.0 venv (ci/setup makes it)";
    // Built once per torch and source (ci/setup builds it; here it is found in the cache).
    const std::string cmd = "cd '" + std::string(kPackage) + "' && LOCKSTEP_C10D=0 '" + python_ +
                            "' -m lockstep_torch.fast >'" + tmp_.path() + "/build.log' 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "building lockstep_fast failed: " << tmp_.path() << "/build.log";
  }
  test::CliResult torchrun(const std::string& report, const std::string& args, bool fast) {
    return test::again_on_torch_exit_abort(
        [&] {
          return test::run_cli("/usr/bin/env", std::string("LOCKSTEP_FAST=") + (fast ? "1 '" : "0 '") + LOCKSTEP_BINARY +
                                                   "' torchrun --nproc-per-node 3 --python '" + python_ + "' --report-dir '" +
                                                   report + "' " + args,
                               tmp_.path());
        },
        report);
  }
  // `args` run twice, with the fast path and without (reports `name`-fast and `name`-slow), each
  // expected to exit with `code`: the two results.
  std::pair<nlohmann::json, nlohmann::json> both(const std::string& name, const std::string& args, int code) {
    std::pair<nlohmann::json, nlohmann::json> out;
    for (const bool fast : {true, false}) {
      const std::string report = tmp_.path() + "/" + name + (fast ? "-fast" : "-slow");
      const auto r = torchrun(report, args, fast);
      EXPECT_EQ(r.code, code) << name << (fast ? " fast: " : " slow: ") << r.out << r.err;
      (fast ? out.first : out.second) = test::only_result(report);
    }
    return out;
  }
  // Each of rank 1's calls as lockstep traced it, sorted: op, group, dtype, count, reduce op, root, splits,
  // site and step.
  static std::vector<std::string> calls(const std::string& report, const nlohmann::json& s) {
    std::vector<std::string> out;
    std::ifstream trace(report + "/" + s.at("artifacts").get<std::string>() + "/rank1.trace.jsonl");
    for (std::string line; std::getline(trace, line);) {
      auto j = nlohmann::json::parse(line);
      nlohmann::json kept;
      for (const char* k : {"kind", "op", "group", "dtype", "count", "reduce", "root", "peer", "tag", "send_counts",
                            "recv_counts", "phase", "step", "seq"}) {
        if (j.contains(k)) kept[k] = j[k];
      }
      out.push_back(kept.dump());
    }
    std::sort(out.begin(), out.end());  // lines are written as calls end: overlapping calls end in either order
    return out;
  }
  std::string python_;
  test::TempDir tmp_{"lockstep_program_fast"};
};

// ops.py (every collective c10d offers, on the default group and a subgroup): the fast path begins
// its all_reduce, broadcast, all_to_all_single, all_gather_into_tensor and reduce_scatter_tensor
// calls (the metric counts them), and the trace is the Python path's, call for call.
TEST_F(ProgramFastTest, TheFastPathTracesEveryCallAsThePythonPathDoes) {
  const auto [sa, sb] = both("ops", kOps, 0);
  ASSERT_FALSE(sa.is_null());
  ASSERT_FALSE(sb.is_null());
  ASSERT_TRUE(sa.at("metrics").contains("fast_calls")) << sa.dump();
  EXPECT_GT(sa.at("metrics").at("fast_calls").get<double>(), 0) << sa.dump();
  EXPECT_FALSE(sb.at("metrics").contains("fast_calls")) << sb.dump();
  EXPECT_EQ(sa.at("metrics").at("unverified_calls"), 0) << sa.dump();
  EXPECT_EQ(sa.at("metrics").at("collectives"), sb.at("metrics").at("collectives"));
  const auto ca = calls(tmp_.path() + "/ops-fast", sa), cb = calls(tmp_.path() + "/ops-slow", sb);
  ASSERT_EQ(ca.size(), cb.size());
  for (std::size_t i = 0; i < ca.size(); ++i) EXPECT_EQ(ca[i], cb[i]) << "call " << i;
}

// A fault in a call the fast path carries (a reduce op of MAX in reduce_scatter_tensor on rank 1,
// a different split in all_to_all_single) is diagnosed as on the Python path: kind, rank, step and
// the field that differs.
TEST_F(ProgramFastTest, AFaultInAFastCallIsDiagnosedAsOnThePythonPath) {
  for (const char* bug : {"rs-max", "a2a-splits"}) {
    const auto [sa, sb] = both(bug, std::string(kOps) + " --bug " + bug, 1);
    ASSERT_FALSE(sa.is_null()) << bug;
    ASSERT_FALSE(sb.is_null()) << bug;
    const auto &da = sa.at("diagnosis"), &db = sb.at("diagnosis");
    EXPECT_EQ(da.at("kind"), "collective_mismatch") << da.dump();
    for (const char* k : {"kind", "rank", "step", "seq", "message"}) EXPECT_EQ(da.value(k, nlohmann::json()), db.value(k, nlohmann::json())) << bug << " " << k;
  }
}

// DDP's reducer calls the group from C++, through c10d's trampoline (which ignores a method that is
// a C++ function): its bucket all-reduces take the fast path too, one per backward at least, and
// the parameters end as they do on the Python path.
TEST_F(ProgramFastTest, DdpsBucketAllReducesFromCxxTakeTheFastPath) {
  const std::string script = tmp_.path() + "/ddp.py";
  std::ofstream(script) << "import torch, torch.distributed as dist\n"
                           "from torch.nn.parallel import DistributedDataParallel as DDP\n"
                           "dist.init_process_group('gloo')\n"
                           "torch.manual_seed(0)\n"
                           "model = DDP(torch.nn.Linear(4, 2))\n"
                           "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                           "for step in range(5):\n"
                           "    x = torch.full((3, 4), float(dist.get_rank() + step))\n"
                           "    opt.zero_grad()\n"
                           "    model(x).sum().backward()\n"
                           "    opt.step()\n"
                           "dist.destroy_process_group()\n";
  const auto [sa, sb] = both("ddp", script, 0);
  ASSERT_FALSE(sa.is_null());
  ASSERT_FALSE(sb.is_null());
  EXPECT_GE(sa.at("metrics").value("fast_calls", 0.0), 5.0) << sa.dump();
  ASSERT_TRUE(sa.contains("digest")) << sa.dump();
  EXPECT_EQ(sa.at("digest"), sb.at("digest"));
}

// A call made with its options by keyword, and a Work the program polls with is_completed() until
// it completes (lockstep ends it there, without holding the GIL), take the fast path and return
// the engine's results.
TEST_F(ProgramFastTest, KeywordCallsAndPolledWorksTakeTheFastPath) {
  const std::string script = tmp_.path() + "/poll.py";
  std::ofstream(script) << "import time, torch, torch.distributed as dist\n"
                           "dist.init_process_group('gloo')\n"
                           "ws = dist.get_world_size()\n"
                           "pg = dist.distributed_c10d._get_default_group()\n"
                           "t = torch.ones(3)\n"
                           "pg.allreduce([t], opts=dist.AllreduceOptions()).wait()\n"
                           "assert t.tolist() == [float(ws)] * 3, t\n"
                           "w = dist.all_reduce(t, async_op=True)\n"
                           "while not w.is_completed():\n"
                           "    time.sleep(0.001)\n"
                           "assert t.tolist() == [float(ws * ws)] * 3, t\n"
                           "dist.destroy_process_group()\n";
  const std::string report = tmp_.path() + "/poll";
  const auto r = torchrun(report, script, true);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto s = test::only_result(report);
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(s.at("metrics").value("fast_calls", 0.0), 2.0) << s.dump();
}

}  // namespace
}  // namespace lockstep
