// The NCCL profiler plugin, driven without NCCL or a GPU: the test dlopens the built
// libnccl-profiler-lockstep.so, fetches the versioned structs NCCL looks for, and plays a
// synthetic event stream for two ranks (two contexts, as two processes' NCCL would). The traces
// must then pass through lockstep's own readers and checks: baseline::read_sequence,
// baseline::first_divergence and report::write_chrome_trace. Expected values are written out by
// hand, never taken from the plugin's helpers.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "harness/baseline/sequence.h"
#include "harness/nccl_profiler/nccl_abi.h"
#include "harness/nccl_profiler/trace_writer.h"
#include "harness/report/chrome_trace.h"
#include "tests/test_util.h"

namespace lockstep::nccl_profiler {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

constexpr std::uint64_t kCommHash = 0x1234abcd5678ef90ull;
constexpr const char* kCommFolder = "comm-1234abcd5678ef90";

// The plugin as NCCL sees it: dlopen by path, dlsym by versioned name.
struct Plugin {
  void* lib = nullptr;
  abi::ProfilerV5* v5 = nullptr;
  abi::ProfilerV4* v4 = nullptr;
  Plugin() {
    lib = ::dlopen(LOCKSTEP_NCCL_PROFILER, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    v5 = static_cast<abi::ProfilerV5*>(::dlsym(lib, "ncclProfiler_v5"));
    v4 = static_cast<abi::ProfilerV4*>(::dlsym(lib, "ncclProfiler_v4"));
  }
};

Plugin& plugin() {
  static Plugin p;  // never closed: NCCL does not unload its profiler either
  return p;
}

// Sets LOCKSTEP_NCCL_TRACE_DIR for one test.
struct TraceDirEnv {
  explicit TraceDirEnv(const std::string& dir) { ::setenv("LOCKSTEP_NCCL_TRACE_DIR", dir.c_str(), 1); }
  ~TraceDirEnv() { ::unsetenv("LOCKSTEP_NCCL_TRACE_DIR"); }
};

// One rank's communicator, driven through the v5 struct.
class Rank {
 public:
  Rank(int rank, int nranks, std::uint64_t hash = kCommHash) {
    const abi::ProfilerV5* p = plugin().v5;
    EXPECT_EQ(p->init(&context_, hash, &mask_, "world", /*n_nodes=*/1, nranks, rank, nullptr), abi::kSuccess);
    rank_ = rank;
  }
  ~Rank() { finalize(); }
  void finalize() {
    if (context_) {
      EXPECT_EQ(plugin().v5->finalize(context_), abi::kSuccess);
    }
    context_ = nullptr;
  }

  void* coll(const char* func, const char* dtype, std::size_t count, int root, std::uint64_t nccl_seq) {
    abi::EventDescrV5 d{};
    d.type = abi::kColl;
    d.rank = rank_;
    d.coll.seq_number = nccl_seq;
    d.coll.func = func;
    d.coll.count = count;
    d.coll.root = root;
    d.coll.datatype = dtype;
    d.coll.n_channels = 2;
    d.coll.algo = "RING";
    d.coll.proto = "LL";
    return start(&d);
  }
  void* p2p(const char* func, const char* dtype, std::size_t count, int peer) {
    abi::EventDescrV5 d{};
    d.type = abi::kP2p;
    d.rank = rank_;
    d.p2p.func = func;
    d.p2p.datatype = dtype;
    d.p2p.count = count;
    d.p2p.peer = peer;
    return start(&d);
  }
  void* start(abi::EventDescrV5* d) {
    void* handle = reinterpret_cast<void*>(0x1);  // must be overwritten
    EXPECT_EQ(plugin().v5->start_event(context_, &handle, d), abi::kSuccess);
    return handle;
  }
  static void stop(void* handle) { EXPECT_EQ(plugin().v5->stop_event(handle), abi::kSuccess); }
  // Starts and stops one collective.
  void run(const char* func, const char* dtype, std::size_t count, int root, std::uint64_t nccl_seq) {
    void* h = coll(func, dtype, count, root, nccl_seq);
    ASSERT_NE(h, nullptr);
    stop(h);
  }

  void* context() const { return context_; }
  int mask() const { return mask_; }

 private:
  void* context_ = nullptr;
  int mask_ = -1;
  int rank_ = 0;
};

std::vector<json> read_lines(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

// Two ranks issue three f32 all_reduces and a bf16 broadcast from root 1; rank 1 issues the
// second all_reduce in `second_dtype`.
void two_rank_stream(const std::string& dir, const char* second_dtype = "ncclFloat32") {
  TraceDirEnv env(dir);
  Rank r0(0, 2), r1(1, 2);
  for (int i = 0; i < 3; ++i) {
    r0.run("AllReduce", "ncclFloat32", 1024, 0, static_cast<std::uint64_t>(i));
    r1.run("AllReduce", i == 1 ? second_dtype : "ncclFloat32", 1024, 0, static_cast<std::uint64_t>(i));
  }
  r0.run("Broadcast", "ncclBfloat16", 256, 1, 0);
  r1.run("Broadcast", "ncclBfloat16", 256, 1, 0);
}

class NcclProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(plugin().lib, nullptr) << "dlopen " << LOCKSTEP_NCCL_PROFILER << ": " << ::dlerror();
    ASSERT_NE(plugin().v5, nullptr) << "no ncclProfiler_v5 in " << LOCKSTEP_NCCL_PROFILER;
    ASSERT_NE(plugin().v4, nullptr) << "no ncclProfiler_v4 in " << LOCKSTEP_NCCL_PROFILER;
  }
};

TEST(NcclProfilerNames, MapsNcclNamesToLockstepNames) {
  EXPECT_EQ(op_name("AllReduce"), "all_reduce");
  EXPECT_EQ(op_name("AllGather"), "all_gather");
  EXPECT_EQ(op_name("AlltoAll"), "all_to_all");
  EXPECT_EQ(op_name("Broadcast"), "broadcast");
  EXPECT_EQ(op_name("Send"), "send");
  EXPECT_EQ(op_name("Recv"), "recv");
  EXPECT_EQ(op_name("ReduceScatter"), "reduce_scatter");
  EXPECT_EQ(op_name("Reduce"), "reduce");
  EXPECT_EQ(op_name(nullptr), "unknown");
  EXPECT_EQ(dtype_name("ncclFloat32"), "f32");
  EXPECT_EQ(dtype_name("ncclFloat64"), "f64");
  EXPECT_EQ(dtype_name("ncclFloat16"), "f16");
  EXPECT_EQ(dtype_name("ncclBfloat16"), "bf16");
  EXPECT_EQ(dtype_name("ncclInt8"), "i8");
  EXPECT_EQ(dtype_name("ncclUint8"), "u8");
  EXPECT_EQ(dtype_name("ncclInt32"), "i32");
  EXPECT_EQ(dtype_name("ncclInt64"), "i64");
  EXPECT_EQ(dtype_name("ncclUint64"), "u64");
  EXPECT_EQ(dtype_name("ncclFloat8e4m3"), "f8e4m3");
  EXPECT_EQ(dtype_name("Unknown"), "unknown");
  EXPECT_EQ(dtype_size("ncclBfloat16"), 2u);
  EXPECT_EQ(dtype_size("Unknown"), 0u);
}

TEST_F(NcclProfilerTest, ExportsVersionedStructsNamedLockstep) {
  for (const char* name : {plugin().v5->name, plugin().v4->name}) EXPECT_STREQ(name, "lockstep");
  const abi::ProfilerV5& p = *plugin().v5;
  EXPECT_TRUE(p.init && p.start_event && p.stop_event && p.record_event_state && p.finalize);
  const abi::ProfilerV4& q = *plugin().v4;
  EXPECT_TRUE(q.init && q.start_event && q.stop_event && q.record_event_state && q.finalize);
}

TEST_F(NcclProfilerTest, TwoRanksTraceReadBySequence) {
  TempDir dir("nccl_profiler");
  two_rank_stream(dir.path());
  const std::string folder = dir / kCommFolder;
  const auto seq = baseline::read_sequence(folder, 2);
  ASSERT_TRUE(seq.has_value()) << "no traces under " << folder;
  for (int r = 0; r < 2; ++r) {
    const auto& calls = (*seq)[static_cast<std::size_t>(r)];
    ASSERT_EQ(calls.size(), 4u) << "rank " << r;
    for (int i = 0; i < 3; ++i) {
      const auto& c = calls[static_cast<std::size_t>(i)];
      EXPECT_EQ(c.seq, i);
      EXPECT_EQ(c.kind, "collective");
      EXPECT_EQ(c.op, "all_reduce");
      EXPECT_EQ(c.dtype, "f32");
      EXPECT_EQ(c.count, 1024);
      EXPECT_EQ(c.device, "cuda");
      EXPECT_EQ(c.reduce, "");  // NCCL's descriptor has no reduction operator
      EXPECT_EQ(c.root, -1);
      EXPECT_EQ(c.peer, -1);
      EXPECT_EQ(c.phase, "");
      EXPECT_EQ(c.step, -1);
      EXPECT_EQ(c.index, i);
      EXPECT_GT(c.t_start_us, 0);
      EXPECT_GE(c.t_end_us, c.t_start_us);
    }
    const auto& b = calls[3];
    EXPECT_EQ(b.seq, 3);
    EXPECT_EQ(b.op, "broadcast");
    EXPECT_EQ(b.dtype, "bf16");
    EXPECT_EQ(b.count, 256);
    EXPECT_EQ(b.root, 1);
  }
  EXPECT_FALSE(baseline::first_divergence({(*seq)[0]}, {(*seq)[1]}).has_value()) << "ranks disagree";

  // The keys lockstep's reader ignores.
  const auto lines = read_lines(folder + "/rank1.trace.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["rank"], 1);
  EXPECT_EQ(lines[0]["source"], "nccl_profiler");
  EXPECT_EQ(lines[0]["comm_hash"], "1234abcd5678ef90");
  EXPECT_EQ(lines[0]["nccl_func"], "AllReduce");
  EXPECT_EQ(lines[0]["nccl_dtype"], "ncclFloat32");
  EXPECT_EQ(lines[0]["bytes"], 4096);
  EXPECT_EQ(lines[0]["algo"], "RING");
  EXPECT_FALSE(lines[0].contains("reduce"));
  EXPECT_FALSE(lines[0].contains("root"));
  EXPECT_EQ(lines[2]["nccl_seq"], 2);
  EXPECT_EQ(lines[3]["nccl_seq"], 0);  // NCCL counts per function; lockstep's seq is 3
  EXPECT_EQ(lines[3]["bytes"], 512);

  const json comm = json::parse(std::ifstream(folder + "/comm.json"));
  EXPECT_EQ(comm["comm_hash"], "1234abcd5678ef90");
  EXPECT_EQ(comm["comm_name"], "world");
  EXPECT_EQ(comm["nranks"], 2);
}

TEST_F(NcclProfilerTest, OpsLockstepLacksAndP2pAreReadable) {
  TempDir dir("nccl_profiler");
  {
    TraceDirEnv env(dir.path());
    Rank r0(0, 2);
    r0.run("ReduceScatter", "ncclFloat16", 128, 0, 0);
    r0.run("Reduce", "ncclInt64", 8, 1, 0);
    Rank::stop(r0.p2p("Send", "ncclUint8", 64, 1));
    r0.run("AllGather", "ncclFloat32", 10, 0, 0);
  }
  const auto seq = baseline::read_sequence(dir / kCommFolder, 1);
  ASSERT_TRUE(seq.has_value());
  const auto& calls = (*seq)[0];
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0].op, "reduce_scatter");
  EXPECT_EQ(calls[0].dtype, "f16");
  EXPECT_EQ(calls[1].op, "reduce");
  EXPECT_EQ(calls[1].root, 1);
  EXPECT_EQ(calls[1].dtype, "i64");
  EXPECT_EQ(calls[2].kind, "p2p");
  EXPECT_EQ(calls[2].op, "send");
  EXPECT_EQ(calls[2].seq, 0);  // p2p calls are numbered apart from collectives, as lockstep does
  EXPECT_EQ(calls[2].peer, 1);
  EXPECT_EQ(calls[2].tag, 0);
  EXPECT_EQ(calls[2].dtype, "u8");
  EXPECT_EQ(calls[3].op, "all_gather");
  EXPECT_EQ(calls[3].seq, 2);
  EXPECT_EQ(calls[0].describe(), "#0 reduce_scatter f16[128] on cuda (- step -1 call 0)");

  const auto lines = read_lines(dir / kCommFolder + "/rank0.trace.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["bytes"], 512);  // 128 f16 received per rank, 2 ranks
  EXPECT_EQ(lines[3]["bytes"], 80);   // all_gather: the output, 10 f32 from each of 2 ranks
}

TEST_F(NcclProfilerTest, DtypeMismatchFoundByLockstepChecks) {
  TempDir golden_dir("nccl_profiler"), observed_dir("nccl_profiler");
  two_rank_stream(golden_dir.path());
  two_rank_stream(observed_dir.path(), /*second_dtype=*/"ncclFloat16");
  const auto golden = baseline::read_sequence(golden_dir / kCommFolder, 2);
  const auto observed = baseline::read_sequence(observed_dir / kCommFolder, 2);
  ASSERT_TRUE(golden && observed);

  // Against the golden sequence (baseline check_exact's comparison).
  const auto d = baseline::first_divergence(*golden, *observed);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rank, 1);
  EXPECT_EQ(d->position, 1);
  EXPECT_EQ(d->recorded, "#1 all_reduce f32[1024] on cuda (- step -1 call 1)");
  EXPECT_EQ(d->observed, "#1 all_reduce f16[1024] on cuda (- step -1 call 1)");

  // Across the ranks of one run: rank 0's calls against rank 1's.
  const auto x = baseline::first_divergence({(*observed)[0]}, {(*observed)[1]});
  ASSERT_TRUE(x.has_value());
  EXPECT_EQ(x->position, 1);
  EXPECT_NE(baseline::sequence_hash(*golden), baseline::sequence_hash(*observed));
}

TEST_F(NcclProfilerTest, ChromeTraceAcceptsTheTraces) {
  TempDir dir("nccl_profiler");
  two_rank_stream(dir.path());
  const std::string out = dir / "trace.json";
  report::write_chrome_trace({dir / kCommFolder + "/rank0.trace.jsonl", dir / kCommFolder + "/rank1.trace.jsonl"},
                             out);
  const json trace = json::parse(std::ifstream(out));
  std::vector<std::string> rank1_names;
  int events = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++events;
    EXPECT_EQ(e["args"]["comm_hash"], "1234abcd5678ef90");
    if (e["tid"] == 1) rank1_names.push_back(e["name"]);
  }
  EXPECT_EQ(events, 8);
  EXPECT_EQ(rank1_names,
            (std::vector<std::string>{"all_reduce #0", "all_reduce #1", "all_reduce #2", "broadcast #3"}));
}

TEST_F(NcclProfilerTest, LinesAreWrittenInSeqOrderWhateverTheStopOrder) {
  TempDir dir("nccl_profiler");
  TraceDirEnv env(dir.path());
  Rank r(0, 1);
  void* a = r.coll("AllReduce", "ncclFloat32", 1, 0, 0);
  void* b = r.coll("AllGather", "ncclFloat32", 2, 0, 0);
  void* c = r.coll("Broadcast", "ncclFloat32", 3, 0, 0);
  const std::string path = dir / kCommFolder + "/rank0.trace.jsonl";
  Rank::stop(c);
  Rank::stop(b);
  EXPECT_EQ(read_lines(path).size(), 0u) << "written before #0 completed";
  Rank::stop(a);
  const auto lines = read_lines(path);  // flushed per line: readable while the comm lives
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["op"], "all_reduce");
  EXPECT_EQ(lines[1]["op"], "all_gather");
  EXPECT_EQ(lines[2]["op"], "broadcast");
  EXPECT_EQ(lines[2]["seq"], 2);
}

TEST_F(NcclProfilerTest, EventNeverStoppedIsAFailedCall) {
  TempDir dir("nccl_profiler");
  {
    TraceDirEnv env(dir.path());
    Rank r(0, 1);
    r.run("AllReduce", "ncclFloat32", 4, 0, 0);
    ASSERT_NE(r.coll("AllReduce", "ncclFloat32", 4, 0, 1), nullptr);
  }  // finalized with #1 open
  const auto lines = read_lines(dir / kCommFolder + "/rank0.trace.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_FALSE(lines[0].contains("error"));
  EXPECT_TRUE(lines[1].contains("error"));
  EXPECT_FALSE(baseline::read_sequence(dir / kCommFolder, 1).has_value()) << "a failed call must void the sequence";
}

TEST_F(NcclProfilerTest, OtherEventTypesGetNoHandle) {
  TempDir dir("nccl_profiler");
  TraceDirEnv env(dir.path());
  Rank r(0, 1);
  EXPECT_EQ(r.mask(), static_cast<int>(abi::kColl | abi::kP2p));
  for (std::uint64_t type : {abi::kGroup, abi::kProxyOp, abi::kKernelCh, abi::kCollApi, abi::kGroupApi}) {
    abi::EventDescrV5 d{};
    d.type = type;
    EXPECT_EQ(r.start(&d), nullptr) << "type " << type;
  }
  abi::EventStateArgs args{};
  EXPECT_EQ(plugin().v5->record_event_state(nullptr, /*state=*/14, &args), abi::kSuccess);
  EXPECT_EQ(plugin().v5->stop_event(nullptr), abi::kSuccess);
  r.finalize();
  EXPECT_EQ(read_lines(dir / kCommFolder + "/rank0.trace.jsonl").size(), 0u);
}

TEST_F(NcclProfilerTest, WithoutTraceDirNothingIsActivated) {
  ::unsetenv("LOCKSTEP_NCCL_TRACE_DIR");
  Rank r(0, 1);
  EXPECT_EQ(r.context(), nullptr);
  EXPECT_EQ(r.mask(), 0);
  EXPECT_EQ(r.coll("AllReduce", "ncclFloat32", 4, 0, 0), nullptr);
}

TEST_F(NcclProfilerTest, UnwritableTraceDirFailsInit) {
  TempDir dir("nccl_profiler");
  const std::string file = dir.write("not_a_dir", "x");
  TraceDirEnv env(file);
  void* context = nullptr;
  int mask = 0;
  EXPECT_EQ(plugin().v5->init(&context, kCommHash, &mask, "world", 1, 1, 0, nullptr), abi::kSystemError);
  EXPECT_EQ(context, nullptr);
}

TEST_F(NcclProfilerTest, V4StructTakesHashAfterNameAndOneByteType) {
  TempDir dir("nccl_profiler");
  TraceDirEnv env(dir.path());
  const abi::ProfilerV4& p = *plugin().v4;
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(p.init(&context, &mask, "w4", 0xabcull, /*n_nodes=*/1, /*n_ranks=*/2, /*rank=*/1, nullptr), abi::kSuccess);
  abi::EventDescrV4 d{};
  d.type = static_cast<std::uint8_t>(abi::kColl);
  d.rank = 1;
  d.coll.func = "AllReduce";
  d.coll.datatype = "ncclFloat64";
  d.coll.count = 3;
  void* h = nullptr;
  ASSERT_EQ(p.start_event(context, &h, &d), abi::kSuccess);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(p.stop_event(h), abi::kSuccess);
  EXPECT_EQ(p.finalize(context), abi::kSuccess);
  const auto lines = read_lines(dir / "comm-0000000000000abc/rank1.trace.jsonl");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["dtype"], "f64");
  EXPECT_EQ(lines[0]["count"], 3);
  EXPECT_EQ(lines[0]["bytes"], 24);
}

TEST_F(NcclProfilerTest, ConcurrentStartsAndStopsKeepEveryCallOnce) {
  TempDir dir("nccl_profiler");
  TraceDirEnv env(dir.path());
  constexpr int kPerThread = 500;
  {
    Rank r(0, 1);
    auto issue = [&r] {
      for (int i = 0; i < kPerThread; ++i) Rank::stop(r.coll("AllReduce", "ncclFloat32", 8, 0, 0));
    };
    std::thread t1(issue), t2(issue);
    t1.join();
    t2.join();
  }
  const auto lines = read_lines(dir / kCommFolder + "/rank0.trace.jsonl");
  ASSERT_EQ(lines.size(), 2u * kPerThread);
  for (std::size_t i = 0; i < lines.size(); ++i) ASSERT_EQ(lines[i]["seq"], static_cast<int>(i));
}

}  // namespace
}  // namespace lockstep::nccl_profiler
