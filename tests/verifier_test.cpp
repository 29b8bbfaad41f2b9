// In-process tests of the verifier's cross-rank fingerprint and point-to-point checks on
// synthetic calls. Every expected value is written out by hand (from the split sizes, dtypes and
// call sites the test itself chose), never taken from the code under test.
#include <gtest/gtest.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "harness/comm/board.h"
#include "harness/comm/types.h"
#include "harness/comm/verifier.h"
#include "harness/core/diagnosis.h"
#include "harness/core/error.h"
#include "tests/test_util.h"

namespace lockstep::comm {
namespace {

// ---------------------------------------------------------------------------------------------
// check_fingerprints: one collective slot, world_size records in rank order.

// A call at `phase` step `step`, call index `index`, sequence `seq`. Buffers are never read:
// only their dtype and count enter the fingerprint.
Call make_call(Op op, DType dtype, std::int64_t count, const std::string& phase = "mix",
               std::int64_t step = 2, std::int64_t index = 0, std::int64_t seq = 8) {
  Call c;
  c.op = op;
  c.in = View{nullptr, dtype, count, DeviceType::kCpu, 0};
  c.out = c.in;
  if (op == Op::kAllGather) c.out.count = count * 3;
  c.site = CallSite{phase, step, index};
  c.seq = seq;
  return c;
}

std::vector<std::int64_t> gather(const std::vector<Call>& calls) {
  const int ws = static_cast<int>(calls.size());
  std::vector<std::int64_t> out;
  for (const auto& c : calls) {
    const auto rec = encode_fingerprint(c, ws);
    EXPECT_EQ(rec.size(), fingerprint_words(ws));
    out.insert(out.end(), rec.begin(), rec.end());
  }
  return out;
}

std::optional<Diagnosis> check(const std::vector<Call>& calls) {
  return check_fingerprints(gather(calls), static_cast<int>(calls.size()));
}

TEST(CheckFingerprintsTest, IdenticalCallsAgree) {
  for (int ws : {1, 2, 3, 5}) {
    std::vector<Call> calls(static_cast<std::size_t>(ws), make_call(Op::kAllReduce, DType::kF32, 256));
    EXPECT_FALSE(check(calls).has_value()) << "world_size " << ws;
  }
  std::vector<Call> barriers(3, make_call(Op::kBarrier, DType::kF32, 0, "finalize", -1, 0));
  EXPECT_FALSE(check(barriers).has_value());
  std::vector<Call> bcast(4, make_call(Op::kBroadcast, DType::kI64, 16));
  for (auto& c : bcast) c.root = 3;
  EXPECT_FALSE(check(bcast).has_value());
}

TEST(CheckFingerprintsTest, LongPhaseNamesAreComparedByTheirFirst24Characters) {
  std::vector<Call> calls(2, make_call(Op::kAllReduce, DType::kF32, 4, std::string(40, 'p')));
  EXPECT_FALSE(check(calls).has_value());
}

// One rank of three issues the all_reduce in bf16 while the others use f32.
class DtypeMismatchRankTest : public ::testing::TestWithParam<int> {};

TEST_P(DtypeMismatchRankTest, BlamesTheOddRankAndNamesBothDtypes) {
  const int odd = GetParam();
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 256));
  calls[static_cast<std::size_t>(odd)].in.dtype = DType::kBF16;
  calls[static_cast<std::size_t>(odd)].out.dtype = DType::kBF16;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, odd);
  EXPECT_EQ(d->seq, 8);
  EXPECT_EQ(d->step, 2);  // make_call's call site
  EXPECT_CONTAINS(d->message, "dtype differs");
  EXPECT_CONTAINS(d->message, "bf16[256]");
  EXPECT_CONTAINS(d->message, "f32[256]");
  EXPECT_CONTAINS(d->message, "step 2");
  EXPECT_CONTAINS(d->message, "collective #8");
  EXPECT_CONTAINS(d->message, "rank " + std::to_string(odd) + " all_reduce bf16[256] sum");
}

INSTANTIATE_TEST_SUITE_P(EachRank, DtypeMismatchRankTest, ::testing::Values(0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "rank" + std::to_string(info.param);
                         });

TEST(CheckFingerprintsTest, MessageMatchesTheDocumentedExample) {
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 256, "mix", 2, 0, 8));
  calls[1].in.dtype = DType::kBF16;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->message,
            "collective #8 (mix step 2 call 0): ranks 0,2 all_reduce f32[256] sum, rank 1 "
            "all_reduce bf16[256] sum: dtype differs");
}

TEST(CheckFingerprintsTest, TwoRanksBlameTheGroupWithoutRankZero) {
  std::vector<Call> calls(2, make_call(Op::kAllReduce, DType::kF32, 64));
  calls[1].in.dtype = DType::kF64;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "f64");
  EXPECT_CONTAINS(d->message, "f32");
}

TEST(CheckFingerprintsTest, CountDiffers) {
  std::vector<Call> calls(3, make_call(Op::kAllGather, DType::kF32, 256));
  calls[2].in.count = 255;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 2);
  EXPECT_CONTAINS(d->message, "count differs");
  EXPECT_CONTAINS(d->message, "f32[255]");
  EXPECT_CONTAINS(d->message, "f32[256]");
}

TEST(CheckFingerprintsTest, RootDiffers) {
  std::vector<Call> calls(3, make_call(Op::kBroadcast, DType::kF32, 32));
  for (auto& c : calls) c.root = 1;
  calls[0].root = 2;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 0);
  EXPECT_CONTAINS(d->message, "root differs");
  EXPECT_CONTAINS(d->message, "root=2");
  EXPECT_CONTAINS(d->message, "root=1");
}

TEST(CheckFingerprintsTest, ReduceOpDiffers) {
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kI32, 8));
  calls[1].reduce = ReduceOp::kMax;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "reduce op differs");
  EXPECT_CONTAINS(d->message, "max");
  EXPECT_CONTAINS(d->message, "sum");
}

TEST(CheckFingerprintsTest, OpDiffersAtTheSameCallSite) {
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 8));
  calls[2] = make_call(Op::kBroadcast, DType::kF32, 8);
  calls[2].root = 0;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 2);
  EXPECT_CONTAINS(d->message, "op");
  EXPECT_CONTAINS(d->message, "broadcast");
}

TEST(CheckFingerprintsTest, SeveralFieldsDifferAreAllNamed) {
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 8));
  calls[1].in.dtype = DType::kF16;
  calls[1].in.count = 7;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "dtype, count differ");
}

TEST(CheckFingerprintsTest, BarrierIgnoresTheBufferItWasNotGiven) {
  std::vector<Call> calls(2, make_call(Op::kBarrier, DType::kF32, 0));
  calls[1].in.dtype = DType::kI64;  // a barrier carries no data
  calls[1].in.count = 5;
  EXPECT_FALSE(check(calls).has_value());
}

// Two ranks at different call sites of the same phase and step: the one at index + 1 skipped
// a collective (or the other added one); with two ranks the one further along is blamed.
class CallSiteAheadTest : public ::testing::TestWithParam<int> {};

TEST_P(CallSiteAheadTest, TwoRanksBlameTheOneAhead) {
  const int ahead = GetParam();
  std::vector<Call> calls = {make_call(Op::kAllGather, DType::kF32, 64, "mix", 2, 1),
                             make_call(Op::kAllGather, DType::kF32, 64, "mix", 2, 1)};
  calls[static_cast<std::size_t>(ahead)] = make_call(Op::kBroadcast, DType::kF32, 64, "mix", 2, 2);
  calls[static_cast<std::size_t>(ahead)].root = 0;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, ahead);
  EXPECT_EQ(d->seq, 8);
  EXPECT_CONTAINS(d->message, "mix step 2 call 1");
  EXPECT_CONTAINS(d->message, "mix step 2 call 2");
  EXPECT_CONTAINS(d->message, "rank " + std::to_string(ahead) + " skipped or added a collective");
}

INSTANTIATE_TEST_SUITE_P(EachRank, CallSiteAheadTest, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "rank" + std::to_string(info.param) + "_ahead";
                         });

TEST(CheckFingerprintsTest, CallSiteAheadByAStepIsBlamed) {
  // Rank 0 skipped the last call of step 2 and is already at step 3's first.
  std::vector<Call> calls = {make_call(Op::kAllReduce, DType::kF32, 64, "mix", 3, 0),
                             make_call(Op::kBarrier, DType::kF32, 0, "mix", 2, 5)};
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->step, 2);  // the step of the call rank 0 skipped: rank 1's
}

TEST(CheckFingerprintsTest, CallSiteMinorityIsBlamedAmongThree) {
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 64, "mix", 1, 0));
  calls[1] = make_call(Op::kAllReduce, DType::kF32, 64, "mix", 1, 1);
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "ranks 0,2 issued it from mix step 1 call 0");
  EXPECT_CONTAINS(d->message, "rank 1 issued it from mix step 1 call 1");
}

TEST(CheckFingerprintsTest, CallSiteDiffersBeforeArgumentsAreCompared) {
  // Different sites and different dtypes: the site decides (missing, not mismatch).
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 64, "mix", 1, 0));
  calls[2] = make_call(Op::kAllReduce, DType::kBF16, 64, "mix", 1, 1);
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 2);
}

// A rank already in its final barrier while the others still issue workload collectives.
class FinalizeRankTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(FinalizeRankTest, BlamesTheRankThatReachedTheEnd) {
  const auto [ws, done] = GetParam();
  std::vector<Call> calls(static_cast<std::size_t>(ws), make_call(Op::kAllReduce, DType::kF32, 64, "mix", 3, 0));
  calls[static_cast<std::size_t>(done)] = make_call(Op::kBarrier, DType::kF32, 0, "finalize", -1, 0);
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, done);
  EXPECT_CONTAINS(d->message, "rank " + std::to_string(done) + " reached the end of the workload");
  EXPECT_EQ(d->step, 3);  // the others' call site, not finalize's -1
  EXPECT_CONTAINS(d->message, "finalize call 0");
}

INSTANTIATE_TEST_SUITE_P(WorldSizeAndRank, FinalizeRankTest,
                         ::testing::Values(std::pair{2, 0}, std::pair{2, 1}, std::pair{3, 0},
                                           std::pair{3, 2}),
                         [](const ::testing::TestParamInfo<std::pair<int, int>>& info) {
                           return "ws" + std::to_string(info.param.first) + "_rank" +
                                  std::to_string(info.param.second);
                         });

TEST(CheckFingerprintsTest, RankStillIssuingAfterTheOthersFinishedIsBlamed) {
  std::vector<Call> calls(3, make_call(Op::kBarrier, DType::kF32, 0, "finalize", -1, 0));
  calls[1] = make_call(Op::kAllReduce, DType::kF32, 64, "mix", 4, 0);
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "rank 1 issued a collective after the others reached the end");
}

// all_to_all with split sizes split(from, to) = (from + to) % 3 + 1 on every rank.
std::int64_t split(int from, int to) { return (from + to) % 3 + 1; }

std::vector<Call> consistent_all_to_all(int ws) {
  std::vector<Call> calls;
  for (int r = 0; r < ws; ++r) {
    Call c = make_call(Op::kAllToAll, DType::kF32, 0);
    for (int j = 0; j < ws; ++j) {
      c.send_counts.push_back(split(r, j));
      c.recv_counts.push_back(split(j, r));
    }
    calls.push_back(c);
  }
  return calls;
}

TEST(CheckFingerprintsTest, AllToAllConsistentSplitsAgree) {
  for (int ws : {2, 3, 4}) EXPECT_FALSE(check(consistent_all_to_all(ws)).has_value()) << ws;
}

TEST(CheckFingerprintsTest, AllToAllSendDisagreesWithPeerRecv) {
  auto calls = consistent_all_to_all(3);
  calls[0].send_counts[2] = 7;  // rank 2 still expects split(0, 2) = 3 from rank 0
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 0);
  EXPECT_CONTAINS(d->message, "rank 0 sends 7 elements to rank 2, which expects 3 from rank 0");
}

TEST(CheckFingerprintsTest, AllToAllRecvDisagreesWithPeerSend) {
  auto calls = consistent_all_to_all(3);
  calls[1].recv_counts[2] = 9;  // rank 2 sends split(2, 1) = 1 to rank 1
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  // One pair, (2, 1): both ranks are party to it, and the lowest is blamed.
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "rank 2 sends 1 elements to rank 1, which expects 9 from rank 2");
  EXPECT_CONTAINS(d->message, "ranks 1,2 are party to every disagreeing pair; blaming the lowest");
}

// Rank 1 of 3 uses wrong output splits: it expects [3, 3, 0] from ranks 0, 1, 2 where they send
// split(j, 1) = [2, 3, 1]. The disagreeing pairs are (0 -> 1) and (2 -> 1); rank 1 is party to
// both, so it is blamed, not rank 0, the sender of the first pair.
TEST(CheckFingerprintsTest, AllToAllBlamesTheRankPartyToEveryDisagreeingPair) {
  auto calls = consistent_all_to_all(3);
  ASSERT_EQ(calls[1].recv_counts, (std::vector<std::int64_t>{2, 3, 1}));
  calls[1].recv_counts = {3, 3, 0};
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 1);
  EXPECT_EQ(d->seq, 8);
  EXPECT_EQ(d->step, 2);
  EXPECT_EQ(d->message,
            "collective #8 (mix step 2 call 0): all_to_all split sizes disagree: rank 0 sends 2 elements to "
            "rank 1, which expects 3 from rank 0; rank 2 sends 1 elements to rank 1, which expects 0 from "
            "rank 2: rank 1 is party to every disagreeing pair");
}

// The same with wrong input splits: rank 1 sends [1, 3, 2] where ranks 0 and 2 expect
// split(1, j) = 2 and 1; its own slot (3) still agrees. Pairs (1 -> 0) and (1 -> 2): rank 1.
TEST(CheckFingerprintsTest, AllToAllWrongInputSplitsBlameTheSender) {
  auto calls = consistent_all_to_all(3);
  calls[1].send_counts = {1, 3, 2};
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "rank 1 sends 1 elements to rank 0, which expects 2 from rank 1");
  EXPECT_CONTAINS(d->message, "rank 1 sends 2 elements to rank 2, which expects 1 from rank 1");
  EXPECT_CONTAINS(d->message, "rank 1 is party to every disagreeing pair");
}

// Two unrelated bad pairs among 4 ranks, (0 -> 1) and (2 -> 3): no rank is party to both;
// each is party to one, and the lowest, rank 0, is blamed.
TEST(CheckFingerprintsTest, AllToAllWithNoRankInEveryPairBlamesTheLowestOfTheMost) {
  auto calls = consistent_all_to_all(4);
  calls[0].send_counts[1] = 9;
  calls[2].send_counts[3] = 9;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rank, 0);
  EXPECT_CONTAINS(d->message, "no rank is party to every disagreeing pair; rank 0 is party to the most (1 of 2)");
}

TEST(CheckFingerprintsTest, AllToAllDtypeStillCompared) {
  auto calls = consistent_all_to_all(3);
  calls[1].in.dtype = DType::kI64;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "dtype differs");
}

// ---------------------------------------------------------------------------------------------
// check_p2p: the sender's record against the receiver's own call.

Call p2p(Op op, int peer, DType dtype, std::int64_t count, int tag, std::int64_t seq = 4) {
  Call c = make_call(op, dtype, count, "mix", 1, 3, seq);
  c.peer = peer;
  c.tag = tag;
  return c;
}

TEST(CheckP2pTest, MatchingSendAndRecvAgree) {
  // rank 0 sends to rank 1; rank 1 receives from rank 0.
  const auto sender = encode_fingerprint(p2p(Op::kSend, 1, DType::kF32, 16, 3), 2);
  EXPECT_FALSE(check_p2p(sender, p2p(Op::kRecv, 0, DType::kF32, 16, 3), 1).has_value());
}

TEST(CheckP2pTest, SendToAnotherRankIsMissingParticipant) {
  // rank 2 of 3 sends to rank 0, but rank 1 waits for it.
  const auto sender = encode_fingerprint(p2p(Op::kSend, 0, DType::kF32, 16, 3), 3);
  const auto d = check_p2p(sender, p2p(Op::kRecv, 2, DType::kF32, 16, 3, 6), 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 2);
  EXPECT_EQ(d->seq, 6);
  EXPECT_EQ(d->step, 1);  // the sender's call site (p2p: mix step 1)
  EXPECT_CONTAINS(d->message, "rank 1 receives from rank 2 but rank 2 issued send to rank 0");
}

TEST(CheckP2pTest, PeerAlsoReceivingIsMissingParticipant) {
  const auto sender = encode_fingerprint(p2p(Op::kRecv, 1, DType::kF32, 16, 3), 2);
  const auto d = check_p2p(sender, p2p(Op::kRecv, 0, DType::kF32, 16, 3), 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 0);
  EXPECT_CONTAINS(d->message, "issued recv");
}

struct P2pMismatchCase {
  const char* label;
  DType dtype;
  std::int64_t count;
  int tag;
  const char* recv_text;  // how the receiver's side is described
};

class CheckP2pMismatchTest : public ::testing::TestWithParam<P2pMismatchCase> {};

TEST_P(CheckP2pMismatchTest, BlamesTheSenderAndNamesBothSides) {
  const auto& c = GetParam();
  const auto sender = encode_fingerprint(p2p(Op::kSend, 1, DType::kF32, 16, 3), 2);
  const auto d = check_p2p(sender, p2p(Op::kRecv, 0, c.dtype, c.count, c.tag), 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->seq, 4);
  EXPECT_CONTAINS(d->message, "rank 0 send f32[16] tag=3");
  EXPECT_CONTAINS(d->message, std::string("rank 1 recv ") + c.recv_text);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, CheckP2pMismatchTest,
    ::testing::Values(P2pMismatchCase{"dtype", DType::kBF16, 16, 3, "bf16[16] tag=3"},
                      P2pMismatchCase{"count", DType::kF32, 15, 3, "f32[15] tag=3"},
                      P2pMismatchCase{"tag", DType::kF32, 16, 4, "f32[16] tag=4"}),
    [](const ::testing::TestParamInfo<P2pMismatchCase>& info) { return std::string(info.param.label); });

// ---------------------------------------------------------------------------------------------
// The engine failure handler: outside a verification an uncaught engine exception aborts the
// process with the exception's message.

// ---------------------------------------------------------------------------------------------
// skipped_collective: rank 0 failed after issuing 3 collectives (#0..#2), at train step 1 call 1.
// Rank 1 issued collective #3 from train step 1 call 0, a call rank 0 went past: rank 0 skipped it.

struct SkipBoard {
  test::TempDir dir{"lockstep_skip"};
  Board board = Board::create(dir / "board.bin", 2, fingerprint_words(2));
  // Rank 1 publishes its record of #3, then counts it as issued (the order a rank uses).
  void rank1_issues_3() {
    board.publish_fingerprint(1, 3, encode_fingerprint(make_call(Op::kAllReduce, DType::kF32, 4, "train", 1, 0, 3), 2));
    board.slot(1).issued.store(4);
  }
  std::optional<Diagnosis> ask(double wait_s) {
    board.slot(1).state.store(static_cast<std::int32_t>(RankState::kRunning));
    return skipped_collective(board, 0, 3, CallSite{"train", 1, 1}, "gloo: connection closed", wait_s);
  }
};

TEST(SkippedCollectiveWaitTest, APeerAlreadyThereIsNamed) {
  SkipBoard b;
  b.board.slot(1).issued.store(3);
  b.rank1_issues_3();
  const auto d = b.ask(5.0);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->seq, 3);
  EXPECT_EQ(d->step, 1);  // rank 1's train step 1
  EXPECT_CONTAINS(d->message, "collective #3: rank 0 did not take part in the all_reduce that rank 1 issued from");
  EXPECT_CONTAINS(d->message, "then failed: gloo: connection closed");
}

// On a loaded machine the peer may reach the call after this rank failed: the answer must not
// depend on that, so a peer still short of #3 is waited for (here 300 ms, within the 5 s).
TEST(SkippedCollectiveWaitTest, APeerThatArrivesLateIsWaitedFor) {
  SkipBoard b;
  b.board.slot(1).issued.store(3);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    b.rank1_issues_3();
  });
  const auto d = b.ask(5.0);
  late.join();
  ASSERT_TRUE(d.has_value()) << "rank 1 published #3 300 ms late and was not waited for";
  EXPECT_EQ(d->rank, 0);
  EXPECT_CONTAINS(d->message, "that rank 1 issued from");
}

// A peer that never gets there is waited for wait_s, no longer, and then nobody is blamed here.
TEST(SkippedCollectiveWaitTest, APeerThatNeverArrivesIsWaitedForAtMostWaitS) {
  SkipBoard b;
  b.board.slot(1).issued.store(3);
  const auto t0 = std::chrono::steady_clock::now();
  const auto d = b.ask(0.4);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(d.has_value()) << d->message;
  EXPECT_GE(s, 0.4);
  EXPECT_LT(s, 30.0);
}

// A peer that is further along but issued #3 from a later call site did not wait for rank 0:
// rank 0 did not skip anything.
TEST(SkippedCollectiveWaitTest, APeerWhoseCallIsNotBehindThisRankIsNoSkip) {
  SkipBoard b;
  b.board.publish_fingerprint(1, 3, encode_fingerprint(make_call(Op::kAllReduce, DType::kF32, 4, "train", 1, 1, 3), 2));
  b.board.slot(1).issued.store(4);
  EXPECT_FALSE(b.ask(5.0).has_value());
}

TEST(EngineFailureHandlerDeathTest, UncaughtExceptionAbortsWithItsMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        install_engine_failure_handler();
        try {
          throw std::runtime_error("gloo says: bytes exceed buffer");
        } catch (...) {
          std::terminate();
        }
      },
      "terminate called after an uncaught exception: gloo says: bytes exceed buffer");
}

}  // namespace
}  // namespace lockstep::comm
