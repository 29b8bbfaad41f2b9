#pragma once
// Checking observed runs against an environment's recorded baseline, and comparing two
// environments (the pre-upgrade compatibility report).
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "harness/rules/stats.h"
#include "harness/baseline/store.h"
#include "harness/core/diagnosis.h"

namespace lockstep::baseline {

// What one environment recorded for one scenario: the latest recorded status, digest and
// sequence, and every recorded sample of each metric (oldest first).
struct ScenarioBaseline {
  std::string status, expected, diagnosis, digest, sequence;
  std::map<std::string, std::vector<double>> samples;
  // Per-iteration metrics: the median of each recorded run (the run-to-run spread).
  std::map<std::string, std::vector<double>> run_medians;
  int runs = 0;
  std::string system;      // what the latest record ran on
  std::int64_t row = 0;    // the latest record's results row (its numerics: Store::numerics)
  std::string tolerances;  // the latest record's [compare] (report::tolerances_text)
};
// Keyed by scenario id. Empty when the environment recorded nothing.
std::map<std::string, ScenarioBaseline> load_baseline(Store& store, const std::string& environment);

// One scenario as observed in this invocation (k repeats).
struct Observation {
  std::string scenario;
  bool clean = false;  // passed with no diagnosis in every repeat: only these are checked
  std::vector<std::string> digests;          // per repeat
  std::vector<std::optional<Sequence>> sequences;  // per repeat
  // Per repeat: reads its curves and tensors (numerics_of), when a digest differs.
  std::vector<std::function<Numerics()>> numbers;
  std::map<std::string, std::vector<double>> samples;
  std::map<std::string, std::vector<double>> run_medians;  // per-iteration metrics, per repeat
};

// The baseline checks of one scenario, in order: digest (result_mismatch), collective sequence
// (sequence_changed), throughput (throughput_regression). Returns the first failing check's
// diagnosis, or nullopt. `suspects` receives the metrics whose throughput rule fired (the
// caller confirms them with fresh samples before declaring a regression).
std::optional<Diagnosis> check_exact(Store& store, const ScenarioBaseline& base, const Observation& obs);
std::vector<std::pair<std::string, Judgement>> throughput_suspects(
    const ScenarioBaseline& base, const std::map<std::string, std::vector<double>>& samples,
    const std::map<std::string, std::vector<double>>& run_medians, const RuleOptions& rule);

// kWithinTolerance: the results differ, every difference within the scenario's [compare]
// tolerances (the detail gives the figures).
enum class Verdict { kSame, kResultsChanged, kSequenceChanged, kThroughputChanged, kOnlyInFrom, kOnlyInTo, kWithinTolerance };
std::string_view to_string(Verdict verdict);

struct ScenarioComparison {
  std::string scenario;
  Verdict verdict = Verdict::kSame;
  std::string detail;  // what changed; for sequences the first divergence
  std::map<std::string, Judgement> metrics;  // every judged metric
  // Both records' numbers beyond the digest, compared (numbers.tensors empty when either has none),
  // each curve of both records (from, to), and the first sequence divergence ("" none).
  NumericsComparison numbers;
  std::vector<std::pair<CurveValues, CurveValues>> curves;
  std::string sequence;
  std::string from_system, to_system;  // what each record ran on (a program's torch and packages)
};
struct Comparison {
  Environment from, to;
  // What the environments' latest records ran on (their results' `system`, distinct, sorted): a
  // program's "torch 2.15.0+cu132, python 3.11.2, ...", which lockstep's own LibTorch is not.
  std::vector<std::string> from_systems, to_systems;
  int from_runs = 0, to_runs = 0;
  std::vector<ScenarioComparison> scenarios;  // sorted by scenario id
};
// Compares the two environments' latest recorded results and all their metric samples.
// Throws InputError when either environment is not in the store.
Comparison compare(Store& store, const std::string& from, const std::string& to, const RuleOptions& rule);
nlohmann::ordered_json comparison_json(const Comparison& c);
std::string comparison_markdown(const Comparison& c);

}  // namespace lockstep::baseline
