// Several collectives in flight at once (a program's overlapping calls: DDP's bucket all-reduces,
// FSDP2's prefetching all-gathers). On the board, the watcher compares every call still in flight,
// not only the last one started, so an earlier call that differs (and may hang the engine) is
// named; through the control group with check_in_background, the records are compared as soon as
// they arrive, without anyone waiting, for an engine that runs the call before it is verified.
// Two ranks live in this one process here: each has its own Verifier over engines written for
// the test (data that completes at once or never; an in-memory all_gather for the control group).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "harness/comm/board.h"
#include "harness/comm/verifier.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using comm::Call;
using comm::DType;
using comm::Op;
using comm::Pending;

// A call whose data never completes (a mismatched call hangs the engine).
class Hung final : public Pending {
 public:
  void wait() override { FAIL() << "a hung call was waited for"; }
};

// The data engine: every call completes at once, or never (`hang`).
class Engine final : public comm::Backend {
 public:
  Engine(int rank, int ws, bool hang) : rank_(rank), ws_(ws), hang_(hang) {}
  int rank() const override { return rank_; }
  int world_size() const override { return ws_; }
  std::string name() const override { return "test"; }
  std::unique_ptr<Pending> start(Call&) override {
    if (hang_) return std::make_unique<Hung>();
    return std::make_unique<comm::Done>();
  }

 private:
  int rank_, ws_;
  bool hang_;
};

// An all_gather of int64 words between the ranks of this process: the control group.
struct Exchange {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, std::map<int, std::vector<std::int64_t>>> calls;  // call number -> rank -> words
};

class GatherPending final : public Pending {
 public:
  GatherPending(std::shared_ptr<Exchange> ex, int n, int ws, std::int64_t* out) : ex_(std::move(ex)), n_(n), ws_(ws), out_(out) {}
  void wait() override {
    std::unique_lock<std::mutex> lock(ex_->mu);
    ex_->cv.wait(lock, [&] { return static_cast<int>(ex_->calls[n_].size()) == ws_; });
    for (const auto& [r, words] : ex_->calls[n_]) std::copy(words.begin(), words.end(), out_ + r * static_cast<int>(words.size()));
  }

 private:
  std::shared_ptr<Exchange> ex_;
  int n_, ws_;
  std::int64_t* out_;
};

class Gather final : public comm::Backend {
 public:
  Gather(std::shared_ptr<Exchange> ex, int rank, int ws) : ex_(std::move(ex)), rank_(rank), ws_(ws) {}
  int rank() const override { return rank_; }
  int world_size() const override { return ws_; }
  std::string name() const override { return "exchange"; }
  std::unique_ptr<Pending> start(Call& call) override {
    EXPECT_EQ(call.op, Op::kAllGather);
    const auto* in = static_cast<const std::int64_t*>(call.in.data);
    {
      std::lock_guard<std::mutex> lock(ex_->mu);
      ex_->calls[n_][rank_].assign(in, in + call.in.count);
    }
    ex_->cv.notify_all();
    return std::make_unique<GatherPending>(ex_, n_++, ws_, static_cast<std::int64_t*>(call.out.data));
  }

 private:
  std::shared_ptr<Exchange> ex_;
  int rank_, ws_, n_ = 0;
};

// The first diagnosis a verifier reported on its own (the watcher or the background checker).
struct Async {
  std::mutex mu;
  std::optional<Diagnosis> first;
  int calls = 0;
  std::function<void(const Diagnosis&)> sink() {
    return [this](const Diagnosis& d) {
      std::lock_guard<std::mutex> lock(mu);
      if (!first) first = d;
      ++calls;
    };
  }
  std::optional<Diagnosis> await(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (first) return first;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }
};

// Collective `seq` of the program at "train.py:7", its `index`-th call there: an all_reduce of
// `count` elements of `dtype`.
Call all_reduce(std::int64_t seq, std::int64_t index, DType dtype, std::int64_t count, std::vector<float>& buf) {
  Call c;
  c.op = Op::kAllReduce;
  c.in = c.out = comm::View{buf.data(), dtype, count};
  c.seq = seq;
  c.site = comm::CallSite{"train.py:7", 3, index};
  return c;
}

// Two ranks of the default group on one board, each with its verifier (data completes at once).
struct TwoOnBoard {
  test::TempDir dir{"lockstep_in_flight"};
  comm::Board created = comm::Board::create(dir.path() + "/board.bin", 2, comm::fingerprint_words(2));
  comm::Board b0 = comm::Board::attach(dir.path() + "/board.bin"), b1 = comm::Board::attach(dir.path() + "/board.bin");
  Async async0, async1;
  comm::Verifier v0{std::make_unique<Engine>(0, 2, false), std::make_unique<Engine>(0, 2, false), &b0, async0.sink(), 0.5};
  comm::Verifier v1{std::make_unique<Engine>(1, 2, false), std::make_unique<Engine>(1, 2, false), &b1, async1.sink(), 0.5};
};

TEST(VerifierInFlightTest, OnTheBoardAnEarlierCallStillInFlightThatDiffersIsNamed) {
  TwoOnBoard two;
  auto &v0 = two.v0, &v1 = two.v1;
  auto& async0 = two.async0;
  std::vector<float> buf(16);
  // Both ranks start collective #0 and #1 before waiting for either; rank 1's #0 is f64.
  Call a0 = all_reduce(0, 0, DType::kF32, 4, buf), b0c = all_reduce(1, 1, DType::kF32, 8, buf);
  Call a1 = all_reduce(0, 0, DType::kF64, 4, buf), b1c = all_reduce(1, 1, DType::kF32, 8, buf);
  auto p_a0 = v0.start(a0);
  auto p_b0 = v0.start(b0c);
  auto p_a1 = v1.start(a1);
  auto p_b1 = v1.start(b1c);
  // The watcher names the older call, though a later one was started since.
  const auto d = async0.await(10);
  ASSERT_TRUE(d.has_value()) << "collective #0 differs while #1 is in flight: the watcher must name it";
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_CONTAINS(d->message, "collective #0");
  EXPECT_CONTAINS(d->message, "dtype differs");
  EXPECT_EQ(d->rank, 1);
  // Each call's own wait compares its own records, in any order: #1 matches, #0 does not.
  EXPECT_NO_THROW(p_b0->wait());
  EXPECT_NO_THROW(p_b1->wait());
  try {
    p_a0->wait();
    ADD_FAILURE() << "collective #0 differs";
  } catch (const DiagnosisError& e) {
    EXPECT_CONTAINS(e.diagnosis().message, "collective #0");
  }
}

TEST(VerifierInFlightTest, OnTheBoardCallsThatMatchAreNeverReported) {
  TwoOnBoard two;
  auto &v0 = two.v0, &v1 = two.v1;
  auto &async0 = two.async0, &async1 = two.async1;
  std::vector<float> buf(16);
  std::vector<std::unique_ptr<Pending>> pending;
  for (int seq = 0; seq < 5; ++seq) {  // five in flight on each rank
    Call c0 = all_reduce(seq, seq, DType::kF32, seq + 1, buf), c1 = all_reduce(seq, seq, DType::kF32, seq + 1, buf);
    pending.push_back(v0.start(c0));
    pending.push_back(v1.start(c1));
  }
  EXPECT_FALSE(async0.await(0.3).has_value());
  EXPECT_FALSE(async1.await(0.01).has_value());
  for (auto& p : pending) EXPECT_NO_THROW(p->wait());
}

TEST(VerifierInFlightTest, ThroughTheControlGroupInTheBackgroundAMismatchIsNamedThoughNoOneWaits) {
  auto ex = std::make_shared<Exchange>();
  Async async0, async1;
  // The program started its call itself, mismatched, and its engine hangs: nobody waits.
  comm::Verifier v0(std::make_unique<Engine>(0, 2, true), std::make_unique<Gather>(ex, 0, 2), nullptr, async0.sink(), 0.5, {1, 3}, true);
  comm::Verifier v1(std::make_unique<Engine>(1, 2, true), std::make_unique<Gather>(ex, 1, 2), nullptr, async1.sink(), 0.5, {1, 3}, true);
  std::vector<float> buf(16);
  Call c0 = all_reduce(0, 0, DType::kF32, 4, buf), c1 = all_reduce(0, 0, DType::kF32, 6, buf);
  c0.group = c1.group = {1, 3};
  auto p0 = v0.start(c0);
  auto p1 = v1.start(c1);
  for (Async* a : {&async0, &async1}) {
    const auto d = a->await(10);
    ASSERT_TRUE(d.has_value()) << "the records were compared as they arrived";
    EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
    EXPECT_CONTAINS(d->message, "count differs");
    EXPECT_CONTAINS(d->message, "ranks 1,3") << "the group's global ranks";
  }
}

TEST(VerifierInFlightTest, ThroughTheControlGroupInTheBackgroundMatchingCallsPassTheirWait) {
  auto ex = std::make_shared<Exchange>();
  Async async0, async1;
  comm::Verifier v0(std::make_unique<Engine>(0, 2, false), std::make_unique<Gather>(ex, 0, 2), nullptr, async0.sink(), 0.5, {}, true);
  comm::Verifier v1(std::make_unique<Engine>(1, 2, false), std::make_unique<Gather>(ex, 1, 2), nullptr, async1.sink(), 0.5, {}, true);
  std::vector<float> buf(16);
  std::vector<std::unique_ptr<Pending>> p0, p1;
  for (int seq = 0; seq < 4; ++seq) {
    Call c0 = all_reduce(seq, seq, DType::kF32, 2, buf), c1 = all_reduce(seq, seq, DType::kF32, 2, buf);
    p0.push_back(v0.start(c0));
    p1.push_back(v1.start(c1));
  }
  for (int i = 3; i >= 0; --i) {  // waited for newest first
    EXPECT_NO_THROW(p0[static_cast<std::size_t>(i)]->wait());
    EXPECT_NO_THROW(p1[static_cast<std::size_t>(i)]->wait());
  }
  EXPECT_FALSE(async0.await(0.1).has_value());
  EXPECT_FALSE(async1.await(0.01).has_value());
}

// A program's other group on the board: each member claims a ring for the group's key (global
// ranks 1 and 3 of 4 here), two groups never share one, and a mismatch in flight is named with the
// group's ranks.
TEST(VerifierInFlightTest, OnTheBoardAGroupsRecordsGoInARingOfItsOwn) {
  test::TempDir dir("lockstep_in_flight");
  const std::string path = dir.path() + "/board.bin";
  comm::Board created = comm::Board::create(path, 4, comm::fingerprint_words(4));
  EXPECT_EQ(created.find_group_ring(1, 77), -1);
  const int ring = created.claim_group_ring(1, 77);
  EXPECT_GE(ring, 1);
  EXPECT_EQ(created.claim_group_ring(1, 77), ring) << "claimed once";
  EXPECT_NE(created.claim_group_ring(1, 78), ring) << "another group, another ring";
  EXPECT_EQ(created.find_group_ring(1, 77), ring);
  EXPECT_EQ(created.find_group_ring(3, 77), -1) << "rings are each rank's own";
  comm::Board b0 = comm::Board::attach(path), b1 = comm::Board::attach(path);
  Async async0, async1;
  comm::Verifier v0(std::make_unique<Engine>(0, 2, true), std::make_unique<Engine>(0, 2, false), &b0, async0.sink(), 0.5, {1, 3}, true, 99);
  comm::Verifier v1(std::make_unique<Engine>(1, 2, true), std::make_unique<Engine>(1, 2, false), &b1, async1.sink(), 0.5, {1, 3}, true, 99);
  EXPECT_GE(created.find_group_ring(1, 99), 1);
  EXPECT_GE(created.find_group_ring(3, 99), 1);
  std::vector<float> buf(16);
  Call c0 = all_reduce(0, 0, DType::kF32, 4, buf), c1 = all_reduce(0, 0, DType::kF32, 5, buf);
  c0.group = c1.group = {1, 3};
  auto p0 = v0.start(c0);
  auto p1 = v1.start(c1);
  const auto d = async1.await(10);
  ASSERT_TRUE(d.has_value()) << "the engine hangs; the watcher compares the group's records on the board";
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_CONTAINS(d->message, "collective #0 on the group of ranks 1,3");
  EXPECT_CONTAINS(d->message, "count differs");
  EXPECT_EQ(d->rank, 3);
}

}  // namespace
}  // namespace lockstep
