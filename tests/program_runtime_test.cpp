// Tests of the program runtime (harness/pytorch/): liblockstep_program.so loads into any
// interpreter because it needs neither torch nor Python, its C interface speaks lockstep's own
// enumerations, and one build verifies programs under every torch the machine has (Debian's 1.13,
// ci/setup's torch 2.x venv).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/comm/types.h"
#include "harness/pytorch/program.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

std::string capture(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

TEST(ProgramRuntimeTest, LibraryNeedsNeitherTorchNorPython) {
  // The libraries it needs (the NEEDED entries), and no search path into LibTorch's folder.
  const std::string needed = capture("readelf -d '" LOCKSTEP_PROGRAM_LIB "' 2>&1 | grep -E 'NEEDED|RPATH|RUNPATH'");
  ASSERT_NE(needed.find("NEEDED"), std::string::npos) << needed;
  for (const char* forbidden : {"torch", "c10", "python", "gloo"}) {
    EXPECT_EQ(needed.find(forbidden), std::string::npos) << "links " << forbidden << ":\n" << needed;
  }
}

TEST(ProgramRuntimeTest, ExportsOnlyItsCInterface) {
  std::istringstream symbols(capture("nm -D --defined-only '" LOCKSTEP_PROGRAM_LIB "' | awk '$2 == \"T\" {print $3}'"));
  std::set<std::string> got;
  for (std::string s; symbols >> s;) got.insert(s);
  const std::set<std::string> expected = {"ls_code", "ls_open", "ls_board_verifies", "ls_carry", "ls_begin", "ls_end", "ls_check_same_count",
                                          "ls_finish", "ls_engine_timeout", "ls_metric", "ls_unverified", "ls_open_group", "ls_p2p_begin", "ls_p2p_end", "ls_version",
                                          "ls_call_fields"};
  EXPECT_EQ(got, expected);
}

// The call-field table the Python side builds its calls from (harness/trace/call_fields.h).
TEST(ProgramRuntimeTest, CallFieldsAreTheTablesRowsWithTheirNone) {
  void* lib = ::dlopen(LOCKSTEP_PROGRAM_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  auto fields = reinterpret_cast<const char* (*)()>(::dlsym(lib, "ls_call_fields"));
  ASSERT_NE(fields, nullptr);
  EXPECT_STREQ(fields(), "root=-1,peer=-1,tag=0");
  auto version = reinterpret_cast<const char* (*)()>(::dlsym(lib, "ls_version"));
  ASSERT_NE(version, nullptr);
  EXPECT_STREQ(version(), "9");
  ::dlclose(lib);
}

TEST(ProgramRuntimeTest, CodesAreLockstepsEnumerators) {
  void* lib = ::dlopen(LOCKSTEP_PROGRAM_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  auto code = reinterpret_cast<int (*)(const char*, const char*)>(::dlsym(lib, "ls_code"));
  ASSERT_NE(code, nullptr);
  EXPECT_EQ(code("op", "all_reduce"), static_cast<int>(comm::Op::kAllReduce));
  EXPECT_EQ(code("op", "all_to_all"), static_cast<int>(comm::Op::kAllToAll));
  EXPECT_EQ(code("op", "recv"), static_cast<int>(comm::Op::kRecv));
  EXPECT_EQ(code("dtype", "bf16"), static_cast<int>(comm::DType::kBF16));
  EXPECT_EQ(code("dtype", "i64"), static_cast<int>(comm::DType::kI64));
  EXPECT_EQ(code("reduce", "avg"), static_cast<int>(comm::ReduceOp::kAvg));
  EXPECT_EQ(code("op", "reduce_scatter"), static_cast<int>(comm::Op::kReduceScatter));
  EXPECT_EQ(code("op", "reduce_scatter_tensor"), -1);
  EXPECT_EQ(code("colour", "red"), -1);
  ::dlclose(lib);
}

// One program scenario written into `tmp` (world size 2, the [workload] command `command` and any
// `extra` [workload] lines) and run under Debian's python: its exit code, output, and its entry in
// results.json (null when there is none).
struct ProgramRun {
  int code;
  std::string log;
  nlohmann::json scenario;
};

ProgramRun run_program(const lockstep::test::TempDir& tmp, const std::string& name, const std::string& command,
                       const std::string& extra = "") {
  const std::string toml = tmp.path() + "/" + name + ".toml", report = tmp.path() + "/r-" + name;
  std::ofstream(toml) << "name = \"programs." << name << "\"\n[run]\nworld_size = 2\ntimeout_s = 60\n"
                      << "[workload]\nkind = \"program\"\ncommand = " << command << "\n" << extra;
  const auto r = lockstep::test::run_cli(LOCKSTEP_BINARY, "run '" + toml + "' --python /usr/bin/python3 --report-dir '" + report + "'", tmp.path());
  ProgramRun run{r.code, r.out + r.err, nullptr};
  std::ifstream in(report + "/results.json");
  if (in) run.scenario = nlohmann::json::parse(in).at("scenarios").at(0);
  return run;
}

// The seed-001 program scenario under `python`: collective_mismatch blaming rank 2 at step 27
// (the scenario's [expect]), and the report names the torch the program imported.
void expect_seed001_under(const std::string& python, const std::string& torch_prefix) {
  lockstep::test::TempDir tmp("lockstep_program_torch");
  const std::string report = tmp.path() + "/r";
  const auto r = lockstep::test::run_cli(
      LOCKSTEP_BINARY,
      "run " LOCKSTEP_SOURCE_DIR "/scenarios/programs/ddp_sage/bug_cast_bf16_step27.toml --python '" + python +
          "' --report-dir '" + report + "'",
      tmp.path());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  std::ifstream in(report + "/results.json");
  ASSERT_TRUE(in) << r.out << r.err;
  const auto j = nlohmann::json::parse(in);
  const auto& s = j.at("scenarios").at(0);
  EXPECT_EQ(s.at("status"), "pass") << s.dump();
  EXPECT_EQ(s.at("diagnosis").at("kind"), "collective_mismatch");
  EXPECT_EQ(s.at("diagnosis").at("rank"), 2);
  EXPECT_EQ(s.value("system", "").rfind("torch " + torch_prefix, 0), 0u) << s.dump();
}

TEST(ProgramUnderTorchTest, Seed001UnderDebiansTorch113) {
  if (!fs::exists("/usr/lib/python3/dist-packages/torch/__init__.py")) GTEST_SKIP() << "Debian's python3-torch is not installed (ci/setup)";
  expect_seed001_under("/usr/bin/python3", "1.13");
}

TEST(ProgramUnderTorchTest, Seed001UnderTorch2FromPyPI) {
  const std::string python = capture(LOCKSTEP_SOURCE_DIR "/ci/setup --program-python");
  const std::string path = python.substr(0, python.find_last_not_of("\n") + 1);
  if (path.empty() || !fs::exists(path)) GTEST_SKIP() << "no torch 2.x venv (ci/setup programs makes it at " << path << ")";
  expect_seed001_under(path, "2.");
}

// What a program ran on is read from its own interpreter when it creates its default group: its
// torch, the CUDA and NCCL that torch was built with ("none" in Debian's CPU build), Python, and
// the GNN packages it has imported by then, here a fake torchrec and dgl whose versions no real
// install has (a package it did not import, torch_geometric, is not named). The expected
// components come from the interpreter itself, asked separately.
TEST(ProgramUnderTorchTest, TheIdentityNamesTorchCudaNcclPythonAndTheImportedPackages) {
  if (!fs::exists("/usr/lib/python3/dist-packages/torch/__init__.py")) GTEST_SKIP() << "Debian's python3-torch is not installed (ci/setup)";
  lockstep::test::TempDir tmp("lockstep_program_identity");
  std::ofstream(tmp.path() + "/ident.py") << "import sys, types\n"
                                             "for name, v in ((\"torchrec\", \"9.9.9-fake\"), (\"dgl\", \"0.0.1-fake\")):\n"
                                             "    m = types.ModuleType(name); m.__version__ = v; sys.modules[name] = m\n"
                                             "import torch, torch.distributed as dist\n"
                                             "dist.init_process_group('gloo')\n"
                                             "t = torch.ones(2); dist.all_reduce(t)\n"
                                             "dist.destroy_process_group()\n";
  const auto run = run_program(tmp, "ident", "[\"{python}\", \"{dir}/ident.py\"]");
  EXPECT_EQ(run.code, 0) << run.log;
  ASSERT_FALSE(run.scenario.is_null()) << run.log;
  const std::string system = run.scenario.value("system", "");
  const std::string torch = capture("/usr/bin/python3 -c 'import torch; print(torch.__version__)'");
  const std::string python = capture("/usr/bin/python3 -c 'import platform; print(platform.python_version())'");
  EXPECT_EQ(system.rfind("torch " + torch.substr(0, torch.find('\n')) + ", cuda none, nccl none, python " + python.substr(0, python.find('\n')), 0), 0u)
      << system;
  EXPECT_NE(system.find(", torchrec 9.9.9-fake"), std::string::npos) << system;
  EXPECT_NE(system.find(", dgl 0.0.1-fake"), std::string::npos) << system;
  EXPECT_EQ(system.find("torch_geometric"), std::string::npos) << system;
}

// The environment is named by what ran: an interpreter whose torch reports another version (a
// fake interpreter: a script that runs Debian's python with the program told to report torch
// 2.15.0-fake) is refused under the environment recorded with torch 1.13, exit 2 naming the
// difference, and nothing of it is recorded; under a new environment it is recorded, and compare
// shows what each side ran on.
TEST(ProgramUnderTorchTest, ARunOnAnotherTorchIsRefusedUnderTheEnvironmentOfTheFirst) {
  if (!fs::exists("/usr/lib/python3/dist-packages/torch/__init__.py")) GTEST_SKIP() << "Debian's python3-torch is not installed (ci/setup)";
  lockstep::test::TempDir tmp("lockstep_program_env");
  std::ofstream(tmp.path() + "/p.py") << "import os, torch, torch.distributed as dist\n"
                                         "if os.environ.get('FAKE_TORCH'):\n"
                                         "    torch.__version__ = os.environ['FAKE_TORCH']\n"
                                         "dist.init_process_group('gloo')\n"
                                         "t = torch.ones(2); dist.all_reduce(t)\n"
                                         "dist.destroy_process_group()\n";
  const std::string fake = tmp.path() + "/fake-python";
  std::ofstream(fake) << "#!/bin/sh\nFAKE_TORCH=2.15.0-fake exec /usr/bin/python3 \"$@\"\n";
  fs::permissions(fake, fs::perms::owner_all);
  const std::string toml = tmp.path() + "/p.toml", db = tmp.path() + "/b.db";
  std::ofstream(toml) << "name = \"programs.env\"\n[run]\nworld_size = 2\ntimeout_s = 60\n[workload]\nkind = \"program\"\n"
                      << "command = [\"{python}\", \"{dir}/p.py\"]\n";
  auto record = [&](const std::string& env, const std::string& python, const std::string& dir) {
    return lockstep::test::run_cli(LOCKSTEP_BINARY, "record '" + toml + "' --repeat 1 --baseline '" + db + "' --env " + env +
                                                        " --python '" + python + "' --report-dir '" + tmp.path() + "/" + dir + "'",
                                   tmp.path());
  };
  auto r = record("torch-1.13", "/usr/bin/python3", "r1");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  r = record("torch-1.13", fake, "r2");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("ran it on torch 2.15.0-fake"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("-> 2.15.0-fake): record it under an environment of its own (--env NAME); nothing of this run was recorded"),
            std::string::npos)
      << r.err;
  r = record("torch-2.15-fake", fake, "r3");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = lockstep::test::run_cli(LOCKSTEP_BINARY, "compare --baseline '" + db + "' --from torch-1.13 --to torch-2.15-fake --json", tmp.path());
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  EXPECT_EQ(j.at("from_runs"), 1) << "the refused run was not recorded";
  EXPECT_EQ(j.at("to").at("ran_on").at(0).get<std::string>().rfind("torch 2.15.0-fake, ", 0), 0u) << j.dump();
  EXPECT_EQ(j.at("from").at("ran_on").at(0).get<std::string>().rfind("torch 1.13", 0), 0u) << j.dump();
}

// A program lockstep was to verify that never creates its default group had nothing checked: the
// scenario is an error, never a pass, and the run exits non-zero.
TEST(ProgramUnderTorchTest, AProgramWithoutAProcessGroupIsAnErrorNotAPass) {
  if (!fs::exists("/usr/lib/python3/dist-packages/torch/__init__.py")) GTEST_SKIP() << "Debian's python3-torch is not installed (ci/setup)";
  lockstep::test::TempDir tmp("lockstep_program_nodist");
  std::ofstream(tmp.path() + "/solo.py") << "import torch\nprint(torch.ones(2).sum())\n";
  const auto run = run_program(tmp, "solo", "[\"{python}\", \"{dir}/solo.py\"]");
  EXPECT_EQ(run.code, 1) << run.log;
  ASSERT_FALSE(run.scenario.is_null()) << run.log;
  const auto& s = run.scenario;
  EXPECT_EQ(s.at("status"), "error") << s.dump();
  EXPECT_NE(s.value("reason", "").find("never called init_process_group"), std::string::npos) << s.dump();
}

// What a comparison across environments reads from a program run: rank 0's logged loss
// ([compare] curve) in results.json's series, and the final parameters in numerics-rank<r>.bin.
// The program is worked by hand: w = [1, 2], x = [1, 1], loss = w . x, SGD lr 0.5 with DDP's
// averaged gradient x, so the losses are 3, 2, 1 and w ends at [-0.5, 0.5]; DDP's replicas are
// written once (rank 0).
TEST(ProgramUnderTorchTest, TheLoggedCurveAndTheFinalParametersAreRecordedForComparisons) {
  if (!fs::exists("/usr/lib/python3/dist-packages/torch/__init__.py")) GTEST_SKIP() << "Debian's python3-torch is not installed (ci/setup)";
  lockstep::test::TempDir tmp("lockstep_program_numerics");
  std::ofstream(tmp.path() + "/fit.py") << "import torch, torch.distributed as dist\n"
                                           "dist.init_process_group('gloo')\n"
                                           "m = torch.nn.Linear(2, 1, bias=False)\n"
                                           "with torch.no_grad():\n"
                                           "    m.weight.copy_(torch.tensor([[1.0, 2.0]]))\n"
                                           "ddp = torch.nn.parallel.DistributedDataParallel(m)\n"
                                           "opt = torch.optim.SGD(ddp.parameters(), lr=0.5)\n"
                                           "for step in range(3):\n"
                                           "    loss = ddp(torch.ones(1, 2)).sum()\n"
                                           "    opt.zero_grad(); loss.backward(); opt.step()\n"
                                           "    if dist.get_rank() == 0:\n"
                                           "        print('step %d loss %r' % (step, loss.item()), flush=True)\n"
                                           "dist.destroy_process_group()\n";
  const auto run = run_program(tmp, "fit", "[\"{python}\", \"{dir}/fit.py\"]",
                               "[compare]\ncurve = 'step (\\d+) loss (\\S+)'\ncurve_rtol = 0.001\n");
  EXPECT_EQ(run.code, 0) << run.log;
  ASSERT_FALSE(run.scenario.is_null()) << run.log;
  const auto& loss = run.scenario.at("series").at("loss");
  EXPECT_EQ(loss.at("values"), nlohmann::json::parse("[3.0, 2.0, 1.0]")) << run.scenario.dump();
  EXPECT_EQ(loss.at("steps"), nlohmann::json::parse("[0, 1, 2]"));
  EXPECT_EQ(loss.at("rtol"), 0.001);
  EXPECT_EQ(run.scenario.at("tolerances").at("curve_rtol"), 0.001);
  const std::string dir = tmp.path() + "/r-fit/" + run.scenario.at("artifacts").get<std::string>();
  std::ifstream in(dir + "/numerics-rank0.bin", std::ios::binary);
  ASSERT_TRUE(in) << dir;
  std::string header;
  std::getline(in, header);
  const auto h = nlohmann::json::parse(header);
  EXPECT_EQ(h.at("tensors"), nlohmann::json::parse(R"([{"name": "weight", "shape": [1, 2], "dtype": "float32", "kept": true}])"));
  double w[2] = {0, 0};
  in.read(reinterpret_cast<char*>(w), sizeof w);
  EXPECT_EQ(w[0], -0.5);
  EXPECT_EQ(w[1], 0.5);
  EXPECT_FALSE(fs::exists(dir + "/numerics-rank1.bin")) << "DDP's replicas are identical: rank 0 writes them";
}

// A program's step times: `median_step_s` is the median of the times between its optimizer steps,
// which one slow step does not move, beside `steps_per_s`, the mean rate, which it does. The
// program sleeps 0.02 s before each of four steps and 0.5 s before the fifth: the median is about
// 0.02 s and the mean at least 0.116 s, on the program's own group (wrap = "none") and wrapped.
TEST(ProgramUnderTorchTest, TheMedianStepIsReportedBesideTheMeanRate) {
  if (!fs::exists("/usr/lib/python3/dist-packages/torch/__init__.py")) GTEST_SKIP() << "Debian's python3-torch is not installed (ci/setup)";
  lockstep::test::TempDir tmp("lockstep_program_median");
  std::ofstream(tmp.path() + "/steps.py") << "import time, torch, torch.distributed as dist\n"
                                             "dist.init_process_group('gloo')\n"
                                             "w = torch.nn.Parameter(torch.zeros(4))\n"
                                             "opt = torch.optim.SGD([w], lr=0.1)\n"
                                             "for pause in (0.02, 0.02, 0.02, 0.02, 0.5):\n"
                                             "    time.sleep(pause)\n"
                                             "    w.grad = torch.ones(4)\n"
                                             "    dist.all_reduce(w.grad)\n"
                                             "    opt.step()\n"
                                             "dist.destroy_process_group()\n";
  for (const std::string wrap : {"none", "gloo"}) {
    const auto run = run_program(tmp, "median_" + wrap, "[\"{python}\", \"{dir}/steps.py\"]", "wrap = \"" + wrap + "\"\n");
    EXPECT_EQ(run.code, 0) << wrap << ": " << run.log;
    ASSERT_FALSE(run.scenario.is_null()) << run.log;
    const auto& s = run.scenario;
    ASSERT_EQ(s.at("status"), "pass") << s.dump();
    const auto& m = s.at("metrics");
    ASSERT_TRUE(m.contains("median_step_s") && m.contains("steps_per_s")) << wrap << ": " << s.dump();
    EXPECT_EQ(m.at("program_steps"), 5) << s.dump();
    const double median = m.at("median_step_s"), mean = 1.0 / m.at("steps_per_s").get<double>();
    EXPECT_GE(median, 0.02) << wrap << ": " << s.dump();
    EXPECT_GE(mean, 0.116) << wrap << ": " << s.dump();
    EXPECT_LT(median, mean / 2) << wrap << ": one slow step moved the median: " << s.dump();
  }
}

// The wrapper returns a collective to the program as soon as it has started, as the program's
// own group does (DDP's bucket all-reduces overlap its backward pass), and checks it when it has
// completed. Rank 1 joins an async all_reduce 1.5 s late: rank 0's call returns well before
// that (a wrapper that carried the call to its end would hold it 1.5 s), its wait takes the rest,
// and the result is right. A dtype mismatch in such a call is still a collective_mismatch. Both
// on the board and over the control group (LOCKSTEP_VERIFY_CHANNEL=control: ranks on several
// hosts), where the call used to be carried to its end.
TEST(ProgramUnderTorchTest, ACollectiveReturnsToTheProgramBeforeItsPeersJoin) {
  if (!fs::exists("/usr/lib/python3/dist-packages/torch/__init__.py")) GTEST_SKIP() << "Debian's python3-torch is not installed (ci/setup)";
  lockstep::test::TempDir tmp("lockstep_program_async");
  std::ofstream(tmp.path() + "/late.py") << "import sys, time, torch, torch.distributed as dist\n"
                                            "dist.init_process_group('gloo')\n"
                                            "rank = dist.get_rank()\n"
                                            "t = torch.full((4,), float(rank + 1), dtype=torch.float16 if rank == 1 and sys.argv[2] == 'f16' else torch.float32)\n"
                                            "if rank == 1:\n"
                                            "    time.sleep(1.5)\n"
                                            "t0 = time.perf_counter()\n"
                                            "work = dist.all_reduce(t, async_op=True)\n"
                                            "t1 = time.perf_counter()\n"
                                            "work.wait()\n"
                                            "t2 = time.perf_counter()\n"
                                            "if rank == 0:\n"
                                            "    open(sys.argv[1], 'w').write('%f %f %f' % (t1 - t0, t2 - t0, t[0].item()))\n"
                                            "dist.destroy_process_group()\n";
  for (const std::string channel : {"auto", "control"}) {
  for (const std::string dtype : {"f32", "f16"}) {
    SCOPED_TRACE(channel + " " + dtype);
    const std::string times = tmp.path() + "/times-" + channel + dtype;
    const auto run = run_program(tmp, "late_" + channel + dtype, "[\"{python}\", \"{dir}/late.py\", \"" + times + "\", \"" + dtype + "\"]",
                                 "env = [\"LOCKSTEP_VERIFY_CHANNEL=" + channel + "\"]\n");
    ASSERT_FALSE(run.scenario.is_null()) << run.log;
    const auto& s = run.scenario;
    if (dtype == "f16") {
      EXPECT_EQ(s.at("status"), "fail") << s.dump();
      EXPECT_EQ(s.at("diagnosis").at("kind"), "collective_mismatch") << s.dump();
      continue;
    }
    EXPECT_EQ(run.code, 0) << run.log;
    ASSERT_EQ(s.at("status"), "pass") << s.dump();
    std::ifstream t(times);
    double issued = -1, waited = -1, value = -1;
    t >> issued >> waited >> value;
    ASSERT_GE(issued, 0) << "rank 0 wrote no times: " << run.log;
    EXPECT_LT(issued, 0.75) << "the all_reduce held the program until its peer joined";
    EXPECT_GT(waited, 1.0) << "the wait returned before rank 1 joined";
    EXPECT_EQ(value, 3.0) << "1 + 2";
  }
  }
}

}  // namespace
}  // namespace lockstep
