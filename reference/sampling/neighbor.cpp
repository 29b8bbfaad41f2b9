// Argument checks and dispatch for neighbor sampling; the kernels are in cpu/neighbor_cpu.cpp.
#include "reference/sampling/neighbor.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>
#include <thread>

#include "reference/common/hash.h"
#include "reference/common/philox.h"

namespace lockstep::ref {

namespace {

constexpr std::int64_t kMaxDraws = std::int64_t{1} << 32;  // draw index k fits 32 bits

void check_fanout(const char* who, std::int64_t fanout, const std::string& where) {
  if (fanout < -1 || fanout >= kMaxDraws) {
    throw std::invalid_argument(std::string(who) + ": " + where +
                                " must be -1 or in [0, 2^32), got " + std::to_string(fanout));
  }
}

}  // namespace

std::uint64_t sample_hop_key(const SampleKey& key) {
  if (key.epoch < 0) {
    throw std::invalid_argument("sample key: epoch must be >= 0, got " + std::to_string(key.epoch));
  }
  if (key.batch < 0) {
    throw std::invalid_argument("sample key: batch must be >= 0, got " + std::to_string(key.batch));
  }
  if (key.hop < 0 || key.hop >= kMaxDraws) {
    throw std::invalid_argument("sample key: hop must be in [0, 2^32), got " +
                                std::to_string(key.hop));
  }
  const std::uint64_t epoch_key = philox_u64(key.seed, static_cast<std::uint64_t>(key.epoch),
                                             stream_counter(streams::kSampleEpoch, 0));
  return philox_u64(epoch_key, static_cast<std::uint64_t>(key.batch),
                    stream_counter(streams::kSampleBatch, static_cast<std::uint32_t>(key.hop)));
}

std::int64_t sample_count(std::int64_t degree, std::int64_t fanout, bool replace) {
  if (degree < 0) {
    throw std::invalid_argument("sample_count: degree must be >= 0, got " + std::to_string(degree));
  }
  if (fanout < -1) {
    throw std::invalid_argument("sample_count: fanout must be >= -1, got " +
                                std::to_string(fanout));
  }
  if (degree == 0 || fanout == 0) return 0;
  if (fanout < 0) return degree;
  return replace ? fanout : std::min(degree, fanout);
}

void sample_node(const std::int64_t* neighbors, const std::int64_t* edge_ids, std::int64_t degree,
                 std::int64_t fanout, bool replace, const SampleKey& key, std::int64_t node,
                 std::vector<std::int64_t>& out_nbrs, std::vector<std::int64_t>& out_eids) {
  check_fanout("sample_node", fanout, "fanout");
  if (node < 0) {
    throw std::invalid_argument("sample_node: node must be >= 0, got " + std::to_string(node));
  }
  if (degree > 0 && (neighbors == nullptr || edge_ids == nullptr)) {
    throw std::invalid_argument("sample_node: node " + std::to_string(node) + " has degree " +
                                std::to_string(degree) + " but a null neighbor or edge id row");
  }
  const std::uint64_t hop_key = sample_hop_key(key);
  const std::int64_t count = sample_count(degree, fanout, replace);
  const std::size_t base = out_nbrs.size();
  out_nbrs.resize(base + static_cast<std::size_t>(count));
  const std::size_t ebase = out_eids.size();
  out_eids.resize(ebase + static_cast<std::size_t>(count));
  detail::sample_node_cpu(neighbors, edge_ids, degree, fanout, replace, hop_key, node,
                          out_nbrs.data() + base, out_eids.data() + ebase);
}

HopSample sample_hop(const CsrGraph& rows, const std::vector<std::int64_t>& nodes,
                     std::int64_t fanout, bool replace, const SampleKey& key) {
  check_fanout("sample_hop", fanout, "fanout");
  const std::uint64_t hop_key = sample_hop_key(key);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] < 0 || nodes[i] >= rows.num_nodes) {
      throw std::out_of_range("sample_hop: nodes[" + std::to_string(i) + "] = " +
                              std::to_string(nodes[i]) + " is out of range [0, " +
                              std::to_string(rows.num_nodes) + ")");
    }
  }
  return detail::sample_hop_cpu(rows, nodes, fanout, replace, hop_key);
}

CsrGraph sampling_graph(const CsrGraph& graph, bool in_edges) {
  if (in_edges) return reverse(graph);
  validate(graph);
  return graph;
}

SampledBlocks sample_neighbors(const CsrGraph& graph, const std::vector<std::int64_t>& seeds,
                               const SampleOptions& options, const SampleKey& key) {
  for (std::size_t h = 0; h < options.fanouts.size(); ++h) {
    check_fanout("sample_neighbors", options.fanouts[h], "fanouts[" + std::to_string(h) + "]");
  }
  if (options.num_threads < 0) {
    throw std::invalid_argument("sample_neighbors: num_threads must be >= 0, got " +
                                std::to_string(options.num_threads));
  }
  if (options.fanouts.size() > static_cast<std::size_t>(kMaxDraws)) {
    throw std::invalid_argument("sample_neighbors: too many hops (" +
                                std::to_string(options.fanouts.size()) + ")");
  }
  SampleKey checked = key;
  checked.hop = 0;
  sample_hop_key(checked);  // throws for a bad epoch or batch
  if (graph.num_nodes < 0 || graph.indptr.size() != static_cast<std::size_t>(graph.num_nodes) + 1 ||
      graph.indptr.front() != 0 || graph.indptr.back() != graph.num_edges() ||
      graph.edge_ids.size() != graph.indices.size()) {
    throw std::invalid_argument("sample_neighbors: inconsistent graph sizes (num_nodes " +
                                std::to_string(graph.num_nodes) + ", indptr " +
                                std::to_string(graph.indptr.size()) + ", indices " +
                                std::to_string(graph.indices.size()) + ", edge_ids " +
                                std::to_string(graph.edge_ids.size()) + ")");
  }
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    if (seeds[i] < 0 || seeds[i] >= graph.num_nodes) {
      throw std::out_of_range("sample_neighbors: seeds[" + std::to_string(i) +
                              "] = " + std::to_string(seeds[i]) + " is out of range [0, " +
                              std::to_string(graph.num_nodes) + ")");
    }
  }
  const int threads = options.num_threads > 0
                          ? options.num_threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return detail::sample_neighbors_cpu(graph, seeds, options, key, threads);
}

std::uint64_t digest(const SampledBlocks& s) {
  Int64Hasher h;
  h.put_sized(s.seeds);
  h.put_sized(s.seed_to_output);
  h.put(static_cast<std::int64_t>(s.blocks.size()));
  for (const Block& b : s.blocks) {
    h.put_sized(b.dst_nodes);
    h.put_sized(b.src_nodes);
    h.put_sized(b.edge_src);
    h.put_sized(b.edge_dst);
    h.put_sized(b.edge_ids);
  }
  return h.digest();
}

}  // namespace lockstep::ref
