#include "harness/core/diagnosis.h"

#include <sstream>

#include <array>

namespace lockstep {
namespace {

struct KindInfo {
  DiagnosisKind kind;
  std::string_view name;
  std::string_view meaning;
};

constexpr std::array kKindInfo = {
    KindInfo{DiagnosisKind::kCollectiveMismatch, "collective_mismatch",
             "ranks issued the same collective slot with different op, dtype, count, reduce op, "
             "root or split sizes"},
    KindInfo{DiagnosisKind::kMissingParticipant, "missing_participant",
             "a rank skipped a collective, issued an extra one, or stopped issuing while others "
             "waited"},
    KindInfo{DiagnosisKind::kRankFailure, "rank_failure",
             "a rank crashed (signal) or exited with an error"},
    KindInfo{DiagnosisKind::kTimeout, "timeout",
             "no rank made progress for the scenario's timeout"},
    KindInfo{DiagnosisKind::kUnevenSteps, "uneven_steps",
             "ranks would run different numbers of steps (found before the first step)"},
    KindInfo{DiagnosisKind::kSplitCoverage, "split_coverage",
             "a rank split lost or duplicated ids, or made the wrong number of chunks"},
    KindInfo{DiagnosisKind::kDeviceMismatch, "device_mismatch",
             "an input or result is on a device the operation does not accept or preserve"},
    KindInfo{DiagnosisKind::kResultMismatch, "result_mismatch",
             "an output differs from the reference or the recorded digest"},
    KindInfo{DiagnosisKind::kNondeterminism, "nondeterminism",
             "runs that must agree (matrix variants, repeats, worker counts) do not"},
    KindInfo{DiagnosisKind::kInvariantViolation, "invariant_violation",
             "an output breaks a structural invariant (edge exists, fanout bound, ...)"},
    KindInfo{DiagnosisKind::kSequenceChanged, "sequence_changed",
             "the collective sequence differs from the recorded golden sequence"},
    KindInfo{DiagnosisKind::kThroughputRegression, "throughput_regression",
             "a metric is significantly slower than its recorded baseline"},
    KindInfo{DiagnosisKind::kDistributionMismatch, "distribution_mismatch",
             "random draws fail a goodness-of-fit test against the distribution they must follow "
             "(chi-square p-value below the documented threshold)"},
    KindInfo{DiagnosisKind::kStraggler, "straggler",
             "the other ranks waited for one rank in most steps, for at least the scenario's "
             "straggler_share of the median step"},
};

}  // namespace

std::string_view to_string(DiagnosisKind kind) {
  return kKindInfo[static_cast<std::size_t>(kind)].name;
}

std::string_view describe(DiagnosisKind kind) {
  return kKindInfo[static_cast<std::size_t>(kind)].meaning;
}

std::optional<DiagnosisKind> diagnosis_kind_from_string(std::string_view name) {
  for (const auto& info : kKindInfo) {
    if (info.name == name) return info.kind;
  }
  return std::nullopt;
}

const std::vector<DiagnosisKind>& all_diagnosis_kinds() {
  static const std::vector<DiagnosisKind> kinds = [] {
    std::vector<DiagnosisKind> out;
    for (const auto& info : kKindInfo) out.push_back(info.kind);
    return out;
  }();
  return kinds;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << (ranks.size() == 1 ? "rank " : "ranks ");
  for (std::size_t i = 0; i < ranks.size(); ++i) os << (i ? "," : "") << ranks[i];
  return os.str();
}

}  // namespace lockstep
