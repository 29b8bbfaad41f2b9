// The system-under-test contract end to end: tiny adapters written here (Python, numpy only)
// run as the ranks of a [system] scenario through launch::run_scenario, and each misbehaviour
// (a wrong answer, a hang, a crash, no outputs, outputs that break the contract) must give its
// diagnosis. Expected values come from the range book's closed form (part = id / 5 for 10
// nodes in 2 parts), never from lockstep's checker.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstring>
#include <regex>
#include <string>

#include "harness/core/error.h"
#include "harness/launch/launcher.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
#include "reference/io/npy.h"
#include "test_util.h"

namespace lockstep {
namespace {

using launch::LaunchOptions;
using test::TempDir;
using test::int64s;
namespace fs = std::filesystem;

// The adapter's head: reads the inputs; `body` then runs with inp, out, ids in scope.
std::string adapter(const std::string& body) {
  return "import os, sys, time, signal\nimport numpy as np\nimport lockstep_sut\n"
         "inp, out = lockstep_sut.start()\n"
         "open(os.path.join(os.environ['LOCKSTEP_SUT_OUTPUTS'], 'pid'), 'w').write(str(os.getpid()))\n"
         "offsets = np.asarray(inp.array('part_offsets'))\n"
         "ids = inp.share('ids.partid.valid')\n" +
         body + "\n";
}

// A right answer for the range book, computed the adapter's own way.
const char* kRight = "out.save('partid.valid', np.searchsorted(offsets, ids, side='right') - 1)\nout.finish()";

std::string scenario_text(const std::string& script, double timeout_s = 30, const std::string& extra_system = "") {
  return "name = \"sut.contract\"\n[system]\nname = \"tiny\"\ncommand = [\"{python}\", \"" + script +
         "\"]\npython_modules = [\"numpy\"]\n" + extra_system + "\n[run]\nworld_size = 2\ntimeout_s = " + std::to_string(timeout_s) +
         "\n[workload]\nkind = \"lookup\"\nnodes = 10\nnum_parts = 2\nqueries = 40\ngroups = [\"partid.valid\"]\n[expect]\noutcome = \"pass\"\n";
}

struct AdapterRun {
  report::ScenarioResult result;
  double seconds = 0;
};

AdapterRun run_adapter(const TempDir& dir, const std::string& body, double timeout_s = 30, bool dump = false) {
  const std::string script = dir.write("adapter.py", adapter(body));
  const std::string file = dir.write("s.toml", scenario_text(script, timeout_s));
  auto scenarios = lockstep::validate::load_file(file);
  LaunchOptions o;
  o.binary = LOCKSTEP_BINARY;
  o.report_dir = dir / "report";
  o.dump = dump;
  const auto t0 = std::chrono::steady_clock::now();
  AdapterRun r{launch::run_scenario(scenarios.at(0), o), 0};
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// Every adapter process the run started is gone.
void expect_no_survivors(const TempDir& dir) {
  for (int r = 0; r < 2; ++r) {
    const std::string pid = test::read_file(dir / ("report/sut.contract/sut/outputs/rank" + std::to_string(r) + "/pid"));
    ASSERT_FALSE(pid.empty()) << "rank " << r << " never wrote its pid";
    EXPECT_NE(kill(std::stoi(pid), 0), 0) << "rank " << r << " (pid " << pid << ") outlived run_scenario";
  }
}

TEST(SutContractTest, RightAnswersPass) {
  TempDir dir("sut");
  const AdapterRun r = run_adapter(dir, kRight);
  EXPECT_EQ(r.result.status, report::Status::kPass) << r.result.reason;
  EXPECT_FALSE(r.result.diagnosis.has_value());
  EXPECT_FALSE(r.result.digest.empty());
  // The inputs follow the documented layout: the range book's closed-form boundaries.
  const std::string manifest = test::read_file(dir / "report/sut.contract/sut/inputs/manifest.json");
  EXPECT_CONTAINS(manifest, "\"schema_version\": 1");
  EXPECT_CONTAINS(manifest, "\"capability\": \"lookup\"");
  const std::string offsets = test::read_file(dir / "report/sut.contract/sut/inputs/part_offsets.npy");
  ASSERT_GE(offsets.size(), 24u);
  std::int64_t last3[3];
  std::memcpy(last3, offsets.data() + offsets.size() - 24, 24);
  EXPECT_EQ(last3[0], 0);
  EXPECT_EQ(last3[1], 5);
  EXPECT_EQ(last3[2], 10);
  expect_no_survivors(dir);
}

TEST(SutContractTest, DumpHoldsInputsOutputsAndTheReferenceAnswers) {
  TempDir dir("sut");
  const AdapterRun r = run_adapter(dir, kRight, 30, /*dump=*/true);
  ASSERT_EQ(r.result.status, report::Status::kPass) << r.result.reason;
  const std::string dump = dir / "report/dump/sut.contract";
  const auto ids = io::read_npy(dump + "/inputs/ids.partid.valid.npy");
  const auto expected = io::read_npy(dump + "/expected/partid.valid.npy");
  ASSERT_EQ(ids.descr, "<i8");
  ASSERT_EQ(expected.descr, "<i8");
  const auto id = int64s(ids), want = int64s(expected);
  ASSERT_EQ(id.size(), 40u);
  ASSERT_EQ(want.size(), id.size());
  for (std::size_t i = 0; i < id.size(); ++i) EXPECT_EQ(want[i], id[i] / 5) << "query " << i;
  EXPECT_TRUE(fs::exists(dump + "/outputs/rank1/done.json"));
  EXPECT_CONTAINS(test::read_file(dump + "/expected/manifest.json"), "lockstep.sut.expected");
}

TEST(SutContractTest, WrongAnswerIsResultMismatchNamingTheIdAndTheClosedForm) {
  TempDir dir("sut");
  // Rank 1 answers id // 3 instead of the owner.
  const AdapterRun r = run_adapter(dir,
                            "part = np.searchsorted(offsets, ids, side='right') - 1\n"
                            "if inp.rank == 1: part = ids // 3\n"
                            "out.save('partid.valid', part)\nout.finish()");
  ASSERT_TRUE(r.result.diagnosis.has_value());
  EXPECT_EQ(r.result.diagnosis->kind, DiagnosisKind::kResultMismatch) << r.result.diagnosis->message;
  EXPECT_EQ(r.result.diagnosis->rank, 1);
  std::smatch m;
  const std::string msg = r.result.diagnosis->message;
  ASSERT_TRUE(std::regex_search(msg, m, std::regex("nid2partid\\(id (\\d+)\\) returned (\\d+), expected (\\d+)"))) << msg;
  const long id = std::stol(m[1]);
  EXPECT_EQ(std::stol(m[2]), id / 3);
  EXPECT_EQ(std::stol(m[3]), id / 5);  // 10 nodes in 2 even parts
  EXPECT_EQ(r.result.status, report::Status::kFail);  // the scenario expected pass
}

TEST(SutContractTest, HangIsTimeoutBlamingTheStuckRankWithinTheBound) {
  TempDir dir("sut");
  const AdapterRun r = run_adapter(dir,
                            "if inp.rank == 1:\n    out.progress('waiting for a reply')\n    time.sleep(3600)\n" + std::string(kRight),
                            /*timeout_s=*/6);
  ASSERT_TRUE(r.result.diagnosis.has_value());
  EXPECT_EQ(r.result.diagnosis->kind, DiagnosisKind::kTimeout) << r.result.diagnosis->message;
  EXPECT_EQ(r.result.diagnosis->rank, 1);
  EXPECT_CONTAINS(r.result.diagnosis->message, "waiting for a reply");
  EXPECT_LT(r.seconds, 6 + 5.0);
  expect_no_survivors(dir);
}

TEST(SutContractTest, WhatARankStartedDiesWithIt) {
  TempDir dir("sut");
  // Rank 1 starts a grandchild that would sleep for ten minutes, then hangs itself.
  const AdapterRun r = run_adapter(dir,
                                   "import subprocess\n"
                                   "if inp.rank == 1:\n"
                                   "    child = subprocess.Popen(['sleep', '600'])\n"
                                   "    open(os.path.join(os.environ['LOCKSTEP_SUT_OUTPUTS'], 'grandchild'), 'w').write(str(child.pid))\n"
                                   "    time.sleep(3600)\n" +
                                       std::string(kRight),
                                   /*timeout_s=*/4);
  ASSERT_TRUE(r.result.diagnosis.has_value());
  EXPECT_EQ(r.result.diagnosis->kind, DiagnosisKind::kTimeout);
  const std::string pid = test::read_file(dir / "report/sut.contract/sut/outputs/rank1/grandchild");
  ASSERT_FALSE(pid.empty());
  // The grandchild is gone, or at most a zombie waiting for init to reap it, by the time
  // run_scenario returns: the launcher waits for every process of a rank's group to be gone.
  const std::string stat = test::read_file("/proc/" + pid + "/stat");
  EXPECT_TRUE(stat.empty() || stat.find(") Z ") != std::string::npos) << "grandchild " << pid << " outlived run_scenario: " << stat;
  expect_no_survivors(dir);
}

// A rank that never reaches lockstep_sut.start() while the other finishes (issue 32, item 3):
// the start-up timeout blames the rank that never started, within startup_timeout_s + 5 s.
TEST(SutContractTest, RankThatNeverStartsIsBlamedWhenTheOthersFinished) {
  TempDir dir("sut");
  const std::string script = dir.write(
      "adapter.py",
      "import os, time\n"
      "if os.environ['RANK'] == '1':\n"
      "    os.makedirs(os.environ['LOCKSTEP_SUT_OUTPUTS'], exist_ok=True)\n"
      "    open(os.path.join(os.environ['LOCKSTEP_SUT_OUTPUTS'], 'pid'), 'w').write(str(os.getpid()))\n"
      "    time.sleep(3600)\n" +
          adapter(kRight));
  std::string text = scenario_text(script);
  text.replace(text.find("timeout_s = "), 0, "startup_timeout_s = 8\n");  // rank 0 must start within it on a loaded machine
  LaunchOptions o;
  o.binary = LOCKSTEP_BINARY;
  o.report_dir = dir / "report";
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = launch::run_scenario(lockstep::validate::load_file(dir.write("s.toml", text)).at(0), o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.diagnosis.has_value()) << r.reason;
  const std::string& msg = r.diagnosis->message;
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kTimeout) << msg;
  EXPECT_EQ(r.diagnosis->rank, 1) << msg;
  EXPECT_CONTAINS(msg, "rank 1 (system tiny) never reached lockstep_sut.start()");
  EXPECT_CONTAINS(msg, "1 of 2 finished");
  // Rank 0 finished: its done.json is there.
  EXPECT_TRUE(fs::exists(dir / "report/sut.contract/sut/outputs/rank0/done.json"));
  EXPECT_LT(seconds, 8 + 5.0 + 10.0);  // start-up bound + 5 s, plus the run's set-up on a loaded machine
  expect_no_survivors(dir);
}

TEST(SutContractTest, SignalIsRankFailureNamingTheSignal) {
  TempDir dir("sut");
  const AdapterRun r = run_adapter(dir, "if inp.rank == 0: os.kill(os.getpid(), signal.SIGSEGV)\n" + std::string(kRight));
  ASSERT_TRUE(r.result.diagnosis.has_value());
  EXPECT_EQ(r.result.diagnosis->kind, DiagnosisKind::kRankFailure);
  EXPECT_EQ(r.result.diagnosis->rank, 0);
  EXPECT_CONTAINS(r.result.diagnosis->message, "SIGSEGV");
  expect_no_survivors(dir);
}

TEST(SutContractTest, ExceptionIsRankFailureQuotingIt) {
  TempDir dir("sut");
  const AdapterRun r = run_adapter(dir, "if inp.rank == 1: raise KeyError('no such partition')\n" + std::string(kRight));
  ASSERT_TRUE(r.result.diagnosis.has_value());
  EXPECT_EQ(r.result.diagnosis->kind, DiagnosisKind::kRankFailure);
  EXPECT_EQ(r.result.diagnosis->rank, 1);
  EXPECT_CONTAINS(r.result.diagnosis->message, "KeyError");
}

// Every rank raises (issue 32, item 3): after a barrier through the output folders, rank 0
// raises 0.2 s after rank 1 (inside the launcher's 0.4 s settle window, and far enough apart
// that a loaded machine keeps the order), with `rank0_error` (rank 1: `rank1_error`).
// Returns the blamed rank.
int blame_when_both_raise(const std::string& rank0_error, const std::string& rank1_error, int run) {
  TempDir dir("sut");
  const AdapterRun r = run_adapter(dir,
                                   "open(os.path.join(out.directory, 'ready'), 'w').close()\n"
                                   "parent = os.path.dirname(out.directory)\n"
                                   "t0 = time.monotonic()\n"
                                   "while not all(os.path.exists(os.path.join(parent, 'rank%d' % q, 'ready')) for q in range(2)):\n"
                                   "    assert time.monotonic() < t0 + 30, 'barrier'\n"
                                   "    time.sleep(0.005)\n"
                                   "if inp.rank == 0:\n"
                                   "    time.sleep(0.2)\n"
                                   "    raise " + rank0_error + "\n"
                                   "raise " + rank1_error + "\n");
  if (!r.result.diagnosis) {
    ADD_FAILURE() << "run " << run << ": no diagnosis: " << r.result.reason;
    return -2;
  }
  EXPECT_EQ(r.result.diagnosis->kind, DiagnosisKind::kRankFailure) << r.result.diagnosis->message;
  return r.result.diagnosis->rank;
}

TEST(SutContractTest, RanksRaisingTheSameErrorBlameTheLowestEveryRun) {
  for (int run = 0; run < 3; ++run) {
    EXPECT_EQ(blame_when_both_raise("RuntimeError('the partition book is corrupt')", "RuntimeError('the partition book is corrupt')", run), 0)
        << "run " << run;
  }
  // The same error naming the rank that raises it is the same way of failing.
  EXPECT_EQ(blame_when_both_raise("KeyError('rank %d has no partition' % inp.rank)", "KeyError('rank %d has no partition' % inp.rank)", 3), 0);
}

TEST(SutContractTest, ALaterDifferentErrorDoesNotTakeTheBlame) {
  // Rank 0 fails because rank 1 did (another error, 0.2 s later): rank 1, the first, is blamed.
  EXPECT_EQ(blame_when_both_raise("ConnectionResetError('peer rank 1 closed the connection')", "RuntimeError('the partition book is corrupt')", 0), 1);
}

TEST(SutContractTest, CleanExitWithoutOutputsIsMissingParticipant) {
  TempDir dir("sut");
  const AdapterRun r = run_adapter(dir, "if inp.rank == 1: sys.exit(0)\n" + std::string(kRight));
  ASSERT_TRUE(r.result.diagnosis.has_value());
  EXPECT_EQ(r.result.diagnosis->kind, DiagnosisKind::kMissingParticipant) << r.result.diagnosis->message;
  EXPECT_EQ(r.result.diagnosis->rank, 1);
}

TEST(SutContractTest, OutputOfTheWrongShapeBreaksTheContract) {
  TempDir dir("sut");
  const AdapterRun r = run_adapter(dir, "out.save('partid.valid', np.zeros((len(ids), 2), np.int64))\nout.finish()");
  ASSERT_TRUE(r.result.diagnosis.has_value());
  EXPECT_EQ(r.result.diagnosis->kind, DiagnosisKind::kInvariantViolation);
  EXPECT_CONTAINS(r.result.diagnosis->message, "expected shape [20]");
}

TEST(SutContractTest, MissingOutputBreaksTheContract) {
  TempDir dir("sut");
  const AdapterRun r = run_adapter(dir, "out.finish()");
  ASSERT_TRUE(r.result.diagnosis.has_value());
  EXPECT_EQ(r.result.diagnosis->kind, DiagnosisKind::kInvariantViolation);
  EXPECT_CONTAINS(r.result.diagnosis->message, "neither written nor rejected");
}

TEST(SutContractTest, MissingPythonModuleIsSkipNotPass) {
  TempDir dir("sut");
  const std::string script = dir.write("adapter.py", adapter(kRight));
  std::string text = scenario_text(script);
  text.replace(text.find("[\"numpy\"]"), 9, "[\"numpy\", \"lockstep_no_such_module\"]");
  auto scenarios = lockstep::validate::load_file(dir.write("s.toml", text));
  LaunchOptions o;
  o.binary = LOCKSTEP_BINARY;
  o.report_dir = dir / "report";
  const auto r = launch::run_scenario(scenarios.at(0), o);
  EXPECT_EQ(r.status, report::Status::kSkip);
  EXPECT_CONTAINS(r.reason, "lockstep_no_such_module");
}

TEST(SutContractTest, BadSystemTablesNameFileAndLine) {
  TempDir dir("sut");
  struct Case {
    std::string system;  // the [system] body
    std::string expected;
  };
  const Case cases[] = {
      {"name = \"tiny\"\ncommand = []\n", "s.toml:10: system.command: must be a non-empty list"},
      {"name = \"tiny\"\ncomand = [\"x\"]\n", "unknown key (did you mean 'command'?)"},
      {"name = \"Tiny Sys\"\ncommand = [\"x\"]\n", "system.name: must match [a-z0-9_.-]+"},
      {"name = \"tiny\"\ncommand = [\"x\"]\nenv = [\"NOEQUALS\"]\n", "system.env: expected \"KEY=VALUE\""},
      {"name = \"tiny\"\n", "[system] is missing required key 'command'"},
  };
  for (const auto& c : cases) {
    const std::string text = "name = \"sut.bad\"\n[run]\nworld_size = 1\n[workload]\nkind = \"lookup\"\n[expect]\noutcome = \"pass\"\n[system]\n" + c.system;
    try {
      lockstep::validate::load_file(dir.write("s.toml", text));
      ADD_FAILURE() << "accepted: " << c.system;
    } catch (const InputError& e) {
      EXPECT_CONTAINS(e.what(), c.expected);
    }
  }
  // A capability a system cannot do, and an injection, are refused at load time.
  const std::string no_cap = "name = \"sut.bad\"\n[workload]\nkind = \"collectives\"\n[expect]\noutcome = \"pass\"\n[system]\nname = \"t\"\ncommand = [\"x\"]\n";
  EXPECT_THROW(lockstep::validate::load_file(dir.write("s.toml", no_cap)), InputError);
  const std::string inject = "name = \"sut.bad\"\n[workload]\nkind = \"lookup\"\n[[inject]]\nkind = \"crash\"\nstep = 0\n[expect]\noutcome = \"pass\"\n[system]\nname = \"t\"\ncommand = [\"x\"]\n";
  try {
    lockstep::validate::load_file(dir.write("s.toml", inject));
    ADD_FAILURE() << "accepted an injection into a system under test";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "does not apply to a system under test");
  }
}

}  // namespace
}  // namespace lockstep
