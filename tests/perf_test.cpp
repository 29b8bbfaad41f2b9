// The cost accounting per rank and phase (harness/perf/), the slowdown fault, the run-to-run
// part of the throughput rule, and a performance baseline end to end: record, a clean check, a
// slowed check, and the report that marks it.
#include <linux/perf_event.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/rules/stats.h"
#include "harness/core/error.h"
#include "harness/perf/cost.h"
#include "tests/test_util.h"

namespace lockstep::perf {
namespace {

constexpr double kMs = 1e-3;

TEST(PhaseClockTest, ChargesEachIterationToItsPhaseAndLeavesTheWarmUpOut) {
  PhaseClock clock(nullptr, {}, /*rank=*/0);
  clock.mark("train", 0);
  burn_cpu(4 * kMs);  // the warm-up iteration
  for (int step = 1; step <= 3; ++step) {
    clock.mark("train", step);
    burn_cpu(10 * kMs);
  }
  clock.mark("eval", -1);  // no step: a total, not an iteration
  burn_cpu(6 * kMs);
  clock.mark("check", 7);  // relabelled at once: an empty site, not an iteration
  clock.mark("push", 7);
  burn_cpu(2 * kMs);
  const auto phases = clock.finish();
  const PhaseCost& train = phases.at("train");
  EXPECT_EQ(train.iterations, 4);
  ASSERT_EQ(train.main_cpu_samples.size(), 3u) << "the first iteration is the warm-up";
  for (double s : train.main_cpu_samples) {
    EXPECT_GE(s, 10 * kMs);
    EXPECT_LT(s, 14 * kMs);
  }
  EXPECT_GE(train.main_cpu_s, 34 * kMs);
  // Read a moment apart from the thread's clock: equal up to that moment.
  EXPECT_GE(train.cpu_s, train.main_cpu_s * 0.99) << "the process's CPU time includes the main thread's";
  EXPECT_GE(train.wall_s, 34 * kMs);
  EXPECT_EQ(phases.at("eval").iterations, 0);
  EXPECT_TRUE(phases.at("eval").main_cpu_samples.empty());
  EXPECT_GE(phases.at("eval").main_cpu_s, 6 * kMs);
  EXPECT_EQ(phases.at("check").iterations, 0);
  EXPECT_EQ(phases.at("push").iterations, 1);
  EXPECT_FALSE(clock.slowdown_fired());
}

// The run ends inside step 3 of "check" after a long final check of its own (the tail): that
// site is closed by the end of the workload, not by the next iteration, so it is no sample
// (steps 1 and 2 are; step 0 is the warm-up), but it counts in the phase's total and its
// iterations. Either the clock is told the workload ended and the rank's finalize barrier
// moves the site on (as a rank runs), or the run simply finishes in that site.
TEST(PhaseClockTest, TheSiteTheWorkloadEndsInIsItsTail) {
  for (const bool told : {false, true}) {
    PhaseClock clock(nullptr, {}, /*rank=*/0);
    for (int step = 0; step <= 3; ++step) {
      clock.mark("check", step);
      burn_cpu(10 * kMs);
    }
    burn_cpu(40 * kMs);  // the tail
    if (told) {
      clock.end_workload();
      clock.mark("finalize", -1);
      burn_cpu(1 * kMs);
    }
    const auto phases = clock.finish();
    const PhaseCost& check = phases.at("check");
    EXPECT_EQ(check.iterations, 4) << told;
    ASSERT_EQ(check.main_cpu_samples.size(), 2u) << "steps 1 and 2; 0 is the warm-up, 3 the tail";
    for (double s : check.main_cpu_samples) {
      EXPECT_GE(s, 10 * kMs) << told;
      EXPECT_LT(s, 14 * kMs) << told;
    }
    EXPECT_GE(check.main_cpu_s, 80 * kMs) << told;
  }
}

TEST(PhaseClockTest, SlowdownBurnsItsShareOfTheIterationOnlyWhereItApplies) {
  Slowdown half{50, "train", /*rank=*/0};
  Slowdown other_rank{50, "", /*rank=*/1};
  PhaseClock clock(nullptr, {half, other_rank}, /*rank=*/0);
  for (int step = 0; step < 4; ++step) {
    clock.mark("train", step);
    burn_cpu(20 * kMs);
    clock.mark("eval", step);
    burn_cpu(20 * kMs);
  }
  const auto phases = clock.finish();
  EXPECT_TRUE(clock.slowdown_fired());
  // 20 ms of work plus 50% of it: 30 ms per train iteration; eval is not slowed.
  for (double s : phases.at("train").main_cpu_samples) {
    EXPECT_GE(s, 29.5 * kMs);
    EXPECT_LT(s, 36 * kMs);
  }
  for (double s : phases.at("eval").main_cpu_samples) {
    EXPECT_GE(s, 19.5 * kMs);
    EXPECT_LT(s, 25 * kMs);
  }
}

TEST(CountersTest, HardwareCountersAreOpenedOrSayWhyNot) {
  Counters c;
  if (c.available()) {
    EXPECT_EQ(c.names(), (std::vector<std::string>{"instructions", "cycles"}));
    EXPECT_EQ(c.availability(), "instructions,cycles");
    EXPECT_EQ(c.read().size(), 2u);
  } else {
    EXPECT_EQ(c.availability().rfind("none: perf_event_open(instructions): ", 0), 0u) << c.availability();
    EXPECT_TRUE(c.read().empty());
  }
}

TEST(CountersTest, InheritedCounterIncludesThreadsStartedAfterIt) {
  // The software task clock goes through the same perf_event_open path as the hardware
  // counters, and exists where they do not.
  Counters c({{PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK}}, {"task_clock_ns"});
  if (!c.available()) GTEST_SKIP() << "perf_event_open offers no task clock here: " << c.availability();
  const double before = c.read().at(0);
  std::thread worker([] { burn_cpu(30 * kMs); });
  worker.join();
  const double after = c.read().at(0);
  EXPECT_GE(after - before, 29e6) << "30 ms burnt by a thread started after the counter was opened";
}

TEST(SlowdownFlagTest, ParsesPercentPhaseAndRankAndRefusesTheRest) {
  const Slowdown a = parse_slowdown_flag("10", "--slowdown");
  EXPECT_EQ(a.percent, 10);
  EXPECT_EQ(a.phase, "");
  EXPECT_EQ(a.rank, -1);
  const Slowdown b = parse_slowdown_flag("2.5:train:1", "--slowdown");
  EXPECT_EQ(b.percent, 2.5);
  EXPECT_EQ(b.phase, "train");
  EXPECT_EQ(b.rank, 1);
  const Slowdown c = parse_slowdown_flag("10::3", "--slowdown");
  EXPECT_EQ(c.phase, "");
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.describe(), "10% on every phase, rank 3");
  EXPECT_TRUE(b.applies("train", 1));
  EXPECT_FALSE(b.applies("train", 0));
  EXPECT_FALSE(b.applies("eval", 1));
  for (const char* bad : {"", "0", "-5", "abc", "nan", "inf", "2000", "10:train:x", "10:train:-1", "10:a:1:2"}) {
    try {
      parse_slowdown_flag(bad, "--slowdown");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_CONTAINS(e.what(), "--slowdown: ");
      EXPECT_CONTAINS(e.what(), "got '" + std::string(bad) + "'");
    }
  }
}

}  // namespace
}  // namespace lockstep::perf

namespace lockstep::baseline {
namespace {

using test::quote;

TEST(ThroughputRuleTest, IterationMetricsAreNamedPerPhaseAndRank) {
  EXPECT_TRUE(is_iteration_metric("train/rank1/main_cpu_s"));
  EXPECT_TRUE(is_iteration_metric("sample/rank0/instructions"));
  EXPECT_FALSE(is_iteration_metric("sampled_edges_per_s"));
  EXPECT_FALSE(is_iteration_metric("rank1_s"));
  EXPECT_EQ(direction_of("sample/rank0/instructions"), Direction::kLowerIsBetter);
  EXPECT_EQ(direction_of("sample/rank0/cycles"), Direction::kLowerIsBetter);
  RuleOptions o;
  o.tolerance = 0.2;
  o.iteration_tolerance = 0.04;
  EXPECT_EQ(rule_for("train/rank0/main_cpu_s", o).tolerance, 0.04);
  EXPECT_EQ(rule_for("us_per_op", o).tolerance, 0.2);
}

TEST(ThroughputRuleTest, RunToRunSpreadWidensTheTolerance) {
  // Identical, tight iterations on both sides: without runs, only the tolerance applies.
  std::vector<double> iterations;
  for (int i = 0; i < 40; ++i) iterations.push_back(1.0 + 0.001 * (i % 5));
  RuleOptions o;
  o.tolerance = 0.03;
  const Judgement plain = judge("t/rank0/main_cpu_s", iterations, iterations, o);
  EXPECT_DOUBLE_EQ(plain.threshold, 0.03);
  // Three baseline runs whose medians were 1.0, 1.1 and 0.9, one observed run: the pooled SD of
  // the log medians (2 degrees of freedom) times sqrt(1/3 + 1/1), times noise_factor 3.
  const std::vector<double> runs{1.0, 1.1, 0.9};
  const double mean = (std::log(1.0) + std::log(1.1) + std::log(0.9)) / 3;
  double ss = 0;
  for (double r : runs) ss += (std::log(r) - mean) * (std::log(r) - mean);
  const double want = std::exp(3 * std::sqrt(ss / 2) * std::sqrt(1.0 / 3 + 1.0)) - 1;
  const Judgement wide = judge("t/rank0/main_cpu_s", iterations, iterations, o, runs, {1.0});
  EXPECT_NEAR(wide.threshold, want, 1e-12);
  EXPECT_GT(wide.threshold, 0.2);
  // Paired runs (recorded interleaved): the spread of their differences, which drift shared
  // by both sides leaves out. Runs 1.0/1.1/0.9 against 1.02/1.12/0.92 drift together.
  const std::vector<double> beside{1.02, 1.12, 0.92};
  std::vector<double> d;
  for (int i = 0; i < 3; ++i) d.push_back(std::log(beside[i]) - std::log(runs[i]));
  const double dm = (d[0] + d[1] + d[2]) / 3;
  const double dss = (d[0] - dm) * (d[0] - dm) + (d[1] - dm) * (d[1] - dm) + (d[2] - dm) * (d[2] - dm);
  const double want_paired = std::max(0.03, std::exp(3 * std::sqrt(dss / 2 / 3)) - 1);
  const Judgement paired = judge("t/rank0/main_cpu_s", iterations, iterations, o, runs, beside, /*paired=*/true);
  EXPECT_NEAR(paired.threshold, want_paired, 1e-12);
  EXPECT_LT(paired.threshold, 0.035) << "the shared drift is not noise";
  EXPECT_GT(judge("t/rank0/main_cpu_s", iterations, iterations, o, runs, beside).threshold, 0.2) << "unpaired, it is";
  // Iterations shorter than a millisecond are not timed, only counted.
  std::vector<double> tiny(iterations);
  for (double& v : tiny) v *= 1e-4;
  EXPECT_FALSE(judge("t/rank0/main_cpu_s", tiny, tiny, o).judged);
  EXPECT_TRUE(judge("t/rank0/instructions", tiny, tiny, o).judged) << "a count is never too small";
  // Fewer than three runs in all say nothing about the spread.
  EXPECT_DOUBLE_EQ(judge("t/rank0/main_cpu_s", iterations, iterations, o, {1.0}, {1.3}).threshold, 0.03);
  // A phase of a few iterations per run is a correctness scenario's, whose cost is start-up's:
  // 12 iterations over the 3 runs (4 each, fewer than min_iterations_per_run 8) are not judged,
  // the same 12 from one run are.
  const std::vector<double> few(iterations.begin(), iterations.begin() + 12);
  EXPECT_FALSE(judge("t/rank0/main_cpu_s", few, few, o, runs, runs).judged);
  EXPECT_FALSE(judge("t/rank0/instructions", few, few, o, runs, runs).judged);
  EXPECT_TRUE(judge("t/rank0/main_cpu_s", few, few, o, {1.0}, {1.0}).judged);
  EXPECT_TRUE(judge("us_per_op", few, few, o, runs, runs).judged) << "a run metric has no iterations";
}

class PerfBaselineTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return tmp_ / name; }
  test::CliResult lockstep(const std::string& args) { return test::run_cli(LOCKSTEP_BINARY, args, tmp_.path()); }
  test::TempDir tmp_{"lockstep_perf"};
};

// One small training scenario, about 4 ms of CPU per step on each of 2 ranks.
constexpr const char* kTraining = R"(name = "perf.small"
[run]
world_size = 2
[workload]
kind = "training"
graph = "erdos_renyi"
nodes = 4000
edges = 40000
num_train = 2048
num_eval = 200
batch_size = 128
hidden = 256
feature_dim = 32
fanouts = [8, 4]
steps = 16
[expect]
outcome = "pass"
)";

TEST_F(PerfBaselineTest, SlowedRankIsDeclaredCleanRunIsNotAndTheReportMarksIt) {
  const std::string scenario = tmp_.write("s/small.toml", kTraining);
  const std::string db = quote(path("b.db"));
  auto r = lockstep("record " + quote(scenario) + " --baseline " + db + " --env e --repeat 3 --report-dir " + quote(path("rec")));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto recorded = nlohmann::json::parse(test::read_file(path("rec/results.json")));
  const auto& samples = recorded["scenarios"][0]["samples"];
  ASSERT_TRUE(samples.contains("train/rank1/main_cpu_s")) << samples.dump();
  EXPECT_EQ(samples["train/rank1/main_cpu_s"].size(), 15u) << "16 steps, the first one a warm-up";
  EXPECT_TRUE(recorded["scenarios"][0]["perf"]["ranks"][1].contains("train"));

  // A generous tolerance keeps this test quiet on a loaded machine, where a clean rank's CPU time
  // per iteration has measured 1.41x the baseline recorded moments before (CI, 2 cores shared);
  // 150% still tells apart the slowdown, which makes rank 1 five times slower.
  const std::string check = " --baseline " + db + " --env e --repeat 1 --tolerance 1.5 --iteration-tolerance 1.5 --report-dir ";
  r = lockstep("run " + quote(scenario) + check + quote(path("clean")));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = lockstep("run " + quote(scenario) + check + quote(path("slow")) + " --slowdown 400::1");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const auto slow = nlohmann::json::parse(test::read_file(path("slow/results.json")));
  EXPECT_EQ(slow["scenarios"][0]["diagnosis"]["kind"], "throughput_regression");
  EXPECT_CONTAINS(slow["scenarios"][0]["diagnosis"]["message"].get<std::string>(), "train/rank1/main_cpu_s");

  // A phase that never runs: the fault never fired, which is an error, not a pass.
  r = lockstep("run " + quote(scenario) + " --report-dir " + quote(path("nowhere")) + " --slowdown 10:nosuchphase");
  EXPECT_EQ(r.code, 1);
  const auto nowhere = nlohmann::json::parse(test::read_file(path("nowhere/results.json")));
  EXPECT_EQ(nowhere["scenarios"][0]["status"], "error");
  EXPECT_CONTAINS(nowhere["scenarios"][0]["reason"].get<std::string>(), "--slowdown 10:nosuchphase never fired");
  EXPECT_CONTAINS(nowhere["scenarios"][0]["reason"].get<std::string>(), "train");

  // Both checks are kept; the report opens on the last one and marks it in the history.
  r = lockstep("report --baseline " + db + " --out " + quote(path("rep")));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = test::read_file(path("rep/index.html"));
  EXPECT_LT(html.find("<h2>Summary</h2>"), html.find("<h2>History</h2>"));
  EXPECT_CONTAINS(html, "1 throughput_regression");
  EXPECT_CONTAINS(html, "stroke=\"#d00\"");
  EXPECT_CONTAINS(html, "throughput_regression: perf.small: slower than recorded");
  EXPECT_CONTAINS(html, "CPU time per iteration, main thread, slowest rank");
  const std::string md = test::read_file(path("rep/report.md"));
  EXPECT_CONTAINS(md, " | 3 | 2 |\n") << "3 records and 2 checks of environment e";
}

TEST_F(PerfBaselineTest, AScenarioInjectingASlowdownIsItsOwnBaseline) {
  std::string text = kTraining;
  text.replace(text.find("outcome = \"pass\""), 16, "outcome = \"throughput_regression\"\nrank = 1");
  text += "[[inject]]\nkind = \"slowdown\"\npercent = 60\nphase = \"train\"\nrank = 1\n";
  const std::string file = tmp_.write("s/slow.toml", text);
  auto r = lockstep("run " + quote(file) + " --report-dir " + quote(path("ab")));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(test::read_file(path("ab/results.json")));
  const auto& s = j["scenarios"][0];
  EXPECT_EQ(s["status"], "pass") << s.dump();
  EXPECT_EQ(s["diagnosis"]["kind"], "throughput_regression");
  EXPECT_EQ(s["diagnosis"]["rank"], 1);
  EXPECT_CONTAINS(s["diagnosis"]["message"].get<std::string>(), "train/rank1/main_cpu_s");
  EXPECT_CONTAINS(s["diagnosis"]["message"].get<std::string>(), "5 interleaved runs a side");
  // The five reference runs (slowdown off) and the first four slowed ones keep their artifacts.
  EXPECT_TRUE(std::filesystem::exists(path("ab/perf.small-ab/reference-5")));
  EXPECT_TRUE(std::filesystem::exists(path("ab/perf.small-ab/candidate-4")));
  EXPECT_FALSE(std::filesystem::exists(path("ab/perf.small-ab/candidate-5"))) << "the last is the scenario's own run";
  // Its samples measure the fault: they are not results, and no baseline records them.
  EXPECT_TRUE(!s.contains("samples") || s["samples"].empty()) << s["samples"].dump();
}

// The same with iterations too short to judge (hidden 8: well under 2 ms): no evidence either
// way, so an error, never a pass or a fail.
TEST_F(PerfBaselineTest, ASlowdownTheRuleCannotJudgeIsAnError) {
  std::string text = kTraining;
  text.replace(text.find("hidden = 256"), 12, "hidden = 8");
  text.replace(text.find("outcome = \"pass\""), 16, "outcome = \"throughput_regression\"");
  text += "[[inject]]\nkind = \"slowdown\"\npercent = 60\nphase = \"train\"\nrank = 1\n";
  const std::string file = tmp_.write("s/short.toml", text);
  auto r = lockstep("run " + quote(file) + " --report-dir " + quote(path("short")));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const auto j = nlohmann::json::parse(test::read_file(path("short/results.json")));
  EXPECT_EQ(j["scenarios"][0]["status"], "error") << j.dump();
  EXPECT_CONTAINS(j["scenarios"][0]["reason"].get<std::string>(), "judged no per-iteration metric");
}

TEST_F(PerfBaselineTest, ABRunAgainstAReferenceBinaryDeclaresTheSlowerCandidate) {
  const std::string scenario = quote(tmp_.write("s/small.toml", kTraining));
  const std::string ab = " --reference " + quote(LOCKSTEP_BINARY) + " --ab-runs 3 --ab-tolerance 0.3 --report-dir ";
  auto r = lockstep("run " + scenario + ab + quote(path("same")));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = lockstep("run " + scenario + ab + quote(path("slow")) + " --slowdown 300::1");  // 4x: far beyond what load does to 3 pairs
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const auto j = nlohmann::json::parse(test::read_file(path("slow/results.json")));
  const auto& d = j["scenarios"][0]["diagnosis"];
  EXPECT_EQ(d["kind"], "throughput_regression");
  EXPECT_EQ(d["rank"], 1) << "only rank 1 was slowed";
  EXPECT_CONTAINS(d["message"].get<std::string>(), "slower than the reference ");
  EXPECT_CONTAINS(d["message"].get<std::string>(), "(3 interleaved runs a side)");
  // The reference runs never carry the candidate's slowdown.
  EXPECT_TRUE(std::filesystem::exists(path("slow/perf.small-ab/reference-3")));
  r = lockstep("run " + scenario + " --reference " + quote(path("no-such-binary")) + " --report-dir " + quote(path("x")));
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "is not an executable lockstep binary");
  r = lockstep("run " + scenario + " --reference " + quote(LOCKSTEP_BINARY) + " --baseline " + quote(path("b.db")) +
               " --report-dir " + quote(path("y")));
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "--reference and --baseline");
}

TEST_F(PerfBaselineTest, BadSlowdownsAreInputErrors) {
  auto r = lockstep("run " + quote(tmp_.write("s/x.toml", kTraining)) + " --slowdown 0 --report-dir " + quote(path("r")));
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "--slowdown: PERCENT must be a number in (0, 1000], got '0'");
  std::string bad = kTraining;
  bad += "[[inject]]\nkind = \"slowdown\"\npercent = -3\n";
  r = lockstep("validate " + quote(tmp_.write("s/bad.toml", bad)));
  EXPECT_EQ(r.code, 2);
  EXPECT_CONTAINS(r.err, "bad.toml:");
  EXPECT_CONTAINS(r.err, "percent");
  EXPECT_CONTAINS(r.err, "must be in (0, 1000], got -3");
}

}  // namespace
}  // namespace lockstep::baseline
