// Training idioms in a user's program, unchanged under lockstep (scenarios/programs/ddp_idioms):
// an LR scheduler (which needs the optimizer's step to stay a bound method), autocast, gradient
// accumulation with no_sync(), clipping, two optimizers. The expected digest comes from the same
// program run natively (torchrun's variables, no lockstep), never from lockstep's output; the
// expected step count is the program's iteration count.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/program_test_util.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTrain = LOCKSTEP_SOURCE_DIR "/scenarios/programs/ddp_idioms/train.py";

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ProgramIdiomsTest : public ::testing::TestWithParam<std::string> {};

// StepLR, bf16 autocast (with GradScaler where the torch has one for the CPU), accumulation over 2
// micro-batches with no_sync, clipping, a logging all-reduce after the optimizer's step: under
// lockstep the program passes with the digest it has natively, and 12 iterations are 12 steps.
// Two optimizers built before init_process_group and OneCycleLR: one step per iteration, not two.
// DDP's find_unused_parameters and static_graph, and (torch 2.x) a torch.compile'd model, likewise.
TEST_P(ProgramIdiomsTest, SchedulersAmpAndAccumulationRunUnchangedWithTheirNativeDigest) {
  const std::string python = test::python_for(GetParam());
  if (!test::imports(python)) GTEST_SKIP() << "no interpreter with torch for '" << GetParam() << "' (ci/setup makes both)";
  test::TempDir tmp("lockstep_idioms");
  struct Case {
    std::string name, args;
    int steps;
    bool torch2_only = false;
  };
  for (const Case& c : {Case{"steplr", "--steps 12 --amp --scheduler steplr", 12},
                        Case{"onecycle2", "--steps 8 --scheduler onecycle --optimizers 2 --early", 8},
                        Case{"find_unused", "--steps 6 --find-unused", 6},
                        Case{"static_graph", "--steps 6 --static-graph --accumulate 1", 6},
                        Case{"compile", "--steps 6 --compile", 6, /*torch2_only=*/true}}) {
    if (c.torch2_only && GetParam() == "debian") continue;  // torch 1.13 has no torch.compile
    const std::string native = tmp.path() + "/native-" + c.name, under = tmp.path() + "/under-" + c.name;
    const auto n = test::run_native(python, std::string(kTrain) + " " + c.args + " --digest-out '" + native + "'", 2, tmp.path() + "/native.log", native);
    ASSERT_EQ(n.rc, 0) << c.name << ": " << n.log;
    const std::string expected = test::first_line(native);
    ASSERT_FALSE(expected.empty()) << c.name << ": the native run wrote no digest";
    std::ostringstream hex;
    hex << std::hex << std::stoull(expected);
    const std::string report = tmp.path() + "/r-" + c.name;
    const auto r = test::again_on_torch_exit_abort(
        [&] {
          return test::run_cli(LOCKSTEP_BINARY,
                               "torchrun --nproc-per-node 2 --python '" + python + "' --report-dir '" + report + "' " + kTrain + ' ' +
                                   c.args + " --digest-out '" + under + "'",
                               tmp.path());
        },
        report);
    EXPECT_EQ(r.code, 0) << c.name << ": " << r.out << r.err;
    std::ifstream in(report + "/results.json");
    ASSERT_TRUE(in) << r.out << r.err;
    const auto s = nlohmann::json::parse(in).at("scenarios").at(0);
    EXPECT_EQ(s.at("status"), "pass") << s.dump();
    EXPECT_FALSE(s.contains("diagnosis") && !s.at("diagnosis").is_null()) << s.dump();
    EXPECT_EQ(s.value("digest", ""), hex.str()) << c.name << ": lockstep's digest is not the native run's";
    EXPECT_EQ(test::first_line(under), expected) << c.name << ": the program's own digest changed under lockstep";
    EXPECT_EQ(s.at("metrics").at("program_steps").get<double>(), c.steps) << s.dump();
  }
}

// A dtype fault in the logging all-reduce that follows optimizer.step() at iteration 5 is step 5
// (the iteration it belongs to), on every torch.
TEST_P(ProgramIdiomsTest, ACallAfterTheOptimizerStepBelongsToItsIteration) {
  const std::string python = test::python_for(GetParam());
  if (!test::imports(python)) GTEST_SKIP() << "no interpreter with torch for '" << GetParam() << "' (ci/setup makes both)";
  test::TempDir tmp("lockstep_idioms_step");
  const std::string report = tmp.path() + "/r";
  const auto r = test::run_cli(LOCKSTEP_BINARY,
                               "torchrun --nproc-per-node 2 --python '" + python + "' --report-dir '" + report + "' " + kTrain +
                                   " --steps 12 --amp --bug log-f64 --bug-rank 1 --bug-step 5",
                               tmp.path());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  std::ifstream in(report + "/results.json");
  ASSERT_TRUE(in) << r.out << r.err;
  const auto d = nlohmann::json::parse(in).at("scenarios").at(0).at("diagnosis");
  EXPECT_EQ(d.at("kind"), "collective_mismatch") << d.dump();
  EXPECT_EQ(d.at("rank"), 1) << d.dump();
  EXPECT_EQ(d.at("step"), 5) << d.dump();
}

// An uncaught exception is rank_failure with the program's step in the structured field, and the
// message quotes the exception and the program's line that raised it (train.py's `raise`).
TEST_P(ProgramIdiomsTest, AnExceptionIsQuotedWithItsLineAndStep) {
  const std::string python = test::python_for(GetParam());
  if (!test::imports(python)) GTEST_SKIP() << "no interpreter with torch for '" << GetParam() << "' (ci/setup makes both)";
  int raise_line = 0, n = 0;
  {
    std::ifstream src(kTrain);
    for (std::string line; std::getline(src, line);) {
      ++n;
      if (line.find("raise ValueError(") != std::string::npos) raise_line = n;
    }
  }
  ASSERT_GT(raise_line, 0);
  test::TempDir tmp("lockstep_idioms_raise");
  const std::string report = tmp.path() + "/r";
  const auto r = test::run_cli(LOCKSTEP_BINARY,
                               "torchrun --nproc-per-node 2 --python '" + python + "' --report-dir '" + report + "' " + kTrain +
                                   " --steps 12 --bug exit-early --bug-rank 1 --bug-step 5",
                               tmp.path());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  std::ifstream in(report + "/results.json");
  ASSERT_TRUE(in) << r.out << r.err;
  const auto d = nlohmann::json::parse(in).at("scenarios").at(0).at("diagnosis");
  EXPECT_EQ(d.at("kind"), "rank_failure") << d.dump();
  EXPECT_EQ(d.at("rank"), 1) << d.dump();
  EXPECT_EQ(d.at("step"), 5) << d.dump();
  const std::string message = d.at("message");
  EXPECT_NE(message.find("ValueError: rank 1 found a bad batch at iteration 5"), std::string::npos) << message;
  EXPECT_NE(message.find("raised at train.py:" + std::to_string(raise_line)), std::string::npos) << message;
}

// lockstep keeps its group out of torch.compile's graphs once torch._dynamo is imported, and not
// before: a program that never compiles does not import dynamo (0.7 s a rank under torch 2.15.0)
// and its collectives go through no disabled wrapper; looking dynamo up (importlib's find_spec)
// is not importing it; importing dynamo after collectives ran disables the group's methods then. Expected values: what the program sees in sys.modules and on
// the group's class (torch.compiler.disable marks a function _torchdynamo_disable).
TEST_P(ProgramIdiomsTest, TheGroupIsKeptOutOfCompileOnlyOnceDynamoIsImported) {
  const std::string python = test::python_for(GetParam());
  if (!test::imports(python)) GTEST_SKIP() << "no interpreter with torch for '" << GetParam() << "' (ci/setup makes both)";
  if (!test::imports(python, "torch.compiler")) GTEST_SKIP() << "this torch has no torch.compiler (torch 1.13)";
  test::TempDir tmp("lockstep_idioms_dynamo");
  const std::string prog = tmp.path() + "/prog.py";
  std::ofstream(prog) << "import sys, torch, torch.distributed as dist\n"
                         "dist.init_process_group('gloo')\n"
                         "t = torch.ones(2)\n"
                         "dist.all_reduce(t)\n"
                         "before = 'torch._dynamo' in sys.modules\n"
                         "cls = type(dist.distributed_c10d._get_default_group())\n"
                         "was = getattr(cls.allreduce, '_torchdynamo_disable', False)\n"
                         "import importlib.util\n"
                         "assert importlib.util.find_spec('torch._dynamo') is not None\n"  // a look, no import
                         "was = was or getattr(cls.allreduce, '_torchdynamo_disable', False)\n"
                         "import torch._dynamo\n"
                         "now = getattr(cls.allreduce, '_torchdynamo_disable', False)\n"
                         "dist.all_reduce(t)\n"
                         "print('group=%s dynamo_before=%s disabled_before=%s disabled_after=%s' % (cls.__name__, before, was, now))\n"
                         "dist.destroy_process_group()\n";
  const std::string report = tmp.path() + "/r";
  const auto r = test::run_cli(LOCKSTEP_BINARY, "torchrun --nproc-per-node 2 --python '" + python + "' --report-dir '" + report + "' " + prog,
                               tmp.path());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const std::string out = r.out + r.err;
  EXPECT_NE(out.find("group=LockstepGroup dynamo_before=False disabled_before=False disabled_after=True"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Torches, ProgramIdiomsTest, ::testing::Values("debian", "venv"));


}  // namespace
}  // namespace lockstep

namespace lockstep {
namespace {

// The program's own voice under `lockstep torchrun` (Debian's torch 1.13): each rank's lines are
// echoed live after "[rankN]:" (only the filtered ranks with --local-ranks-filter, none with
// --redirects 3, the logs holding them either way); `-m package.module` runs a module; a program
// that exits before init_process_group is reported with its own last line, at once.
class ProgramVoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::imports("/usr/bin/python3")) GTEST_SKIP() << "Debian's python3-torch is not installed (ci/setup)";
    fs::create_directories(tmp_.path() + "/pkg");
    std::ofstream(tmp_.path() + "/pkg/__init__.py") << "";
    std::ofstream(tmp_.path() + "/pkg/hello.py") << "import torch.distributed as dist\n"
                                                    "dist.init_process_group('gloo')\n"
                                                    "print('hello from rank %d' % dist.get_rank(), flush=True)\n"
                                                    "dist.barrier()\n"
                                                    "dist.destroy_process_group()\n";
    std::ofstream(tmp_.path() + "/usage.py") << "import sys\nimport torch\nsys.exit('usage: usage.py --lr LR')\n";
  }
  test::CliResult torchrun(const std::string& args) {
    return test::run_cli("sh", "-c " + test::quote("cd " + test::quote(tmp_.path()) + " && " + test::quote(LOCKSTEP_BINARY) +
                                                   " torchrun --python /usr/bin/python3 " + args),
                         tmp_.path());
  }
  test::TempDir tmp_{"lockstep_voice"};
};

TEST_F(ProgramVoiceTest, RankLinesAreEchoedWithTheirRankAndModulesRun) {
  auto r = torchrun("--nproc-per-node 2 --report-dir r1 -m pkg.hello");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[rank0]: hello from rank 0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank1]: hello from rank 1\n"), std::string::npos) << r.out;
  r = torchrun("--nproc-per-node 2 --local-ranks-filter 1 --report-dir r2 -m pkg.hello");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("[rank0]:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[rank1]: hello from rank 1\n"), std::string::npos) << r.out;
  r = torchrun("--nproc-per-node 2 --redirects 3 --report-dir r3 -m pkg.hello");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("hello from rank"), std::string::npos) << r.out;
  EXPECT_NE(read_all(tmp_.path() + "/r3/torchrun.hello/rank1.log").find("hello from rank 1"), std::string::npos);
  r = torchrun("--nproc-per-node 2 --local-ranks-filter 2 -m pkg.hello");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--local-ranks-filter: '2' is not a rank in [0, 2)"), std::string::npos) << r.err;
}

TEST_F(ProgramVoiceTest, AProgramThatEndsBeforeInitIsReportedWithItsOwnWords) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = torchrun("--nproc-per-node 2 --report-dir r usage.py");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  std::ifstream in(tmp_.path() + "/r/results.json");
  ASSERT_TRUE(in) << r.out << r.err;
  const auto s = nlohmann::json::parse(in).at("scenarios").at(0);
  EXPECT_EQ(s.at("status"), "error") << s.dump();
  EXPECT_NE(s.value("reason", "").find("its last output: usage: usage.py --lr LR"), std::string::npos) << s.dump();
  // Two interpreters importing torch, on a loaded 2-core machine; the old path took 11-16 s.
  EXPECT_LT(seconds, 30) << "the launcher waited for something after the ranks had exited";
}

}  // namespace
}  // namespace lockstep

namespace lockstep {
namespace {

// lockstep's FNV-1a over every rank's 63-bit digest (8 little-endian bytes each) in rank order,
// shifted right by one: scenarios/README.md's rule for a program without DDP, written out here.
std::string combined_hex(const std::vector<std::uint64_t>& digests) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const std::uint64_t d : digests) {
    for (int b = 0; b < 8; ++b) {
      h ^= (d >> (8 * b)) & 0xffu;
      h *= 1099511628211ULL;
    }
  }
  std::ostringstream os;
  os << std::hex << (h >> 1);
  return os.str();
}

// `script` (in tmp) under `lockstep torchrun` over 2 ranks of Debian's torch, given tmp as its
// argument (where it writes its own digests): the run, and its one scenario result (null when
// there is none). Expects exit 0.
std::pair<test::CliResult, nlohmann::json> digest_run(const test::TempDir& tmp, const std::string& script) {
  const std::string report = tmp.path() + "/r";
  auto r = test::run_cli(LOCKSTEP_BINARY,
                         "torchrun --nproc-per-node 2 --python /usr/bin/python3 --report-dir '" + report + "' '" + tmp.path() + "/" +
                             script + "' '" + tmp.path() + "'",
                         tmp.path());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  std::ifstream in(report + "/results.json");
  if (!in) return {r, nullptr};
  return {r, nlohmann::json::parse(in).at("scenarios").at(0)};
}

// A program without DDP (each rank its own shard, gradients all-reduced by hand) still gets a
// digest: its ranks' digests of the parameters their optimizers hold, combined in rank order.
// Each rank of the program writes its own digest (the same BLAKE2 rule), so the expected value
// comes from the program and the documented combination, not from lockstep.
TEST(ProgramDigestTest, AProgramWithoutDdpIsDigestedFromWhatItsOptimizersHold) {
  if (!test::imports("/usr/bin/python3")) GTEST_SKIP() << "Debian's python3-torch is not installed (ci/setup)";
  test::TempDir tmp("lockstep_sharded");
  std::ofstream(tmp.path() + "/sharded.py")
      << "import hashlib, sys, torch, torch.distributed as dist\n"
         "dist.init_process_group('gloo')\n"
         "r = dist.get_rank()\n"
         "w = torch.nn.Parameter(torch.arange(4, dtype=torch.float32) * (r + 1))\n"
         "b = torch.nn.Parameter(torch.zeros(2) + r)\n"
         "opt = torch.optim.SGD([w, b], lr=0.5)\n"
         "for step in range(3):\n"
         "    g = torch.ones(4) * (r + 1)\n"
         "    dist.all_reduce(g)\n"
         "    w.grad, b.grad = g, torch.ones(2)\n"
         "    opt.step()\n"
         "h = hashlib.blake2b(digest_size=8)\n"
         "for p in (w, b):\n"
         "    h.update(str(p.dtype).encode()); h.update(p.detach().contiguous().numpy().tobytes())\n"
         "open('%s/digest-%d' % (sys.argv[1], r), 'w').write('%d' % (int.from_bytes(h.digest(), 'little') >> 1))\n"
         "dist.destroy_process_group()\n";
  const auto [r, s] = digest_run(tmp, "sharded.py");
  ASSERT_FALSE(s.is_null()) << r.out << r.err;
  const std::string d0 = test::first_line(tmp.path() + "/digest-0"), d1 = test::first_line(tmp.path() + "/digest-1");
  ASSERT_FALSE(d0.empty() || d1.empty()) << r.out;
  EXPECT_NE(d0, d1) << "the shards should differ";
  EXPECT_EQ(s.value("digest", ""), combined_hex({std::stoull(d0), std::stoull(d1)})) << s.dump();
}

// A DDP module with a part DDP is told to ignore (a model-parallel part, as TorchRec's
// DistributedModelParallel ignores its sharded tables): that part differs between the ranks by
// design, so it is not compared as a replica; the run's digest is the replicas' digest followed by
// every rank's digest of its ignored parameters, in rank order. Before, the ranks' different
// shards were a result_mismatch. The program writes each digest itself (the same BLAKE2 rule).
TEST(ProgramDigestTest, ParametersDdpIgnoresAreEachRanksOwnNotReplicas) {
  if (!test::imports("/usr/bin/python3")) GTEST_SKIP() << "Debian's python3-torch is not installed (ci/setup)";
  test::TempDir tmp("lockstep_ignored");
  std::ofstream(tmp.path() + "/ignored.py")
      << "import hashlib, sys, torch, torch.distributed as dist\n"
         "from torch.nn.parallel import DistributedDataParallel as DDP\n"
         "dist.init_process_group('gloo')\n"
         "r = dist.get_rank()\n"
         "class M(torch.nn.Module):\n"
         "    def __init__(self):\n"
         "        super().__init__()\n"
         "        self.shared = torch.nn.Linear(2, 1, bias=False)\n"
         "        self.local = torch.nn.Parameter(torch.full((3,), float(r + 1)))\n"
         "    def forward(self, x):\n"
         "        return self.shared(x).sum() + (self.local * self.local).sum()\n"
         "torch.manual_seed(0)\n"
         "m = M()\n"
         "DDP._set_params_and_buffers_to_ignore_for_model(m, ['local'])\n"
         "ddp = DDP(m)\n"
         "opt = torch.optim.SGD(ddp.parameters(), lr=0.1)\n"
         "for step in range(3):\n"
         "    opt.zero_grad()\n"
         "    ddp(torch.ones(4, 2) * (r + 1)).backward()\n"
         "    opt.step()\n"
         "def digest(ps):\n"
         "    h = hashlib.blake2b(digest_size=8)\n"
         "    for p in ps:\n"
         "        h.update(str(p.dtype).encode()); h.update(p.detach().contiguous().numpy().tobytes())\n"
         "    return int.from_bytes(h.digest(), 'little') >> 1\n"
         "open('%s/replica-%d' % (sys.argv[1], r), 'w').write('%d' % digest([m.shared.weight]))\n"
         "open('%s/own-%d' % (sys.argv[1], r), 'w').write('%d' % digest([m.local]))\n"
         "dist.destroy_process_group()\n";
  const auto [r, s] = digest_run(tmp, "ignored.py");
  ASSERT_FALSE(s.is_null()) << r.out << r.err;
  const std::string rep0 = test::first_line(tmp.path() + "/replica-0"), rep1 = test::first_line(tmp.path() + "/replica-1");
  const std::string own0 = test::first_line(tmp.path() + "/own-0"), own1 = test::first_line(tmp.path() + "/own-1");
  ASSERT_FALSE(rep0.empty() || own0.empty() || own1.empty()) << r.out;
  EXPECT_EQ(rep0, rep1) << "DDP keeps the shared layer identical";
  EXPECT_NE(own0, own1) << "each rank's ignored part should be its own";
  EXPECT_EQ(s.value("digest", ""), combined_hex({std::stoull(rep0), std::stoull(own0), std::stoull(own1)})) << s.dump();
}

}  // namespace
}  // namespace lockstep

namespace lockstep {
namespace {

// A program that gives init_process_group an 8 s timeout: its waiting rank's Gloo would raise
// after 8 s and hide the stalled rank. lockstep's watchdog (timeout_s 60) comes down to 75% of it
// and speaks first: timeout, blaming rank 1 (asleep before its step-2 all-reduce), at step 2, the
// message saying why the timeout was shorter. A bare-tensor loop: step n is n optimizer steps done.
TEST(ProgramTimeoutTest, LockstepSpeaksBeforeTheProgramsOwnEngineTimeout) {
  if (!test::imports("/usr/bin/python3")) GTEST_SKIP() << "Debian's python3-torch is not installed (ci/setup)";
  test::TempDir tmp("lockstep_engine_timeout");
  std::ofstream(tmp.path() + "/stall.py") << "import datetime, time, torch, torch.distributed as dist\n"
                                             "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=8))\n"
                                             "r = dist.get_rank()\n"
                                             "w = torch.nn.Parameter(torch.zeros(4))\n"
                                             "opt = torch.optim.SGD([w], lr=0.1)\n"
                                             "for step in range(5):\n"
                                             "    if r == 1 and step == 2:\n"
                                             "        time.sleep(120)\n"
                                             "    g = torch.ones(4)\n"
                                             "    dist.all_reduce(g)\n"
                                             "    w.grad = g\n"
                                             "    opt.step()\n"
                                             "dist.destroy_process_group()\n";
  const std::string report = tmp.path() + "/r";
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = test::run_cli(LOCKSTEP_BINARY,
                               "torchrun --nproc-per-node 2 --timeout-s 60 --python /usr/bin/python3 --report-dir '" + report + "' '" +
                                   tmp.path() + "/stall.py'",
                               tmp.path());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  std::ifstream in(report + "/results.json");
  ASSERT_TRUE(in) << r.out << r.err;
  const auto d = nlohmann::json::parse(in).at("scenarios").at(0).at("diagnosis");
  EXPECT_EQ(d.at("kind"), "timeout") << d.dump();
  EXPECT_EQ(d.at("rank"), 1) << d.dump();
  EXPECT_EQ(d.at("step"), 2) << d.dump();
  EXPECT_NE(d.at("message").get<std::string>().find("brought down to 6 s"), std::string::npos) << d.dump();
  EXPECT_LT(seconds, 55) << "lockstep waited for its own 60 s timeout";
}

}  // namespace
}  // namespace lockstep
