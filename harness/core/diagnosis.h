#pragma once
// The closed vocabulary of diagnoses. Every check emits exactly one of these kinds; the
// documented meaning of each lives in scenarios/README.md and must stay in sync with
// kKindInfo in diagnosis.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

enum class DiagnosisKind : std::uint8_t {
  kCollectiveMismatch,   // ranks issued the same collective slot with different arguments
  kMissingParticipant,   // a rank skipped, added, or stopped issuing collectives
  kRankFailure,          // a rank crashed or exited with an error
  kTimeout,              // no progress for the scenario's timeout
  kUnevenSteps,          // ranks would run different numbers of steps
  kSplitCoverage,        // a split lost, duplicated or mis-chunked ids
  kDeviceMismatch,       // a result on the wrong device, or a device the op cannot accept
  kResultMismatch,       // an output differs from the reference
  kNondeterminism,       // runs that must agree (matrix variants, repeats) do not
  kInvariantViolation,   // an output breaks a structural invariant
  kSequenceChanged,      // the collective sequence differs from the recorded golden one
  kThroughputRegression, // a metric is significantly slower than its baseline
  kDistributionMismatch, // random draws fail a goodness-of-fit test against their distribution
  kStraggler,            // the others waited for one rank in most steps, beyond the scenario's share
};

// Returns the snake_case name ("collective_mismatch").
std::string_view to_string(DiagnosisKind kind);
// "rank 2" / "ranks 0,1": the ranks a diagnosis names, as messages write them.
std::string rank_list(const std::vector<int>& ranks);
// Returns the kind named `name`, or nullopt when it is not in the vocabulary.
std::optional<DiagnosisKind> diagnosis_kind_from_string(std::string_view name);
// Returns every kind, in declaration order.
const std::vector<DiagnosisKind>& all_diagnosis_kinds();
// Returns the one-line documented meaning of `kind`.
std::string_view describe(DiagnosisKind kind);

struct Diagnosis {
  DiagnosisKind kind;
  std::string message;
  int rank = -1;          // the rank the diagnosis blames, -1 when none
  std::int64_t seq = -1;  // the collective sequence number involved, -1 when none
  std::int64_t step = -1;  // the step of the call site involved (the verifier's), -1 when none
};

}  // namespace lockstep

#include <stdexcept>

namespace lockstep {

// Thrown by a check that has reached a diagnosis. The rank runtime catches it, records the
// diagnosis for the launcher, and ends the rank.
class DiagnosisError : public std::runtime_error {
 public:
  explicit DiagnosisError(Diagnosis diagnosis)
      : std::runtime_error(diagnosis.message), diagnosis_(std::move(diagnosis)) {}
  const Diagnosis& diagnosis() const { return diagnosis_; }

 private:
  Diagnosis diagnosis_;
};

}  // namespace lockstep
