#pragma once
// What the tests of the reference trainer share (training_test.cpp, the model and its data;
// training_precision_test.cpp, bf16 and the optimizer): a seed-fixed graph with labels and a
// train/eval split, and a sampled batch of it.
#include <cstdint>
#include <vector>

#include "reference/graph/graph.h"
#include "reference/sampling/neighbor.h"
#include "reference/train/sage.h"

namespace lockstep::ref::train::train_test {

using Ids = std::vector<std::int64_t>;

struct Fixture {
  CsrGraph rows;
  std::vector<std::int32_t> labels;
  Ids train, eval;
};

inline Fixture make_fixture(std::int64_t nodes, std::int64_t edges, std::int64_t dim, int classes, std::uint64_t seed) {
  Fixture f;
  f.rows = sampling_graph(erdos_renyi(nodes, edges, seed), /*in_edges=*/true);
  f.labels = node_labels(f.rows, seed, dim, classes);
  train_eval_split(nodes, seed, nodes / 2, nodes / 4, f.train, f.eval);
  return f;
}

inline SampledBlocks sample(const Fixture& f, const Ids& seeds, const Ids& fanouts, std::int64_t batch) {
  SampleOptions so;
  so.fanouts = fanouts;
  so.num_threads = 1;
  return sample_neighbors(f.rows, seeds, so, SampleKey{7, 0, batch, 0});
}

}  // namespace lockstep::ref::train::train_test
