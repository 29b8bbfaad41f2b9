#pragma once
// The [workload] keys of kind "embedding" that lockstep's embedding workload and the "embedding"
// capability of a system under test share, read by one reader (scenarios/README.md, "Workload
// keys by kind"). The optimizer is chosen per side: the workload trains one table per entry of
// `optimizers`, a system one table with `optimizer`. Each side reads its own further keys after
// read() and then calls finish().
#include <cstdint>
#include <vector>

#include "harness/scenario/config.h"
#include "reference/embedding/bag.h"
#include "reference/embedding/embedding.h"

namespace lockstep::workloads {

struct EmbeddingSpec {
  std::int64_t rows = 1009;                           // 1..2^24
  std::int64_t dim = 16;                              // 1..4096
  std::int64_t steps = 4;                             // 1..1000
  std::vector<std::int64_t> batch_sizes = {24, 3, 0, 17};  // global ids per step, cycled; each 0..2^20
  std::int64_t hot_rows = 4;                          // >= 1: half of the ids fall in [0, hot_rows)
  ref::OptimizerOptions optimizer;  // lr [0, 100] (0.1), eps [0, 1] (torch's), beta1, beta2 [0, 1),
                                    // initial_accumulator_value >= 0; `kind` is not read here
  double init_scale = 0.5;                            // (0, 1000]
  // Bags (reference/embedding/bag.h), optional: with `bag_sizes` each sample is a bag of ids
  // pooled into one row, `batch_sizes` counts bags, and bag q of a step holds
  // bag_sizes[q mod len] ids (0 = an empty bag). Empty: one id per sample, as without bags.
  std::vector<std::int64_t> bag_sizes;                // each 0..1024
  ref::BagPooling pooling = ref::BagPooling::kSum;    // "sum", "mean"; needs bag_sizes
  bool per_sample_weights = false;                    // needs bag_sizes; with mean pooling, a weighted mean
  bool bags() const { return !bag_sizes.empty(); }
  bool int32_ids = false;                             // id_dtype: "int64" (default) or "int32"

  // Reads and checks the shared keys of `c`. Throws InputError naming file:line and the key.
  // Does not call finish().
  static EmbeddingSpec read(const scenario::Config& c);
};

}  // namespace lockstep::workloads
