#pragma once
// The step-count pre-flight check: before the first step, every rank states how many steps it
// will run; any inequality becomes the diagnosis `uneven_steps`, naming each rank's count,
// instead of a hang at the first step some rank does not take.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/diagnosis.h"

namespace lockstep::comm {
class Communicator;
}

namespace lockstep::workloads {

// All-gathers `my_steps` (phase "preflight"); throws DiagnosisError(uneven_steps) on any
// difference, blaming the rank whose count differs from the most common one. `what` names
// where the counts come from in the message.
void preflight_steps(comm::Communicator& comm, std::int64_t my_steps, const std::string& what);

// The judgement of those counts (steps[r] is rank r's), for any source of them (a system's
// outputs too): uneven_steps naming every rank's count and blaming the first whose count
// differs from the most common one (the smallest count among equally common ones), or nothing.
std::optional<Diagnosis> uneven_steps(const std::vector<std::int64_t>& steps, const std::string& what);

}  // namespace lockstep::workloads
