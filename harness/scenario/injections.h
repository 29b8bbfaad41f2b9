#pragma once
// The [[inject]] tables that lockstep's own injectors act on, parsed into what those injectors
// take: a communicator fault (comm/faults.h) or a slowdown (perf/cost.h). The injectors never
// see a scenario; workload-level injections are the workload's to parse.
#include "harness/comm/faults.h"
#include "harness/perf/cost.h"
#include "harness/scenario/scenario.h"

namespace lockstep::scenario {

// Parses one [[inject]] table of a communicator fault kind (comm::is_comm_fault); throws
// InputError naming file:line and the key.
comm::Fault parse_fault(const Injection& injection, int world_size);
// Parses an [[inject]] table of kind slowdown; throws InputError naming file:line and the key.
perf::Slowdown parse_slowdown(const Injection& injection, int world_size);

}  // namespace lockstep::scenario
