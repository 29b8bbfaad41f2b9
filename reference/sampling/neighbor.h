#pragma once
// Multi-hop uniform neighbor sampling on the host, as DGL's sample_neighbors / PyG's
// NeighborSampler do, but with every draw a pure function of (seed, epoch, batch, hop, node id,
// draw index): the result never depends on thread count, world size, partitioning or device,
// and a rank that owns a node reproduces exactly what sample_neighbors draws for it.
//
// Exact definition of the randomness, for reimplementation elsewhere (e.g. a CUDA kernel).
// All words are uint64; philox_u64, stream_counter and uniform_below are common/philox.h's.
//   epoch_key = philox_u64(seed,      c0 = epoch,  c1 = stream_counter(kSampleEpoch, 0))
//   hop_key   = philox_u64(epoch_key, c0 = batch,  c1 = stream_counter(kSampleBatch, hop))
//   bits(v, k) = philox_u64x2(hop_key, c0 = node v, c1 = stream_counter(kSampleDraw, k / 2))[k % 2]
// (philox_u64x2 is Philox4x32-10 with key (lo32(key), hi32(key)) on counter
// (lo32(c0), hi32(c0), lo32(c1), hi32(c1)), returning (w0 | w1 << 32, w2 | w3 << 32), and
// philox_u64 its first word: one Philox call serves draws 2m and 2m + 1.)
// Node v of degree d (its CSR row nbrs[0..d), eids[0..d)) with fanout f gets:
//   f == -1, or !replace and d <= f: every position 0 .. d-1 in CSR order (no draws);
//   d == 0 or f == 0: nothing;
//   replace, d > 0: f positions, draw k (k = 0 .. f-1) being uniform_below(bits(v, k), d),
//     in draw order (also when d <= f);
//   !replace, d > f: partial Fisher-Yates on the virtual array p = (0, 1, ..., d-1): for
//     k = 0 .. f-1, j = k + uniform_below(bits(v, k), d - k), swap p[k] and p[j], and emit
//     p[k] (after the swap). Output is in draw order: f distinct positions, a uniformly random
//     subset in uniformly random order.
// Each emitted position e yields neighbor nbrs[e] and edge id eids[e].
#include <cstdint>
#include <vector>

#include "reference/graph/graph.h"

namespace lockstep::ref {

// Identifies one sampling call. All fields must be >= 0; hop and draw index must fit 32 bits.
struct SampleKey {
  std::uint64_t seed = 0;
  std::int64_t epoch = 0;
  std::int64_t batch = 0;
  std::int64_t hop = 0;
  bool operator==(const SampleKey&) const = default;
};

// Returns hop_key (see the top of this file) for `key`. Throws std::invalid_argument when
// epoch or batch is negative or hop is not in [0, 2^32).
std::uint64_t sample_hop_key(const SampleKey& key);

// Returns how many (neighbor, edge id) pairs sample_node emits for a node of `degree`:
// 0 when degree or fanout is 0, degree when fanout is -1, fanout with replacement,
// min(degree, fanout) without. Throws std::invalid_argument for degree < 0 or fanout < -1.
std::int64_t sample_count(std::int64_t degree, std::int64_t fanout, bool replace);

// Appends the sampled neighbors of `node` (its CSR row: neighbors[0..degree),
// edge_ids[0..degree)) to out_nbrs and their edge ids to out_eids, as defined at the top of
// this file. Throws std::invalid_argument for degree < 0, fanout < -1 or >= 2^32, node < 0,
// a null row with degree > 0, or a bad key (see sample_hop_key).
void sample_node(const std::int64_t* neighbors, const std::int64_t* edge_ids, std::int64_t degree,
                 std::int64_t fanout, bool replace, const SampleKey& key, std::int64_t node,
                 std::vector<std::int64_t>& out_nbrs, std::vector<std::int64_t>& out_eids);

// The draws of one hop for a list of nodes (duplicates allowed), as an owner rank serves them:
// counts[i] pairs for nodes[i], concatenated node after node in nbrs / eids; node i's pairs
// are exactly sample_node's for it. key.hop selects the hop.
struct HopSample {
  std::vector<std::int64_t> counts;
  std::vector<std::int64_t> nbrs;
  std::vector<std::int64_t> eids;
};
// Throws as sample_node does, and std::out_of_range for a node outside [0, rows.num_nodes).
HopSample sample_hop(const CsrGraph& rows, const std::vector<std::int64_t>& nodes,
                     std::int64_t fanout, bool replace, const SampleKey& key);

struct SampleOptions {
  std::vector<std::int64_t> fanouts;  // per hop, from the seeds outwards; -1 = all neighbors
  bool replace = false;
  // Sample in-neighbors (message sources), as DGL/PyG do; false = out-neighbors. Read by
  // sampling_graph() and the checks; sample_neighbors() itself samples the rows it is given.
  bool in_edges = true;
  int num_threads = 0;  // 0: std::thread::hardware_concurrency(); never changes the result
  // The node -> local id table of the relabelling; never changes the result. kAuto: a flat
  // array over all node ids (4 bytes a node, cached per thread) up to 2^26 nodes, else a hash
  // table sized to the sample.
  enum class IdTable { kAuto, kFlat, kHash } id_table = IdTable::kAuto;
};

// Returns the graph whose CSR rows list the neighbors to sample: reverse(graph) (rows are
// in-neighbors, edge ids kept) when in_edges, else a copy of graph (rows are out-neighbors).
// Throws std::invalid_argument when validate(graph) does.
CsrGraph sampling_graph(const CsrGraph& graph, bool in_edges);

// One hop of message flow, edges running from sampled neighbor (src) to frontier node (dst),
// like a DGL block (MFG). For in-edges, edge i is the original edge
// src_nodes[edge_src[i]] -> dst_nodes[edge_dst[i]]; for out-edges it is that edge reversed.
struct Block {
  std::vector<std::int64_t> dst_nodes;  // global ids of this hop's frontier (unique)
  std::vector<std::int64_t> src_nodes;  // unique global ids: dst_nodes first, then new
                                        // neighbors in order of first appearance in the edges
  std::vector<std::int64_t> edge_src;   // per edge: local index into src_nodes
  std::vector<std::int64_t> edge_dst;   // per edge: local index into dst_nodes
  std::vector<std::int64_t> edge_ids;   // per edge: original edge id
  bool operator==(const Block&) const = default;
};

// Edges of a block are grouped by dst (ascending local index), and within one dst node are in
// sample_node's order. DGL lists blocks from the input layer inwards: its blocks are ours
// reversed. PyG's (node, row, col, edge) is src_nodes of the last block, edge_src, edge_dst
// and edge_ids concatenated over hops (local ids shared, since each hop's src_nodes extend
// the previous one's).
struct SampledBlocks {
  std::vector<std::int64_t> seeds;           // the input seeds, as given (duplicates kept)
  std::vector<std::int64_t> seed_to_output;  // per input seed: its position among the unique
                                             // seeds = blocks[0].dst_nodes (first-seen order)
  std::vector<Block> blocks;  // blocks[h] is hop h; blocks[h+1].dst_nodes == blocks[h].src_nodes
  bool operator==(const SampledBlocks&) const = default;
};

// Samples options.fanouts.size() hops from `seeds` on `graph`, whose row v lists the
// neighbors to sample for v (see sampling_graph); hop h uses key with hop = h (key.hop is
// ignored). Node v at hop h gets exactly sample_node(row v, fanouts[h], replace, key@h, v).
// The graph must satisfy validate() (only sizes are re-checked: a full check is O(E)).
// Throws std::invalid_argument for a bad fanout, num_threads < 0, a bad key or inconsistent
// graph sizes, std::out_of_range naming the first seed (or sampled neighbor) outside
// [0, num_nodes). Result on the host.
SampledBlocks sample_neighbors(const CsrGraph& graph, const std::vector<std::int64_t>& seeds,
                               const SampleOptions& options, const SampleKey& key);

// Returns XXH3-64 (seed 0) of the little-endian int64 sequence: seeds.size(), seeds...,
// seed_to_output.size(), ..., blocks.size(), then per block each of dst_nodes, src_nodes,
// edge_src, edge_dst, edge_ids as size followed by values.
std::uint64_t digest(const SampledBlocks& sampled);

// ---- backend entry points (cpu/neighbor_cpu.cpp); arguments already checked -----------------
namespace detail {

// sample_node's kernel: writes sample_count(degree, fanout, replace) pairs to out_nbrs and
// out_eids, with hop_key = sample_hop_key(key).
void sample_node_cpu(const std::int64_t* neighbors, const std::int64_t* edge_ids,
                     std::int64_t degree, std::int64_t fanout, bool replace, std::uint64_t hop_key,
                     std::int64_t node, std::int64_t* out_nbrs, std::int64_t* out_eids);

// sample_hop's kernel, on the calling thread.
HopSample sample_hop_cpu(const CsrGraph& rows, const std::vector<std::int64_t>& nodes,
                         std::int64_t fanout, bool replace, std::uint64_t hop_key);

// sample_neighbors on the host with `num_threads` >= 1 threads.
SampledBlocks sample_neighbors_cpu(const CsrGraph& graph, const std::vector<std::int64_t>& seeds,
                                   const SampleOptions& options, const SampleKey& key,
                                   int num_threads);

}  // namespace detail

}  // namespace lockstep::ref
