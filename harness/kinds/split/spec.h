#pragma once
// The [workload] keys of kind "split", read by one reader for lockstep's split workload and for
// the "split" capability of a system under test (scenarios/README.md, "Workload keys by kind").
// Each side reads its own further keys after read() and then calls finish().
#include <cstdint>

#include "harness/scenario/config.h"

namespace lockstep::workloads {

struct SplitSpec {
  std::int64_t num_ids = 1000;   // 0..2^24: the training ids, a permutation of [0, num_ids)
  std::int64_t batch_size = 32;  // 1..2^24

  // Reads and checks the shared keys of `c`. Throws InputError naming file:line and the key.
  // Does not call finish().
  static SplitSpec read(const scenario::Config& c);
};

}  // namespace lockstep::workloads
