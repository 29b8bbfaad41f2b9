#include "reference/sampling/checks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace lockstep::ref {

namespace {

using GraphEdge = SampleChecker::Edge;

std::string hop_text(std::size_t h) { return "hop " + std::to_string(h); }

// Edges of `graph` sorted by id, so that an id can be looked up by binary search.
std::vector<GraphEdge> edges_by_id(const CsrGraph& graph) {
  std::vector<GraphEdge> edges;
  edges.reserve(graph.indices.size());
  for (std::int64_t u = 0; u < graph.num_nodes; ++u) {
    for (auto e = graph.indptr[static_cast<std::size_t>(u)];
         e < graph.indptr[static_cast<std::size_t>(u) + 1]; ++e) {
      edges.push_back({graph.edge_ids[static_cast<std::size_t>(e)], u,
                       graph.indices[static_cast<std::size_t>(e)]});
    }
  }
  std::sort(edges.begin(), edges.end(), [](const GraphEdge& a, const GraphEdge& b) {
    return std::tie(a.id, a.src, a.dst) < std::tie(b.id, b.src, b.dst);
  });
  return edges;
}

std::optional<std::string> check_structure(const SampledBlocks& s, const SampleOptions& options) {
  if (s.blocks.size() != options.fanouts.size()) {
    return "expected " + std::to_string(options.fanouts.size()) + " blocks (one per fanout), got " +
           std::to_string(s.blocks.size());
  }
  if (s.seed_to_output.size() != s.seeds.size()) {
    return "seed_to_output has " + std::to_string(s.seed_to_output.size()) + " entries for " +
           std::to_string(s.seeds.size()) + " seeds";
  }
  std::vector<std::int64_t> unique;
  std::unordered_map<std::int64_t, std::int64_t> position;
  for (std::size_t i = 0; i < s.seeds.size(); ++i) {
    const auto [it, added] =
        position.try_emplace(s.seeds[i], static_cast<std::int64_t>(unique.size()));
    if (added) unique.push_back(s.seeds[i]);
    if (s.seed_to_output[i] != it->second) {
      return "seed_to_output[" + std::to_string(i) + "] is " + std::to_string(s.seed_to_output[i]) +
             ", expected " + std::to_string(it->second) + " for seed " + std::to_string(s.seeds[i]);
    }
  }
  if (!s.blocks.empty() && s.blocks[0].dst_nodes != unique) {
    return "hop 0: dst_nodes are not the unique seeds in first-seen order";
  }
  for (std::size_t h = 0; h < s.blocks.size(); ++h) {
    const Block& b = s.blocks[h];
    const std::size_t num_dst = b.dst_nodes.size();
    const std::size_t num_src = b.src_nodes.size();
    if (h > 0 && b.dst_nodes != s.blocks[h - 1].src_nodes) {
      return hop_text(h) + ": dst_nodes differ from hop " + std::to_string(h - 1) + "'s src_nodes";
    }
    if (num_src < num_dst ||
        !std::equal(b.dst_nodes.begin(), b.dst_nodes.end(), b.src_nodes.begin())) {
      return hop_text(h) + ": dst_nodes are not a prefix of src_nodes";
    }
    std::unordered_set<std::int64_t> seen;
    for (std::size_t i = 0; i < num_src; ++i) {
      if (!seen.insert(b.src_nodes[i]).second) {
        return hop_text(h) + ": node " + std::to_string(b.src_nodes[i]) +
               " appears twice in src_nodes (position " + std::to_string(i) + ")";
      }
    }
    const std::size_t m = b.edge_src.size();
    if (b.edge_dst.size() != m || b.edge_ids.size() != m) {
      return hop_text(h) + ": edge_src, edge_dst and edge_ids have sizes " + std::to_string(m) +
             ", " + std::to_string(b.edge_dst.size()) + ", " + std::to_string(b.edge_ids.size());
    }
    auto next_new = static_cast<std::int64_t>(num_dst);
    for (std::size_t e = 0; e < m; ++e) {
      const std::int64_t src = b.edge_src[e];
      const std::int64_t dst = b.edge_dst[e];
      if (src < 0 || src >= static_cast<std::int64_t>(num_src)) {
        return hop_text(h) + ", edge " + std::to_string(e) + ": edge_src " + std::to_string(src) +
               " is out of range [0, " + std::to_string(num_src) + ")";
      }
      if (dst < 0 || dst >= static_cast<std::int64_t>(num_dst)) {
        return hop_text(h) + ", edge " + std::to_string(e) + ": edge_dst " + std::to_string(dst) +
               " is out of range [0, " + std::to_string(num_dst) + ")";
      }
      if (e > 0 && dst < b.edge_dst[e - 1]) {
        return hop_text(h) + ", edge " + std::to_string(e) + ": edges are not grouped by dst";
      }
      if (src > next_new) {
        return hop_text(h) + ", edge " + std::to_string(e) + ": src node " +
               std::to_string(b.src_nodes[static_cast<std::size_t>(src)]) +
               " is used before src node " +
               std::to_string(b.src_nodes[static_cast<std::size_t>(next_new)]) +
               " (src_nodes not in first-seen order)";
      }
      if (src == next_new) ++next_new;
    }
    if (next_new != static_cast<std::int64_t>(num_src)) {
      return hop_text(h) + ": src node " +
             std::to_string(b.src_nodes[static_cast<std::size_t>(next_new)]) +
             " is not a dst node and no edge uses it";
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> first_difference(const SampledBlocks& a, const SampledBlocks& b) {
  if (a == b) return std::nullopt;
  std::ostringstream os;
  for (std::size_t h = 0; h < std::min(a.blocks.size(), b.blocks.size()); ++h) {
    const auto& x = a.blocks[h];
    const auto& y = b.blocks[h];
    if (x == y) continue;
    for (std::size_t d = 0; d < std::min(x.dst_nodes.size(), y.dst_nodes.size()); ++d) {
      std::vector<std::int64_t> ex, ey;
      for (std::size_t i = 0; i < x.edge_ids.size(); ++i) {
        if (x.edge_dst[i] == static_cast<std::int64_t>(d)) ex.push_back(x.edge_ids[i]);
      }
      for (std::size_t i = 0; i < y.edge_ids.size(); ++i) {
        if (y.edge_dst[i] == static_cast<std::int64_t>(d)) ey.push_back(y.edge_ids[i]);
      }
      if (ex != ey || x.dst_nodes[d] != y.dst_nodes[d]) {
        os << "hop " << h << " node " << x.dst_nodes[d] << " got " << ex.size() << " edges vs " << ey.size();
        if (!ex.empty() && !ey.empty()) os << " (first edge id " << ex[0] << " vs " << ey[0] << ")";
        return os.str();
      }
    }
    os << "hop " << h << " differs in its node lists";
    return os.str();
  }
  if (a.blocks.size() != b.blocks.size()) return "different number of hops";
  return "the seeds differ";
}

std::optional<std::string> check_sampled_blocks(const CsrGraph& graph, const SampledBlocks& sampled,
                                                const SampleOptions& options) {
  return SampleChecker(graph, options).check(sampled);
}

SampleChecker::SampleChecker(const CsrGraph& graph, SampleOptions options)
    : graph_(graph), options_(std::move(options)) {
  validate(graph);
  edges_ = edges_by_id(graph);
  degree_.assign(static_cast<std::size_t>(graph.num_nodes), 0);
  for (std::int64_t u = 0; u < graph.num_nodes; ++u) {
    if (options_.in_edges) {
      for (auto e = graph.indptr[static_cast<std::size_t>(u)];
           e < graph.indptr[static_cast<std::size_t>(u) + 1]; ++e) {
        ++degree_[static_cast<std::size_t>(graph.indices[static_cast<std::size_t>(e)])];
      }
    } else {
      degree_[static_cast<std::size_t>(u)] = graph.degree(u);
    }
  }
}

std::optional<std::string> SampleChecker::check(const SampledBlocks& sampled) const {
  const CsrGraph& graph = graph_;
  const SampleOptions& options = options_;
  const std::vector<GraphEdge>& edges = edges_;
  const std::vector<std::int64_t>& degree = degree_;
  if (auto error = check_structure(sampled, options)) return error;
  for (std::size_t i = 0; i < sampled.seeds.size(); ++i) {
    if (sampled.seeds[i] < 0 || sampled.seeds[i] >= graph.num_nodes) {
      return "seed " + std::to_string(sampled.seeds[i]) + " (seeds[" + std::to_string(i) +
             "]) is not a node of the graph";
    }
  }

  std::unordered_set<std::int64_t> ids;
  for (std::size_t h = 0; h < sampled.blocks.size(); ++h) {
    const Block& b = sampled.blocks[h];
    const std::int64_t fanout = options.fanouts[h];
    std::size_t e = 0;
    for (std::size_t i = 0; i < b.dst_nodes.size(); ++i) {
      const std::int64_t node = b.dst_nodes[i];
      const auto where_text = [&] { return hop_text(h) + ", node " + std::to_string(node); };
      if (node < 0 || node >= graph.num_nodes) return where_text() + ": not a node of the graph";
      const std::size_t first = e;
      ids.clear();
      for (; e < b.edge_dst.size() && b.edge_dst[e] == static_cast<std::int64_t>(i); ++e) {
        const std::int64_t nbr = b.src_nodes[static_cast<std::size_t>(b.edge_src[e])];
        const std::int64_t id = b.edge_ids[e];
        const auto edge_where = [&] {
          return where_text() + ", edge " + std::to_string(e) + " (edge id " + std::to_string(id) + ")";
        };
        const auto it =
            std::lower_bound(edges.begin(), edges.end(), id,
                             [](const GraphEdge& g, std::int64_t x) { return g.id < x; });
        if (it == edges.end() || it->id != id) return edge_where() + ": no graph edge has this id";
        if (std::next(it) != edges.end() && std::next(it)->id == id) {
          return edge_where() + ": several graph edges have this id";
        }
        const std::int64_t want_src = options.in_edges ? nbr : node;
        const std::int64_t want_dst = options.in_edges ? node : nbr;
        if (it->src != want_src || it->dst != want_dst) {
          return edge_where() + ": graph edge is " + std::to_string(it->src) + " -> " +
                 std::to_string(it->dst) + ", sampled as " + std::to_string(want_src) + " -> " +
                 std::to_string(want_dst);
        }
        ids.insert(id);
      }
      const auto count = static_cast<std::int64_t>(e - first);
      const std::int64_t d = degree[static_cast<std::size_t>(node)];
      const std::int64_t want = sample_count(d, fanout, options.replace);
      if (count != want) {
        return where_text() + ": " + std::to_string(count) + " sampled edges, expected " +
               std::to_string(want) + " (degree " + std::to_string(d) + ", fanout " +
               std::to_string(fanout) + (options.replace ? ", with" : ", without") +
               " replacement)";
      }
      const bool distinct = fanout < 0 || !options.replace;
      if (distinct && static_cast<std::int64_t>(ids.size()) != count) {
        return where_text() + ": " + std::to_string(count) + " sampled edges but only " +
               std::to_string(ids.size()) + " distinct edge ids";
      }
    }
    if (e != b.edge_dst.size()) {
      return hop_text(h) + ", edge " + std::to_string(e) + ": edge_dst is not grouped";
    }
  }
  return std::nullopt;
}

double regularized_gamma_q(double a, double x) {
  if (!(a > 0) || !std::isfinite(a)) {
    throw std::invalid_argument("regularized_gamma_q: a must be finite and > 0, got " +
                                std::to_string(a));
  }
  if (!(x >= 0)) {
    throw std::invalid_argument("regularized_gamma_q: x must be >= 0, got " + std::to_string(x));
  }
  if (x == 0) return 1.0;
  if (std::isinf(x)) return 0.0;
  constexpr double kEps = 1e-16;
  constexpr double kTiny = 1e-300;
  constexpr int kMaxIter = 1000000;
  const double log_prefactor = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {
    // P(a, x) = e^-x x^a / Gamma(a) * sum_n x^n / (a (a+1) ... (a+n)).
    double ap = a;
    double del = 1.0 / a;
    double sum = del;
    for (int n = 0; n < kMaxIter; ++n) {
      ap += 1;
      del *= x / ap;
      sum += del;
      if (std::fabs(del) < std::fabs(sum) * kEps) break;
    }
    return std::clamp(1.0 - sum * std::exp(log_prefactor), 0.0, 1.0);
  }
  // Q(a, x) = e^-x x^a / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...)).
  double b = x + 1 - a;
  double c = 1 / kTiny;
  double d = 1 / b;
  double h = d;
  for (int i = 1; i < kMaxIter; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < kEps) break;
  }
  return std::clamp(std::exp(log_prefactor) * h, 0.0, 1.0);
}

double chi_square_pvalue(double chi2, double df) {
  if (!(df > 0)) {
    throw std::invalid_argument("chi_square_pvalue: df must be > 0, got " + std::to_string(df));
  }
  if (!(chi2 >= 0)) {
    throw std::invalid_argument("chi_square_pvalue: chi2 must be >= 0, got " +
                                std::to_string(chi2));
  }
  return regularized_gamma_q(df / 2, chi2 / 2);
}

double chi_square_uniform_pvalue(const std::vector<std::int64_t>& counts) {
  if (counts.size() < 2) {
    throw std::invalid_argument("chi_square_uniform_pvalue: need at least 2 cells, got " +
                                std::to_string(counts.size()));
  }
  double total = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 0) {
      throw std::invalid_argument("chi_square_uniform_pvalue: counts[" + std::to_string(i) +
                                  "] = " + std::to_string(counts[i]) + " is negative");
    }
    total += static_cast<double>(counts[i]);
  }
  if (total == 0) {
    throw std::invalid_argument("chi_square_uniform_pvalue: counts sum to 0");
  }
  const double expected = total / static_cast<double>(counts.size());
  double chi2 = 0;
  for (const std::int64_t c : counts) {
    const double diff = static_cast<double>(c) - expected;
    chi2 += diff * diff / expected;
  }
  return chi_square_pvalue(chi2, static_cast<double>(counts.size() - 1));
}

}  // namespace lockstep::ref
