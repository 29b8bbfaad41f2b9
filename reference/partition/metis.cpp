// kMetis partitioning. All METIS calls are here.
#include <metis.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/partition/partition.h"

// Every METIS call goes through this: a failure becomes a std::runtime_error naming the code.
#define LOCKSTEP_REF_METIS_CHECK(expr)                                         \
  do {                                                                         \
    const int status_ = (expr);                                                \
    if (status_ != METIS_OK) {                                                 \
      throw std::runtime_error(std::string("metis: ") + #expr + " returned " + \
                               ::lockstep::ref::metis_status_name(status_));   \
    }                                                                          \
  } while (0)

namespace lockstep::ref {

namespace {

std::string metis_status_name(int status) {
  switch (status) {
    case METIS_ERROR_INPUT: return "METIS_ERROR_INPUT";
    case METIS_ERROR_MEMORY: return "METIS_ERROR_MEMORY";
    case METIS_ERROR: return "METIS_ERROR";
    default: return "status " + std::to_string(status);
  }
}

// METIS keeps its random state in globals, so concurrent calls would race.
std::mutex& metis_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

std::vector<std::int32_t> metis_part_of(const CsrGraph& graph, int num_parts, std::uint64_t seed) {
  if (num_parts < 1) {
    throw std::invalid_argument("metis_part_of: num_parts must be >= 1, got " +
                                std::to_string(num_parts));
  }
  validate(graph);
  const std::int64_t n = graph.num_nodes;
  std::vector<std::int32_t> part_of(static_cast<std::size_t>(n), 0);
  if (num_parts == 1 || n == 0) return part_of;

  constexpr std::int64_t kIdxMax = std::numeric_limits<idx_t>::max();
  if (n > kIdxMax || 2 * graph.num_edges() > kIdxMax) {
    throw std::out_of_range("metis_part_of: a graph of " + std::to_string(n) + " nodes and " +
                            std::to_string(graph.num_edges()) + " edges is too large for METIS's " +
                            std::to_string(8 * sizeof(idx_t)) + "-bit idx_t");
  }

  // Symmetrise: u -> v and v -> u for every edge with u != v, each adjacency sorted, unique.
  std::vector<idx_t> xadj(static_cast<std::size_t>(n) + 1, 0);
  for (std::int64_t u = 0; u < n; ++u) {
    for (auto e = graph.indptr[static_cast<std::size_t>(u)];
         e < graph.indptr[static_cast<std::size_t>(u) + 1]; ++e) {
      const std::int64_t v = graph.indices[static_cast<std::size_t>(e)];
      if (v == u) continue;
      ++xadj[static_cast<std::size_t>(u) + 1];
      ++xadj[static_cast<std::size_t>(v) + 1];
    }
  }
  for (std::size_t u = 0; u < static_cast<std::size_t>(n); ++u) xadj[u + 1] += xadj[u];
  std::vector<idx_t> adjncy(static_cast<std::size_t>(xadj.back()));
  std::vector<idx_t> next(xadj.begin(), xadj.end() - 1);
  for (std::int64_t u = 0; u < n; ++u) {
    for (auto e = graph.indptr[static_cast<std::size_t>(u)];
         e < graph.indptr[static_cast<std::size_t>(u) + 1]; ++e) {
      const std::int64_t v = graph.indices[static_cast<std::size_t>(e)];
      if (v == u) continue;
      adjncy[static_cast<std::size_t>(next[static_cast<std::size_t>(u)]++)] = static_cast<idx_t>(v);
      adjncy[static_cast<std::size_t>(next[static_cast<std::size_t>(v)]++)] = static_cast<idx_t>(u);
    }
  }
  idx_t out = 0;
  for (std::size_t u = 0; u < static_cast<std::size_t>(n); ++u) {
    const auto b = adjncy.begin() + xadj[u];
    const auto e = adjncy.begin() + xadj[u + 1];
    std::sort(b, e);
    const auto end = std::unique(b, e);
    xadj[u] = out;
    for (auto it = b; it != end; ++it) adjncy[static_cast<std::size_t>(out++)] = *it;
  }
  xadj[static_cast<std::size_t>(n)] = out;
  adjncy.resize(static_cast<std::size_t>(out));
  if (adjncy.empty()) adjncy.push_back(0);  // METIS wants a valid pointer

  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = static_cast<idx_t>(
      (static_cast<std::uint32_t>(seed) ^ static_cast<std::uint32_t>(seed >> 32)) & 0x7FFFFFFFu);
  options[METIS_OPTION_NUMBERING] = 0;

  idx_t nvtxs = static_cast<idx_t>(n);
  idx_t ncon = 1;
  idx_t nparts = static_cast<idx_t>(num_parts);
  idx_t objval = 0;
  std::vector<idx_t> part(static_cast<std::size_t>(n), 0);
  {
    const std::lock_guard<std::mutex> lock(metis_mutex());
    LOCKSTEP_REF_METIS_CHECK(METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy.data(),
                                                 /*vwgt=*/nullptr, /*vsize=*/nullptr,
                                                 /*adjwgt=*/nullptr, &nparts, /*tpwgts=*/nullptr,
                                                 /*ubvec=*/nullptr, options, &objval, part.data()));
  }
  for (std::size_t u = 0; u < part.size(); ++u) {
    if (part[u] < 0 || part[u] >= nparts) {
      throw std::runtime_error("metis: node " + std::to_string(u) + " got part " +
                               std::to_string(part[u]) + ", outside [0, " +
                               std::to_string(num_parts) + ")");
    }
    part_of[u] = static_cast<std::int32_t>(part[u]);
  }
  return part_of;
}

}  // namespace lockstep::ref
