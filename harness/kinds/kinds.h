#pragma once
// Every kind of `[workload]`, listed once. A kind lives in harness/kinds/<kind>/: its one reader
// of the `[workload]` keys (spec.h, where lockstep's workload and the capability share them),
// lockstep's own workload (workload.cpp, `WorkloadSpec <kind>_spec()`) and, where a system under
// test can do it, the capability that writes the system's inputs and judges its outputs
// (capability.cpp, `sut::Capability <kind>_capability()`). Both registries are this list:
// workload_registry.cpp expands WORKLOAD, capability_registry.cpp expands CAPABILITY.
// (`lookup`'s workload is named "graph_lookup": lockstep's own lookup takes a graph.)
// `program` is not a kind here: a user's program, read by scenario/scenario.cpp.
#define LOCKSTEP_KINDS(WORKLOAD, CAPABILITY) \
  WORKLOAD(collectives)                      \
  WORKLOAD(latency)                          \
  WORKLOAD(lookup) CAPABILITY(lookup)        \
  WORKLOAD(sampling) CAPABILITY(sampling)    \
  WORKLOAD(split) CAPABILITY(split)          \
  WORKLOAD(embedding) CAPABILITY(embedding)  \
  WORKLOAD(training) CAPABILITY(training)
