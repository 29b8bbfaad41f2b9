#pragma once
// Node partitioning, DGL-style relabelling and per-part local graphs, all on the host and all
// pure functions of (graph, num_parts, method, seed).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reference/graph/graph.h"

namespace lockstep::ref {

enum class PartitionMethod { kRange, kHash, kRandom, kMetis };

// Returns "range", "hash", "random" or "metis".
std::string to_string(PartitionMethod method);
// Returns the method named exactly (lower case) as to_string writes it, or nullopt.
std::optional<PartitionMethod> partition_method_from_string(std::string_view name);

// Which part owns each node and the relabelling that makes each part's ids contiguous.
struct Partitioning {
  int num_parts = 0;
  std::vector<std::int32_t> part_of;       // original node id -> part
  std::vector<std::int64_t> new_id;        // original -> relabelled
  std::vector<std::int64_t> orig_id;       // relabelled -> original
  std::vector<std::int64_t> part_offsets;  // num_parts + 1; part p owns relabelled ids
                                           // [part_offsets[p], part_offsets[p+1])
  bool operator==(const Partitioning&) const = default;
};

// Returns the partitioning whose parts are given by `part_of` (each in [0, num_parts)),
// relabelled DGL-style: parts in order, original order kept within a part. Throws
// std::invalid_argument when num_parts < 1, std::out_of_range naming the first bad part.
Partitioning make_partitioning(int num_parts, std::vector<std::int32_t> part_of);

// Assigns every node to one of num_parts parts (parts may be empty, e.g. when
// num_parts > num_nodes), then relabels as make_partitioning:
//   kRange:  contiguous blocks; the first n % p parts get n / p + 1 nodes, the rest n / p.
//   kHash:   splitmix64(id) % p (splitmix64's finaliser of id + 0x9E3779B97F4A7C15; no seed).
//   kRandom: philox_u64(seed, id, stream_counter(streams::kRandomPartition, 0)) % p.
//   kMetis:  METIS_PartGraphKway (default options but METIS_OPTION_SEED =
//            (lo32(seed) ^ hi32(seed)) & 0x7FFFFFFF and METIS_OPTION_NUMBERING = 0) on the
//            symmetrised graph without self-loops or duplicate edges; deterministic for a seed
//            with a given METIS build. Calls are serialised (METIS keeps global RNG state).
//            num_parts == 1 or a graph without nodes never calls METIS. METIS may leave
//            parts empty (it does for two 3-cliques in 3 parts) and is not balanced exactly.
// Throws std::invalid_argument when num_parts < 1 or the graph is invalid,
// std::out_of_range when the graph is too large for METIS's 32-bit idx_t, and
// std::runtime_error carrying METIS's error code when METIS fails.
Partitioning partition_graph(const CsrGraph& graph, int num_parts, PartitionMethod method,
                             std::uint64_t seed);

// Returns the kMetis part of every node, as partition_graph describes, without relabelling.
// Throws as partition_graph.
std::vector<std::int32_t> metis_part_of(const CsrGraph& graph, int num_parts, std::uint64_t seed);

// Returns `graph` with node u renamed new_id[u]: relabelled node v's out-edges are those of
// orig_id[v], in the same order, with destinations renamed and edge ids kept. Throws
// std::invalid_argument when the partitioning does not cover graph.num_nodes nodes.
CsrGraph relabel(const CsrGraph& graph, const Partitioning& partitioning);

// One part's view of a relabelled graph. Local id l < num_owned is relabelled global id
// part_offsets[part] + l; the halo nodes (destinations owned by other parts) follow, sorted
// by global id. `graph` holds the out-edges of owned nodes in local ids (same order, edge ids
// kept); halo nodes have no out-edges.
struct LocalGraph {
  int part = 0;
  std::int64_t num_owned = 0;
  std::vector<std::int64_t> global_ids;  // local -> relabelled global id
  CsrGraph graph;
  bool operator==(const LocalGraph&) const = default;
};

// Returns part `part`'s local graph of `relabelled` (the output of relabel()). Throws
// std::out_of_range when part is not in [0, num_parts), std::invalid_argument when the graph
// and partitioning disagree on the node count.
LocalGraph local_graph(const CsrGraph& relabelled, const Partitioning& partitioning, int part);

}  // namespace lockstep::ref
