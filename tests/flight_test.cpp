// The flight recorder (comm/board.h): each rank's last collectives, kept on the board where the
// launcher reads them after the rank was killed; and kind = "program" scenarios as loaded.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/comm/board.h"
#include "harness/comm/types.h"
#include "harness/core/error.h"
#include "harness/launch/launcher.h"
#include "harness/rank/plan.h"
#include "harness/rank/rank_main.h"
#include "harness/scenario/scenario.h"
#include "harness/validate/validate.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using test::TempDir;

comm::Call all_reduce(std::int64_t count, comm::DType dtype, std::string phase, std::int64_t step) {
  comm::Call c;
  c.op = comm::Op::kAllReduce;
  c.in.dtype = dtype;
  c.in.count = count;
  c.site.phase = std::move(phase);
  c.site.step = step;
  return c;
}

TEST(FlightRecorderTest, KeepsTheLastSixteenCollectivesOldestFirst) {
  TempDir dir("lockstep_flight");
  comm::Board board = comm::Board::create(dir / "board.bin", 2, 8);
  auto& slot = board.slot(1);
  EXPECT_TRUE(comm::read_flight(slot).empty());
  for (std::int64_t seq = 0; seq < 20; ++seq) {
    comm::flight_issued(slot, seq, all_reduce(100 + seq, comm::DType::kF32, "train", seq), 1000 + seq);
    if (seq < 19) comm::flight_done(slot, seq, true, 2000 + seq);
  }
  const auto records = comm::read_flight(slot);
  ASSERT_EQ(records.size(), 16u);
  for (std::size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].seq, static_cast<std::int64_t>(i) + 4);
    EXPECT_EQ(records[i].count, 104 + static_cast<std::int64_t>(i));
    EXPECT_EQ(records[i].t_start_us, 1004 + static_cast<std::int64_t>(i));
  }
  EXPECT_EQ(records.back().state, comm::FlightState::kIssued);
  EXPECT_EQ(records.back().t_end_us, 0);
  EXPECT_EQ(records[14].state, comm::FlightState::kCompleted);
  EXPECT_EQ(records[14].t_end_us, 2018);
  EXPECT_EQ(records.back().describe(), "#19 all_reduce f32[119] sum (train step 19) in flight");
  EXPECT_EQ(records[14].describe(), "#18 all_reduce f32[118] sum (train step 18) completed");
  // Another rank's recorder is untouched; a failed call says so.
  EXPECT_TRUE(comm::read_flight(board.slot(0)).empty());
  comm::flight_done(slot, 19, false, 3000);
  EXPECT_EQ(comm::read_flight(slot).back().describe(), "#19 all_reduce f32[119] sum (train step 19) failed");
  // A completion for a record already overwritten changes nothing.
  comm::flight_done(slot, 3, false, 4000);
  EXPECT_EQ(comm::read_flight(slot).front().state, comm::FlightState::kCompleted);
}

TEST(FlightRecorderTest, ABarrierHasNoDtypeAndTheRecorderSurvivesReattaching) {
  TempDir dir("lockstep_flight");
  {
    comm::Board board = comm::Board::create(dir / "board.bin", 1, 8);
    comm::Call c;
    c.op = comm::Op::kBarrier;
    c.site.phase = "finalize";
    comm::flight_issued(board.slot(0), 7, c, 1);
  }
  comm::Board again = comm::Board::attach(dir / "board.bin");
  const auto records = comm::read_flight(again.slot(0));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].describe(), "#7 barrier (finalize) in flight");
}

// A rank that hangs is killed by the watchdog before it flushed its trace; its last collectives
// reach the report anyway, from the flight recorder: the diagnosis lists every rank's, and the
// rank's trace (and trace.json) holds them. Before the flight recorder, rank 1's trace was empty.
TEST(FlightRecorderTest, KillingARankAfterAHangLeavesItsLastRecordsInTheReport) {
  TempDir dir("lockstep_flight");
  const std::string file = dir.write("hang.toml", R"(name = "test.hang_at_step_9"
[run]
world_size = 2
timeout_s = 2
[workload]
kind = "collectives"
steps = 12
count = 8
ops = ["all_reduce"]
[[inject]]
kind = "sleep"
rank = 1
step = 9
seconds = 600
[expect]
outcome = "timeout"
rank = 1
)");
  const auto r = launch::run_scenario(lockstep::validate::load_file(file).at(0), test::launch_options(dir));
  EXPECT_EQ(r.status, report::Status::kPass) << test::describe(r);
  ASSERT_TRUE(r.diagnosis.has_value());
  EXPECT_CONTAINS(r.diagnosis->message, "last collectives: rank 0: ");
  EXPECT_CONTAINS(r.diagnosis->message, "; rank 1: ");
  EXPECT_CONTAINS(r.diagnosis->message, "in flight");

  const std::string artifacts = rank::artifacts_dir(dir / "report", "test.hang_at_step_9");
  std::map<std::int64_t, nlohmann::json> rank1;
  std::ifstream in(rank::trace_path(artifacts, 1));
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["kind"] == "collective") rank1[j["seq"].get<std::int64_t>()] = j;
  }
  ASSERT_FALSE(rank1.empty()) << "rank 1's trace is empty";
  // Rank 1 completed every collective of steps 0-8 before it hung at step 9.
  std::int64_t last_step = -1;
  for (const auto& [seq, j] : rank1) {
    EXPECT_TRUE(j["op"] == "all_reduce" || j["op"] == "barrier") << j.dump();  // a barrier ends each step
    EXPECT_EQ(j["flight_recorder"], true) << j.dump();
    if (!j.contains("error")) last_step = std::max(last_step, j["step"].get<std::int64_t>());
  }
  EXPECT_EQ(last_step, 8);
  const std::string chrome = test::read_file(artifacts + "/trace.json");
  const auto trace = nlohmann::json::parse(chrome);
  int rank1_events = 0;
  for (const auto& e : trace["traceEvents"]) rank1_events += e.value("ph", "") == "X" && e.value("tid", -1) == 1;
  EXPECT_EQ(rank1_events, static_cast<int>(rank1.size()));
}

// kind = "program" scenarios: what the loader accepts and refuses.
TEST(ProgramScenarioTest, TheLoaderReadsTheProgramAndRefusesWhatCannotApply) {
  TempDir dir("lockstep_program");
  dir.write("train.py", "");  // the script must exist (a missing one is refused, below)
  const std::string ok = dir.write("ok.toml", R"(name = "p.ok"
[run]
world_size = 2
[workload]
kind = "program"
command = ["{python}", "{dir}/train.py", "--steps", "3"]
python_modules = ["torch"]
env = ["A=1"]
[expect]
outcome = "pass"
)");
  const auto s = lockstep::validate::load_file(ok).at(0);
  ASSERT_TRUE(s.program.has_value());
  EXPECT_EQ(s.program->command, (std::vector<std::string>{"{python}", "{dir}/train.py", "--steps", "3"}));
  EXPECT_EQ(s.program->wrap, "gloo");
  EXPECT_EQ(s.program->env, std::vector<std::string>{"A=1"});

  auto refused = [&](const std::string& name, const std::string& body, const std::string& expected) {
    const std::string f = dir.write(name, body);
    try {
      lockstep::validate::load_file(f);
      ADD_FAILURE() << name << " was accepted";
    } catch (const InputError& e) {
      EXPECT_CONTAINS(e.what(), expected);
      EXPECT_CONTAINS(e.what(), f + ":");
    }
  };
  refused("nocmd.toml", "name = \"p\"\n[workload]\nkind = \"program\"\n[expect]\noutcome = \"pass\"\n", "missing required key 'command'");
  refused("wrap.toml", "name = \"p\"\n[workload]\nkind = \"program\"\ncommand = [\"x\"]\nwrap = \"nccl\"\n[expect]\noutcome = \"pass\"\n",
          "must be \"gloo\" or \"none\", got \"nccl\"");
  refused("inject.toml",
          "name = \"p\"\n[workload]\nkind = \"program\"\ncommand = [\"x\"]\n[[inject]]\nkind = \"crash\"\nrank = 0\n[expect]\noutcome = \"pass\"\n",
          "[[inject]] of a kind = \"program\" can only be slow_rank");
  refused("slow_step.toml",
          "name = \"p\"\n[run]\nworld_size = 2\n[workload]\nkind = \"program\"\ncommand = [\"x\"]\n[[inject]]\nkind = \"slow_rank\"\nrank = 1\n"
          "seconds = 0.1\nstep = 3\n[expect]\noutcome = \"pass\"\n",
          "slow_rank slows every step");
  refused("slow_seconds.toml",
          "name = \"p\"\n[run]\nworld_size = 2\n[workload]\nkind = \"program\"\ncommand = [\"x\"]\n[[inject]]\nkind = \"slow_rank\"\nrank = 1\n"
          "seconds = 0\n[expect]\noutcome = \"pass\"\n",
          "must be in (0, 60]");
  refused("share.toml",
          "name = \"p\"\n[run]\nworld_size = 2\n[workload]\nkind = \"program\"\ncommand = [\"x\"]\n[expect]\noutcome = \"pass\"\nstraggler_share = 1.5\n",
          "straggler_share: must be in (0, 1]");
  refused("share_one_rank.toml",
          "name = \"p\"\n[workload]\nkind = \"program\"\ncommand = [\"x\"]\n[expect]\noutcome = \"pass\"\nstraggler_share = 0.2\n",
          "needs run.world_size >= 2");
  {
    // The one injection a program takes reaches its rank through the rank plan, and only that rank's.
    const std::string f = dir.write("slow.toml",
                                    "name = \"p\"\n[run]\nworld_size = 2\n[workload]\nkind = \"program\"\ncommand = [\"true\"]\n[[inject]]\n"
                                    "kind = \"slow_rank\"\nrank = 1\nseconds = 0.25\nop = \"all_reduce\"\n[expect]\noutcome = \"straggler\"\n"
                                    "straggler_share = 0.3\n");
    const auto loaded = lockstep::validate::load_file(f);
    ASSERT_EQ(loaded.size(), 1u);
    EXPECT_EQ(loaded[0].straggler_share, 0.3);
    EXPECT_FALSE(lockstep::rank::plan_for(loaded[0], 0, dir.path()).slow_rank.has_value());
    const auto plan = lockstep::rank::plan_for(loaded[0], 1, dir.path());
    ASSERT_TRUE(plan.slow_rank.has_value());
    EXPECT_EQ(plan.slow_rank->seconds, 0.25);
    EXPECT_EQ(plan.slow_rank->op, "all_reduce");
    EXPECT_EQ(plan.slow_rank->phase, "");
    EXPECT_EQ(plan.slow_rank->call, -1);
    // Written and read back, the plan keeps it.
    lockstep::rank::write_plan(dir / "p1.json", plan);
    const auto again = lockstep::rank::read_plan(dir / "p1.json");
    ASSERT_TRUE(again.slow_rank.has_value());
    EXPECT_EQ(again.slow_rank->index, 0u);
    EXPECT_EQ(again.slow_rank->seconds, 0.25);
    EXPECT_EQ(again.slow_rank->op, "all_reduce");
    EXPECT_EQ(again.slow_rank->phase, "");
    EXPECT_EQ(again.slow_rank->call, -1);
    // A plan whose slow_rank is not whole, or names no op, is refused naming the key.
    auto j = lockstep::rank::to_json(plan);
    j["slow_rank"].erase("seconds");
    const std::string no_seconds = dir.write("p2.json", j.dump());
    EXPECT_CONTAINS(test::message_of<InputError>([&] { lockstep::rank::read_plan(no_seconds); }), "'slow_rank.seconds' is missing");
    j = lockstep::rank::to_json(plan);
    j["slow_rank"]["op"] = "all_reduse";
    const std::string bad_op = dir.write("p3.json", j.dump());
    EXPECT_CONTAINS(test::message_of<InputError>([&] { lockstep::rank::read_plan(bad_op); }), "slow_rank.op is not an op: 'all_reduse'");
  }
  refused("slow_call.toml",
          "name = \"p\"\n[run]\nworld_size = 2\n[workload]\nkind = \"program\"\ncommand = [\"true\"]\n[[inject]]\nkind = \"slow_rank\"\n"
          "rank = 1\nseconds = 0.1\ncall = 1\n[expect]\noutcome = \"pass\"\n",
          "a program's calls have no index within the step");
  refused("slow_twice.toml",
          "name = \"p\"\n[run]\nworld_size = 2\n[workload]\nkind = \"program\"\ncommand = [\"true\"]\n[[inject]]\nkind = \"slow_rank\"\n"
          "rank = 1\nseconds = 0.1\n[[inject]]\nkind = \"slow_rank\"\nrank = 1\nseconds = 0.2\n[expect]\noutcome = \"pass\"\n",
          "a program's rank takes one slow_rank");
  refused("slow_unwrapped.toml",
          "name = \"p\"\n[run]\nworld_size = 2\n[workload]\nkind = \"program\"\ncommand = [\"true\"]\nwrap = \"none\"\n[[inject]]\n"
          "kind = \"slow_rank\"\nrank = 1\nseconds = 0.1\n[expect]\noutcome = \"pass\"\n",
          "wrap = \"none\" has none");
  refused("gate_missing.toml",
          "name = \"p\"\n[run]\nworld_size = 2\n[workload]\nkind = \"program\"\ncommand = [\"true\"]\n[expect]\noutcome = \"straggler\"\n",
          "a straggler is a diagnosis only where the scenario sets straggler_share");
  refused("gate_unwrapped.toml",
          "name = \"p\"\n[run]\nworld_size = 2\n[workload]\nkind = \"program\"\ncommand = [\"true\"]\nwrap = \"none\"\n[expect]\n"
          "outcome = \"pass\"\nstraggler_share = 0.2\n",
          "straggler_share: has nothing to judge");
  refused("typo.toml", "name = \"p\"\n[workload]\nkind = \"program\"\ncommand = [\"x\"]\ncomand = [\"y\"]\n[expect]\noutcome = \"pass\"\n", "comand");
}

// A program that cannot start (its command is not on PATH) is refused when its file is loaded
// (validate and run alike, exit 2), naming file:line and the key, never a hang, a pass or a
// rank_failure with exit code 127 and empty logs.
TEST(ProgramScenarioTest, AMissingCommandIsAnErrorNamingTheKey) {
  TempDir dir("lockstep_program");
  const std::string f = dir.write("p.toml", R"(name = "p.missing"
[run]
world_size = 2
[workload]
kind = "program"
command = ["no-such-program-lockstep"]
wrap = "none"
[expect]
outcome = "pass"
)");
  try {
    lockstep::validate::load_file(f);
    ADD_FAILURE() << "a command that is not on PATH was accepted";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), f + ":6:");
    EXPECT_CONTAINS(e.what(), "workload.command");
    EXPECT_CONTAINS(e.what(), "'no-such-program-lockstep' is not on PATH");
  }
  // A script after {python} that does not exist, and a path that is not executable, likewise.
  const std::string g = dir.write("q.toml", "name = \"q\"\n[workload]\nkind = \"program\"\ncommand = [\"{python}\", \"{dir}/trian.py\"]\n");
  try {
    lockstep::validate::load_file(g);
    ADD_FAILURE() << "a missing script was accepted";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "the script '{dir}/trian.py'");
    EXPECT_CONTAINS(e.what(), "does not exist");
  }
  const std::string h = dir.write("s.toml", "name = \"s\"\n[workload]\nkind = \"lookup\"\n[system]\nname = \"t\"\ncommand = [\"{dir}/s.toml\"]\n");
  try {
    lockstep::validate::load_file(h);
    ADD_FAILURE() << "a command that is not executable was accepted";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(e.what(), "system.command");
    EXPECT_CONTAINS(e.what(), "is not an executable file");
  }
}

}  // namespace
}  // namespace lockstep
