#pragma once
// Invariant checks of sampled blocks against the original graph, and the chi-square test used
// to check that draws are uniform. Host only; independent of the sampler's code paths (they
// read the original graph, never sampling_graph()).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reference/graph/graph.h"
#include "reference/sampling/neighbor.h"

namespace lockstep::ref {

// Returns nullopt when `sampled` could be sample_neighbors' output for its seeds on
// sampling_graph(graph, options.in_edges) with options.fanouts / replace, else a message
// naming the hop, node and edge of the first violation:
//   structure: seed_to_output maps each seed to it in blocks[0].dst_nodes, which are the unique
//     seeds in first-seen order; one block per fanout; dst_nodes a prefix of src_nodes;
//     src_nodes unique, the new ones in order of first appearance in the edges; local indices
//     in range; edges grouped by ascending dst; blocks[h+1].dst_nodes == blocks[h].src_nodes;
//   edges: each edge id names a graph edge that joins exactly this (neighbor, node) pair in
//     the sampled direction;
//   counts: fanout -1 gives every edge of the node once; without replacement
//     min(degree, fanout) distinct edges; with replacement fanout edges when degree > 0;
//     nodes without neighbors get none.
// Throws std::invalid_argument when validate(graph) does.
std::optional<std::string> check_sampled_blocks(const CsrGraph& graph, const SampledBlocks& sampled,
                                                const SampleOptions& options);

// Where two samples of the same seeds first differ, for a diagnosis; nullopt when a == b.
// Hops are compared in order; in the first hop that differs, the first destination (by local
// index) whose node id or edge list differs gives
//   "hop H node V got N edges vs M (first edge id X vs Y)"
// (V is a's node id; the parenthesis only when both lists are non-empty). When every common
// destination agrees: "hop H differs in its node lists"; when every common hop agrees:
// "different number of hops"; when every block agrees: "the seeds differ".
std::optional<std::string> first_difference(const SampledBlocks& a, const SampledBlocks& b);

// check_sampled_blocks for many samples of one graph: the edge index (all edges sorted by id)
// and the degrees are built once, in the constructor. `graph` must outlive the checker.
class SampleChecker {
 public:
  // Throws std::invalid_argument when validate(graph) does.
  SampleChecker(const CsrGraph& graph, SampleOptions options);
  std::optional<std::string> check(const SampledBlocks& sampled) const;

  struct Edge {
    std::int64_t id;
    std::int64_t src;
    std::int64_t dst;
  };

 private:
  const CsrGraph& graph_;
  SampleOptions options_;
  std::vector<Edge> edges_;            // sorted by (id, src, dst)
  std::vector<std::int64_t> degree_;   // in the sampled direction
};

// Returns the regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a),
// by series for x < a + 1 and Lentz's continued fraction otherwise (Numerical Recipes 6.2),
// accurate to about 1e-14 relative. Throws std::invalid_argument for a <= 0 or x < 0.
double regularized_gamma_q(double a, double x);

// Returns P(X >= chi2) for X chi-square distributed with `df` degrees of freedom:
// Q(df / 2, chi2 / 2). Throws std::invalid_argument for df <= 0 or chi2 < 0.
double chi_square_pvalue(double chi2, double df);

// Returns the p-value of Pearson's chi-square goodness-of-fit test of `counts` against the
// uniform distribution over its cells (df = cells - 1). Throws std::invalid_argument for fewer
// than 2 cells, a negative count or a zero total.
double chi_square_uniform_pvalue(const std::vector<std::int64_t>& counts);

}  // namespace lockstep::ref
