// Every collective c10d offers, in a user's program under lockstep: reduce_scatter (torch 2.x),
// reduce, gather and scatter are verified with the fields that matter to each (reduce op, root,
// count), and a call lockstep does not verify is named in the scenario's notes, never silent.
// Expected values come from the programs (scenarios/programs/ops/ops.py: root = world_size - 1,
// chunks of 2 and 3 elements) and from c10d's contracts, not from lockstep's output.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/program_test_util.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOps = LOCKSTEP_SOURCE_DIR "/scenarios/programs/ops/ops.py";

class ProgramCollectivesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    python_ = test::python_for(GetParam());
    if (!test::imports(python_)) GTEST_SKIP() << "no interpreter with torch for '" << GetParam() << "' (ci/setup makes both)";
  }
  test::CliResult torchrun(const std::string& report, const std::string& script_and_args, int ranks = 3) {
    return test::again_on_torch_exit_abort(
        [&] {
          return test::run_cli(LOCKSTEP_BINARY,
                               "torchrun --nproc-per-node " + std::to_string(ranks) + " --python '" + python_ + "' --report-dir '" +
                                   report + "' " + script_and_args,
                               tmp_.path());
        },
        report);
  }
  std::string python_;
  test::TempDir tmp_{"lockstep_program_collectives"};
};

// ops.py's 3 rounds over 3 ranks: reduce, gather and scatter (root 2) reach the trace with their
// root, reduce with its reduce op, and (torch 2.x) reduce_scatter_tensor with its reduce op and
// chunk; nothing is left unverified.
TEST_P(ProgramCollectivesTest, RootedAndReducingCollectivesAreTracedWithTheirFields) {
  const std::string report = tmp_.path() + "/r";
  const auto r = torchrun(report, kOps);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto s = test::only_result(report);
  ASSERT_FALSE(s.is_null());
  EXPECT_EQ(s.at("metrics").at("unverified_calls").get<double>(), 0) << s.dump();
  EXPECT_FALSE(s.contains("notes")) << s.dump();
  std::map<std::string, int> seen;
  std::ifstream trace(report + "/" + s.at("artifacts").get<std::string>() + "/rank1.trace.jsonl");
  ASSERT_TRUE(trace) << s.dump();
  for (std::string line; std::getline(trace, line);) {
    const auto j = nlohmann::json::parse(line);
    const std::string op = j.value("op", "");
    if (op == "reduce" || op == "gather" || op == "scatter") {
      EXPECT_EQ(j.value("root", -1), 2) << line;
      ++seen[op];
    }
    if (op == "reduce") EXPECT_EQ(j.value("reduce", ""), "sum") << line;
    if (op == "reduce") EXPECT_EQ(j.value("count", 0), 3) << line;
    if (op == "gather" || op == "scatter") EXPECT_EQ(j.value("count", 0), 2) << line;
    // Each member of all_reduce_coalesced([f32[3], f32[2]]) and all_gather_coalesced([f32[3],
    // f32[2]]) is a record of its own: no other call of ops.py has 3 elements.
    if ((op == "all_reduce" || op == "all_gather") && j.value("count", 0) == 3 && !j.contains("group")) ++seen[op + "[3]"];
    if (op == "reduce_scatter") {
      EXPECT_EQ(j.value("reduce", ""), "sum") << line;
      EXPECT_EQ(j.value("count", 0), 2) << line;
      EXPECT_FALSE(j.contains("root")) << line;
      ++seen[op];
    }
  }
  EXPECT_EQ(seen["reduce"], 3);
  EXPECT_EQ(seen["gather"], 3);
  EXPECT_EQ(seen["scatter"], 3);
  EXPECT_EQ(seen["all_reduce[3]"], 3) << "all_reduce_coalesced's first member, every round";
  EXPECT_EQ(seen["all_gather[3]"], 3) << "all_gather_coalesced's first member, every round";
  // torch 2.x: reduce_scatter (list form) and reduce_scatter_tensor each round; 1.13's Gloo has none.
  EXPECT_EQ(seen["reduce_scatter"], GetParam() == "debian" ? 0 : 6);
}

// The faults of ops.py each name the field and the rank: a root that differs in reduce, a count
// that differs in gather or in a member of all_reduce_coalesced, and (torch 2.x) a reduce op that differs in reduce_scatter_tensor, which
// the engine itself runs without complaint.
TEST_P(ProgramCollectivesTest, ARootCountOrReduceOpThatDiffersIsNamed) {
  struct Case {
    const char* bug;
    int rank;
    const char* field;
    bool torch2_only;
  };
  for (const Case& c : {Case{"reduce-root", 0, "root differs", false}, Case{"gather-count", 1, "count differs", false},
                        Case{"rs-max", 1, "reduce op differs", true}, Case{"coalesced-count", 1, "count differs", false}}) {
    if (c.torch2_only && GetParam() == "debian") continue;
    const std::string report = tmp_.path() + "/" + c.bug;
    const auto r = torchrun(report, std::string(kOps) + " --bug " + c.bug);
    EXPECT_EQ(r.code, 1) << c.bug << ": " << r.out << r.err;
    const auto s = test::only_result(report);
    ASSERT_FALSE(s.is_null()) << r.out << r.err;
    const auto& d = s.at("diagnosis");
    EXPECT_EQ(d.at("kind"), "collective_mismatch") << d.dump();
    EXPECT_EQ(d.at("rank"), c.rank) << d.dump();
    EXPECT_NE(d.at("message").get<std::string>().find(c.field), std::string::npos) << d.dump();
  }
}

// A call lockstep does not verify (a coalesced call of more members than it verifies at once)
// still runs, and the run says so: the metric counts it and a note names it with the ranks that
// made it, on the console too. The calls beside it are verified: an all-reduce with PRODUCT
// (traced with its reduce op), a receive from any rank (compared once its sender is known) and
// Gloo's monitored_barrier (a barrier).
TEST_P(ProgramCollectivesTest, AnUnverifiedCallIsNamedInTheNotes) {
  const std::string script = tmp_.path() + "/product.py";
  std::ofstream(script) << "import torch, torch.distributed as dist\n"
                           "dist.init_process_group('gloo')\n"
                           "r = dist.get_rank()\n"
                           "for _ in range(2):\n"
                           "    t = torch.full((2,), 2.0)\n"
                           "    dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)\n"
                           "    assert t.tolist() == [4.0, 4.0], t\n"
                           "    many = [torch.ones(1) for _ in range(17)]\n"
                           "    dist.all_reduce_coalesced(many)\n"
                           "    assert all(m.item() == 2.0 for m in many)\n"
                           "    if r == 0:\n"
                           "        dist.send(torch.full((3,), 5.0), 1)\n"
                           "    else:\n"
                           "        got = torch.empty(3)\n"
                           "        assert dist.recv(got) == 0 and got.tolist() == [5.0] * 3\n"
                           "    dist.monitored_barrier()\n"
                           "dist.destroy_process_group()\n";
  const std::string report = tmp_.path() + "/product";
  const auto r = torchrun(report, script, 2);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const auto s = test::only_result(report);
  ASSERT_FALSE(s.is_null()) << r.out << r.err;
  EXPECT_EQ(s.at("metrics").at("unverified_calls").get<double>(), 2) << s.dump();
  ASSERT_TRUE(s.contains("notes")) << s.dump();
  const std::string note = s.at("notes").at(0);
  EXPECT_NE(note.find("allreduce_coalesced x2 (ranks 0,1)"), std::string::npos) << note;
  EXPECT_NE(r.out.find("note: not verified by lockstep"), std::string::npos) << r.out;
  std::map<std::string, int> seen;
  std::ifstream trace(report + "/" + s.at("artifacts").get<std::string>() + "/rank1.trace.jsonl");
  for (std::string line; std::getline(trace, line);) {
    const auto j = nlohmann::json::parse(line);
    const std::string op = j.value("op", "");
    if (op == "all_reduce" && j.value("reduce", "") == "product") ++seen["product"];
    if (op == "recv" && j.value("peer", -1) == 0) ++seen["recv from 0"];
    if (op == "barrier") ++seen["barrier"];
  }
  EXPECT_EQ(seen["product"], 2);
  EXPECT_EQ(seen["recv from 0"], 2);
  EXPECT_GE(seen["barrier"], 2) << "monitored_barrier, and lockstep's own at the end";
}

// A reduce op outside sum, max, min and avg is compared too: PRODUCT on one rank, SUM on the other.
TEST_P(ProgramCollectivesTest, AProductThatDiffersIsNamed) {
  const std::string script = tmp_.path() + "/product_bug.py";
  std::ofstream(script) << "import torch, torch.distributed as dist\n"
                           "dist.init_process_group('gloo')\n"
                           "t = torch.full((2,), 2.0)\n"
                           "dist.all_reduce(t, op=dist.ReduceOp.PRODUCT if dist.get_rank() == 1 else dist.ReduceOp.SUM)\n"
                           "dist.destroy_process_group()\n";
  const std::string report = tmp_.path() + "/product_bug";
  const auto r = torchrun(report, script, 3);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const auto s = test::only_result(report);
  ASSERT_FALSE(s.is_null()) << r.out << r.err;
  const auto& d = s.at("diagnosis");
  EXPECT_EQ(d.at("kind"), "collective_mismatch") << d.dump();
  EXPECT_EQ(d.at("rank"), 1) << d.dump();
  EXPECT_NE(d.at("message").get<std::string>().find("reduce op differs"), std::string::npos) << d.dump();
  EXPECT_NE(d.at("message").get<std::string>().find("product"), std::string::npos) << d.dump();
}

// Two pipeline stages that each post their send before their receive (batch_isend_irecv, then
// isend/irecv) finish as natively: a wrapper that carried each send to its end would leave both
// ranks in their sends. The trace holds every pair (4 steps x 2 exchanges, a send and a receive
// each: 8 p2p records per rank). A tag that differs is named with both tags, blaming the sender.
TEST_P(ProgramCollectivesTest, PointToPointCallsStayNonBlockingAndTheirTagsAreCompared) {
  constexpr const char* kPipe = LOCKSTEP_SOURCE_DIR "/scenarios/programs/pipeline/pipe.py";
  const std::string report = tmp_.path() + "/pipe";
  const auto r = test::run_cli(LOCKSTEP_BINARY,
                               "torchrun --timeout-s 60 --nproc-per-node 2 --python '" + python_ + "' --report-dir '" + report + "' " + kPipe,
                               tmp_.path());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto s = test::only_result(report);
  ASSERT_FALSE(s.is_null());
  int p2p = 0;
  std::ifstream trace(report + "/" + s.at("artifacts").get<std::string>() + "/rank1.trace.jsonl");
  for (std::string line; std::getline(trace, line);) p2p += nlohmann::json::parse(line).value("kind", "") == "p2p";
  EXPECT_EQ(p2p, 16);
  const std::string bad = tmp_.path() + "/tag";
  const auto t = torchrun(bad, std::string(kPipe) + " --bug tag", 2);
  EXPECT_EQ(t.code, 1) << t.out << t.err;
  const auto st = test::only_result(bad);
  ASSERT_FALSE(st.is_null()) << t.out << t.err;
  const auto& d = st.at("diagnosis");
  EXPECT_EQ(d.at("kind"), "collective_mismatch") << d.dump();
  EXPECT_EQ(d.at("rank"), 0) << d.dump();
  EXPECT_NE(d.at("message").get<std::string>().find("tag=1"), std::string::npos) << d.dump();
}

INSTANTIATE_TEST_SUITE_P(Torches, ProgramCollectivesTest, ::testing::Values("debian", "venv"));

}  // namespace
}  // namespace lockstep
