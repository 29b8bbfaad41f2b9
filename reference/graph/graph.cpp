#include "reference/graph/graph.h"

#include <stdexcept>
#include <string>

#include "reference/common/hash.h"

namespace lockstep::ref {

namespace {

std::string range_text(std::int64_t n) { return "[0, " + std::to_string(n) + ")"; }

void check_node(const CsrGraph& g, std::int64_t u, const char* what) {
  if (u < 0 || u >= g.num_nodes) {
    throw std::out_of_range(std::string(what) + ": node " + std::to_string(u) +
                            " is out of range " + range_text(g.num_nodes));
  }
}

void check_ids(const char* name, const std::vector<std::int64_t>& ids, std::int64_t num_nodes) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= num_nodes) {
      throw std::out_of_range("from_edges: " + std::string(name) + "[" + std::to_string(i) +
                              "] = " + std::to_string(ids[i]) + " is out of range " +
                              range_text(num_nodes));
    }
  }
}

}  // namespace

std::int64_t CsrGraph::degree(std::int64_t u) const {
  check_node(*this, u, "degree");
  return indptr[static_cast<std::size_t>(u) + 1] - indptr[static_cast<std::size_t>(u)];
}

std::span<const std::int64_t> CsrGraph::neighbors(std::int64_t u) const {
  check_node(*this, u, "neighbors");
  const auto b = static_cast<std::size_t>(indptr[static_cast<std::size_t>(u)]);
  const auto e = static_cast<std::size_t>(indptr[static_cast<std::size_t>(u) + 1]);
  return std::span<const std::int64_t>(indices.data() + b, e - b);
}

void validate(const CsrGraph& g) {
  if (g.num_nodes < 0) {
    throw std::invalid_argument("csr graph: num_nodes must be >= 0, got " +
                                std::to_string(g.num_nodes));
  }
  if (g.indptr.size() != static_cast<std::size_t>(g.num_nodes) + 1) {
    throw std::invalid_argument(
        "csr graph: indptr has " + std::to_string(g.indptr.size()) +
        " entries, expected num_nodes + 1 = " + std::to_string(g.num_nodes + 1));
  }
  if (g.indptr[0] != 0) {
    throw std::invalid_argument("csr graph: indptr[0] must be 0, got " +
                                std::to_string(g.indptr[0]));
  }
  for (std::size_t u = 0; u + 1 < g.indptr.size(); ++u) {
    if (g.indptr[u + 1] < g.indptr[u]) {
      throw std::invalid_argument("csr graph: indptr decreases at " + std::to_string(u + 1) + ": " +
                                  std::to_string(g.indptr[u]) + " -> " +
                                  std::to_string(g.indptr[u + 1]));
    }
  }
  if (g.indptr.back() != g.num_edges()) {
    throw std::invalid_argument("csr graph: indptr ends at " + std::to_string(g.indptr.back()) +
                                " but there are " + std::to_string(g.num_edges()) + " indices");
  }
  if (g.edge_ids.size() != g.indices.size()) {
    throw std::invalid_argument("csr graph: " + std::to_string(g.edge_ids.size()) +
                                " edge ids for " + std::to_string(g.indices.size()) + " edges");
  }
  for (std::size_t e = 0; e < g.indices.size(); ++e) {
    if (g.indices[e] < 0 || g.indices[e] >= g.num_nodes) {
      throw std::invalid_argument("csr graph: indices[" + std::to_string(e) +
                                  "] = " + std::to_string(g.indices[e]) + " is out of range " +
                                  range_text(g.num_nodes));
    }
  }
}

CsrGraph from_edges(std::int64_t num_nodes, const std::vector<std::int64_t>& src,
                    const std::vector<std::int64_t>& dst) {
  if (num_nodes < 0) {
    throw std::invalid_argument("from_edges: num_nodes must be >= 0, got " +
                                std::to_string(num_nodes));
  }
  if (src.size() != dst.size()) {
    throw std::invalid_argument("from_edges: src has " + std::to_string(src.size()) +
                                " ids but dst has " + std::to_string(dst.size()));
  }
  check_ids("src", src, num_nodes);
  check_ids("dst", dst, num_nodes);

  CsrGraph g;
  g.num_nodes = num_nodes;
  g.indptr.assign(static_cast<std::size_t>(num_nodes) + 1, 0);
  for (const std::int64_t u : src) ++g.indptr[static_cast<std::size_t>(u) + 1];
  for (std::size_t u = 0; u < static_cast<std::size_t>(num_nodes); ++u) {
    g.indptr[u + 1] += g.indptr[u];
  }
  g.indices.resize(src.size());
  g.edge_ids.resize(src.size());
  std::vector<std::int64_t> next(g.indptr.begin(), g.indptr.end() - 1);
  for (std::size_t i = 0; i < src.size(); ++i) {
    const auto pos = static_cast<std::size_t>(next[static_cast<std::size_t>(src[i])]++);
    g.indices[pos] = dst[i];
    g.edge_ids[pos] = static_cast<std::int64_t>(i);
  }
  return g;
}

CsrGraph from_edges(std::int64_t num_nodes, const IdSpan& src, const IdSpan& dst) {
  if (src.size != dst.size) {
    throw std::invalid_argument("from_edges: src has " + std::to_string(src.size) +
                                " ids but dst has " + std::to_string(dst.size));
  }
  return from_edges(num_nodes, to_host_i64(src), to_host_i64(dst));
}

CsrGraph reverse(const CsrGraph& g) {
  validate(g);
  CsrGraph r;
  r.num_nodes = g.num_nodes;
  r.indptr.assign(g.indptr.size(), 0);
  for (const std::int64_t v : g.indices) ++r.indptr[static_cast<std::size_t>(v) + 1];
  for (std::size_t v = 0; v + 1 < r.indptr.size(); ++v) r.indptr[v + 1] += r.indptr[v];
  r.indices.resize(g.indices.size());
  r.edge_ids.resize(g.indices.size());
  std::vector<std::int64_t> next(r.indptr.begin(), r.indptr.end() - 1);
  for (std::int64_t u = 0; u < g.num_nodes; ++u) {
    for (auto e = g.indptr[static_cast<std::size_t>(u)];
         e < g.indptr[static_cast<std::size_t>(u) + 1]; ++e) {
      const auto v = static_cast<std::size_t>(g.indices[static_cast<std::size_t>(e)]);
      const auto pos = static_cast<std::size_t>(next[v]++);
      r.indices[pos] = u;
      r.edge_ids[pos] = g.edge_ids[static_cast<std::size_t>(e)];
    }
  }
  return r;
}

std::uint64_t digest(const CsrGraph& g) {
  Int64Hasher h;
  h.put(g.num_nodes);
  h.put_sized(g.indptr);
  h.put_sized(g.indices);
  h.put_sized(g.edge_ids);
  return h.digest();
}

}  // namespace lockstep::ref
