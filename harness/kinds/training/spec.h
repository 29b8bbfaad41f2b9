#pragma once
// The [workload] keys of kind "training", read by one reader for lockstep's training workload
// and for the "training" capability of a system under test, so that a key has one range and one
// default wherever it is read (scenarios/README.md, "Workload keys by kind"). Each side reads its
// own further keys after read() and then calls finish() on the table.
#include <cstdint>
#include <vector>

#include "harness/scenario/config.h"
#include "harness/workloads/graph_spec.h"
#include "reference/train/sage.h"

namespace lockstep::workloads {

struct TrainingSpec {
  GraphSpec graph;
  ref::train::SageConfig model;         // layers 2..3, hidden, num_classes, activation; in_dim = feature_dim
  std::int64_t feature_dim = 16;        // 1..4096: fixed input features per node
  std::vector<std::int64_t> fanouts;    // one per layer, each -1 (all) or 1..1000; default 5
  ref::train::Precision precision = ref::train::Precision::kF32;  // fp32, bf16, bf16_reduce
  std::int64_t num_train = 1024;        // >= 1
  std::int64_t batch_size = 64;         // >= 1, global
  std::int64_t steps = 40;              // 1..100000
  ref::train::Optimizer::Kind optimizer = ref::train::Optimizer::Kind::kSgd;
  double lr = 0.1;                      // (0, 10]; default 0.1 for sgd, 0.01 for adam
  double momentum = 0.9;                // [0, 1); sgd

  // Reads and checks the shared keys of `c` (the graph's seed defaults to `seed`, run.seed).
  // Throws InputError naming file:line and the key. Does not call finish().
  static TrainingSpec read(const scenario::Config& c, std::uint64_t seed);
};

}  // namespace lockstep::workloads
