// What a run leaves behind: the per-rank JSON Lines traces (record mode), the Chrome trace and
// the --dump arrays, from real rank processes of the lockstep binary (launch::run_scenario).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/error.h"
#include "harness/launch/launcher.h"
#include "harness/rank/rank_main.h"
#include "harness/report/results.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
#include "lockstep/config.h"
#include "reference/io/npy.h"
#include "tests/test_util.h"

namespace lockstep::launch {
namespace {

namespace fs = std::filesystem;
using test::describe;
using test::TempDir;
using test::workload_value;

LaunchOptions options_for(const TempDir& dir, bool dump = false) { return test::launch_options(dir, dump); }

// ---------------------------------------------------------------------------------------------
// Traces: verify = "record", two dtypes, every op. One run shared by the tests below.

constexpr int kTraceWs = 2;
constexpr int kTraceSteps = 2;
constexpr std::int64_t kTraceCount = 16;
const std::vector<std::string> kTraceDtypes = {"f32", "bf16"};

class TraceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lockstep_launcher");
    const std::string file = dir_->write("trace.toml", R"(name = "test.trace"
[run]
world_size = 2
verify = "record"
[workload]
kind = "collectives"
steps = 2
count = 16
dtypes = ["f32", "bf16"]
reduce = ["sum"]
[expect]
outcome = "pass"
)");
    auto s = lockstep::validate::load_file(file).at(0);
    slug_ = s.slug();
    result_ = new report::ScenarioResult(run_scenario(s, options_for(*dir_)));
  }
  static void TearDownTestSuite() {
    delete result_;
    result_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  static std::string artifacts() { return rank::artifacts_dir((*dir_ / "report"), slug_); }

  // The rank's trace, one parsed JSON object per line.
  static std::vector<nlohmann::json> trace_lines(int rank) {
    std::vector<nlohmann::json> lines;
    std::ifstream in(rank::trace_path(artifacts(), rank));
    std::string line;
    while (std::getline(in, line)) {
      lines.push_back(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false));
    }
    return lines;
  }

  static TempDir* dir_;
  static std::string slug_;
  static report::ScenarioResult* result_;
};

TempDir* TraceTest::dir_ = nullptr;
std::string TraceTest::slug_;
report::ScenarioResult* TraceTest::result_ = nullptr;

std::size_t element_bytes(const std::string& dtype) { return dtype == "f32" ? 4 : 2; }

TEST_F(TraceTest, RunPasses) {
  EXPECT_EQ(result_->status, report::Status::kPass) << describe(*result_);
}

TEST_F(TraceTest, OneLinePerCompletedCallWithItsKeys) {
  // Per step and dtype: all_reduce, all_gather, all_to_all, broadcast, send, recv, barrier;
  // then the barrier that ends the step; and the final barrier of the run.
  const std::size_t per_dtype = 7;
  const std::size_t want_lines = kTraceSteps * (kTraceDtypes.size() * per_dtype + 1) + 1;
  for (int r = 0; r < kTraceWs; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(fs::exists(rank::trace_path(artifacts(), r)));
    const auto lines = trace_lines(r);
    ASSERT_EQ(lines.size(), want_lines);
    std::int64_t next_collective = 0, next_p2p = 0;
    for (std::size_t k = 0; k < lines.size(); ++k) {
      const auto& j = lines[k];
      SCOPED_TRACE("line " + std::to_string(k + 1) + ": " + j.dump());
      ASSERT_TRUE(j.is_object());
      for (const char* key : {"seq", "op", "bytes", "t_start_us", "t_end_us", "phase", "step"}) {
        ASSERT_TRUE(j.contains(key)) << key;
      }
      EXPECT_EQ(j.value("rank", -1), r);
      EXPECT_LE(j["t_start_us"].get<std::int64_t>(), j["t_end_us"].get<std::int64_t>());
      const std::string op = j["op"];
      const bool p2p = op == "send" || op == "recv";
      EXPECT_EQ(j["seq"].get<std::int64_t>(), p2p ? next_p2p++ : next_collective++);
      if (k + 1 == lines.size()) {
        EXPECT_EQ(op, "barrier");
        EXPECT_EQ(j["phase"], "finalize");
        EXPECT_EQ(j["step"], -1);
        continue;
      }
      EXPECT_EQ(j["phase"], "mix");
      const std::int64_t step = j["step"];
      EXPECT_TRUE(step >= 0 && step < kTraceSteps) << step;
      if (op == "barrier") {
        EXPECT_EQ(j["bytes"], 0);
        continue;
      }
      ASSERT_TRUE(j.contains("dtype"));
      ASSERT_TRUE(j.contains("count"));
      const std::string dtype = j["dtype"];
      const std::size_t es = element_bytes(dtype);
      std::int64_t want_count = kTraceCount;
      std::size_t want_bytes = kTraceCount * es;
      if (op == "all_gather") want_bytes = kTraceWs * kTraceCount * es;
      if (op == "all_to_all") {  // rank r sends (r + j) % 3 + 1 elements to rank j
        want_count = 0;
        for (int to = 0; to < kTraceWs; ++to) want_count += (r + to) % 3 + 1;
        want_bytes = static_cast<std::size_t>(want_count) * es;
      }
      EXPECT_EQ(j["bytes"].get<std::size_t>(), want_bytes);
      EXPECT_EQ(j["count"].get<std::int64_t>(), want_count);
      if (op == "all_reduce") {
        EXPECT_EQ(j["reduce"], "sum");
      }
      if (p2p) {
        EXPECT_EQ(j["peer"], op == "send" ? (r + 1) % kTraceWs : (r + kTraceWs - 1) % kTraceWs);
      }
    }
    // Per step: 2 dtypes x 5 collectives + the step's closing barrier; then the final barrier.
    EXPECT_EQ(next_collective, kTraceSteps * (2 * 5 + 1) + 1);
    EXPECT_EQ(next_p2p, kTraceSteps * 2 * 2);
  }
}

TEST_F(TraceTest, Bf16AllReduceRecordsTheWireFormatOnLibTorch1) {
  for (int r = 0; r < kTraceWs; ++r) {
    int bf16_reduces = 0;
    for (const auto& j : trace_lines(r)) {
      if (j.value("op", "") != "all_reduce") continue;
      if (j.value("dtype", "") == "f32") {
        EXPECT_FALSE(j.contains("wire")) << j.dump();
        continue;
      }
      ASSERT_EQ(j.value("dtype", ""), "bf16");
      ++bf16_reduces;
#if LOCKSTEP_TORCH_VERSION_MAJOR < 2
      // LibTorch 1.13's Gloo has no bf16: the reduction runs in f32, and the trace says so.
      ASSERT_TRUE(j.contains("wire")) << j.dump();
      EXPECT_CONTAINS(j["wire"].get<std::string>(), "f32");
#else
      EXPECT_FALSE(j.contains("wire")) << j.dump();
#endif
    }
    EXPECT_EQ(bf16_reduces, kTraceSteps);
  }
}

TEST_F(TraceTest, ChromeTraceHasOneEventPerCall) {
  const std::string path = artifacts() + "/trace.json";
  ASSERT_TRUE(fs::exists(path));
  std::ifstream in(path);
  const auto trace = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(trace.is_discarded()) << "trace.json is not JSON";
  ASSERT_TRUE(trace.contains("traceEvents"));
  ASSERT_TRUE(trace["traceEvents"].is_array());
  std::size_t calls = 0;
  for (int r = 0; r < kTraceWs; ++r) calls += trace_lines(r).size();
  std::map<int, std::size_t> per_thread;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X") ++per_thread[e.value("tid", -1)];
  }
  std::size_t events = 0;
  for (const auto& [tid, n] : per_thread) events += n;
  EXPECT_EQ(events, calls);
  EXPECT_EQ(per_thread.size(), static_cast<std::size_t>(kTraceWs));
  for (int r = 0; r < kTraceWs; ++r) EXPECT_EQ(per_thread[r], trace_lines(r).size()) << "rank " << r;
}

// ---------------------------------------------------------------------------------------------
// Dump: the last all_reduce of each rank as .npy, listed in manifest.json. One shared run.

constexpr int kDumpWs = 3;
constexpr std::int64_t kDumpCount = 10;
constexpr std::int64_t kDumpSteps = 2;

class DumpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("lockstep_launcher");
    const std::string file = dir_->write("dump.toml", R"(name = "test.dump"
[run]
world_size = 3
[workload]
kind = "collectives"
steps = 2
count = 10
dtypes = ["f32"]
ops = ["all_reduce"]
reduce = ["sum"]
[expect]
outcome = "pass"
)");
    auto s = lockstep::validate::load_file(file).at(0);
    dump_dir_ = (fs::path((*dir_ / "report")) / "dump" / s.slug()).string();
    result_ = new report::ScenarioResult(run_scenario(s, options_for(*dir_, /*dump=*/true)));
  }
  static void TearDownTestSuite() {
    delete result_;
    result_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  static nlohmann::json manifest() {
    std::ifstream in(dump_dir_ + "/manifest.json");
    return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }

  static TempDir* dir_;
  static std::string dump_dir_;
  static report::ScenarioResult* result_;
};

TempDir* DumpTest::dir_ = nullptr;
std::string DumpTest::dump_dir_;
report::ScenarioResult* DumpTest::result_ = nullptr;

TEST_F(DumpTest, ManifestListsTheLastAllReduceOfEveryRank) {
  EXPECT_EQ(result_->status, report::Status::kPass) << describe(*result_);
  const auto m = manifest();
  ASSERT_TRUE(m.is_object()) << "manifest.json missing or not JSON in " << dump_dir_;
  EXPECT_EQ(m.value("schema_version", 0), 1);
  EXPECT_EQ(m.value("scenario", ""), "test.dump");
  ASSERT_TRUE(m.contains("arrays"));
  const auto& arrays = m["arrays"];
  ASSERT_EQ(arrays.size(), static_cast<std::size_t>(kDumpWs));
  for (int r = 0; r < kDumpWs; ++r) {
    const auto& a = arrays[static_cast<std::size_t>(r)];
    EXPECT_EQ(a.value("name", ""), "all_reduce_f32");
    EXPECT_EQ(a.value("rank", -1), r);
    EXPECT_EQ(a.value("dtype", ""), "f32");
    EXPECT_EQ(a.value("numpy_dtype", ""), "<f4");
    EXPECT_EQ(a.value("file", ""), "all_reduce_f32.rank" + std::to_string(r) + ".npy");
    EXPECT_EQ(a["shape"], nlohmann::json::array({kDumpCount}));
  }
}

TEST_F(DumpTest, ArraysHoldTheClosedFormSumOfTheLastStep) {
  const auto m = manifest();
  ASSERT_TRUE(m.is_object() && m.contains("arrays"));
  // Last step, first (only) all_reduce: sum over ranks of (r+1)*(i%3+1) + (step + 0) % 2.
  const std::int64_t last = kDumpSteps - 1;
  for (const auto& a : m["arrays"]) {
    const auto npy = io::read_npy(dump_dir_ + "/" + a["file"].get<std::string>());
    EXPECT_EQ(npy.descr, "<f4");
    ASSERT_EQ(npy.shape, std::vector<std::int64_t>{kDumpCount});
    ASSERT_EQ(npy.data.size(), kDumpCount * sizeof(float));
    for (std::int64_t i = 0; i < kDumpCount; ++i) {
      double want = 0;
      for (int r = 0; r < kDumpWs; ++r) want += workload_value(r, last, 0, i);
      float got;
      std::memcpy(&got, npy.data.data() + i * sizeof(float), sizeof got);
      EXPECT_EQ(static_cast<double>(got), want) << a["file"] << " element " << i;
    }
  }
  // The same closed form written out for i = 0, 1, 2: (1+2+3) * (i+1) + 3 * 1.
  const auto rank0 = io::read_npy(dump_dir_ + "/all_reduce_f32.rank0.npy");
  float first[3];
  std::memcpy(first, rank0.data.data(), sizeof first);
  EXPECT_EQ(first[0], 9.0f);
  EXPECT_EQ(first[1], 15.0f);
  EXPECT_EQ(first[2], 21.0f);
}

TEST_F(DumpTest, NumpyLoadsEveryArrayWithItsShape) {
  if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "requires python3 with numpy (python3 -c 'import numpy' failed)";
  }
  const std::string script =
      "import json, sys, numpy as np\n"
      "d = sys.argv[1]\n"
      "m = json.load(open(d + '/manifest.json'))\n"
      "assert len(m['arrays']) == 3, m\n"
      "for a in m['arrays']:\n"
      "    x = np.load(d + '/' + a['file'])\n"
      "    assert x.shape == tuple(a['shape']) == (10,), (a['file'], x.shape)\n"
      "    assert x.dtype == np.float32, x.dtype\n"
      "    assert x.tolist()[:3] == [9.0, 15.0, 21.0], x.tolist()\n";
  const std::string script_path = dir_->write("check_dump.py", script);
  const std::string cmd = "python3 '" + script_path + "' '" + dump_dir_ + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
}

}  // namespace
}  // namespace lockstep::launch
