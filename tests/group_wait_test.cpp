// Calls on a program's other process groups, on the board: they count as progress, a rank that
// made only such calls has started, and two ranks waiting for each other from one call site in
// calls on different groups is the crossed wait that group_wait.h names (the call issued on the
// wrong group), with the blame rule it documents. The board is written here as the Monitor writes
// it: the default group's counters for a default-group call, the group_* fields for another's.
#include <gtest/gtest.h>

#include "harness/comm/board.h"
#include "harness/comm/monitor.h"
#include "harness/launch/group_wait.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

// Rank r waits in a default-group all_reduce (collective #0) from `site`.
void in_default_call(comm::Board& b, int r, const std::string& site) {
  auto& s = b.slot(r);
  s.op.store(static_cast<int>(comm::Op::kAllReduce));
  comm::Board::store_phase(s.phase, site);
  s.issued.store(1);
}

// Rank r waits in an all_reduce on the group of `ranks` from `site`.
void in_group_call(comm::Board& b, int r, std::uint64_t mask, const std::string& site) {
  auto& s = b.slot(r);
  s.group_op.store(static_cast<int>(comm::Op::kAllReduce));
  s.group_mask.store(mask);
  s.group_step.store(-1);
  comm::Board::store_phase(s.group_phase, site);
  s.group_issued.store(1);
}

TEST(GroupWaitTest, GroupCallsAreProgressAndStartARank) {
  test::TempDir dir("lockstep_group_wait");
  comm::Board b = comm::Board::create(dir.path() + "/board.bin", 2, 8);
  const auto before = b.progress();
  EXPECT_FALSE(b.view(0).started());
  in_group_call(b, 0, 0b11, "train.py:5");
  EXPECT_GT(b.progress(), before);
  EXPECT_TRUE(b.view(0).started());
  EXPECT_TRUE(b.view(0).in_group_call());
  EXPECT_FALSE(b.view(0).in_collective());
  EXPECT_EQ(launch::wait_text(b.view(0)), "waiting in all_reduce on the group of ranks 0,1 (train.py:5)");
  b.slot(0).group_completed.store(1);
  EXPECT_FALSE(b.view(0).in_group_call());
}

// Rank 1 all-reduces on the default group where its pair (0,1) uses the pair's group; ranks 2 and 3
// wait in their own group's call, which rank 1 is in but from another site: only the pair at one
// site is the crossed wait. Rank 1's call has 1 of 4 of its group's ranks, rank 0's 1 of 2.
TEST(GroupWaitTest, TwoRanksWaitingOnEachOtherOnDifferentGroupsAreNamed) {
  test::TempDir dir("lockstep_group_wait");
  comm::Board b = comm::Board::create(dir.path() + "/board.bin", 4, 8);
  in_group_call(b, 0, 0b0011, "groups.py:37");
  in_default_call(b, 1, "groups.py:37");
  in_group_call(b, 2, 0b1110, "groups.py:52");
  in_group_call(b, 3, 0b1110, "groups.py:52");
  const auto d = launch::crossed_groups(b, 0, 4);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 1);
  EXPECT_EQ(d->seq, 0);
  EXPECT_NE(d->message.find("on the group of ranks 0,1"), std::string::npos) << d->message;
  EXPECT_NE(d->message.find("on the default group"), std::string::npos) << d->message;
  EXPECT_NE(d->message.find("1 of 4, against 1 of 2"), std::string::npos) << d->message;
}

// Ranks that each wait on their own disjoint pair from one site (the everyday subgroup idiom), or
// on groups that do not hold each other, wait for someone else: no crossed wait. Two sites are a
// crossed wait only when asked for (at timeout_s): a rank that skipped a call went on to another
// group's, missing_participant blaming it.
TEST(GroupWaitTest, DisjointOrOneSidedGroupsAreNotACrossedWait) {
  test::TempDir dir("lockstep_group_wait");
  comm::Board b = comm::Board::create(dir.path() + "/board.bin", 4, 8);
  in_group_call(b, 0, 0b0011, "train.py:9");
  in_group_call(b, 2, 0b1100, "train.py:9");
  EXPECT_FALSE(launch::crossed_groups(b, 0, 4).has_value());
  in_group_call(b, 1, 0b0110, "train.py:9");  // holds rank 2, but rank 2's group does not hold rank 1
  EXPECT_FALSE(launch::crossed_groups(b, 0, 4).has_value());
  in_group_call(b, 3, 0b1010, "train.py:9");  // holds rank 1 and rank 1's group (1,2) does not hold 3
  EXPECT_FALSE(launch::crossed_groups(b, 0, 4).has_value());

  comm::Board c = comm::Board::create(dir.path() + "/board2.bin", 4, 8);
  for (int r : {0, 2, 3}) in_default_call(c, r, "train.py:70");
  in_group_call(c, 1, 0b1010, "train.py:46");
  EXPECT_FALSE(launch::crossed_groups(c, 0, 4).has_value());
  const auto d = launch::crossed_groups(c, 0, 4, /*same_site=*/false);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 1);  // its call has 1 of 2 of its group's ranks, the others' 3 of 4
  EXPECT_NE(d->message.find("rank 1 skipped or added a call"), std::string::npos) << d->message;
}

// Equal shares (rank 0 on ranks 0,1,2 and rank 1 on ranks 0,1,3, each call joined by 1 of 3): the
// lower rank is blamed, and the message says why.
TEST(GroupWaitTest, EqualSharesBlameTheLowerRank) {
  test::TempDir dir("lockstep_group_wait");
  comm::Board b = comm::Board::create(dir.path() + "/board.bin", 4, 8);
  in_group_call(b, 1, 0b1011, "x.py:3");
  in_group_call(b, 0, 0b0111, "x.py:3");
  const auto d = launch::crossed_groups(b, 0, 4);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rank, 0);
  EXPECT_NE(d->message.find("equal shares: blaming the lower rank"), std::string::npos) << d->message;
}

class NoEngine final : public comm::Backend {
 public:
  int rank() const override { return 1; }
  int world_size() const override { return 2; }
  std::string name() const override { return "none"; }
  std::unique_ptr<comm::Pending> start(comm::Call&) override { return std::make_unique<comm::Done>(); }
};

// A group call is traced with the group's ranks and the rank's own number, numbered apart from the
// default group's, and it moves the board's group counters, not the default group's.
TEST(GroupWaitTest, MonitorRecordsAGroupCallApart) {
  test::TempDir dir("lockstep_group_wait");
  comm::Board b = comm::Board::create(dir.path() + "/board.bin", 4, 8);
  comm::Monitor m(std::make_unique<NoEngine>(), &b.slot(3), std::shared_ptr<std::FILE>(), 3);
  comm::Call g;
  g.op = comm::Op::kAllReduce;
  g.in.count = 4;
  g.group = {1, 3};
  auto p = m.start(g);
  EXPECT_EQ(b.view(3).group_issued, 1);
  EXPECT_EQ(b.view(3).group_ranks(), (std::vector<int>{1, 3}));
  EXPECT_EQ(b.view(3).issued, 0);
  p->wait();
  EXPECT_EQ(b.view(3).group_completed, 1);
  EXPECT_EQ(b.view(3).completed, 0);
  comm::Call c;
  c.op = comm::Op::kBarrier;
  c.group = {1, 3};
  c.seq = 0;
  const trace::Record r = comm::trace_record(c, 3, 10, 20, nullptr);
  ASSERT_TRUE(r.group.has_value());
  EXPECT_EQ(*r.group, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(r.rank, 3);
  const trace::Record back = *trace::parse_line(trace::to_line(r));
  EXPECT_EQ(back, r);
}

// Point-to-point calls in flight on the board, as the Monitor writes them: rank `r` issues `op` to
// (or from) global rank `peer` at pipe.py:40 step 2.
std::int64_t p2p(comm::Board& b, int r, comm::Op op, int peer) {
  comm::Call c;
  c.op = op;
  c.in.count = 4;
  c.site = comm::CallSite{"pipe.py:40", 2, 0};
  return comm::p2p_issued(b.slot(r), c, peer);
}

// Rank 1 waits to receive from rank 0, whose send went to rank 2, which is not receiving from 0:
// rank 0 sent to the wrong peer. Expected values: the ranks the board was written with.
TEST(GroupWaitTest, AReceiveWhoseSenderSentElsewhereBlamesTheSender) {
  test::TempDir dir("lockstep_group_wait");
  comm::Board b = comm::Board::create(dir.path() + "/board.bin", 3, 8);
  EXPECT_FALSE(launch::misdirected_send(b, 0, 3).has_value()) << "an empty board proves nothing";
  p2p(b, 1, comm::Op::kRecv, 0);
  p2p(b, 0, comm::Op::kRecv, 1);  // rank 0 also waits for rank 1: not what is wrong
  const std::int64_t send = p2p(b, 0, comm::Op::kSend, 2);
  const auto d = launch::stuck_waits(b, 0, 3);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->step, 2);
  EXPECT_CONTAINS(d->message, "rank 0 sent to the wrong peer: rank 1 waits in recv f32[4] from rank 0 tag=0 (pipe.py:40 step 2)");
  EXPECT_CONTAINS(d->message, "send f32[4] to rank 2 tag=0");
  // Once rank 2 receives from rank 0 (its send was meant for it), or the send has ended, it is not.
  const std::int64_t recv2 = p2p(b, 2, comm::Op::kRecv, 0);
  EXPECT_FALSE(launch::misdirected_send(b, 0, 3).has_value());
  comm::p2p_done(b.slot(2), recv2);
  EXPECT_TRUE(launch::misdirected_send(b, 0, 3).has_value());
  comm::p2p_done(b.slot(0), send);
  EXPECT_FALSE(launch::misdirected_send(b, 0, 3).has_value());
}

// A sender with a send to the receiver in flight (a tag mismatch, or only slow) is never this.
TEST(GroupWaitTest, ASenderWithASendToTheReceiverIsNotMisdirected) {
  test::TempDir dir("lockstep_group_wait");
  comm::Board b = comm::Board::create(dir.path() + "/board.bin", 3, 8);
  p2p(b, 1, comm::Op::kRecv, 0);
  p2p(b, 0, comm::Op::kSend, 2);
  p2p(b, 0, comm::Op::kSend, 1);
  EXPECT_FALSE(launch::misdirected_send(b, 0, 3).has_value());
}

// Rank 0 sends f32[5] and rank 1 receives its second message from rank 0 into f16[5]: the engine
// kills rank 1 (Gloo: "Received data size doesn't match expected size") before the verifier beside
// the transfer compares. The board still holds both records, the send even after it ended; the
// second send pairs with the second receive (the first pair matched). Expected values: the calls
// written here, and the verifier's p2p blame (the sender).
TEST(GroupWaitTest, AReceiveKilledBySendOfAnotherSizeIsThePairsMismatch) {
  test::TempDir dir("lockstep_group_wait");
  comm::Board b = comm::Board::create(dir.path() + "/board.bin", 2, 8);
  // The step-th call of its op between the two ranks: its ordinal is the step.
  auto call = [&](int r, comm::Op op, int peer, comm::DType dtype, std::int64_t count, int step) {
    comm::Call c;
    c.op = op;
    c.peer = peer;
    c.in.dtype = dtype;
    c.in.count = count;
    c.site = comm::CallSite{"ops.py:61", step, 0};
    return comm::p2p_issued(b.slot(r), c, peer, step);
  };
  comm::p2p_done(b.slot(0), call(0, comm::Op::kSend, 1, comm::DType::kF32, 5, 0));
  comm::p2p_done(b.slot(1), call(1, comm::Op::kRecv, 0, comm::DType::kF32, 5, 0));
  EXPECT_FALSE(launch::torn_p2p_pair(b, 0, 2).has_value()) << "a matched pair that ended";
  const std::int64_t send = call(0, comm::Op::kSend, 1, comm::DType::kF32, 5, 1);
  call(1, comm::Op::kRecv, 0, comm::DType::kF32, 5, 1);
  EXPECT_FALSE(launch::torn_p2p_pair(b, 0, 2).has_value()) << "the same size: nothing torn";
  call(0, comm::Op::kSend, 1, comm::DType::kF32, 5, 2);
  comm::p2p_done(b.slot(0), send);
  comm::p2p_done(b.slot(0), send + 1);  // the third send ended: it is on the board still
  call(1, comm::Op::kRecv, 0, comm::DType::kF16, 5, 2);
  // Rank 1's second receive (f32) is still in flight and pairs with the second send (f32): not it;
  // its third (f16) pairs with the third send (f32).
  const auto d = launch::torn_p2p_pair(b, 0, 2);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->step, 2);
  EXPECT_CONTAINS(d->message, "rank 0 send f32[5] tag=0, rank 1 recv f16[5] tag=0 (ops.py:61 step 2)");
  // Asked about one rank: only that rank's receives count (the failed rank's, in the judge).
  EXPECT_TRUE(launch::torn_p2p_pair(b, 0, 2, 1).has_value());
  EXPECT_FALSE(launch::torn_p2p_pair(b, 0, 2, 0).has_value()) << "rank 0 receives nothing";
  // The misdirected-send rule reads only calls in flight: rank 0 has none.
  EXPECT_FALSE(launch::misdirected_send(b, 0, 2).has_value());
}

// The Monitor numbers a program's p2p calls on the board over all its groups, with the peer as a
// global rank, and clears each when it ends.
TEST(GroupWaitTest, MonitorKeepsPointToPointCallsInFlightWithGlobalPeers) {
  test::TempDir dir("lockstep_group_wait");
  comm::Board b = comm::Board::create(dir.path() + "/board.bin", 4, 8);
  comm::Monitor m(std::make_unique<NoEngine>(), &b.slot(3), std::shared_ptr<std::FILE>(), 3);
  comm::Call s;
  s.op = comm::Op::kSend;
  s.in.count = 2;
  s.peer = 0;  // the group's rank 0: global rank 1
  s.group = {1, 3};
  auto p = m.start(s);
  const auto f = comm::read_p2p_flight(b.slot(3));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].op, comm::Op::kSend);
  EXPECT_EQ(f[0].peer, 1);
  p->wait();
  EXPECT_TRUE(comm::read_p2p_flight(b.slot(3)).empty());
}

// The Monitor numbers a group's p2p calls per op, peer and tag (the k-th send to a peer pairs with
// the peer's k-th receive), and its records carry the group's board key; an ended call stays on
// the board (read_p2p_recent) until the ring reuses its place. Two groups of the same ranks are
// two Monitors: their counts are their own.
TEST(GroupWaitTest, MonitorCountsEachGroupsPointToPointCallsPerPeerAndTag) {
  test::TempDir dir("lockstep_group_wait");
  comm::Board b = comm::Board::create(dir.path() + "/board.bin", 4, 8);
  comm::Monitor m(std::make_unique<NoEngine>(), &b.slot(3), std::shared_ptr<std::FILE>(), 3, 77);
  comm::Monitor other(std::make_unique<NoEngine>(), &b.slot(3), std::shared_ptr<std::FILE>(), 3, 78);
  auto send = [](comm::Monitor& on, int peer, int tag) {
    comm::Call s;
    s.op = comm::Op::kSend;
    s.in.count = 2;
    s.peer = peer;
    s.tag = tag;
    s.group = {1, 3};
    on.start(s)->wait();
  };
  send(m, 0, 0);
  send(m, 0, 0);
  send(m, 0, 5);
  send(other, 0, 0);
  const auto f = comm::read_p2p_recent(b.slot(3));
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].ordinal, 0);
  EXPECT_EQ(f[1].ordinal, 1);
  EXPECT_EQ(f[2].ordinal, 0) << "another tag counts apart";
  EXPECT_EQ(f[3].ordinal, 0) << "another group of the same ranks counts apart";
  EXPECT_EQ(f[0].group, 77u);
  EXPECT_EQ(f[3].group, 78u);
  for (const auto& v : f) EXPECT_TRUE(v.ended);
  EXPECT_TRUE(comm::read_p2p_flight(b.slot(3)).empty());
}

}  // namespace
}  // namespace lockstep
