// The trace record (harness/trace/record.h): write -> parse round trips against lines written out
// by hand, the monitor's records (from a Call, and from a flight-recorder entry) against the lines
// scenarios/README.md documents, and lines written before the format had a version ("v"), by the
// monitor, the launcher's flight-recorder merge and the NCCL profiler plugin of that time. Every
// expected line and value below is typed in from the documented format, never taken from the
// writer.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/baseline/sequence.h"
#include "harness/comm/backend.h"
#include "harness/comm/monitor.h"
#include "harness/report/chrome_trace.h"
#include "harness/trace/record.h"
#include "tests/test_util.h"

namespace lockstep::trace {
namespace {

using test::TempDir;

Record all_reduce_record() {
  Record r;
  r.rank = 1;
  r.seq = 7;
  r.kind = "collective";
  r.op = "all_reduce";
  r.dtype = "f32";
  r.count = 256;
  r.device = "cpu";
  r.bytes = 1024;
  r.reduce = "sum";
  r.phase = "train";
  r.step = 3;
  r.index = 2;
  r.t_start_us = 1000;
  r.t_end_us = 1250;
  return r;
}

constexpr const char* kAllReduceLine =
    R"({"v":1,"rank":1,"seq":7,"kind":"collective","op":"all_reduce","dtype":"f32","count":256,"device":"cpu","bytes":1024,"reduce":"sum","phase":"train","step":3,"index":2,"t_start_us":1000,"t_end_us":1250})"
    "\n";

Record all_to_all_record() {
  Record r;
  r.rank = 0;
  r.seq = 4;
  r.kind = "collective";
  r.op = "all_to_all";
  r.dtype = "bf16";
  r.count = 6;
  r.device = "cuda";
  r.bytes = 12;
  r.send_counts = std::vector<std::int64_t>{1, 2, 3};
  r.recv_counts = std::vector<std::int64_t>{3, 2, 1};
  r.wire = "f32 upcast";
  r.phase = "say \"hi\"\n";
  r.step = -1;
  r.index = 0;
  r.t_start_us = 5;
  r.t_end_us = 9;
  r.error = "timeout: rank 1 \\ stuck";
  return r;
}

constexpr const char* kAllToAllLine =
    R"({"v":1,"rank":0,"seq":4,"kind":"collective","op":"all_to_all","dtype":"bf16","count":6,"device":"cuda","bytes":12,"send_counts":[1,2,3],"recv_counts":[3,2,1],"wire":"f32 upcast","phase":"say \"hi\"\n","step":-1,"index":0,"t_start_us":5,"t_end_us":9,"error":"timeout: rank 1 \\ stuck"})"
    "\n";

Record send_record() {
  Record r;
  r.rank = 1;
  r.seq = 0;
  r.kind = "p2p";
  r.op = "send";
  r.dtype = "i64";
  r.count = 3;
  r.device = "cpu";
  r.bytes = 24;
  r.peer = 0;
  r.tag = 5;
  r.phase = "ring";
  r.step = 0;
  r.index = 1;
  r.t_start_us = 10;
  r.t_end_us = 20;
  return r;
}

constexpr const char* kSendLine =
    R"({"v":1,"rank":1,"seq":0,"kind":"p2p","op":"send","dtype":"i64","count":3,"device":"cpu","bytes":24,"peer":0,"tag":5,"phase":"ring","step":0,"index":1,"t_start_us":10,"t_end_us":20})"
    "\n";

Record flight_barrier_record() {
  Record r;
  r.rank = 0;
  r.seq = 2;
  r.kind = "collective";
  r.op = "barrier";
  r.phase = "";
  r.step = -1;
  r.index = 0;
  r.t_start_us = 7;
  r.t_end_us = 8;
  r.error = "in flight when the rank ended";
  r.flight_recorder = true;
  return r;
}

constexpr const char* kFlightBarrierLine =
    R"({"v":1,"rank":0,"seq":2,"kind":"collective","op":"barrier","phase":"","step":-1,"index":0,"t_start_us":7,"t_end_us":8,"error":"in flight when the rank ended","flight_recorder":true})"
    "\n";

Record nccl_broadcast_record() {
  Record r;
  r.rank = 0;
  r.seq = 3;
  r.kind = "collective";
  r.op = "broadcast";
  r.dtype = "bf16";
  r.count = 256;
  r.device = "cuda";
  r.bytes = 512;
  r.root = 1;
  r.phase = "";
  r.step = -1;
  r.index = 3;
  r.t_start_us = 100;
  r.t_end_us = 150;
  r.source = "nccl_profiler";
  r.comm_hash = "1234abcd5678ef90";
  r.nccl_func = "Broadcast";
  r.nccl_dtype = "ncclBfloat16";
  r.nccl_seq = 0;
  r.algo = "RING";
  r.proto = "LL";
  return r;
}

constexpr const char* kNcclBroadcastLine =
    R"({"v":1,"rank":0,"seq":3,"kind":"collective","op":"broadcast","dtype":"bf16","count":256,"device":"cuda","bytes":512,"root":1,"phase":"","step":-1,"index":3,"t_start_us":100,"t_end_us":150,"source":"nccl_profiler","comm_hash":"1234abcd5678ef90","nccl_func":"Broadcast","nccl_dtype":"ncclBfloat16","nccl_seq":0,"algo":"RING","proto":"LL"})"
    "\n";

struct Case {
  const char* name;
  Record (*record)();
  const char* line;
};

class TraceRecordRoundTripTest : public ::testing::TestWithParam<Case> {};

TEST_P(TraceRecordRoundTripTest, WritesTheDocumentedLineAndParsesItBack) {
  const Case& c = GetParam();
  const Record record = c.record();
  EXPECT_EQ(to_line(record), c.line);
  std::string why;
  const auto parsed = parse_line(c.line, &why);
  ASSERT_TRUE(parsed.has_value()) << why;
  EXPECT_EQ(parsed->v, 1);
  EXPECT_EQ(*parsed, record);
  EXPECT_EQ(to_line(*parsed), c.line);
  // Every line is one JSON object that a generic reader takes as it is.
  EXPECT_TRUE(nlohmann::json::parse(c.line).is_object());
}

INSTANTIATE_TEST_SUITE_P(Kinds, TraceRecordRoundTripTest,
                         ::testing::Values(Case{"all_reduce", all_reduce_record, kAllReduceLine},
                                           Case{"all_to_all_escaped_error", all_to_all_record, kAllToAllLine},
                                           Case{"send", send_record, kSendLine},
                                           Case{"flight_barrier", flight_barrier_record, kFlightBarrierLine},
                                           Case{"nccl_broadcast", nccl_broadcast_record, kNcclBroadcastLine}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(TraceRecordTest, AppendLineAppends) {
  std::string out = "x";
  append_line(out, send_record());
  append_line(out, all_reduce_record());
  EXPECT_EQ(out, std::string("x") + kSendLine + kAllReduceLine);
}

TEST(TraceRecordTest, UnknownKeysAreKeptInOrderAndWrittenLast) {
  const auto r = parse_line(R"({"v":1,"rank":0,"future":{"a":[1,2]},"seq":1,"x":"y"})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->rank, 0);
  EXPECT_EQ(r->seq, 1);
  ASSERT_EQ(r->unknown.size(), 2u);
  EXPECT_EQ(r->unknown[0].first, "future");
  EXPECT_EQ(r->unknown[0].second, R"({"a":[1,2]})");
  EXPECT_EQ(r->unknown[1].first, "x");
  EXPECT_EQ(r->unknown[1].second, R"("y")");
  EXPECT_EQ(to_line(*r), "{\"v\":1,\"rank\":0,\"seq\":1,\"future\":{\"a\":[1,2]},\"x\":\"y\"}\n");
}

TEST(TraceRecordTest, ALaterVersionIsRead) {
  const auto r = parse_line(R"({"v":2,"rank":3,"op":"all_reduce","new_key":true})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->v, 2);
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->op, "all_reduce");
}

TEST(TraceRecordTest, RefusesWhatIsNotARecord) {
  const char* bad[] = {
      R"({"rank": 1, "seq": 2, "op": "all_to)",  // a torn last line
      "",
      "[1,2]",
      "42",
      R"({"rank":"one"})",
      R"({"seq":1.5})",
      R"({"send_counts":[1,"2"]})",
      R"({"flight_recorder":1})",
      R"({"v":"1"})",
      R"({"op":null})",
  };
  for (const char* line : bad) {
    std::string why;
    EXPECT_FALSE(parse_line(line, &why).has_value()) << line;
    EXPECT_FALSE(why.empty()) << line;
  }
}

TEST(TraceRecordTest, TrailingNewlineAndCarriageReturnAreIgnored) {
  const auto r = parse_line("{\"rank\":2,\"seq\":9}\r\n");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->rank, 2);
  EXPECT_EQ(r->seq, 9);
}

TEST(TraceRecordTest, AnEmptyRecordIsAnObjectWithTheVersionOnly) {
  EXPECT_EQ(to_line(Record{}), "{\"v\":1}\n");
  Record unversioned;
  unversioned.v = 0;
  EXPECT_EQ(to_line(unversioned), "{}\n");
}

// ---------------------------------------------------------------------------------------------
// Lines written before the format had a version: the same keys, in each writer's own order.

TEST(TraceRecordUnversionedTest, MonitorLineOfBeforeParses) {
  // The monitor's hand-formatted head, then its nlohmann tail in alphabetical order.
  const char* line =
      R"({"rank":0,"seq":4,"kind":"collective","op":"all_to_all","dtype":"bf16","count":6,"device":"cuda","bytes":12,"error":"timeout: rank 1 \\ stuck","phase":"say \"hi\"\n","recv_counts":[3,2,1],"send_counts":[1,2,3],"wire":"f32 upcast","step":-1,"index":0,"t_start_us":5,"t_end_us":9})";
  const auto r = parse_line(line);
  ASSERT_TRUE(r.has_value());
  Record want = all_to_all_record();
  want.v = 0;
  EXPECT_EQ(*r, want);
  // Written again it keeps its version (none) and takes the writer's key order.
  std::string rewritten = kAllToAllLine;
  rewritten.erase(1, std::string(R"("v":1,)").size());
  EXPECT_EQ(to_line(*r), rewritten);
}

TEST(TraceRecordUnversionedTest, FlightRecorderLineOfBeforeParses) {
  // nlohmann::json's default object: keys sorted.
  const char* line =
      R"({"count":256,"dtype":"f32","error":"failed","flight_recorder":true,"index":2,"kind":"collective","op":"all_reduce","phase":"train","rank":1,"reduce":"sum","seq":7,"step":3,"t_end_us":1300,"t_start_us":1000})";
  const auto r = parse_line(line);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->v, 0);
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->seq, 7);
  EXPECT_EQ(r->kind, "collective");
  EXPECT_EQ(r->op, "all_reduce");
  EXPECT_EQ(r->dtype, "f32");
  EXPECT_EQ(r->count, 256);
  EXPECT_FALSE(r->device.has_value());
  EXPECT_FALSE(r->bytes.has_value());
  EXPECT_EQ(r->reduce, "sum");
  EXPECT_EQ(r->phase, "train");
  EXPECT_EQ(r->step, 3);
  EXPECT_EQ(r->index, 2);
  EXPECT_EQ(r->t_start_us, 1000);
  EXPECT_EQ(r->t_end_us, 1300);
  EXPECT_EQ(r->error, "failed");
  EXPECT_EQ(r->flight_recorder, true);
  EXPECT_TRUE(r->unknown.empty());
}

TEST(TraceRecordUnversionedTest, NcclProfilerLineOfBeforeParses) {
  const char* line =
      R"({"rank":0,"seq":3,"kind":"collective","op":"broadcast","dtype":"bf16","count":256,"device":"cuda","bytes":512,"root":1,"phase":"","step":-1,"index":3,"t_start_us":100,"t_end_us":150,"source":"nccl_profiler","comm_hash":"1234abcd5678ef90","nccl_func":"Broadcast","nccl_dtype":"ncclBfloat16","nccl_seq":0,"algo":"RING","proto":"LL"})";
  const auto r = parse_line(line);
  ASSERT_TRUE(r.has_value());
  Record want = nccl_broadcast_record();
  want.v = 0;
  EXPECT_EQ(*r, want);
}

// ---------------------------------------------------------------------------------------------
// The monitor's records.

// A backend whose calls complete at once.
class DoneBackend final : public comm::Backend {
 public:
  explicit DoneBackend(int rank) : rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return 2; }
  std::string name() const override { return "done"; }
  std::unique_ptr<comm::Pending> start(comm::Call&) override { return std::make_unique<comm::Done>(); }

 private:
  int rank_;
};

comm::Call call_of(comm::Op op, comm::DType dtype, std::int64_t count, const std::string& phase, std::int64_t step,
                   std::int64_t index) {
  comm::Call c;
  c.op = op;
  c.in.dtype = dtype;
  c.in.count = count;
  c.out.dtype = dtype;
  c.out.count = count;
  c.site = comm::CallSite{phase, step, index};
  return c;
}

TEST(TraceMonitorTest, RecordOfEachCallKind) {
  comm::Call ar = call_of(comm::Op::kAllReduce, comm::DType::kF32, 256, "train", 3, 2);
  ar.seq = 7;
  EXPECT_EQ(to_line(comm::trace_record(ar, /*rank=*/1, 1000, 1250, nullptr)), kAllReduceLine);

  comm::Call a2a = call_of(comm::Op::kAllToAll, comm::DType::kBF16, 6, "say \"hi\"\n", -1, 0);
  a2a.in.device = comm::DeviceType::kCuda;
  a2a.out.count = 6;
  a2a.send_counts = {1, 2, 3};
  a2a.recv_counts = {3, 2, 1};
  a2a.wire = "f32 upcast";
  a2a.seq = 4;
  const std::string error = "timeout: rank 1 \\ stuck";
  EXPECT_EQ(to_line(comm::trace_record(a2a, /*rank=*/0, 5, 9, &error)), kAllToAllLine);

  comm::Call send = call_of(comm::Op::kSend, comm::DType::kI64, 3, "ring", 0, 1);
  send.peer = 0;
  send.tag = 5;
  send.seq = 0;
  EXPECT_EQ(to_line(comm::trace_record(send, /*rank=*/1, 10, 20, nullptr)), kSendLine);

  // all_gather counts its output (2 ranks x 8 f32 = 64 bytes); broadcast names its root.
  comm::Call ag = call_of(comm::Op::kAllGather, comm::DType::kF32, 8, "mix", 0, 1);
  ag.out.count = 16;
  ag.seq = 1;
  EXPECT_EQ(to_line(comm::trace_record(ag, /*rank=*/0, 1, 2, nullptr)),
            R"({"v":1,"rank":0,"seq":1,"kind":"collective","op":"all_gather","dtype":"f32","count":8,"device":"cpu","bytes":64,"phase":"mix","step":0,"index":1,"t_start_us":1,"t_end_us":2})"
            "\n");
  comm::Call bc = call_of(comm::Op::kBroadcast, comm::DType::kF64, 4, "mix", 0, 2);
  bc.root = 1;
  bc.seq = 2;
  EXPECT_EQ(to_line(comm::trace_record(bc, /*rank=*/0, 3, 4, nullptr)),
            R"({"v":1,"rank":0,"seq":2,"kind":"collective","op":"broadcast","dtype":"f64","count":4,"device":"cpu","bytes":32,"root":1,"phase":"mix","step":0,"index":2,"t_start_us":3,"t_end_us":4})"
            "\n");
  comm::Call barrier = call_of(comm::Op::kBarrier, comm::DType::kF32, 0, "", -1, 0);
  barrier.seq = 3;
  EXPECT_EQ(to_line(comm::trace_record(barrier, /*rank=*/0, 5, 6, nullptr)),
            R"({"v":1,"rank":0,"seq":3,"kind":"collective","op":"barrier","bytes":0,"phase":"","step":-1,"index":0,"t_start_us":5,"t_end_us":6})"
            "\n");
}

TEST(TraceMonitorTest, TraceFileLinesParseToTheCallsRecords) {
  TempDir dir("lockstep_trace_record");
  const std::string path = dir / "rank1.trace.jsonl";
  const std::int64_t before = comm::now_us();
  {
    comm::Monitor monitor(std::make_unique<DoneBackend>(1), /*board=*/nullptr, path);
    comm::Call ar = call_of(comm::Op::kAllReduce, comm::DType::kF32, 256, "train", 3, 2);
    monitor.start(ar)->wait();
    comm::Call send = call_of(comm::Op::kSend, comm::DType::kI64, 3, "ring", 0, 1);
    send.peer = 0;
    send.tag = 5;
    monitor.start(send)->wait();
  }
  const std::int64_t after = comm::now_us();

  Record want_ar = all_reduce_record();
  want_ar.seq = 0;  // the monitor numbers calls from 0, collectives and p2p apart
  const Record want[] = {want_ar, send_record()};
  std::istringstream lines(test::read_file(path));
  std::string line;
  std::size_t n = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(n, 2u) << line;
    std::string why;
    auto r = parse_line(line, &why);
    ASSERT_TRUE(r.has_value()) << why << ": " << line;
    ASSERT_TRUE(r->t_start_us && r->t_end_us) << line;
    EXPECT_LE(before, *r->t_start_us);
    EXPECT_LE(*r->t_start_us, *r->t_end_us);
    EXPECT_LE(*r->t_end_us, after);
    Record expected = want[n];
    expected.t_start_us = r->t_start_us;
    expected.t_end_us = r->t_end_us;
    EXPECT_EQ(*r, expected) << line;
    EXPECT_EQ(line + "\n", to_line(expected));
    ++n;
  }
  EXPECT_EQ(n, 2u);
}

TEST(TraceMonitorTest, RecordOfAFlightRecorderEntry) {
  comm::FlightView f;
  f.seq = 7;
  f.op = comm::Op::kAllReduce;
  f.dtype = comm::DType::kF32;
  f.reduce = comm::ReduceOp::kSum;
  f.count = 256;
  f.phase = "train";
  f.step = 3;
  f.index = 2;
  f.t_start_us = 1000;
  f.t_end_us = 1300;
  f.state = comm::FlightState::kFailed;
  EXPECT_EQ(to_line(comm::trace_record(/*rank=*/1, f)),
            R"({"v":1,"rank":1,"seq":7,"kind":"collective","op":"all_reduce","dtype":"f32","count":256,"reduce":"sum","phase":"train","step":3,"index":2,"t_start_us":1000,"t_end_us":1300,"error":"failed","flight_recorder":true})"
            "\n");
  f.state = comm::FlightState::kCompleted;
  EXPECT_FALSE(comm::trace_record(1, f).error.has_value());

  comm::FlightView b;
  b.seq = 2;
  b.op = comm::Op::kBarrier;
  b.step = -1;
  b.t_start_us = 7;
  b.state = comm::FlightState::kIssued;
  const std::int64_t before = comm::now_us();
  Record r = comm::trace_record(/*rank=*/0, b);
  const std::int64_t after = comm::now_us();
  ASSERT_TRUE(r.t_end_us.has_value());
  EXPECT_LE(before, *r.t_end_us);  // still in flight: it ends now
  EXPECT_LE(*r.t_end_us, after);
  r.t_end_us = 8;
  EXPECT_EQ(to_line(r), kFlightBarrierLine);
}

// ---------------------------------------------------------------------------------------------
// The readers take a versioned line and the same call's unversioned line alike.

// A program's call on one of its own groups is another call than the same call on the default
// group: a baseline sequence keeps the group, and a run that moved the call to another group
// diverges from the recorded one, naming both.
TEST(TraceReadersTest, ABaselineSequenceKeepsTheGroupOfACall) {
  TempDir dir("lockstep_trace_record");
  std::string on_pair = kAllReduceLine;
  on_pair.insert(on_pair.find(R"("phase")"), R"("group":[2,3],)");
  dir.write("pair/rank0.trace.jsonl", on_pair);
  dir.write("world/rank0.trace.jsonl", kAllReduceLine);
  const auto pair = baseline::read_sequence(dir / "pair", 1);
  const auto world = baseline::read_sequence(dir / "world", 1);
  ASSERT_TRUE(pair && world);
  EXPECT_EQ((*pair)[0][0].group, "[2,3]");
  EXPECT_EQ((*pair)[0][0].describe(), "#7 all_reduce f32[256] sum on group [2,3] (train step 3 call 2)");
  const auto d = baseline::first_divergence(*pair, *world);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->recorded, "#7 all_reduce f32[256] sum on group [2,3] (train step 3 call 2)");
  EXPECT_EQ(d->observed, "#7 all_reduce f32[256] sum (train step 3 call 2)");
  EXPECT_NE(baseline::sequence_hash(*pair), baseline::sequence_hash(*world));
}

TEST(TraceReadersTest, VersionedAndUnversionedLinesReadAlike) {
  TempDir dir("lockstep_trace_record");
  std::string unversioned = kAllReduceLine;
  unversioned.erase(1, std::string(R"("v":1,)").size());
  ASSERT_EQ(unversioned.substr(0, 9), R"({"rank":1)");
  dir.write("v1/rank0.trace.jsonl", kAllReduceLine);
  dir.write("v0/rank0.trace.jsonl", unversioned);

  const auto v1 = baseline::read_sequence(dir / "v1", 1);
  const auto v0 = baseline::read_sequence(dir / "v0", 1);
  ASSERT_TRUE(v1 && v0);
  ASSERT_EQ((*v1)[0].size(), 1u);
  EXPECT_EQ((*v1)[0][0].describe(), "#7 all_reduce f32[256] sum (train step 3 call 2)");
  EXPECT_FALSE(baseline::first_divergence(*v1, *v0).has_value());
  EXPECT_EQ(baseline::sequence_hash(*v1), baseline::sequence_hash(*v0));

  report::write_chrome_trace({dir / "v1/rank0.trace.jsonl"}, dir / "v1.json");
  report::write_chrome_trace({dir / "v0/rank0.trace.jsonl"}, dir / "v0.json");
  EXPECT_EQ(test::read_file(dir / "v1.json"), test::read_file(dir / "v0.json"));
  const auto t = nlohmann::json::parse(test::read_file(dir / "v1.json"));
  const auto& e = t["traceEvents"].back();
  EXPECT_EQ(e["name"], "all_reduce #7");
  EXPECT_EQ(e["ts"], 1000);
  EXPECT_EQ(e["dur"], 250);
  EXPECT_FALSE(e["args"].contains("v"));
  EXPECT_EQ(e["args"]["reduce"], "sum");
}

TEST(TraceReadersTest, SequenceNamesTheLineThatIsNotARecord) {
  TempDir dir("lockstep_trace_record");
  dir.write("rank0.trace.jsonl", std::string(kAllReduceLine) + R"({"rank":0,"seq":"eight"})" + "\n");
  try {
    baseline::read_sequence(dir.path(), 1);
    FAIL() << "expected an InputError";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("rank0.trace.jsonl:2: not a trace record"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lockstep::trace
