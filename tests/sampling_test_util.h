// Helpers shared by the reference sampler's tests (sampling_test.cpp, sampling_checks_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "reference/graph/graph.h"
#include "reference/sampling/neighbor.h"
#include "tests/test_util.h"

namespace lockstep::ref {

using Ids = std::vector<std::int64_t>;

using test::message_of;

inline SampleOptions options_of(Ids fanouts, bool replace, bool in_edges, int num_threads = 1) {
  SampleOptions o;
  o.fanouts = std::move(fanouts);
  o.replace = replace;
  o.in_edges = in_edges;
  o.num_threads = num_threads;
  return o;
}

inline const CsrGraph& rmat12() {
  static const CsrGraph g = rmat(12, std::int64_t{16} << 12, /*seed=*/2024);
  return g;
}

// 300 nodes spread over the id range, a few repeated, plus nodes without neighbors in the
// sampled direction (R-MAT at scale 12 leaves many).
inline Ids invariant_seeds(const CsrGraph& sg) {
  Ids seeds;
  for (std::int64_t i = 0; i < 300; ++i) seeds.push_back((i * 2654435761) % sg.num_nodes);
  seeds.push_back(seeds[3]);
  seeds.push_back(seeds[0]);
  seeds.push_back(seeds[299]);
  int isolated = 0;
  for (std::int64_t v = sg.num_nodes - 1; v >= 0 && isolated < 5; --v) {
    if (sg.degree(v) == 0) {
      seeds.push_back(v);
      seeds.push_back(v);
      ++isolated;
    }
  }
  EXPECT_EQ(isolated, 5) << "the R-MAT graph should have isolated nodes";
  return seeds;
}
}  // namespace lockstep::ref
