#include "reference/partition/partition.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "reference/common/philox.h"

namespace lockstep::ref {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  std::uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void check_num_parts(const char* who, int num_parts) {
  if (num_parts < 1) {
    throw std::invalid_argument(std::string(who) + ": num_parts must be >= 1, got " +
                                std::to_string(num_parts));
  }
}

// Throws std::invalid_argument unless `p` is a well-formed partitioning of num_nodes nodes.
void check_partitioning(const Partitioning& p, std::int64_t num_nodes, const char* who) {
  const auto n = static_cast<std::size_t>(num_nodes);
  if (p.num_parts < 1 || p.part_of.size() != n || p.new_id.size() != n || p.orig_id.size() != n ||
      p.part_offsets.size() != static_cast<std::size_t>(p.num_parts) + 1 ||
      p.part_offsets.front() != 0 || p.part_offsets.back() != num_nodes) {
    throw std::invalid_argument(std::string(who) + ": partitioning of " +
                                std::to_string(p.part_of.size()) + " nodes in " +
                                std::to_string(p.num_parts) + " parts does not fit a graph of " +
                                std::to_string(num_nodes) + " nodes");
  }
  for (std::size_t v = 0; v < n; ++v) {
    const std::int64_t u = p.orig_id[v];
    if (u < 0 || u >= num_nodes ||
        p.new_id[static_cast<std::size_t>(u)] != static_cast<std::int64_t>(v)) {
      throw std::invalid_argument(std::string(who) + ": orig_id[" + std::to_string(v) +
                                  "] = " + std::to_string(u) + " is not the inverse of new_id");
    }
  }
}

}  // namespace

std::string to_string(PartitionMethod method) {
  switch (method) {
    case PartitionMethod::kRange: return "range";
    case PartitionMethod::kHash: return "hash";
    case PartitionMethod::kRandom: return "random";
    case PartitionMethod::kMetis: return "metis";
  }
  throw std::invalid_argument("to_string: unknown partition method " +
                              std::to_string(static_cast<int>(method)));
}

std::optional<PartitionMethod> partition_method_from_string(std::string_view name) {
  for (const auto m : {PartitionMethod::kRange, PartitionMethod::kHash, PartitionMethod::kRandom,
                       PartitionMethod::kMetis}) {
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

Partitioning make_partitioning(int num_parts, std::vector<std::int32_t> part_of) {
  check_num_parts("make_partitioning", num_parts);
  Partitioning p;
  p.num_parts = num_parts;
  p.part_offsets.assign(static_cast<std::size_t>(num_parts) + 1, 0);
  for (std::size_t u = 0; u < part_of.size(); ++u) {
    if (part_of[u] < 0 || part_of[u] >= num_parts) {
      throw std::out_of_range("make_partitioning: part_of[" + std::to_string(u) +
                              "] = " + std::to_string(part_of[u]) + " is out of range [0, " +
                              std::to_string(num_parts) + ")");
    }
    ++p.part_offsets[static_cast<std::size_t>(part_of[u]) + 1];
  }
  for (std::size_t q = 0; q < static_cast<std::size_t>(num_parts); ++q) {
    p.part_offsets[q + 1] += p.part_offsets[q];
  }
  const std::size_t n = part_of.size();
  p.new_id.resize(n);
  p.orig_id.resize(n);
  std::vector<std::int64_t> next(p.part_offsets.begin(), p.part_offsets.end() - 1);
  for (std::size_t u = 0; u < n; ++u) {
    const std::int64_t v = next[static_cast<std::size_t>(part_of[u])]++;
    p.new_id[u] = v;
    p.orig_id[static_cast<std::size_t>(v)] = static_cast<std::int64_t>(u);
  }
  p.part_of = std::move(part_of);
  return p;
}

Partitioning partition_graph(const CsrGraph& graph, int num_parts, PartitionMethod method,
                             std::uint64_t seed) {
  check_num_parts("partition_graph", num_parts);
  validate(graph);
  const std::int64_t n = graph.num_nodes;
  std::vector<std::int32_t> part_of(static_cast<std::size_t>(n), 0);
  const auto parts = static_cast<std::uint64_t>(num_parts);
  switch (method) {
    case PartitionMethod::kRange: {
      const std::int64_t base = n / num_parts;
      const std::int64_t rem = n % num_parts;
      const std::int64_t big_end = rem * (base + 1);  // nodes in the first rem parts
      for (std::int64_t u = 0; u < n; ++u) {
        part_of[static_cast<std::size_t>(u)] =
            static_cast<std::int32_t>(u < big_end ? u / (base + 1) : rem + (u - big_end) / base);
      }
      break;
    }
    case PartitionMethod::kHash:
      for (std::int64_t u = 0; u < n; ++u) {
        part_of[static_cast<std::size_t>(u)] =
            static_cast<std::int32_t>(splitmix64(static_cast<std::uint64_t>(u)) % parts);
      }
      break;
    case PartitionMethod::kRandom: {
      const std::uint64_t c1 = stream_counter(streams::kRandomPartition, 0);
      for (std::int64_t u = 0; u < n; ++u) {
        part_of[static_cast<std::size_t>(u)] =
            static_cast<std::int32_t>(philox_u64(seed, static_cast<std::uint64_t>(u), c1) % parts);
      }
      break;
    }
    case PartitionMethod::kMetis: part_of = metis_part_of(graph, num_parts, seed); break;
    default:
      throw std::invalid_argument("partition_graph: unknown partition method " +
                                  std::to_string(static_cast<int>(method)));
  }
  return make_partitioning(num_parts, std::move(part_of));
}

CsrGraph relabel(const CsrGraph& graph, const Partitioning& partitioning) {
  validate(graph);
  check_partitioning(partitioning, graph.num_nodes, "relabel");
  CsrGraph out;
  out.num_nodes = graph.num_nodes;
  out.indptr.assign(graph.indptr.size(), 0);
  out.indices.reserve(graph.indices.size());
  out.edge_ids.reserve(graph.edge_ids.size());
  for (std::int64_t v = 0; v < graph.num_nodes; ++v) {
    const auto u = static_cast<std::size_t>(partitioning.orig_id[static_cast<std::size_t>(v)]);
    for (auto e = graph.indptr[u]; e < graph.indptr[u + 1]; ++e) {
      const auto pos = static_cast<std::size_t>(e);
      out.indices.push_back(partitioning.new_id[static_cast<std::size_t>(graph.indices[pos])]);
      out.edge_ids.push_back(graph.edge_ids[pos]);
    }
    out.indptr[static_cast<std::size_t>(v) + 1] = out.num_edges();
  }
  return out;
}

LocalGraph local_graph(const CsrGraph& relabelled, const Partitioning& partitioning, int part) {
  validate(relabelled);
  check_partitioning(partitioning, relabelled.num_nodes, "local_graph");
  if (part < 0 || part >= partitioning.num_parts) {
    throw std::out_of_range("local_graph: part " + std::to_string(part) + " is out of range [0, " +
                            std::to_string(partitioning.num_parts) + ")");
  }
  const std::int64_t lo = partitioning.part_offsets[static_cast<std::size_t>(part)];
  const std::int64_t hi = partitioning.part_offsets[static_cast<std::size_t>(part) + 1];
  const auto first = static_cast<std::size_t>(relabelled.indptr[static_cast<std::size_t>(lo)]);
  const auto last = static_cast<std::size_t>(relabelled.indptr[static_cast<std::size_t>(hi)]);

  std::vector<std::int64_t> halo;
  for (std::size_t e = first; e < last; ++e) {
    const std::int64_t v = relabelled.indices[e];
    if (v < lo || v >= hi) halo.push_back(v);
  }
  std::sort(halo.begin(), halo.end());
  halo.erase(std::unique(halo.begin(), halo.end()), halo.end());

  LocalGraph local;
  local.part = part;
  local.num_owned = hi - lo;
  local.global_ids.reserve(static_cast<std::size_t>(local.num_owned) + halo.size());
  for (std::int64_t v = lo; v < hi; ++v) local.global_ids.push_back(v);
  local.global_ids.insert(local.global_ids.end(), halo.begin(), halo.end());

  CsrGraph& g = local.graph;
  g.num_nodes = static_cast<std::int64_t>(local.global_ids.size());
  g.indptr.assign(static_cast<std::size_t>(g.num_nodes) + 1, 0);
  for (std::int64_t l = 0; l < local.num_owned; ++l) {
    g.indptr[static_cast<std::size_t>(l) + 1] =
        relabelled.indptr[static_cast<std::size_t>(lo + l) + 1] - static_cast<std::int64_t>(first);
  }
  for (auto l = static_cast<std::size_t>(local.num_owned);
       l < static_cast<std::size_t>(g.num_nodes); ++l) {
    g.indptr[l + 1] = g.indptr[l];
  }
  g.indices.reserve(last - first);
  g.edge_ids.assign(relabelled.edge_ids.begin() + static_cast<std::ptrdiff_t>(first),
                    relabelled.edge_ids.begin() + static_cast<std::ptrdiff_t>(last));
  for (std::size_t e = first; e < last; ++e) {
    const std::int64_t v = relabelled.indices[e];
    if (v >= lo && v < hi) {
      g.indices.push_back(v - lo);
    } else {
      const auto it = std::lower_bound(halo.begin(), halo.end(), v);
      g.indices.push_back(local.num_owned + (it - halo.begin()));
    }
  }
  return local;
}

}  // namespace lockstep::ref
