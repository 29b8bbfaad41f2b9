#pragma once
// Validation of loaded scenarios against what will run them, a step after parsing: each
// variant's [workload] keys and [[inject]] tables against lockstep's workload registry
// (workloads::validate), or, with [system], against the system-under-test capability of that
// kind (sut::validate). scenario::load_file checks the scenario schema alone, so that scenario/
// depends on neither workloads/ nor sut/; the entry points (the CLI, a rank) load through here.
#include <string>
#include <vector>

#include "harness/scenario/scenario.h"

namespace lockstep::validate {

// Validates one variant: its workload (or capability) keys and injections, and parses its
// communicator faults and slowdowns once into each Injection (scenario/injections.h). Throws
// InputError naming file:line. A program (kind = "program") has nothing more to check.
void check(scenario::Scenario& s);

// scenario::load_file / load_paths with check() on every variant as soon as it is parsed, so a
// bad key is reported before the next variant or file is read. Throw InputError with file:line.
std::vector<scenario::Scenario> load_file(const std::string& path);
std::vector<scenario::Scenario> load_paths(const std::vector<std::string>& paths);

}  // namespace lockstep::validate
