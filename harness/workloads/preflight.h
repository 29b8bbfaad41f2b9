#pragma once
// The step-count pre-flight check: before the first step, every rank states how many steps it
// will run; any inequality becomes the diagnosis `uneven_steps`, naming each rank's count,
// instead of a hang at the first step some rank does not take.
#include <cstdint>
#include <string>

namespace lockstep::comm {
class Communicator;
}

namespace lockstep::workloads {

// All-gathers `my_steps` (phase "preflight"); throws DiagnosisError(uneven_steps) on any
// difference, blaming the rank whose count differs from the most common one. `what` names
// where the counts come from in the message.
void preflight_steps(comm::Communicator& comm, std::int64_t my_steps, const std::string& what);

}  // namespace lockstep::workloads
