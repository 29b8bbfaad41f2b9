// Tests of a record's numbers beyond its digest (harness/baseline/numerics.h): the tensor file a
// program's rank writes (lockstep_torch/numerics.py) read as untrusted input, the per-tensor and
// per-curve comparison against declared tolerances, and `lockstep compare`'s verdicts from a store
// (schema version 6) that holds them. Every expected figure is worked out by hand in the comment
// beside it.
#include "harness/baseline/numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness/baseline/check.h"
#include "harness/baseline/report.h"
#include "harness/baseline/store.h"
#include "harness/core/error.h"
#include "tests/test_util.h"

namespace lockstep::baseline {
namespace {

// Little-endian float64 bytes, written here byte by byte (not through to_bytes).
std::string le(const std::vector<double>& values) {
  std::string out;
  for (double v : values) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    for (int k = 0; k < 8; ++k) out += static_cast<char>((bits >> (8 * k)) & 0xff);
  }
  return out;
}

std::string input_error(const std::string& bytes) {
  try {
    parse_tensor_file(bytes, "numerics-rank0.bin");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(NumericsTest, ReadsTheFileARankWrites) {
  const std::string header =
      R"({"format": "lockstep-numerics", "version": 1, "tensors": [)"
      R"({"name": "lin.weight", "shape": [2, 2], "dtype": "float32", "kept": true},)"
      R"({"name": "big", "shape": [1000000], "dtype": "bfloat16", "kept": false},)"
      R"({"name": "lin.bias", "shape": [2], "dtype": "float64", "kept": true}]})";
  const auto t = parse_tensor_file(header + "\n" + le({1, -2, 0.5, 3}) + le({-0.25, 7}), "numerics-rank0.bin");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].name, "lin.weight");
  EXPECT_EQ(t[0].shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(t[0].values, (std::vector<double>{1, -2, 0.5, 3}));
  EXPECT_FALSE(t[1].kept);
  EXPECT_TRUE(t[1].values.empty());
  EXPECT_EQ(t[1].dtype, "bfloat16");
  EXPECT_EQ(t[2].values, (std::vector<double>{-0.25, 7}));
}

TEST(NumericsTest, AFileThatDisagreesWithItsHeaderIsRefusedByName) {
  const std::string h = R"({"format": "lockstep-numerics", "version": 1, "tensors": [{"name": "w", "shape": [3], "dtype": "float32", "kept": true}]})";
  EXPECT_CONTAINS(input_error(h + "\n" + le({1, 2})), "numerics-rank0.bin: the header lists 3 kept elements (24 bytes), the file has 16 bytes");
  EXPECT_CONTAINS(input_error("no newline"), "numerics-rank0.bin: not a lockstep numerics file (no header line)");
  EXPECT_CONTAINS(input_error("{\"format\": \"other\"}\n"), "format is not \"lockstep-numerics\"");
  EXPECT_CONTAINS(input_error("{\"format\": \"lockstep-numerics\", \"version\": 2, \"tensors\": []}\n"), "numerics version 2 is not 1");
  EXPECT_CONTAINS(input_error(R"({"format": "lockstep-numerics", "version": 1, "tensors": [{"name": "w", "shape": [-1]}]})" "\n"),
                  "tensor w: a dimension is not a whole number >= 0: -1");
  EXPECT_CONTAINS(input_error(R"({"format": "lockstep-numerics", "version": 1, "tensors": [{"name": "w", "shape": [1048576, 1048576, 2]}]})" "\n"),
                  "tensor w: more than 2^40 elements");
  EXPECT_CONTAINS(input_error(R"({"format": 7})" "\n"), "numerics-rank0.bin: not a lockstep numerics file: ");
  EXPECT_CONTAINS(input_error(R"({"format": "lockstep-numerics", "version": 1, "tensors": [{"name": "w", "shape": [1], "kept": "yes"}]})" "\n"),
                  "numerics-rank0.bin: not a lockstep numerics file: ");
}

Numerics tensors(const std::vector<double>& w) { return Numerics{{TensorValues{"w", {4}, "float32", true, w}}, {}}; }
Numerics curve(const std::vector<std::int64_t>& steps, const std::vector<double>& v) { return Numerics{{}, {CurveValues{"loss", steps, v}}}; }

TEST(NumericsTest, TensorsWithinTheToleranceGiveTheirFigures) {
  Tolerances t;
  t.declared = true;
  t.param_rtol = 1e-3;
  // Element 1: |2.001 - 2| = 0.001 <= 0 + 1e-3 * 2 = 0.002; relative 0.001 / 2 = 5e-4.
  const auto c = compare_numerics(tensors({1, 2, 0, 4}), tensors({1, 2.001, 0, 4}), t);
  EXPECT_FALSE(c.identical);
  EXPECT_TRUE(c.within) << c.detail;
  ASSERT_EQ(c.tensors.size(), 1u);
  EXPECT_EQ(c.tensors[0].differ, 1);
  EXPECT_EQ(c.tensors[0].beyond, 0);
  EXPECT_NEAR(c.tensors[0].max_rel, 5e-4, 1e-9);
  EXPECT_EQ(c.detail, "parameters: 1 of 4 elements differ, largest relative difference 0.0005 (w, |difference| 0.001)");
}

TEST(NumericsTest, ATensorBeyondTheToleranceIsNamedWithItsCount) {
  Tolerances t;
  t.param_rtol = 1e-4;
  t.param_atol = 0.01;
  // Element 1 moves 0.001 <= 0.01 + 2e-4: within. Element 2 moves 0 -> 0.5 > 0.01: beyond, its
  // relative difference infinite (0 before). Element 3 moves 4 -> 4.1: 0.1 > 0.01 + 4e-4, beyond.
  const auto c = compare_numerics(tensors({1, 2, 0, 4}), tensors({1, 2.001, 0.5, 4.1}), t);
  EXPECT_FALSE(c.within);
  EXPECT_EQ(c.tensors[0].differ, 3);
  EXPECT_EQ(c.tensors[0].beyond, 2);
  EXPECT_EQ(c.detail, "parameter w: 2 of 4 elements beyond atol 0.01 + rtol 0.0001 x |value| (largest |difference| 0.5, relative inf)");
}

TEST(NumericsTest, NanEqualsNanAndANewNanIsBeyondAnyTolerance) {
  Tolerances loose;
  loose.param_rtol = 1e9;
  EXPECT_TRUE(compare_numerics(tensors({NAN, 1, 2, 3}), tensors({NAN, 1, 2, 3}), loose).identical);
  const auto c = compare_numerics(tensors({1, 1, 2, 3}), tensors({NAN, 1, 2, 3}), loose);
  EXPECT_FALSE(c.within);
  EXPECT_EQ(c.tensors[0].beyond, 1);
}

TEST(NumericsTest, AnInfinityOnEitherSideIsBeyondAnyTolerance) {
  Tolerances loose;
  loose.param_rtol = 1e9;
  loose.curve_rtol = 1e9;
  // |1 - inf| <= rtol * |inf| would hold: a value that is not finite is never within.
  EXPECT_EQ(compare_numerics(tensors({INFINITY, 1, 2, 3}), tensors({1, 1, 2, 3}), loose).tensors[0].beyond, 1);
  EXPECT_EQ(compare_numerics(tensors({INFINITY, 1, 2, 3}), tensors({-INFINITY, 1, 2, 3}), loose).tensors[0].beyond, 1);
  EXPECT_TRUE(compare_numerics(tensors({INFINITY, 1, 2, 3}), tensors({INFINITY, 1, 2, 3}), loose).identical);
  EXPECT_FALSE(compare_numerics(curve({0}, {INFINITY}), curve({0}, {1}), loose).within);
}

TEST(NumericsTest, TensorsListedWithoutValuesAndCurvesInOneRecordAreNamedNotCompared) {
  Tolerances t;
  t.param_rtol = 1e-3;
  Numerics a = tensors({1, 2, 3, 4}), b = tensors({1, 2.001, 3, 4});
  a.tensors.push_back(TensorValues{"big", {1000}, "float32", false, {}});
  b.tensors.push_back(TensorValues{"big", {1000}, "float32", false, {}});
  a.curves.push_back(CurveValues{"loss", {0}, {1}});
  const auto c = compare_numerics(a, b, t);
  EXPECT_TRUE(c.within) << c.detail;
  EXPECT_FALSE(c.identical);
  EXPECT_EQ(c.detail, "parameters: 1 of 4 elements differ, largest relative difference 0.0005 (w, |difference| 0.001); not compared: loss "
                      "(only in the first record), 1 parameter tensors past LOCKSTEP_NUMERICS_MAX_ELEMENTS (listed without values)");
}

TEST(NumericsTest, AStepLoggedTwiceIsComparedAtItsFirstOccurrence) {
  Tolerances t;
  // Steps 0, 1, 0, 1 (a counter per epoch): the first 0 and 1 of each side are compared, 2 points.
  const auto c = compare_numerics(curve({0, 1, 0, 1}, {5, 4, 3, 2}), curve({0, 1, 0, 1}, {5, 4, 9, 9}), t);
  EXPECT_TRUE(c.identical) << c.detail;
  EXPECT_EQ(c.curves[0].points, 2);
}

TEST(NumericsTest, ATensorInOneRecordOnlyOrReshapedIsNotWithinTolerance) {
  Tolerances t;
  Numerics a = tensors({1, 2, 3, 4});
  Numerics b = a;
  b.tensors[0].shape = {2, 2};
  EXPECT_EQ(compare_numerics(a, b, t).detail, "parameter w: shape changed");
  b.tensors[0].name = "v";
  const auto c = compare_numerics(a, b, t);
  EXPECT_FALSE(c.within);
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].problem, "only in the first record");
  EXPECT_EQ(c.tensors[1].problem, "only in the second record");
}


TEST(NumericsTest, ACurveIsComparedStepByStepAndPartsAtTheFirstStepBeyondItsTolerance) {
  Tolerances t;
  t.curve_rtol = 0.05;
  // Step 3: |1.04 - 1| / 1.04 = 0.0385 <= 0.05 (differs, within); step 4: 0.2 / 1.2 = 0.1667 > 0.05.
  // Step 5 is in the first record only: not compared.
  const auto c = compare_numerics(curve({0, 1, 2, 3, 4, 5}, {1, 1, 1, 1, 1, 1}), curve({0, 1, 2, 3, 4}, {1, 1, 1, 1.04, 1.2}), t);
  ASSERT_EQ(c.curves.size(), 1u);
  EXPECT_EQ(c.curves[0].points, 5);
  EXPECT_EQ(c.curves[0].first_differ_step, 3);
  EXPECT_EQ(c.curves[0].first_beyond_step, 4);
  EXPECT_EQ(c.detail, "loss parts at step 4 (relative difference 0.167 > curve_rtol 0.05)");
  // Where the curves part is not where they are furthest apart: both are named.
  const auto e = compare_numerics(curve({0, 1, 2}, {1, 1, 1}), curve({0, 1, 2}, {1, 1.1, 1.5}), t);
  EXPECT_EQ(e.detail, "loss parts at step 1 (relative difference 0.0909 > curve_rtol 0.05; largest 0.333 at step 2)");
  // Logged every 10 steps: the steps are the program's, not the points' positions.
  t.curve_rtol = 0.5;
  const auto d = compare_numerics(curve({0, 10, 20}, {2, 2, 2}), curve({0, 10, 20}, {2, 2, 2.5}), t);
  EXPECT_TRUE(d.within);
  EXPECT_EQ(d.detail, "loss largest relative difference 0.2 over 3 steps");
}

// An export (schema version 6) of two environments, one scenario each, with the given numerics
// and tolerances, imported into a new store; then compare's verdict for it.
struct Compared {
  Verdict verdict;
  std::string detail;
};
std::string export_two(const std::string& from_numerics, const std::string& to_numerics, const std::string& tolerances,
                       const std::string& from_digest, const std::string& to_digest) {
  auto run = [&](const std::string& uid, const std::string& env, const std::string& digest, const std::string& numerics) {
    return R"({"uid": ")" + uid + R"(", "environment": ")" + env + R"(", "started_at": "2026-01-01T00:00:0)" + uid.substr(1) +
           R"(Z", "kind": "record", "repeat": 0, "lockstep_rev": "r", "host": "h", "results": [{"scenario": "p", "name": "p",
           "file": "p.toml", "variant": "", "status": "pass", "expected": "pass", "diagnosis": "", "digest": ")" + digest +
           R"(", "duration_s": 1, "world_size": 2, "sequence": "", "metrics": {}, "tolerances": )" + tolerances +
           R"(, "numerics": )" + numerics + "}]}";
  };
  auto env = [](const std::string& name) {
    return R"({"name": ")" + name + R"(", "torch": "1", "torch_line": "t", "cuda": "none", "nccl": "none", "compiler": "c",
               "cpu": "c", "gpu": "none", "driver": "none", "lockstep_rev": "r"})";
  };
  return R"({"format": "lockstep-baseline", "schema_version": 6, "environments": [)" + env("a") + "," + env("b") +
         R"(], "sequences": [], "runs": [)" + run("u1", "a", from_digest, from_numerics) + "," + run("u2", "b", to_digest, to_numerics) +
         "]}";
}

Compared compare_two(const std::string& from_numerics, const std::string& to_numerics, const std::string& tolerances,
                     const std::string& from_digest = "d1", const std::string& to_digest = "d2") {
  test::TempDir dir("lockstep_numerics");
  Store store(dir.path() + "/s.db", Access::kCreate);
  EXPECT_EQ(store.import_text(export_two(from_numerics, to_numerics, tolerances, from_digest, to_digest), "t.json"), 2);
  // The export keeps what was imported (NaN as "nan"): exporting it again gives the same.
  const std::string again = store.export_text();
  EXPECT_CONTAINS(again, "\"numerics\":");
  if (from_numerics.find("\"nan\"") != std::string::npos || to_numerics.find("\"nan\"") != std::string::npos) {
    EXPECT_CONTAINS(again, "\"nan\"");
  }
  test::TempDir copy("lockstep_numerics_copy");
  Store other(copy.path() + "/s.db", Access::kCreate);
  EXPECT_EQ(other.import_text(again, "again.json"), 2);
  EXPECT_EQ(other.export_text(), again);
  const Comparison c = compare(store, "a", "b", RuleOptions{});
  EXPECT_EQ(c.scenarios.size(), 1u);
  return c.scenarios.empty() ? Compared{Verdict::kSame, ""} : Compared{c.scenarios[0].verdict, c.scenarios[0].detail};
}

const char* kTol = R"({"param_rtol": 0.001, "param_atol": 0, "curve_rtol": 0.01, "sequence_may_change": false})";
std::string nums(const std::string& w, const std::string& loss) {
  return R"({"tensors": [{"name": "fc.weight", "shape": [2], "dtype": "float32", "kept": true, "values": )" + w +
         R"(}], "curves": [{"name": "loss", "steps": [0, 1, 2], "values": )" + loss + "}]}";
}

TEST(NumericsTest, CompareCallsAnUpgradeWithinItsDeclaredTolerancesWithinTolerance) {
  // fc.weight[1]: |4.002 - 4| = 0.002 <= 1e-3 * 4; loss step 2: 0.001 / 1.001 < 0.01.
  const auto c = compare_two(nums("[1, 4]", "[3, 2, 1]"), nums("[1, 4.002]", "[3, 2, 1.001]"), kTol);
  EXPECT_EQ(to_string(c.verdict), "within_tolerance");
  EXPECT_CONTAINS(c.detail, "within tolerance: loss largest relative difference 0.000999 over 3 steps");
  EXPECT_CONTAINS(c.detail, "parameters: 1 of 2 elements differ, largest relative difference 0.0005 (fc.weight, |difference| 0.002)");
}

TEST(NumericsTest, CompareNamesTheStepAndTheTensorOfAResultsChange) {
  // Loss step 1: |2.5 - 2| / 2.5 = 0.2 > 0.01; fc.weight[0]: |1.5 - 1| = 0.5 > 1e-3.
  const auto c = compare_two(nums("[1, 4]", "[3, 2, 1]"), nums("[1.5, 4]", "[3, 2.5, \"nan\"]"), kTol);
  EXPECT_EQ(to_string(c.verdict), "results_changed");
  EXPECT_CONTAINS(c.detail, "loss parts at step 1 (relative difference 0.2 > curve_rtol 0.01; largest inf at step 2)");
  EXPECT_CONTAINS(c.detail, "parameter fc.weight: 1 of 2 elements beyond atol 0 + rtol 0.001 x |value|");
  EXPECT_CONTAINS(c.detail, "(digest d1 -> d2)");
}

TEST(NumericsTest, EqualDigestsAreTheSameWhateverTensorsWereKept) {
  const std::string unkept =
      R"({"tensors": [{"name": "big", "shape": [9], "dtype": "float32", "kept": false}], "curves": [{"name": "loss", "steps": [0], "values": [1]}]})";
  EXPECT_EQ(to_string(compare_two(unkept, unkept, kTol, "d", "d").verdict), "same");
}

TEST(NumericsTest, AScenarioSkippedInOneEnvironmentIsOnlyInTheOther) {
  test::TempDir dir("lockstep_numerics_skip");
  std::string text = export_two(nums("[1, 4]", "[3, 2, 1]"), nums("[1, 4]", "[3, 2, 1]"), kTol, "", "d2");
  const std::string pass = R"("status": "pass")";
  text.replace(text.find(pass), pass.size(), R"("status": "skip")");
  Store store(dir.path() + "/s.db", Access::kCreate);
  ASSERT_EQ(store.import_text(text, "t.json"), 2);
  const Comparison c = compare(store, "a", "b", RuleOptions{});
  ASSERT_EQ(c.scenarios.size(), 1u);
  EXPECT_EQ(to_string(c.scenarios[0].verdict), "only_in_to");
  EXPECT_EQ(c.scenarios[0].detail, "skipped in a (it could not run there), run in b");
}

// A changed collective sequence is sequence_changed, unless [compare] says it may change: then a
// note beside the numbers' verdict.
TEST(NumericsTest, ASequenceThatMayChangeIsANoteBesideTheNumbersVerdict) {
  auto verdict = [](bool may_change) {
    test::TempDir dir("lockstep_numerics_seq");
    const std::string tol = std::string(R"({"param_rtol": 0.001, "param_atol": 0, "curve_rtol": 0.01, "sequence_may_change": )") +
                            (may_change ? "true" : "false") + "}";
    std::string text = export_two(nums("[1, 4]", "[3, 2, 1]"), nums("[1, 4.002]", "[3, 2, 1]"), tol, "d1", "d2");
    auto call = [](const char* dtype) {
      return std::string(R"({"seq": 0, "kind": "collective", "op": "all_reduce", "dtype": ")") + dtype +
             R"(", "count": 4, "device": "cpu", "phase": "train", "step": 0, "index": 0, "reduce": "sum"})";
    };
    const std::string empty = R"("sequences": [])";
    text.replace(text.find(empty), empty.size(),
                 R"("sequences": [{"hash": "h1", "ranks": [[)" + call("f32") + R"(]]}, {"hash": "h2", "ranks": [[)" + call("bf16") + "]]}]");
    const std::string none = R"("sequence": "")";
    text.replace(text.find(none), none.size(), R"("sequence": "h1")");
    text.replace(text.find(none), none.size(), R"("sequence": "h2")");
    Store store(dir.path() + "/s.db", Access::kCreate);
    EXPECT_EQ(store.import_text(text, "t.json"), 2);
    const Comparison c = compare(store, "a", "b", RuleOptions{});
    return std::make_pair(std::string(to_string(c.scenarios.at(0).verdict)), c.scenarios.at(0).detail);
  };
  const auto [strict, strict_detail] = verdict(false);
  EXPECT_EQ(strict, "sequence_changed");
  EXPECT_CONTAINS(strict_detail, "first divergence: rank 0, call 0");
  EXPECT_CONTAINS(strict_detail, "within tolerance: parameters: 1 of 2 elements differ");
  const auto [loose, loose_detail] = verdict(true);
  EXPECT_EQ(loose, "within_tolerance");
  EXPECT_CONTAINS(loose_detail, "collective sequence changed ([compare] sequence = \"may_change\"): first divergence: rank 0, call 0");
}

// Identical numbers and a per-iteration cost about twice the older one's (20 iterations a side,
// 10 ms + i * 10 us against 20 ms + i * 10 us: medians 10.095 and 20.095 ms, ratio 1.9906):
// throughput_changed, its ratio first in the detail.
TEST(NumericsTest, IdenticalResultsThatRunSlowerAreThroughputChanged) {
  test::TempDir dir("lockstep_numerics_slow");
  std::string text = export_two(nums("[1, 4]", "[3, 2, 1]"), nums("[1, 4]", "[3, 2, 1]"), kTol, "d", "d");
  auto samples = [](double base) {
    std::string v;
    for (int i = 0; i < 20; ++i) v += (i ? ", " : "") + std::to_string(base + i * 1e-5);
    return R"("metrics": {}, "samples": {"train/rank0/main_cpu_s": [)" + v + "]},";
  };
  const std::string ran = R"("metrics": {},)";
  const std::size_t first = text.find(ran), second = text.find(ran, first + ran.size());
  text.replace(second, ran.size(), samples(0.020));
  text.replace(first, ran.size(), samples(0.010));
  Store store(dir.path() + "/s.db", Access::kCreate);
  ASSERT_EQ(store.import_text(text, "t.json"), 2);
  const Comparison c = compare(store, "a", "b", RuleOptions{});
  EXPECT_EQ(to_string(c.scenarios.at(0).verdict), "throughput_changed") << c.scenarios.at(0).detail;
  EXPECT_EQ(c.scenarios.at(0).detail.rfind("train/rank0/main_cpu_s 1.99x", 0), 0u) << c.scenarios.at(0).detail;
}

TEST(NumericsTest, WithoutDeclaredTolerancesAnyDifferenceIsAChange) {
  const auto c = compare_two(nums("[1, 4]", "[3, 2, 1]"), nums("[1, 4.002]", "[3, 2, 1]"), "null");
  EXPECT_EQ(to_string(c.verdict), "results_changed");
  EXPECT_CONTAINS(c.detail, "parameter fc.weight: 1 of 2 elements beyond atol 0 + rtol 0 x |value|");
  // Identical numbers and digests are the same; identical numbers under different digests are not
  // explained by them.
  EXPECT_EQ(to_string(compare_two(nums("[1, 4]", "[3, 2, 1]"), nums("[1, 4]", "[3, 2, 1]"), kTol, "d", "d").verdict), "same");
  const auto d = compare_two(nums("[1, 4]", "[3, 2, 1]"), nums("[1, 4]", "[3, 2, 1]"), kTol);
  EXPECT_EQ(to_string(d.verdict), "results_changed");
  EXPECT_CONTAINS(d.detail, "the recorded tensors and curves are identical: the digest covers more");
}

// The report's program upgrade section: what each side ran on, the curve of both overlaid, the
// table of parameters that differ (the imported figures: fc.weight[0] moved 0.5, relative 0.5).
TEST(NumericsTest, TheReportShowsTheUpgradeTheCurvesAndTheParametersThatDiffer) {
  test::TempDir dir("lockstep_numerics_report");
  {
    Store store(dir.path() + "/s.db", Access::kCreate);
    std::string text = export_two(nums("[1, 4]", "[3, 2, 1]"), nums("[1.5, 4]", "[3, 2.5, 1.5]"), kTol, "d1", "d2");
    const std::string ran = R"("metrics": {},)";
    const std::size_t first = text.find(ran), second = text.find(ran, first + ran.size());
    text.replace(second, ran.size(), R"("metrics": {}, "system": "torch 2.15.0+cu132, python 3.11.7",)");
    text.replace(first, ran.size(), R"("metrics": {}, "system": "torch 1.13.0a0, python 3.11.2",)");
    ASSERT_EQ(store.import_text(text, "t.json"), 2);
  }
  Store store(dir.path() + "/s.db", Access::kRead);
  write_report(store, dir.path() + "/out");
  const std::string md = test::read_file(dir.path() + "/out/report.md");
  EXPECT_CONTAINS(md, "### Program upgrade: a to b");
  EXPECT_CONTAINS(md, "| programs ran on | torch 1.13.0a0, python 3.11.2 | torch 2.15.0+cu132, python 3.11.7 |");
  EXPECT_CONTAINS(md, "#### p: results\\_changed");
  EXPECT_CONTAINS(md, "| fc.weight | 1 of 2 | 1 | 0.5 | 0.5 |");
  const std::string html = test::read_file(dir.path() + "/out/index.html");
  EXPECT_CONTAINS(html, "<title>p: loss</title>");
  EXPECT_CONTAINS(html, ">step</text>");
  EXPECT_CONTAINS(html, "<td>fc.weight</td><td>1 of 2</td><td class=\"bad\">1</td>");
}

TEST(NumericsTest, AnExportWithValuesThatDoNotFitTheShapeIsRefusedNamingIt) {
  test::TempDir dir("lockstep_numerics_bad");
  Store store(dir.path() + "/s.db", Access::kCreate);
  const std::string text =
      R"({"format": "lockstep-baseline", "schema_version": 6, "environments": [{"name": "a", "torch": "1", "torch_line": "t",
      "cuda": "none", "nccl": "none", "compiler": "c", "cpu": "c", "gpu": "none", "driver": "none", "lockstep_rev": "r"}],
      "sequences": [], "runs": [{"uid": "u1", "environment": "a", "started_at": "2026", "kind": "record", "repeat": 0,
      "lockstep_rev": "r", "host": "h", "results": [{"scenario": "p", "name": "p", "file": "p.toml", "variant": "",
      "status": "pass", "expected": "pass", "diagnosis": "", "digest": "d", "duration_s": 1, "world_size": 2, "sequence": "",
      "metrics": {}, "numerics": {"tensors": [{"name": "w", "shape": [3], "dtype": "float32", "kept": true, "values": [1, 2]}],
      "curves": []}}]}]})";
  try {
    store.import_text(text, "bad.json");
    ADD_FAILURE() << "imported";
  } catch (const InputError& e) {
    EXPECT_CONTAINS(std::string(e.what()), "bad.json: run u1, p: numerics: tensor w has 2 values for its shape's 3");
  }
  EXPECT_TRUE(store.runs().empty()) << "nothing of a refused export is imported";
}

}  // namespace
}  // namespace lockstep::baseline
