// The rank contract and the one judge: the rank status's JSON form (hand-written lines, both
// ways), the environment readers, the judge's rules in their documented order over hand-made
// exits (a fake progress source), and the one verdict function.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdlib>

#include "harness/comm/board.h"
#include "harness/core/env.h"
#include "harness/launch/verdict.h"
#include "harness/launch/watch.h"
#include "harness/rank/plan.h"
#include "harness/rank/status.h"
#include "test_util.h"

namespace lockstep {
namespace {

TEST(RankStatusTest, ReadsAHandWrittenDiagnosisStatus) {
  test::TempDir dir;
  const std::string path = dir.write("rank1.status.json", R"({"rank": 1, "scenario": "comm.x[ws=2]", "outcome": "diagnosis",
    "diagnosis": {"kind": "collective_mismatch", "message": "rank 1 f16", "rank": 1, "seq": 7, "step": 4}})");
  const auto st = rank::read_status(path);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->rank, 1);
  EXPECT_EQ(st->scenario, "comm.x[ws=2]");
  EXPECT_EQ(st->outcome, rank::Outcome::kDiagnosis);
  ASSERT_TRUE(st->diagnosis);
  EXPECT_EQ(st->diagnosis->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(st->diagnosis->message, "rank 1 f16");
  EXPECT_EQ(st->diagnosis->rank, 1);
  EXPECT_EQ(st->diagnosis->seq, 7);
  EXPECT_EQ(st->diagnosis->step, 4);
}

TEST(RankStatusTest, WritesTheDocumentedKeys) {
  rank::RankStatus st;
  st.rank = 2;
  st.scenario = "s";
  st.outcome = rank::Outcome::kOk;
  st.metrics = {{"steps_per_s", 4.5}};
  st.digest = "ab12";
  st.series["loss"] = report::Series{{1.0, 0.5}, 1e-6};
  st.collectives = 9;
  const auto j = rank::to_json(st);
  EXPECT_EQ(j, nlohmann::json::parse(R"({"rank": 2, "scenario": "s", "outcome": "ok", "metrics": {"steps_per_s": 4.5},
    "digest": "ab12", "series": {"loss": {"values": [1.0, 0.5], "rtol": 1e-6}}, "collectives": 9})"));
}

TEST(RankStatusTest, AProgramsStatusHasNoDigestAndRoundTrips) {
  rank::RankStatus st;
  st.program = true;
  st.outcome = rank::Outcome::kError;
  st.message = "ValueError: boom";
  const auto j = rank::to_json(st);
  EXPECT_EQ(j, nlohmann::json::parse(R"({"rank": 0, "program": true, "outcome": "error", "message": "ValueError: boom"})"));
  const auto back = rank::status_from_json(j);
  EXPECT_TRUE(back.program);
  EXPECT_EQ(back.outcome, rank::Outcome::kError);
  EXPECT_EQ(back.message, "ValueError: boom");
}

TEST(RankStatusTest, MissingOrForeignFilesAreNoStatus) {
  test::TempDir dir;
  EXPECT_FALSE(rank::read_status(dir / "none.json"));
  EXPECT_FALSE(rank::read_status(dir.write("a.json", "[1, 2]")));
  EXPECT_FALSE(rank::read_status(dir.write("b.json", R"({"rank": "one"})")));
  EXPECT_FALSE(rank::read_status(dir.write("c.json", "{\"rank\": 0")));
}

// A lockstep rank's cost, in the form scenarios/README.md documents, read into its typed form
// and written back the same.
TEST(RankStatusTest, PerfIsTypedAndKeepsItsDocumentedForm) {
  const auto j = nlohmann::json::parse(R"({"rank": 1, "scenario": "s", "outcome": "ok", "metrics": {}, "digest": "d",
    "perf": {"availability": "instructions", "counters": ["instructions"], "slowdown_fired": true,
             "phases": {"train": {"iterations": 3, "wall_s": 1.5, "cpu_s": 1.25, "main_cpu_s": 1.0, "user_s": 1.125,
                                  "sys_s": 0.125, "cpu_samples": [0.5, 0.25], "main_cpu_samples": [0.375],
                                  "instructions": 9000.0, "instructions_samples": [4000.0, 5000.0]}}}})");
  const auto st = rank::status_from_json(j);
  ASSERT_TRUE(st.perf);
  EXPECT_EQ(st.perf->availability, "instructions");
  EXPECT_TRUE(st.perf->slowdown_fired);
  ASSERT_EQ(st.perf->phases.count("train"), 1u);
  const perf::PhaseReport& p = st.perf->phases.at("train");
  EXPECT_EQ(p.iterations, 3);
  EXPECT_EQ(p.main_cpu_s, 1.0);
  EXPECT_EQ(p.sys_s, 0.125);
  EXPECT_EQ(p.main_cpu_samples, std::vector<double>{0.375});
  EXPECT_EQ(p.counters.at("instructions"), 9000.0);
  EXPECT_EQ(p.counter_samples.at("instructions"), (std::vector<double>{4000.0, 5000.0}));
  EXPECT_EQ(rank::to_json(st), j);
  // Programs report no cost: no perf key at all.
  rank::RankStatus program;
  program.program = true;
  program.outcome = rank::Outcome::kOk;
  EXPECT_FALSE(rank::to_json(program).contains("perf"));
}

// The rank plan: the launcher's one message to each rank it starts, read by `lockstep rank` and
// the program runtime alike.
TEST(RankPlanTest, ReadsAHandWrittenPlan) {
  test::TempDir dir;
  const std::string path = dir.write("rank1.plan.json", R"({"schema_version": 1, "rank": 1, "world_size": 2,
    "scenario": "comm.x", "verify": "record", "status": "/r/rank1.status.json", "trace": "/r/rank1.trace.jsonl",
    "board": "/r/board.bin", "timeout_s": 12.5, "engine_timeout_s": 80, "slowdown": "10:train", "slowdown_off": true})");
  const rank::RankPlan p = rank::read_plan(path);
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.world_size, 2);
  EXPECT_EQ(p.scenario, "comm.x");
  EXPECT_EQ(p.mode, VerifyMode::kRecord);
  EXPECT_EQ(p.status_path, "/r/rank1.status.json");
  EXPECT_EQ(p.trace_path, "/r/rank1.trace.jsonl");
  EXPECT_EQ(p.board_path, "/r/board.bin");
  EXPECT_EQ(p.timeout_s, 12.5);
  EXPECT_EQ(p.engine_timeout_s, 80);
  EXPECT_EQ(p.slowdown, "10:train");
  EXPECT_TRUE(p.slowdown_off);
  // Written back, it reads the same.
  rank::write_plan(dir / "again.json", p);
  EXPECT_EQ(rank::to_json(rank::read_plan(dir / "again.json")), rank::to_json(p));
}

TEST(RankPlanTest, RefusesAPlanOfAnotherBuildOrWithABadKey) {
  test::TempDir dir;
  nlohmann::json good = rank::to_json(rank::RankPlan{});
  auto refused = [&](nlohmann::json j) {
    const std::string path = dir.write("p.json", j.dump());
    return test::message_of<InputError>([&] { rank::read_plan(path); });
  };
  auto j = good;
  j["schema_version"] = 2;
  EXPECT_CONTAINS(refused(j), "schema_version 2, this lockstep reads 1");
  j = good;
  j.erase("board");
  EXPECT_CONTAINS(refused(j), "'board' is missing or of the wrong type");
  j = good;
  j["verify"] = "check";
  EXPECT_CONTAINS(refused(j), "verify must be off, record or verify, got 'check'");
  j = good;
  j["rank"] = 2;
  EXPECT_CONTAINS(refused(j), "rank 2 is not in [0, world_size 1)");
  EXPECT_CONTAINS(test::message_of<InputError>([&] { rank::read_plan(dir / "none.json"); }), "cannot read the rank plan");
}

TEST(EnvTest, ReadersNameTheVariable) {
  ::setenv("LOCKSTEP_TEST_INT", "12x", 1);
  EXPECT_EQ(test::message_of<InputError>([] { env::integer("LOCKSTEP_TEST_INT", 0); }),
            "environment variable LOCKSTEP_TEST_INT must be an integer, got '12x'");
  ::setenv("LOCKSTEP_TEST_INT", "-3", 1);
  EXPECT_EQ(env::integer("LOCKSTEP_TEST_INT", 0), -3);
  ::unsetenv("LOCKSTEP_TEST_INT");
  EXPECT_EQ(env::integer("LOCKSTEP_TEST_INT", 5), 5);
  ::setenv("LOCKSTEP_TEST_S", "0", 1);
  EXPECT_EQ(env::seconds("LOCKSTEP_TEST_S", 60), 60);  // not positive
  ::setenv("LOCKSTEP_TEST_S", "2.5", 1);
  EXPECT_EQ(env::seconds("LOCKSTEP_TEST_S", 60), 2.5);
  ::unsetenv("LOCKSTEP_TEST_S");
  EXPECT_TRUE(env::is_loopback("127.0.1.1"));
  EXPECT_TRUE(env::is_loopback("localhost"));
  EXPECT_FALSE(env::is_loopback("10.0.0.1"));
  EXPECT_EQ(env::assign(env::kPlan, "/x"), "LOCKSTEP_PLAN=/x");
}

// A source that answers with its rule's name, so that the test sees which rule the judge chose.
class FakeSource final : public launch::ProgressSource {
 public:
  FakeSource(bool contract, std::vector<bool> finished) : contract_(contract), finished_(std::move(finished)) {}
  bool rank_contract() const override { return contract_; }
  void poll(int, const launch::Child&, launch::Watchdog::Rank&) override {}
  bool finished(int r) const override { return finished_[static_cast<std::size_t>(r)]; }
  Diagnosis failure(int r, const launch::Child&, const std::vector<launch::Child>&) const override {
    return {DiagnosisKind::kRankFailure, "failure", r, -1};
  }
  Diagnosis unfinished(int r, const std::vector<launch::Child>&) const override {
    return {DiagnosisKind::kMissingParticipant, "unfinished", r, -1};
  }
  std::optional<Diagnosis> comm_lost(int r) const override { return Diagnosis{DiagnosisKind::kRankFailure, "comm", r, -1}; }
  Diagnosis startup(const launch::Watchdog&, int) const override { return {DiagnosisKind::kTimeout, "startup", -1, -1}; }
  Diagnosis deadline(const launch::Watchdog&) const override { return {DiagnosisKind::kTimeout, "deadline", -1, -1}; }
  Diagnosis timeout(const std::vector<launch::Child>&, double) const override { return {DiagnosisKind::kTimeout, "timeout", -1, -1}; }

 private:
  bool contract_;
  std::vector<bool> finished_;
};

launch::Child exited(int code, int ms) {
  launch::Child c;
  c.exited = true;
  c.status = W_EXITCODE(code, 0);
  c.exit_time = launch::Clock::time_point(std::chrono::milliseconds(ms));
  return c;
}
launch::Child killed(int sig, int ms) {
  launch::Child c = exited(0, ms);
  c.status = sig;  // WIFSIGNALED: the low 7 bits hold the signal
  return c;
}
launch::Child running() { return launch::Child{}; }

class JudgeTest : public ::testing::Test {
 protected:
  launch::Judgement judge(const std::vector<launch::Child>& kids, const launch::ProgressSource& src,
                          launch::Watchdog::Verdict v = launch::Watchdog::Verdict::kAllExited) {
    launch::Watchdog dog(static_cast<int>(kids.size()), {}, launch::Clock::now());
    return launch::judge(kids, src, dog, launch::WatchEnd{v}, 60, dir_.path());
  }
  test::TempDir dir_;
};

TEST_F(JudgeTest, ARanksOwnDiagnosisComesBeforeAnEarlierCrash) {
  dir_.write("rank1.status.json", R"({"rank": 1, "outcome": "diagnosis",
    "diagnosis": {"kind": "result_mismatch", "message": "m", "rank": 1, "seq": 3}})");
  const auto j = judge({killed(SIGSEGV, 1), exited(rank::kExitDiagnosed, 2)}, FakeSource(true, {false, false}));
  ASSERT_TRUE(j.diagnosis);
  EXPECT_EQ(j.diagnosis->kind, DiagnosisKind::kResultMismatch);
  EXPECT_EQ(j.diagnosis->seq, 3);
}

TEST_F(JudgeTest, BadInputIsAnErrorQuotingTheRank) {
  dir_.write("rank0.status.json", R"({"rank": 0, "outcome": "input_error", "message": "x.toml:3: bad"})");
  const auto j = judge({exited(rank::kExitInput, 1), exited(0, 2)}, FakeSource(true, {false, true}));
  EXPECT_FALSE(j.diagnosis);
  EXPECT_EQ(j.error, "rank 0: x.toml:3: bad");
}

TEST_F(JudgeTest, TheEarliestFailureIsBlamedAndALostConnectionIsNotAFailure) {
  const auto j = judge({exited(rank::kExitCommError, 1), exited(7, 5), killed(SIGKILL, 3)}, FakeSource(true, {false, false, false}));
  ASSERT_TRUE(j.diagnosis);
  EXPECT_EQ(j.diagnosis->message, "failure");
  EXPECT_EQ(j.diagnosis->rank, 2);
}

// Rule 3's tie rule on synthetic reap times (ms): of the ranks that failed the same way (the
// FakeSource compares the signal or the exit code) within the settle window (0.4 s, the
// Watchdog's default) of the first failure, the lowest is blamed.
TEST_F(JudgeTest, TheLowestRankThatFailedTheSameWayWithinTheSettleWindowIsBlamed) {
  const FakeSource src(false, {false, false, false});
  // Rank 1 reaped first, rank 0 40 ms later with the same exit: rank 0.
  EXPECT_EQ(judge({exited(1, 50), exited(1, 10), running()}, src).diagnosis->rank, 0);
  // The same two reaped in the other order: still rank 0.
  EXPECT_EQ(judge({exited(1, 10), exited(1, 50), running()}, src).diagnosis->rank, 0);
  // Three ranks the same way, the lowest reaped last but within 400 ms: rank 0.
  EXPECT_EQ(judge({exited(1, 405), exited(1, 20), exited(1, 6)}, src).diagnosis->rank, 0);
  // Only the ranks that failed the same way as the first count: rank 2 first (exit 1), rank 0 a
  // different way (a consequence, say), rank 1 the same way: rank 1.
  EXPECT_EQ(judge({exited(3, 30), exited(1, 60), exited(1, 10)}, src).diagnosis->rank, 1);
  EXPECT_EQ(judge({killed(SIGSEGV, 30), killed(SIGABRT, 60), killed(SIGABRT, 10)}, src).diagnosis->rank, 1);
}

// "The same way" reads every number in the line that says why as any number: a rank's own
// number, and the shapes and indices that differ per rank in one engine error (Gloo's all_gather
// with unequal batches, as TorchRec raises it on both ranks), no longer make one failure two;
// another exception, or another message, still does.
TEST(FailureWordsTest, NumbersReadAsAnyNumberOtherWordsDoNot) {
  EXPECT_EQ(launch::failure_words("RuntimeError: injected crash in every rank (rank 0)"),
            "RuntimeError: injected crash in every rank (rank #)");
  EXPECT_EQ(launch::failure_words("RuntimeError: ProcessGroupGloo::allgather: invalid tensor size at index 1 (expected (8, 8), got (6, 8))"),
            launch::failure_words("RuntimeError: ProcessGroupGloo::allgather: invalid tensor size at index 0 (expected (6, 8), got (8, 8))"));
  EXPECT_EQ(launch::failure_words("rank12: step 305 failed"), "rank#: step # failed");
  EXPECT_NE(launch::failure_words("ValueError: bad batch 3"), launch::failure_words("RuntimeError: bad batch 3"));
  EXPECT_NE(launch::failure_words("ConnectionResetError: [Errno 104] Connection reset by peer"),
            launch::failure_words("RuntimeError: invalid tensor size at index 0"));
  EXPECT_EQ(launch::failure_words(""), "");
}

TEST(FailureWordsTest, ARaisedLineIsAPythonExceptionsLastLine) {
  EXPECT_TRUE(launch::raised_line("RuntimeError: ProcessGroupGloo::allgather: invalid tensor size at index 0"));
  EXPECT_TRUE(launch::raised_line("torch.distributed.DistBackendError: NCCL error"));
  EXPECT_TRUE(launch::raised_line("KeyboardInterrupt"));
  EXPECT_TRUE(launch::raised_line("ValueError: bad batch (raised at train.py:44, step 5)"));
  EXPECT_FALSE(launch::raised_line("terminate called without an active exception"));
  EXPECT_FALSE(launch::raised_line("Segmentation fault"));
  EXPECT_FALSE(launch::raised_line("step 3 loss 0.25"));
  EXPECT_FALSE(launch::raised_line("  File \"train.py\", line 44, in main"));
  EXPECT_FALSE(launch::raised_line(""));
}

// Two ranks of a system raise the same engine error (their own indices in it); rank 1 is then
// killed by SIGABRT on its way out (torch's Gloo thread stopped while the interpreter finalizes)
// and is reaped first, rank 0 exits 1 30 ms later. They failed the same way: the lowest, rank 0,
// is blamed. Rank 1 killed with no exception in its log is another way: rank 1 (the first).
TEST_F(JudgeTest, ARankThatRaisedAndWasThenKilledOnItsWayOutFailedTheWayItsExceptionSays) {
  const std::string tb = "Traceback (most recent call last):\n  File \"adapter.py\", line 9, in main\n";
  dir_.write("rank0.log", tb + "RuntimeError: ProcessGroupGloo::allgather: invalid tensor size at index 1 (expected (2, 16), got (1, 16))\n");
  dir_.write("rank1.log", tb + "RuntimeError: ProcessGroupGloo::allgather: invalid tensor size at index 0 (expected (1, 16), got (2, 16))\n"
                               "terminate called without an active exception\n");
  auto source = launch::file_source(2, dir_.path(), dir_.path(), "", "torchrec", 10, 60);
  const std::vector<launch::Child> kids = {exited(1, 40), killed(SIGABRT, 10)};
  EXPECT_EQ(source->failure_way(0, kids[0]), source->failure_way(1, kids[1]));
  const auto j = judge(kids, *source);
  ASSERT_TRUE(j.diagnosis);
  EXPECT_EQ(j.diagnosis->kind, DiagnosisKind::kRankFailure);
  EXPECT_EQ(j.diagnosis->rank, 0);
  // Killed by SIGSEGV or SIGKILL after the same line: the signal is its own way (the line may be a
  // handled exception's, long before).
  const std::vector<launch::Child> segv = {exited(1, 40), killed(SIGSEGV, 10)};
  EXPECT_NE(source->failure_way(0, segv[0]), source->failure_way(1, segv[1]));
  EXPECT_EQ(judge(segv, *source).diagnosis->rank, 1);
  dir_.write("rank1.log", "terminate called without an active exception\n");
  EXPECT_NE(source->failure_way(0, kids[0]), source->failure_way(1, kids[1]));
  EXPECT_EQ(judge(kids, *source).diagnosis->rank, 1);
}

TEST_F(JudgeTest, AFailureAfterTheSettleWindowOrADifferentWayDoesNotTakeTheBlame) {
  const FakeSource src(false, {false, false});
  // Rank 0 failed the same way 401 ms after rank 1: outside the window, rank 1 (the first).
  EXPECT_EQ(judge({exited(1, 411), exited(1, 10)}, src).diagnosis->rank, 1);
  // Rank 0 failed 5 ms after rank 1, a different way: rank 1.
  EXPECT_EQ(judge({exited(2, 15), exited(1, 10)}, src).diagnosis->rank, 1);
  EXPECT_EQ(judge({killed(SIGKILL, 15), exited(1, 10)}, src).diagnosis->rank, 1);
}

// The watchdog waited past settle_s for rank 0, busy (importing) when rank 1 failed
// (Watchdog::settle_until): rank 0's same failure 2.2 s later, reaped before the verdict, is
// counted, and it is blamed.
TEST_F(JudgeTest, AFailureTheWatchdogWaitedForPastTheSettleTimeTakesTheBlame) {
  const FakeSource src(false, {false, false});
  const auto t0 = launch::Clock::now();
  launch::Watchdog dog(2, {}, t0);
  auto at = [&](double s) { return t0 + std::chrono::duration_cast<launch::Clock::duration>(std::chrono::duration<double>(s)); };
  const launch::Watchdog::Rank failed{true, true, false, 0};
  std::int64_t ns = 0;
  for (double s = 1; s < 3.2; s += 0.1) {
    launch::Watchdog::Rank importing{false, false, false, 0};
    importing.cpu_ns = ns += 60'000'000;  // runnable 60% of the time
    ASSERT_EQ(dog.observe({importing, failed}, at(s)), launch::Watchdog::Verdict::kWatch);
  }
  ASSERT_EQ(dog.observe({launch::Watchdog::Rank{true, true, false, 0}, failed}, at(3.2)), launch::Watchdog::Verdict::kAllExited);
  // Rank 1 reaped just before the watchdog's first look at it, rank 0 at the verdict: 2.201 s apart.
  auto reaped = [&](double s) { launch::Child c = exited(1, 0); c.exit_time = at(s); return c; };
  const auto j = launch::judge({reaped(3.2), reaped(0.999)}, src, dog, launch::WatchEnd{launch::Watchdog::Verdict::kAllExited}, 60, dir_.path());
  ASSERT_TRUE(j.diagnosis);
  EXPECT_EQ(j.diagnosis->rank, 0);
  // Without the wait (the default watchdog's 0.4 s window) the same exits blame rank 1.
  EXPECT_EQ(judge({exited(1, 2210), exited(1, 10)}, src).diagnosis->rank, 1);
}

TEST_F(JudgeTest, WithoutTheRankContractEveryNonZeroExitIsAFailure) {
  const auto j = judge({exited(0, 1), exited(rank::kExitCommError, 2)}, FakeSource(false, {true, false}));
  ASSERT_TRUE(j.diagnosis);
  EXPECT_EQ(j.diagnosis->message, "failure");
  EXPECT_EQ(j.diagnosis->rank, 1);
}

TEST_F(JudgeTest, ACleanExitWithoutFinishingIsMissingParticipantBeforeALostConnection) {
  const auto j = judge({exited(rank::kExitCommError, 1), exited(0, 2)}, FakeSource(true, {false, false}));
  ASSERT_TRUE(j.diagnosis);
  EXPECT_EQ(j.diagnosis->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(j.diagnosis->rank, 1);
  const auto only_comm = judge({exited(rank::kExitCommError, 1), exited(0, 2)}, FakeSource(true, {false, true}));
  ASSERT_TRUE(only_comm.diagnosis);
  EXPECT_EQ(only_comm.diagnosis->message, "comm");
  EXPECT_EQ(only_comm.diagnosis->rank, 0);
}

TEST_F(JudgeTest, TheWatchdogsVerdictComesLast) {
  using V = launch::Watchdog::Verdict;
  const FakeSource src(true, {false, false});
  EXPECT_EQ(judge({running(), running()}, src, V::kTimeout).diagnosis->message, "timeout");
  EXPECT_EQ(judge({running(), running()}, src, V::kStartupTimeout).diagnosis->message, "startup");
  EXPECT_EQ(judge({running(), running()}, src, V::kDeadline).diagnosis->message, "deadline");
  EXPECT_FALSE(judge({exited(0, 1), exited(0, 2)}, FakeSource(true, {true, true})).diagnosis);
  // A failed rank explains a hang the watchdog also saw.
  EXPECT_EQ(judge({exited(1, 1), running()}, src, V::kTimeout).diagnosis->message, "failure");
}

// A program's receiver killed by its engine (SIGABRT: Gloo got 20 bytes for a 10-byte buffer)
// before the verifier compared the pair: the board's records of the pair decide, not the crash.
// Expected values: the calls written on the board here; the sender is blamed, as for any p2p
// mismatch. Without the pair on the board it is the crash (rank_failure of rank 1).
TEST_F(JudgeTest, AReceiverKilledInItsEngineByASendOfAnotherSizeIsThePairsMismatch) {
  comm::Board board = comm::Board::create(dir_.path() + "/board.bin", 2, 8);
  auto source = launch::board_source(board, dir_.path(), /*exit_finishes=*/false);
  const std::vector<launch::Child> kids = {exited(rank::kExitCommError, 40), killed(SIGABRT, 10)};
  const auto crash = judge(kids, *source);
  ASSERT_TRUE(crash.diagnosis);
  EXPECT_EQ(crash.diagnosis->kind, DiagnosisKind::kRankFailure);
  EXPECT_EQ(crash.diagnosis->rank, 1);
  comm::Call send;
  send.op = comm::Op::kSend;
  send.peer = 1;
  send.in.count = 5;
  send.site = comm::CallSite{"ops.py:70", 1, 0};
  comm::p2p_done(board.slot(0), comm::p2p_issued(board.slot(0), send, 1));
  comm::Call recv = send;
  recv.op = comm::Op::kRecv;
  recv.peer = 0;
  recv.in.dtype = comm::DType::kF16;
  comm::p2p_issued(board.slot(1), recv, 0);
  const auto torn = judge(kids, *source);
  ASSERT_TRUE(torn.diagnosis);
  EXPECT_EQ(torn.diagnosis->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(torn.diagnosis->rank, 0);
  EXPECT_EQ(torn.diagnosis->step, 1);
  EXPECT_CONTAINS(torn.diagnosis->message, "rank 0 send f32[5] tag=0, rank 1 recv f16[5] tag=0");
  EXPECT_CONTAINS(torn.diagnosis->message, "(rank 1 was killed by SIGABRT)");
  // The sender failing first on its own (a crash of its own, the receiver still waiting): its
  // crash, not the receiver's pair.
  const auto sender = judge({killed(SIGSEGV, 10), running()}, *source);
  ASSERT_TRUE(sender.diagnosis);
  EXPECT_EQ(sender.diagnosis->kind, DiagnosisKind::kRankFailure);
  EXPECT_EQ(sender.diagnosis->rank, 0);
}

TEST(VerdictTest, DecideIsAFunctionOfTheEvidence) {
  scenario::Expectation expect_pass;
  scenario::Expectation expect_mismatch;
  expect_mismatch.kind = DiagnosisKind::kCollectiveMismatch;
  expect_mismatch.rank = 1;
  report::ScenarioResult r;
  r.status = report::Status::kPass;
  launch::decide(expect_pass, r);
  EXPECT_EQ(r.status, report::Status::kPass);
  EXPECT_EQ(r.reason, "");
  r.diagnosis = Diagnosis{DiagnosisKind::kCollectiveMismatch, "m", 2, 4};
  launch::decide(expect_pass, r);
  EXPECT_EQ(r.status, report::Status::kFail);
  EXPECT_EQ(r.reason, "expected pass, got collective_mismatch: m");
  launch::decide(expect_mismatch, r);
  EXPECT_EQ(r.status, report::Status::kFail);
  EXPECT_EQ(r.reason, "expected the diagnosis to name rank 1, it names rank 2");
  r.diagnosis->rank = 1;
  launch::decide(expect_mismatch, r);
  EXPECT_EQ(r.status, report::Status::kPass);
  r.error = "injection #0 never fired";
  launch::decide(expect_mismatch, r);
  EXPECT_EQ(r.status, report::Status::kError);
  EXPECT_EQ(r.reason, "injection #0 never fired");
  // A skip, --no-skip and a cancel are evidence too, and outrank an error (the run that would
  // have had it never happened); a status set by hand is not evidence.
  r.status = report::Status::kSkip;
  launch::decide(expect_mismatch, r);
  EXPECT_EQ(r.status, report::Status::kError);
  r.skip = "requires cuda";
  launch::decide(expect_mismatch, r);
  EXPECT_EQ(r.status, report::Status::kSkip);
  EXPECT_EQ(r.reason, "requires cuda");
  r.skip_fails = true;
  launch::decide(expect_mismatch, r);
  EXPECT_EQ(r.status, report::Status::kFail);
  EXPECT_EQ(r.reason, "skipped, and --no-skip makes a skip a failure: requires cuda");
  r.cancelled = "not run: the run was cancelled by SIGINT";
  launch::decide(expect_mismatch, r);
  EXPECT_EQ(r.status, report::Status::kCancelled);
  EXPECT_EQ(r.reason, "not run: the run was cancelled by SIGINT");
}

// `lockstep rank` reads the plan LOCKSTEP_PLAN names, and refuses one written for another rank
// (exit 2, naming the plan) before it joins any group.
TEST(RankPlanTest, LockstepRankRefusesAPlanForAnotherRank) {
  test::TempDir dir;
  const std::string scenario = dir.write("s.toml", "name = \"t.plan\"\n[run]\nworld_size = 1\n[workload]\nkind = \"collectives\"\n"
                                                   "[expect]\noutcome = \"pass\"\n");
  rank::RankPlan plan;
  plan.rank = 1;
  plan.world_size = 2;
  plan.scenario = "t.plan";
  const std::string path = dir / "rank1.plan.json";
  rank::write_plan(path, plan);
  const auto r = test::run_cli("env", "RANK=0 WORLD_SIZE=1 LOCKSTEP_PLAN=" + test::quote(path) + " " + test::quote(LOCKSTEP_BINARY) +
                                          " rank " + test::quote(scenario) + " --report-dir " + test::quote(dir / "report"),
                               dir.path());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_CONTAINS(r.err, "the rank plan " + path + " is for rank 1 of 2 of scenario t.plan, but this is rank 0 of 1 of scenario t.plan");
}

}  // namespace
}  // namespace lockstep
