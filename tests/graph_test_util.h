#pragma once
// What the tests of reference/graph share (graph_test.cpp, CSR and loaders;
// graph_generators_test.cpp, the generators).
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <vector>

#include "reference/graph/graph.h"

namespace lockstep::ref::graph_test {

// (src, dst, edge id) of every edge, in CSR order.
inline std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> triples(const CsrGraph& g) {
  std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> out;
  for (std::int64_t u = 0; u < g.num_nodes; ++u) {
    for (auto e = g.indptr[static_cast<std::size_t>(u)];
         e < g.indptr[static_cast<std::size_t>(u) + 1]; ++e) {
      out.emplace_back(u, g.indices[static_cast<std::size_t>(e)],
                       g.edge_ids[static_cast<std::size_t>(e)]);
    }
  }
  return out;
}

}  // namespace lockstep::ref::graph_test
