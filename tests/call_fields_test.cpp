// The call-field table (harness/trace/call_fields.h) drives every place a call's fields go: each
// test walks every row of the table, so a row added to it is covered here without a new test.
// Values are chosen by the test (a row's `none` plus one or two), and what is expected is written
// from the row's name and label, never read back from the code under test.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "harness/baseline/sequence.h"
#include "harness/baseline/store.h"
#include "harness/comm/monitor.h"
#include "harness/comm/types.h"
#include "harness/comm/verifier.h"
#include "harness/core/diagnosis.h"
#include "harness/trace/record.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using comm::Call;
using comm::CallField;
using comm::CallFieldKind;
using comm::Op;

constexpr Op kAllOps[] = {Op::kAllReduce, Op::kAllGather, Op::kAllToAll, Op::kBroadcast, Op::kBarrier, Op::kSend,
                          Op::kRecv,      Op::kReduceScatter, Op::kReduce, Op::kGather, Op::kScatter};

Call make_call(Op op, int world_size) {
  Call c;
  c.op = op;
  c.in = comm::View{nullptr, comm::DType::kF32, 4, comm::DeviceType::kCpu, 0};
  c.out = c.in;
  if (op == Op::kAllToAll) {
    c.send_counts.assign(static_cast<std::size_t>(world_size), 1);
    c.recv_counts.assign(static_cast<std::size_t>(world_size), 1);
  }
  c.site = comm::CallSite{"train", 2, 0};
  c.seq = 5;
  // Every row a valid value (a rank of a 3-rank group where the row is one).
  for (const CallField& f : comm::call_fields()) c.*f.member = f.none + 1;
  return c;
}

// The rows each op carries, and the table's own consistency.
TEST(CallFieldTableTest, RowsAreNamedOnceAndCarriedByTheirOps) {
  ASSERT_EQ(comm::call_fields().size(), static_cast<std::size_t>(trace::kCallFieldCount));
  ASSERT_GE(trace::kCallFieldCount, trace::kCallFieldsBeforeTable);
  for (std::size_t i = 0; i < comm::call_fields().size(); ++i) {
    const CallField& f = comm::call_fields()[i];
    EXPECT_EQ(f.name, trace::kCallFieldKeys[i]);
    EXPECT_EQ(std::string(f.name), baseline::kCallRecordFields[i].name);
    EXPECT_EQ(f.none, baseline::kCallRecordFields[i].none) << f.name;
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(f.name, comm::call_fields()[j].name);
    // A copy of a row is the same row (it knows its place in the table).
    const CallField copy = f;
    EXPECT_EQ(copy.index, static_cast<int>(i));
    for (Op op : kAllOps) EXPECT_EQ(copy.shown(op, f.none + 1), f.shown(op, f.none + 1)) << f.name;
    // An op that does not carry the row reads `none`, whatever the call holds.
    for (Op op : kAllOps) {
      Call c = make_call(op, 3);
      EXPECT_EQ(f.of(c), f.carried_by(op) ? f.none + 1 : f.none) << f.name << " on " << comm::to_string(op);
    }
  }
  // The rows the table started with, by hand: a rooted op's root, send/recv's peer and tag.
  const auto& rows = comm::call_fields();
  EXPECT_EQ(rows[0].name, "root");
  EXPECT_TRUE(rows[0].carried_by(Op::kBroadcast));
  EXPECT_FALSE(rows[0].carried_by(Op::kSend));
  EXPECT_EQ(rows[1].name, "peer");
  EXPECT_EQ(rows[1].kind, CallFieldKind::kPeer);
  EXPECT_TRUE(rows[1].carried_by(Op::kRecv));
  EXPECT_FALSE(rows[1].carried_by(Op::kAllReduce));
  EXPECT_EQ(rows[2].name, "tag");
}

// A rank that differs in one row: the verifier says so, naming the row.
TEST(CallFieldTableTest, EveryRowIsComparedByTheVerifier) {
  constexpr int ws = 3;
  int checked = 0;
  for (const CallField& f : comm::call_fields()) {
    for (Op op : kAllOps) {
      if (!f.carried_by(op)) continue;
      ++checked;
      if (comm::is_p2p(op)) {
        if (op != Op::kRecv) continue;
        // Rank 0 sends to rank 1 (peer 1); rank 1 receives from rank 0 (peer 0).
        Call send = make_call(Op::kSend, 2), recv = make_call(Op::kRecv, 2);
        send.peer = 1;
        recv.peer = 0;
        ASSERT_FALSE(comm::check_p2p(comm::encode_fingerprint(send, 2), recv, 1).has_value()) << f.name;
        if (f.kind == CallFieldKind::kPeer) {
          send.*f.member = 0;  // rank 0 sends to itself
          const auto d = comm::check_p2p(comm::encode_fingerprint(send, 2), recv, 1);
          ASSERT_TRUE(d.has_value()) << f.name;
          EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant) << f.name;
        } else {
          send.*f.member = f.none + 2;
          const auto d = comm::check_p2p(comm::encode_fingerprint(send, 2), recv, 1);
          ASSERT_TRUE(d.has_value()) << f.name;
          EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch) << f.name;
          EXPECT_CONTAINS(d->message, "send f32[4] ");
          EXPECT_CONTAINS(d->message, std::string(f.name) + "=" + std::to_string(f.none + 2));
          EXPECT_CONTAINS(d->message, std::string(f.name) + "=" + std::to_string(f.none + 1));
        }
        continue;
      }
      std::vector<Call> calls(ws, make_call(op, ws));
      calls[2].*f.member = f.none + 2;
      std::vector<std::int64_t> gathered;
      for (const Call& c : calls) {
        const auto rec = comm::encode_fingerprint(c, ws);
        gathered.insert(gathered.end(), rec.begin(), rec.end());
      }
      const auto d = comm::check_fingerprints(gathered, ws);
      ASSERT_TRUE(d.has_value()) << f.name << " on " << comm::to_string(op);
      EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
      EXPECT_EQ(d->rank, 2);
      EXPECT_CONTAINS(d->message, std::string(f.label) + " differs");
    }
  }
  EXPECT_GT(checked, 0);
}

// Every row is a key of the trace line for the ops that carry it, and parses back.
TEST(CallFieldTableTest, EveryRowIsATraceKeyThatRoundTrips) {
  for (std::size_t i = 0; i < comm::call_fields().size(); ++i) {
    const CallField& f = comm::call_fields()[i];
    for (Op op : kAllOps) {
      Call c = make_call(op, 3);
      c.*f.member = f.none + 2;
      const std::string line = trace::to_line(comm::trace_record(c, 0, 1, 2, nullptr));
      const std::string key = "\"" + std::string(f.name) + "\":";
      if (!f.carried_by(op)) {
        EXPECT_EQ(line.find(key), std::string::npos) << line;
        continue;
      }
      EXPECT_CONTAINS(line, key + std::to_string(f.none + 2));
      const auto rec = trace::parse_line(line);
      ASSERT_TRUE(rec.has_value()) << line;
      EXPECT_EQ((*rec).*trace::kCallFieldMembers[i], f.none + 2) << line;
      EXPECT_TRUE(rec->unknown.empty()) << line;
    }
  }
}

void write_traces(const std::string& dir, const std::vector<Call>& per_rank) {
  std::filesystem::create_directories(dir);
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    std::ofstream(dir + "/rank" + std::to_string(r) + ".trace.jsonl")
        << trace::to_line(comm::trace_record(per_rank[r], static_cast<int>(r), 1, 2, nullptr));
  }
}

// A golden sequence keeps every row: a changed row is a divergence named by the row, the hash
// changes, and the store and its JSON export keep the value.
TEST(CallFieldTableTest, EveryRowIsPartOfTheGoldenSequenceAndTheStore) {
  test::TempDir dir("lockstep_call_fields");
  int n = 0;
  for (const CallField& f : comm::call_fields()) {
    Op op = Op::kBarrier;
    for (Op o : kAllOps) {
      if (f.carried_by(o)) {
        op = o;
        break;
      }
    }
    ASSERT_TRUE(f.carried_by(op)) << f.name << " is carried by no op";
    const std::string a = dir.path() + "/a" + std::to_string(n), b = dir.path() + "/b" + std::to_string(n);
    ++n;
    Call base = make_call(op, 2), changed = base;
    changed.*f.member = f.none + 2;
    write_traces(a, {base, base});
    write_traces(b, {base, changed});
    const auto recorded = baseline::read_sequence(a, 2);
    const auto observed = baseline::read_sequence(b, 2);
    ASSERT_TRUE(recorded && observed);
    EXPECT_NE(baseline::sequence_hash(*recorded), baseline::sequence_hash(*observed)) << f.name;
    const auto d = baseline::first_divergence(*recorded, *observed);
    ASSERT_TRUE(d.has_value()) << f.name;
    EXPECT_EQ(d->rank, 1);
    EXPECT_CONTAINS(d->observed, " " + std::string(f.name) + " " + std::to_string(f.none + 2));
    EXPECT_CONTAINS(d->recorded, " " + std::string(f.name) + " " + std::to_string(f.none + 1));

    // Through the store (an import, a read, an export) and back.
    const std::string hash = baseline::sequence_hash(*observed);
    std::string calls;
    for (const auto& rank : *observed) {
      calls += std::string(calls.empty() ? "" : ",") + "[";
      for (const auto& c : rank) {
        calls += "{\"seq\": " + std::to_string(c.seq) + ", \"kind\": \"" + c.kind + "\", \"op\": \"" + c.op +
                 "\", \"dtype\": \"f32\", \"count\": 4, \"device\": \"cpu\", \"phase\": \"train\", \"step\": 2, \"index\": 0";
        for (const auto& g : baseline::kCallRecordFields) {
          if (c.*g.member != g.none) calls += ", \"" + std::string(g.name) + "\": " + std::to_string(c.*g.member);
        }
        if (!c.send_counts.empty()) calls += ", \"send_counts\": \"" + c.send_counts + "\", \"recv_counts\": \"" + c.recv_counts + "\"";
        if (!c.reduce.empty()) calls += ", \"reduce\": \"" + c.reduce + "\"";
        calls += "}";
      }
      calls += "]";
    }
    const std::string text =
        R"({"format": "lockstep-baseline", "schema_version": 5,
"environments": [{"name": "e", "torch": "1", "torch_line": "t", "cuda": "none", "nccl": "none", "compiler": "c",
                  "cpu": "c", "gpu": "none", "driver": "none", "lockstep_rev": "r"}],
"sequences": [{"hash": ")" + hash + R"(", "ranks": [)" + calls + R"(]}],
"runs": [{"uid": "u1", "environment": "e", "started_at": "2026-01-01T00:00:00Z", "kind": "record", "repeat": 0,
          "lockstep_rev": "r", "host": "h", "results": [{"scenario": "x", "name": "x", "file": "x.toml", "variant": "",
          "status": "pass", "expected": "pass", "diagnosis": "", "digest": "d", "duration_s": 1, "world_size": 2,
          "sequence": ")" + hash + R"(", "metrics": {}}]}]})";
    const std::string db = dir.path() + "/s" + std::to_string(n) + ".db";
    {
      baseline::Store store(db, baseline::Access::kCreate);
      ASSERT_EQ(store.import_text(text, "t.json"), 1);
    }
    baseline::Store store(db, baseline::Access::kRead);
    const baseline::Sequence back = store.sequence(hash);
    ASSERT_EQ(back.size(), 2u);
    ASSERT_EQ(back[1].size(), 1u);
    EXPECT_EQ(back[1][0].*baseline::kCallRecordFields[static_cast<std::size_t>(&f - comm::call_fields().data())].member,
              f.none + 2)
        << f.name;
    EXPECT_FALSE(baseline::first_divergence(*observed, back).has_value()) << f.name;
    EXPECT_CONTAINS(store.export_text(), "\"" + std::string(f.name) + "\":" + std::to_string(f.none + 2));
  }
}

}  // namespace
}  // namespace lockstep
