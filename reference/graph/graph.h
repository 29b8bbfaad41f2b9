#pragma once
// Directed graphs in CSR form on the host, their construction from edge lists, generators and
// loaders. Every function here is deterministic: its result is a pure function of its
// arguments (never of thread count or timing).
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "reference/common/device.h"

namespace lockstep::ref {

// Out-edges in CSR form. Node u's out-edges are positions [indptr[u], indptr[u+1]);
// indices[e] is the destination of edge position e and edge_ids[e] its original edge id.
struct CsrGraph {
  std::int64_t num_nodes = 0;
  std::vector<std::int64_t> indptr{0};  // num_nodes + 1 entries, indptr[0] == 0, non-decreasing
  std::vector<std::int64_t> indices;    // destination of each out-edge
  std::vector<std::int64_t> edge_ids;   // original edge id of each out-edge

  // Returns the number of edges (indices.size()).
  std::int64_t num_edges() const { return static_cast<std::int64_t>(indices.size()); }
  // Returns the out-degree of `u`. Throws std::out_of_range when u is not in [0, num_nodes).
  std::int64_t degree(std::int64_t u) const;
  // Returns the destinations of u's out-edges. Throws std::out_of_range like degree().
  std::span<const std::int64_t> neighbors(std::int64_t u) const;

  bool operator==(const CsrGraph&) const = default;
};

// Throws std::invalid_argument naming the first inconsistency: a negative num_nodes, an
// indptr of the wrong size, not starting at 0, decreasing or not ending at indices.size(),
// edge_ids of a different size, or a destination outside [0, num_nodes).
void validate(const CsrGraph& graph);

// Returns the CSR of edges src[i] -> dst[i]. Stable: a node's out-edges keep their input
// order; edge_ids[e] is the input position of the edge. Throws std::invalid_argument when
// num_nodes < 0 or the sizes differ, std::out_of_range naming the first id outside
// [0, num_nodes) and its position.
CsrGraph from_edges(std::int64_t num_nodes, const std::vector<std::int64_t>& src,
                    const std::vector<std::int64_t>& dst);
// As above for int32 or int64 ids on any device (copied to the host); the graph is on the host.
CsrGraph from_edges(std::int64_t num_nodes, const IdSpan& src, const IdSpan& dst);
// As above for literal lists (from_edges(3, {0, 1}, {1, 2})), which would otherwise be ambiguous.
inline CsrGraph from_edges(std::int64_t num_nodes, std::initializer_list<std::int64_t> src,
                           std::initializer_list<std::int64_t> dst) {
  return from_edges(num_nodes, std::vector<std::int64_t>(src), std::vector<std::int64_t>(dst));
}

// Returns the in-edges of `graph` as a CSR (the transpose): node v's entries are the sources
// of edges u -> v, in the order those edges appear in graph's CSR (by source, then position),
// with their edge ids. Throws std::invalid_argument when validate(graph) does.
CsrGraph reverse(const CsrGraph& graph);

// Returns XXH3-64 (seed 0) of the little-endian int64 sequence
// num_nodes, indptr.size(), indptr..., indices.size(), indices..., edge_ids.size(), edge_ids...
std::uint64_t digest(const CsrGraph& graph);

// ---- generators (generators.cpp) ------------------------------------------------------------
// Each edge i is drawn from philox (common/philox.h) with the seed as key and counter
// (c0 = i, c1 = stream_counter(stream, ...)); the draws are spread over threads in fixed
// chunks, so the graph never depends on num_threads. Then, in edge order, self-loops are
// dropped unless self_loops, and a repeated (src, dst) pair is dropped unless multi_edges
// (the first occurrence by edge index is kept): num_edges is an upper bound on the result's
// edge count. The kept edges get edge ids 0, 1, ... in draw order.
struct GenOptions {
  bool self_loops = false;
  bool multi_edges = false;
  int num_threads = 0;  // 0: std::thread::hardware_concurrency(); never changes the result
};

// R-MAT with the Graph500 parameters a = 0.57, b = 0.19, c = 0.19, d = 0.05 on 2^scale nodes.
// Edge i picks one quadrant per level l = 0 .. scale-1, most significant bit first, from
// u = uniform01(philox_u64x2(seed, i, stream_counter(streams::kRmat, l / 2))[l % 2]):
// u < 0.57 -> (0, 0), u < 0.76 -> (0, 1), u < 0.95 -> (1, 0), else (1, 1) as (src bit, dst
// bit), the thresholds being those double literals.
// Node ids are not permuted (low ids have high degree). Throws std::invalid_argument when
// scale is not in [0, 40] or num_edges < 0.
CsrGraph rmat(int scale, std::int64_t num_edges, std::uint64_t seed, GenOptions options = {});

// G(n, m) with uniform endpoints: edge i is (uniform_below(w0, n), uniform_below(w1, n)) with
// (w0, w1) = philox_u64x2(seed, i, stream_counter(streams::kErdosRenyi, 0)).
// Throws std::invalid_argument when n < 0, num_edges < 0, or n == 0 and num_edges > 0.
CsrGraph erdos_renyi(std::int64_t n, std::int64_t num_edges, std::uint64_t seed,
                     GenOptions options = {});

// The nodes power_law() keeps isolated, ascending: sort nodes by
// (philox_u64(seed, id, stream_counter(streams::kPowerLawNodes, 0)), id) and take the first
// k = llround(isolated_fraction * n). Throws std::invalid_argument when n < 0 or
// isolated_fraction is not in [0, 1].
std::vector<std::int64_t> power_law_isolated(std::int64_t n, double isolated_fraction,
                                             std::uint64_t seed);

// A graph whose endpoints follow a power law. In the node order of power_law_isolated the
// first k nodes get no edges at all and the others get ranks r = 1 .. R = n-k. Both endpoints
// of edge i are drawn independently with probability proportional to r^-exponent: with
// (w0, w1) = philox_u64x2(seed, i, stream_counter(streams::kPowerLawEdges, 0)), the endpoint
// for word w has the smallest r with cdf[r] > uniform01(w) * cdf[R], where cdf[0] = 0 and
// cdf[r] = cdf[r-1] + std::pow(r, -exponent) in double (so it relies on the libm's pow).
// Nodes outside the chosen set may also end up with no edges. Throws std::invalid_argument
// when an argument is out of range (exponent must be finite and >= 0) or num_edges > 0 and
// every node is isolated.
CsrGraph power_law(std::int64_t n, std::int64_t num_edges, double exponent,
                   double isolated_fraction, std::uint64_t seed, GenOptions options = {});

// Small hand-checkable graphs: "path4" (0->1->2->3), "star5" (0->1..4), "triangle"
// (0->1->2->0), "isolated3" (3 nodes, no edges), "two_cliques" (nodes 0-2 and 3-5, each pair
// within a clique joined in both directions). Edges are listed by source, then destination.
// Throws std::invalid_argument listing the names for any other name.
CsrGraph tiny(const std::string& name);

// ---- loaders (loaders.cpp) ------------------------------------------------------------------
// Reads "src dst" lines: fields separated by whitespace and/or commas (further fields are
// ignored), '#' starts a comment, blank lines are skipped, and the first line with content may
// be a header in which neither of the first two fields is an integer. num_nodes == -1 means
// max id + 1.
// Throws std::runtime_error naming the path when the file cannot be read and "path:line" for
// a malformed line, std::out_of_range with "path:line" for an id outside [0, num_nodes), and
// std::invalid_argument when num_nodes < -1.
CsrGraph load_edge_list(const std::string& path, std::int64_t num_nodes = -1);

// Reads two 1-D int32 or int64 .npy arrays of equal length as src and dst. Throws
// std::runtime_error naming the path for a bad file, dtype or shape, std::out_of_range naming
// the path and index for an id outside [0, num_nodes), std::invalid_argument for num_nodes < -1.
CsrGraph load_npy_edges(const std::string& src_path, const std::string& dst_path,
                        std::int64_t num_nodes = -1);

// Reads a [2, E] int32 or int64 .npy array (PyG's edge_index: row 0 src, row 1 dst). Throws
// as load_npy_edges.
CsrGraph load_npy_edge_index(const std::string& path, std::int64_t num_nodes = -1);

}  // namespace lockstep::ref
