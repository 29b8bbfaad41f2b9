#pragma once
// The [workload] keys of kind "sampling", read by one reader for lockstep's sampling workload
// and for the "sampling" capability of a system under test (scenarios/README.md, "Workload keys
// by kind"). Each side reads its own further keys after read() and then calls finish().
#include <cstdint>
#include <vector>

#include "harness/scenario/config.h"
#include "harness/workloads/graph_spec.h"

namespace lockstep::workloads {

struct SamplingSpec {
  GraphSpec graph;
  std::vector<std::int64_t> fanouts = {10, 5};  // per hop, non-empty, each -1 (all) or 1..1000
  bool replace = false;
  bool in_edges = true;          // edges_dir: "in" (default) or "out"
  std::int64_t num_seeds = 256;  // >= 0
  std::int64_t batch_size = 64;  // >= 1

  // Reads and checks the shared keys of `c` (the graph's seed defaults to `seed`, run.seed).
  // Throws InputError naming file:line and the key. Does not call finish().
  static SamplingSpec read(const scenario::Config& c, std::uint64_t seed);
};

}  // namespace lockstep::workloads
