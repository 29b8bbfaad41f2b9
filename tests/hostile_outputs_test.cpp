// A system's outputs are untrusted input (issue 32, item 2): hostile numpy adapters written here
// replace an output with a FIFO, a symlink, a wrong-shaped 1 GiB (sparse) array, deeply nested
// or huge JSON, or print a large log, and each must end in a diagnosis naming the rank and the
// file within timeout_s + 5 s, without the launcher blocking or allocating the file's size.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "harness/launch/launcher.h"
#include "harness/launch/watch.h"
#include "harness/validate/validate.h"
#include "test_util.h"

namespace lockstep {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

constexpr double kTimeoutS = 20;

// Both ranks answer right; then `hostile` runs on rank 1 only (D: its outputs folder).
std::string adapter(const std::string& hostile, const std::string& before_finish = "") {
  return "import os, sys, json\nimport numpy as np\nimport lockstep_sut\n"
         "inp, out = lockstep_sut.start()\n"
         "D = os.environ['LOCKSTEP_SUT_OUTPUTS']\n"
         "offsets = np.asarray(inp.array('part_offsets'))\n"
         "ids = inp.share('ids.partid.valid')\n"
         "out.save('partid.valid', np.searchsorted(offsets, ids, side='right') - 1)\n"
         "if inp.rank == 1:\n" +
         (before_finish.empty() ? std::string("    pass\n") : before_finish) +
         "out.finish()\n"
         "if inp.rank == 1:\n" +
         (hostile.empty() ? std::string("    pass") : hostile) + "\n";
}

struct HostileRun {
  report::ScenarioResult result;
  double seconds = 0;
  long peak_growth_kib = 0;  // how much this process's peak RSS grew during the run
};

long peak_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

HostileRun run_adapter(const TempDir& dir, const std::string& script_text) {
  const std::string script = dir.write("adapter.py", script_text);
  const std::string file = dir.write(
      "s.toml", "name = \"sut.hostile\"\n[system]\nname = \"hostile\"\ncommand = [\"{python}\", \"" + script +
                    "\"]\npython_modules = [\"numpy\"]\n[run]\nworld_size = 2\ntimeout_s = " + std::to_string(kTimeoutS) +
                    "\n[workload]\nkind = \"lookup\"\nnodes = 10\nnum_parts = 2\nqueries = 40\ngroups = [\"partid.valid\"]\n"
                    "[expect]\noutcome = \"pass\"\n");
  auto scenarios = validate::load_file(file);
  launch::LaunchOptions o;
  o.binary = LOCKSTEP_BINARY;
  o.report_dir = dir / "report";
  const long peak0 = peak_kib();
  const auto t0 = std::chrono::steady_clock::now();
  HostileRun r{launch::run_scenario(scenarios.at(0), o), 0, 0};
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.peak_growth_kib = peak_kib() - peak0;
  return r;
}

// The run is an invariant_violation blaming rank 1 whose message names `file` and `what`.
void expect_refused(const HostileRun& r, const std::string& file, const std::string& what) {
  ASSERT_TRUE(r.result.diagnosis.has_value()) << r.result.reason;
  const std::string& msg = r.result.diagnosis->message;
  EXPECT_EQ(r.result.diagnosis->kind, DiagnosisKind::kInvariantViolation) << msg;
  EXPECT_EQ(r.result.diagnosis->rank, 1) << msg;
  EXPECT_CONTAINS(msg, "rank 1");
  EXPECT_CONTAINS(msg, file);
  EXPECT_CONTAINS(msg, what);
  EXPECT_LT(r.seconds, kTimeoutS + 5) << msg;
}

TEST(HostileOutputsTest, FifoInPlaceOfAnArrayIsRefusedWithoutBlocking) {
  TempDir dir("hostile");
  const HostileRun r = run_adapter(dir, adapter("    p = os.path.join(D, 'partid.valid.npy')\n    os.remove(p)\n    os.mkfifo(p)"));
  expect_refused(r, "partid.valid.npy", "is a FIFO");
}

TEST(HostileOutputsTest, FifoInPlaceOfDoneJsonIsRefusedWithoutBlocking) {
  TempDir dir("hostile");
  const HostileRun r = run_adapter(dir, adapter("    p = os.path.join(D, 'done.json')\n    os.remove(p)\n    os.mkfifo(p)"));
  expect_refused(r, "done.json", "is a FIFO");
}

// A done.json is read once into its typed form, and its "rank" must be the folder's: rank 1
// handing in rank 0's outputs (a copy, or a system that mixes up LOCAL_RANK) is refused.
TEST(HostileOutputsTest, DoneJsonOfAnotherRankIsRefused) {
  TempDir dir("hostile");
  const HostileRun r = run_adapter(dir, adapter("    p = os.path.join(D, 'done.json')\n"
                                                "    d = json.load(open(p))\n    d['rank'] = 0\n"
                                                "    json.dump(d, open(p + '.tmp', 'w'))\n    os.replace(p + '.tmp', p)"));
  expect_refused(r, "done.json", "is rank 0's, in rank 1's folder");
}

TEST(HostileOutputsTest, FifoInPlaceOfProgressJsonIsRefused) {
  TempDir dir("hostile");
  const HostileRun r = run_adapter(dir, adapter("    p = os.path.join(D, 'progress.json')\n    os.remove(p)\n    os.mkfifo(p)"));
  expect_refused(r, "progress.json", "is a FIFO");
}

TEST(HostileOutputsTest, SymlinkToRightAnswersOutsideTheRunIsRefused) {
  TempDir dir("hostile");
  // The right answers, saved outside the run's folder, and the output a symlink to them.
  const std::string outside = dir / "outside.npy";
  const HostileRun r = run_adapter(dir, adapter("    p = os.path.join(D, 'partid.valid.npy')\n    os.replace(p, '" + outside +
                                         "')\n    os.symlink('" + outside + "', p)"));
  expect_refused(r, "partid.valid.npy", "symlink");
}

TEST(HostileOutputsTest, SymlinkDoneJsonToAFileOutsideIsRefused) {
  TempDir dir("hostile");
  const HostileRun r = run_adapter(dir, adapter("    p = os.path.join(D, 'done.json')\n    os.remove(p)\n    os.symlink('/etc/passwd', p)"));
  expect_refused(r, "done.json", "symlink");
}

TEST(HostileOutputsTest, OutputsFolderReplacedBySymlinkIsRefused) {
  TempDir dir("hostile");
  // Once rank 0 has finished, rank 1 moves the whole outputs folder outside the run and leaves
  // a symlink to it in its place: every file under it is a regular file.
  const std::string outside = dir / "outside";
  const HostileRun r = run_adapter(
      dir, adapter("    import time\n    P = os.path.dirname(D)\n"
                   "    while not os.path.exists(os.path.join(P, 'rank0', 'done.json')): time.sleep(0.05)\n"
                   "    os.rename(P, '" + outside + "')\n    os.symlink('" + outside + "', P)"));
  ASSERT_TRUE(r.result.diagnosis.has_value()) << r.result.reason;
  const std::string& msg = r.result.diagnosis->message;
  EXPECT_EQ(r.result.diagnosis->kind, DiagnosisKind::kInvariantViolation) << msg;
  EXPECT_CONTAINS(msg, "sut/outputs was replaced by a symlink to " + outside);
  EXPECT_LT(r.seconds, kTimeoutS + 5) << msg;
}

TEST(HostileOutputsTest, HardLinkToAFileOutsideIsRefused) {
  TempDir dir("hostile");
  const std::string outside = dir / "outside.npy";
  const HostileRun r = run_adapter(dir, adapter("    p = os.path.join(D, 'partid.valid.npy')\n    os.link(p, '" + outside + "')"));
  expect_refused(r, "partid.valid.npy", "hard link");
}

// A sparse 1 GiB file whose header declares 20 elements: refused from its header and size,
// without reading or allocating the gigabyte.
TEST(HostileOutputsTest, GigabyteArrayOfTheWrongShapeIsRefusedBeforeAllocation) {
  TempDir dir("hostile");
  const HostileRun r = run_adapter(dir, adapter("    p = os.path.join(D, 'partid.valid.npy')\n"
                                         "    with open(p, 'r+b') as f: f.truncate(1 << 30)"));
  expect_refused(r, "partid.valid.npy", "needs 160");
  EXPECT_LT(r.peak_growth_kib, 256 * 1024) << "the launcher's peak RSS grew by " << r.peak_growth_kib << " KiB";
}

// A sparse 1 GiB array whose header matches its size: more than an output may hold.
TEST(HostileOutputsTest, GigabyteArrayBeyondTheLimitIsRefusedBeforeAllocation) {
  TempDir dir("hostile");
  const HostileRun r = run_adapter(dir, adapter("    p = os.path.join(D, 'partid.valid.npy')\n"
                                         "    a = np.lib.format.open_memmap(p, mode='w+', dtype='<i8', shape=(1 << 27,))\n"
                                         "    del a"));
  expect_refused(r, "partid.valid.npy", "allowed");
  EXPECT_LT(r.peak_growth_kib, 256 * 1024) << "the launcher's peak RSS grew by " << r.peak_growth_kib << " KiB";
}

TEST(HostileOutputsTest, DeeplyNestedNotesAreRefusedNotACrash) {
  TempDir dir("hostile");
  const HostileRun r = run_adapter(dir, adapter("    p = os.path.join(D, 'done.json')\n"
                                         "    d = json.load(open(p))\n"
                                         "    t = json.dumps(d)[:-1] + ', \"notes\": ' + '[' * 100000 + ']' * 100000 + '}'\n"
                                         "    open(p, 'w').write(t)"));
  expect_refused(r, "done.json", "nests deeper than 64");
}

TEST(HostileOutputsTest, DoneJsonBeyondTheSizeLimitIsRefused) {
  TempDir dir("hostile");
  const HostileRun r = run_adapter(dir, adapter("", "    for i in range(2000000): out.note('note %d' % i)\n"));
  expect_refused(r, "done.json", "allowed");
}

// 200,000 distinct notes (within the size limit): the first 1000 kept, the rest counted, in
// linear time.
TEST(HostileOutputsTest, ManyNotesAreCappedAndCounted) {
  TempDir dir("hostile");
  const HostileRun r = run_adapter(dir, adapter("", "    for i in range(200000): out.note('note %d' % i)\n"));
  EXPECT_EQ(r.result.status, report::Status::kPass) << r.result.reason;
  ASSERT_GE(r.result.notes.size(), 1001u);
  EXPECT_LE(r.result.notes.size(), 1010u);
  bool counted = false;
  for (const auto& n : r.result.notes) counted = counted || n.find("199000 more notes") != std::string::npos;
  EXPECT_TRUE(counted);
  EXPECT_LT(r.seconds, kTimeoutS + 5);
}

// A 200 MiB (sparse) progress.json is never read; the run still passes.
TEST(HostileOutputsTest, HugeProgressJsonIsNotRead) {
  TempDir dir("hostile");
  const HostileRun r = run_adapter(dir, adapter("", "    import time\n"
                                              "    with open(os.path.join(D, 'progress.json'), 'r+b') as f: f.truncate(200 << 20)\n"
                                              "    time.sleep(1)\n"));
  EXPECT_EQ(r.result.status, report::Status::kPass) << r.result.reason;
  EXPECT_LT(r.peak_growth_kib, 128 * 1024) << "the launcher's peak RSS grew by " << r.peak_growth_kib << " KiB";
}

// A rank that printed a gigabyte (sparse here) before its traceback: only the tail is read.
TEST(HostileOutputsTest, LastLineOfAGigabyteLogReadsOnlyTheTail) {
  TempDir dir("hostile");
  const std::string log = dir / "rank1.log";
  {
    std::ofstream out(log, std::ios::binary);
    out << "start\n";
  }
  fs::resize_file(log, std::uintmax_t{1} << 30);
  {
    std::ofstream out(log, std::ios::binary | std::ios::app);
    out << "\nTraceback (most recent call last):\n  File \"adapter.py\", line 3\nValueError: boom\n";
  }
  const long peak0 = peak_kib();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(launch::log_last_line(log), "ValueError: boom");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 1.0);
  EXPECT_LT(peak_kib() - peak0, 16 * 1024);
}

TEST(HostileOutputsTest, LastLineOfAFifoLogIsEmptyNotABlock) {
  TempDir dir("hostile");
  const std::string log = dir / "rank0.log";
  ASSERT_EQ(mkfifo(log.c_str(), 0600), 0);
  EXPECT_EQ(launch::log_last_line(log), "");
}

// An output whose dtype is not the contract's (issue 32, item 3): a tiny SGD embedding adapter
// that answers right, then casts one output. float64 rows round back to the same float32
// values, so only the dtype check can catch it.
std::string embedding_adapter(const std::string& cast) {
  return "import numpy as np\nimport lockstep_sut\n"
         "inp, out = lockstep_sut.start()\n"
         "f32 = np.float32\n"
         "lr = f32(inp.config['optimizer']['lr'])\n"
         "table = np.array(inp.array('init'), dtype=f32)\n"
         "all_ids, all_grads, off = inp.array('ids'), inp.array('grads'), inp.array('step_offsets')\n"
         "def save(name, a):\n"
         "    out.save(name, " + (cast.empty() ? std::string("a") : cast) + ")\n"
         "for t, ids, _ in inp.steps():\n"
         "    save('pulled.step%d' % t, table[ids])\n"
         "    ids_t = np.asarray(all_ids[off[t]:off[t + 1]])\n"
         "    g_t = np.asarray(all_grads[off[t]:off[t + 1]])\n"
         "    rows, inv = np.unique(ids_t, return_inverse=True)\n"
         "    g = np.zeros((rows.size, table.shape[1]), f32)\n"
         "    np.add.at(g, inv, g_t)\n"
         "    table[rows] = table[rows] - lr * g\n"
         "    if inp.rank == 0:\n"
         "        save('table.step%d' % t, table)\n"
         "out.finish()\n";
}

report::ScenarioResult run_embedding(const TempDir& dir, const std::string& cast) {
  const std::string script = dir.write("adapter.py", embedding_adapter(cast));
  const std::string file = dir.write(
      "s.toml", "name = \"sut.dtype\"\n[system]\nname = \"tiny\"\ncommand = [\"{python}\", \"" + script +
                    "\"]\npython_modules = [\"numpy\"]\n[run]\nworld_size = 2\ntimeout_s = 30\n"
                    "[workload]\nkind = \"embedding\"\nrows = 50\ndim = 4\nsteps = 2\nbatch_sizes = [6, 5]\noptimizer = \"sgd\"\n"
                    "[expect]\noutcome = \"pass\"\n");
  auto scenarios = validate::load_file(file);
  launch::LaunchOptions o;
  o.binary = LOCKSTEP_BINARY;
  o.report_dir = dir / "report";
  return launch::run_scenario(scenarios.at(0), o);
}

TEST(OutputDtypeTest, TinyEmbeddingAdapterPassesWithTheDeclaredDtypes) {
  TempDir dir("dtype");
  const auto r = run_embedding(dir, "");
  EXPECT_EQ(r.status, report::Status::kPass) << r.reason << (r.diagnosis ? r.diagnosis->message : "");
}

TEST(OutputDtypeTest, Float64PulledRowsAreAnInvariantViolationNamingRankFileAndDtypes) {
  TempDir dir("dtype");
  const auto r = run_embedding(dir, "a.astype(np.float64) if (inp.rank == 1 and name == 'pulled.step0') else a");
  ASSERT_TRUE(r.diagnosis.has_value()) << r.reason;
  const std::string& msg = r.diagnosis->message;
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kInvariantViolation) << msg;
  EXPECT_EQ(r.diagnosis->rank, 1) << msg;
  EXPECT_CONTAINS(msg, "rank 1");
  EXPECT_CONTAINS(msg, "rank1/pulled.step0.npy");
  EXPECT_CONTAINS(msg, "float64 ('<f8')");
  EXPECT_CONTAINS(msg, "declares float32 ('<f4')");
  EXPECT_EQ(r.status, report::Status::kFail);
}

TEST(OutputDtypeTest, Float16TableIsAnInvariantViolationToo) {
  TempDir dir("dtype");
  const auto r = run_embedding(dir, "a.astype(np.float16) if name == 'table.step1' else a");
  ASSERT_TRUE(r.diagnosis.has_value()) << r.reason;
  const std::string& msg = r.diagnosis->message;
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kInvariantViolation) << msg;
  EXPECT_EQ(r.diagnosis->rank, 0) << msg;
  EXPECT_CONTAINS(msg, "rank0/table.step1.npy");
  EXPECT_CONTAINS(msg, "float16 ('<f2')");
}

// The contract's int64 sampling rows written as int32 (widening to int64 would hide it): the
// dtype is checked before the rows are.
TEST(OutputDtypeTest, Int32SamplingRowsAreAnInvariantViolation) {
  TempDir dir("dtype");
  const std::string script = dir.write(
      "adapter.py",
      "import numpy as np\nimport lockstep_sut\ninp, out = lockstep_sut.start()\n"
      "for k in range(int(inp.config['repeats'])):\n"
      "    dt = np.int32 if (inp.rank == 0 and k == 0) else np.int64\n"
      "    out.save('edges.repeat%d' % k, np.zeros((0, 5), dt))\n"
      "out.finish()\n");
  const std::string file = dir.write(
      "s.toml", "name = \"sut.dtype\"\n[system]\nname = \"tiny\"\ncommand = [\"{python}\", \"" + script +
                    "\"]\npython_modules = [\"numpy\"]\n[run]\nworld_size = 2\ntimeout_s = 30\n"
                    "[workload]\nkind = \"sampling\"\nnum_seeds = 16\nbatch_size = 8\n[expect]\noutcome = \"pass\"\n");
  launch::LaunchOptions o;
  o.binary = LOCKSTEP_BINARY;
  o.report_dir = dir / "report";
  const auto r = launch::run_scenario(validate::load_file(file).at(0), o);
  ASSERT_TRUE(r.diagnosis.has_value()) << r.reason;
  const std::string& msg = r.diagnosis->message;
  EXPECT_EQ(r.diagnosis->kind, DiagnosisKind::kInvariantViolation) << msg;
  EXPECT_EQ(r.diagnosis->rank, 0) << msg;
  EXPECT_CONTAINS(msg, "rank0/edges.repeat0.npy");
  EXPECT_CONTAINS(msg, "int32 ('<i4')");
  EXPECT_CONTAINS(msg, "declares int64 ('<i8')");
}

}  // namespace
}  // namespace lockstep
