#pragma once
// Systems under test. A scenario with a [system] table has the system's own program do the
// work of one capability (lookup, sampling, embedding) in place of lockstep's ranks: lockstep
// writes the inputs (.npy + manifest.json), the launcher starts the system's command once per
// rank, and the capability's check judges the outputs against the reference. The contract is
// documented in scenarios/README.md ("Systems under test") and is versioned by
// kSutSchemaVersion; harness/sut/python/lockstep_sut.py is its Python side.
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "harness/scenario/scenario.h"
#include "harness/sut/io.h"

namespace lockstep::sut {

// What a check found when the outputs pass: their digest (for [matrix] invariance and
// baselines), metrics, and notes (declared semantic differences, remarks) for the report.
struct CheckResult {
  std::string digest;
  std::map<std::string, double> metrics;
  std::vector<std::string> notes;
};

struct Capability {
  std::string name;     // the [workload] kind it stands for
  std::string summary;
  // Validates the [workload] keys and [system.profile] (consuming every key it reads). Throws
  // InputError naming file:line.
  std::function<void(const scenario::Scenario&)> validate;
  // Writes the inputs every rank reads.
  std::function<void(const scenario::Scenario&, InputWriter&)> write_inputs;
  // Judges the ranks' outputs; throws DiagnosisError (from the closed vocabulary) on the
  // first problem.
  std::function<CheckResult(const scenario::Scenario&, const SystemOutputs&)> check;
  // With --dump: writes the reference's own answers (whole-run arrays, not split by rank), so
  // that a run can be re-verified from the dump alone. Null when the checks are invariants only.
  std::function<void(const scenario::Scenario&, InputWriter&)> write_expected;
};

// The capabilities, sorted by name.
const std::vector<Capability>& capabilities();
// Returns the capability named `name`, or nullptr.
const Capability* find_capability(std::string_view name);
// Validates a scenario with [system]: a known capability, its keys, no [[inject]] (the
// system's own behaviour is what is tested). Throws InputError.
void validate(const scenario::Scenario& s);

}  // namespace lockstep::sut
