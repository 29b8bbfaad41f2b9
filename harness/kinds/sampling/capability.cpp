// Capability "sampling" for systems under test: multi-hop uniform neighbor sampling (in-edges)
// of each rank's share of every global batch. A system draws with its own random generator,
// so its samples cannot equal the reference's; they are checked by the reference's invariant
// checker (edges exist, min(fanout, degree) distinct edges per frontier node, blocks chain
// hop to hop), by repeat determinism (the same seed twice in one process gives the same
// sample) and by a chi-square test of one node's draws.
#include <algorithm>
#include <array>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "harness/core/diagnosis.h"
#include "harness/core/error.h"
#include "harness/sut/capability.h"
#include "harness/sut/common.h"
#include "harness/workloads/digest.h"
#include "harness/workloads/graph_spec.h"
#include "harness/kinds/sampling/spec.h"
#include "reference/common/philox.h"
#include "reference/sampling/checks.h"
#include "reference/sampling/neighbor.h"

namespace lockstep::sut {
namespace {

using I64 = std::vector<std::int64_t>;

// The uniformity test fails below this p-value (as the sampling workload's): a correct sampler
// sits far above it, a biased one many orders of magnitude below.
constexpr double kMinPValue = 1e-4;

// The shared keys (SamplingSpec), then the capability's own.
struct Options : workloads::SamplingSpec {
  std::int64_t repeats = 2;
  std::int64_t uniformity_fanout = 0;  // 0: no uniformity test
};

Options read_options(const scenario::Scenario& s) {
  const auto& c = s.workload_config;
  Options o;
  static_cast<workloads::SamplingSpec&>(o) = workloads::SamplingSpec::read(c, s.seed);
  o.repeats = read_int(c, "repeats", 2, 1, 4);
  o.uniformity_fanout = read_int(c, "uniformity_fanout", 0, 0, 10000);
  c.finish();
  if (!o.in_edges) c.fail("edges_dir", "systems under test sample in-edges (\"in\") in this version, got \"out\"");
  s.system->profile.finish();
  return o;
}

struct Prepared {
  ref::CsrGraph graph;     // out-edges, as generated
  ref::CsrGraph rows;      // in-neighbor rows (sampling_graph)
  I64 seeds;               // all batches, concatenated
  std::int64_t num_batches = 0;
  I64 shares;              // [num_batches, ws + 1] absolute offsets into seeds
  std::int64_t uniformity_node = -1, uniformity_calls = 0;
};

Prepared prepare(const scenario::Scenario& s, const Options& o, int ws) {
  Prepared p;
  p.graph = workloads::build_graph(o.graph);
  p.rows = ref::sampling_graph(p.graph, /*in_edges=*/true);
  const std::int64_t n = p.graph.num_nodes;
  for (std::int64_t i = 0; i < o.num_seeds; ++i) {
    p.seeds.push_back(static_cast<std::int64_t>(ref::uniform_below(
        ref::philox_u64(s.seed, static_cast<std::uint64_t>(i), ref::stream_counter(ref::streams::kSutQueries, 100)),
        static_cast<std::uint64_t>(n))));
  }
  p.num_batches = (o.num_seeds + o.batch_size - 1) / o.batch_size;
  for (std::int64_t b = 0; b < p.num_batches; ++b) {
    const std::int64_t lo = b * o.batch_size, hi = std::min(o.num_seeds, lo + o.batch_size);
    for (auto x : share_offsets(hi - lo, ws, lo)) p.shares.push_back(x);
  }
  if (o.uniformity_fanout > 0) {
    std::int64_t v = 0;
    for (std::int64_t u = 1; u < n; ++u) {
      if (p.rows.degree(u) > p.rows.degree(v)) v = u;
    }
    const std::int64_t degree = p.rows.degree(v);
    const std::int64_t per_call = ref::sample_count(degree, o.uniformity_fanout, o.replace);
    if (degree < 2 || per_call >= degree) {
      throw InputError(s.file + ": uniformity_fanout: node " + std::to_string(v) + " (the highest in-degree, " + std::to_string(degree) +
                       ") leaves no choice with fanout " + std::to_string(o.uniformity_fanout) +
                       "; use a graph with higher degrees or a smaller fanout");
    }
    p.uniformity_node = v;
    p.uniformity_calls = (20 * degree + per_call - 1) / per_call;  // >= 20 expected draws per edge
  }
  return p;
}

void write_inputs(const scenario::Scenario& s, InputWriter& w) {
  const Options o = read_options(s);
  const Prepared p = prepare(s, o, w.world_size());
  const std::int64_t e = p.graph.num_edges();
  I64 src(static_cast<std::size_t>(e), -1), dst(static_cast<std::size_t>(e), -1);
  for (std::int64_t u = 0; u < p.graph.num_nodes; ++u) {
    for (auto pos = p.graph.indptr[static_cast<std::size_t>(u)]; pos < p.graph.indptr[static_cast<std::size_t>(u) + 1]; ++pos) {
      const auto id = p.graph.edge_ids[static_cast<std::size_t>(pos)];
      LOCKSTEP_CHECK(id >= 0 && id < e && src[static_cast<std::size_t>(id)] < 0, "edge ids are not a permutation of [0, E)");
      src[static_cast<std::size_t>(id)] = u;
      dst[static_cast<std::size_t>(id)] = p.graph.indices[static_cast<std::size_t>(pos)];
    }
  }
  w.config("num_nodes", p.graph.num_nodes);
  w.config("num_edges", e);
  w.config("fanouts", o.fanouts);
  w.config("replace", o.replace);
  w.config("edge_dir", "in");
  w.config("num_batches", p.num_batches);
  w.config("repeats", o.repeats);
  w.config("sampler_seed", s.seed);
  if (p.uniformity_node >= 0) {
    w.config("uniformity", {{"node", p.uniformity_node}, {"calls", p.uniformity_calls}, {"fanout", o.uniformity_fanout}});
  } else {
    w.config("uniformity", nullptr);
  }
  w.array("edges_src", src, {e}, "source node of edge id e (edges run src -> dst; sample in-edges: a node's sources)");
  w.array("edges_dst", dst, {e}, "destination node of edge id e");
  const std::int64_t n = p.graph.num_nodes;
  w.array("in_indptr", p.rows.indptr, {n + 1}, "CSR of in-neighbors: node v's in-edges are positions [in_indptr[v], in_indptr[v+1])");
  w.array("in_src", p.rows.indices, {e}, "per CSR position: the in-neighbor (the edge's source)");
  w.array("in_eids", p.rows.edge_ids, {e}, "per CSR position: the edge id");
  w.array("seeds", p.seeds, {static_cast<std::int64_t>(p.seeds.size())}, "seed nodes of every global batch, concatenated");
  // No seeds, no batches: nothing to split (the helper's batches() is then empty).
  if (p.num_batches > 0) w.shares("seeds", p.shares, p.num_batches);
}

// One rank's output rows (batch, hop, dst, src, eid), read and shape-checked.
I64 read_edges(const SystemOutputs& out, int r, const std::string& name) {
  std::vector<std::int64_t> shape;
  if (!out.has(r, name) && !out.rejected(r, name)) contract_violation(r, name, "missing (neither written nor rejected)");
  if (auto why = out.rejected(r, name)) {
    throw DiagnosisError(Diagnosis{DiagnosisKind::kRankFailure, "rank " + std::to_string(r) + ": sampling raised " + *why, r, -1});
  }
  I64 rows = out.int64s(r, name, Declared::kInt64, &shape);
  if (shape.size() != 2 || shape[1] != 5) contract_violation(r, name, "expected int64 [n, 5] rows (batch, hop, dst, src, eid)");
  return rows;
}

// Rebuilds one batch's blocks from the flat rows in the reference's canonical layout and runs
// the reference checker on them. Returns nullopt or the first violation.
std::optional<std::string> check_batch(const ref::SampleChecker& checker, const I64& seeds,
                                       const std::vector<const std::int64_t*>& rows, std::size_t hops) {
  ref::SampledBlocks sb;
  sb.seeds = seeds;
  I64 frontier;
  std::unordered_map<std::int64_t, std::int64_t> local;
  for (auto v : seeds) {
    auto [it, fresh] = local.emplace(v, static_cast<std::int64_t>(frontier.size()));
    if (fresh) frontier.push_back(v);
    sb.seed_to_output.push_back(it->second);
  }
  std::vector<std::vector<const std::int64_t*>> by_hop(hops);
  for (const auto* row : rows) {
    if (row[1] < 0 || row[1] >= static_cast<std::int64_t>(hops)) {
      return "hop " + std::to_string(row[1]) + " is outside [0, " + std::to_string(hops) + ") (one hop per fanout)";
    }
    by_hop[static_cast<std::size_t>(row[1])].push_back(row);
  }
  for (std::size_t h = 0; h < hops; ++h) {
    ref::Block block;
    block.dst_nodes = frontier;
    auto& edges = by_hop[h];
    for (const auto* row : edges) {
      if (!local.count(row[2])) {
        return "hop " + std::to_string(h) + ": edges sampled for node " + std::to_string(row[2]) +
               ", which is not in the hop's frontier (the seeds, then every node the previous hops reached)";
      }
    }
    std::stable_sort(edges.begin(), edges.end(), [&](const auto* a, const auto* b) { return local.at(a[2]) < local.at(b[2]); });
    I64 src_nodes = frontier;
    std::unordered_map<std::int64_t, std::int64_t> src_local = local;
    for (const auto* row : edges) {
      auto [it, fresh] = src_local.emplace(row[3], static_cast<std::int64_t>(src_nodes.size()));
      if (fresh) src_nodes.push_back(row[3]);
      block.edge_src.push_back(it->second);
      block.edge_dst.push_back(local.at(row[2]));
      block.edge_ids.push_back(row[4]);
    }
    block.src_nodes = src_nodes;
    sb.blocks.push_back(std::move(block));
    frontier = src_nodes;
    local = std::move(src_local);
  }
  return checker.check(sb);
}

CheckResult check(const scenario::Scenario& s, const SystemOutputs& out) {
  const Options o = read_options(s);
  const int ws = out.world_size();
  const Prepared p = prepare(s, o, ws);
  ref::SampleOptions so;
  so.fanouts = o.fanouts;
  so.replace = o.replace;
  so.in_edges = true;
  const ref::SampleChecker checker(p.graph, so);
  CheckResult res;
  I64 digest_stream;
  std::int64_t total_edges = 0;
  for (int r = 0; r < ws; ++r) {
    std::vector<I64> repeats;
    for (std::int64_t k = 0; k < o.repeats; ++k) {
      const std::string name = "edges.repeat" + std::to_string(k);
      I64 rows = read_edges(out, r, name);
      const std::size_t n = rows.size() / 5;
      std::map<std::int64_t, std::vector<const std::int64_t*>> by_batch;
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t* row = rows.data() + 5 * i;
        if (row[0] < 0 || row[0] >= p.num_batches) {
          contract_violation(r, name, "row " + std::to_string(i) + " names batch " + std::to_string(row[0]) + ", outside [0, " +
                                          std::to_string(p.num_batches) + ")");
        }
        by_batch[row[0]].push_back(row);
      }
      for (std::int64_t b = 0; b < p.num_batches; ++b) {
        const auto lo = p.shares[static_cast<std::size_t>(b * (ws + 1) + r)];
        const auto hi = p.shares[static_cast<std::size_t>(b * (ws + 1) + r + 1)];
        const I64 seeds(p.seeds.begin() + lo, p.seeds.begin() + hi);
        if (auto why = check_batch(checker, seeds, by_batch[b], o.fanouts.size())) {
          std::ostringstream os;
          os << "rank " << r << ", batch " << b << (o.repeats > 1 ? ", repeat " + std::to_string(k) : "") << ": " << *why;
          throw DiagnosisError(Diagnosis{DiagnosisKind::kInvariantViolation, os.str(), r, -1});
        }
      }
      if (k == 0) total_edges += static_cast<std::int64_t>(n);
      repeats.push_back(std::move(rows));
    }
    // Repeat determinism: the same seed must give the same sample (as a set of rows per batch,
    // hop and node: the order a system lists them in is its own).
    auto sorted = [](const I64& rows) {
      std::vector<std::array<std::int64_t, 5>> v(rows.size() / 5);
      for (std::size_t i = 0; i < v.size(); ++i) std::copy_n(rows.data() + 5 * i, 5, v[i].begin());
      std::sort(v.begin(), v.end());
      return v;
    };
    const auto first = sorted(repeats[0]);
    for (const auto& row : first) digest_stream.insert(digest_stream.end(), row.begin(), row.end());
    for (std::size_t k = 1; k < repeats.size(); ++k) {
      const auto other = sorted(repeats[k]);
      if (other == first) continue;
      std::size_t i = 0;
      while (i < first.size() && i < other.size() && first[i] == other[i]) ++i;
      const auto& at = i < first.size() ? first[i] : other[i];
      auto draws_of = [&](const std::vector<std::array<std::int64_t, 5>>& v) {
        I64 srcs;
        for (const auto& row : v) {
          if (row[0] == at[0] && row[1] == at[1] && row[2] == at[2]) srcs.push_back(row[3]);
        }
        return preview(srcs, 6);
      };
      std::ostringstream os;
      os << "rank " << r << ": the same seed (" << s.seed << ") gave different samples in repeat 0 and repeat " << k << ": batch "
         << at[0] << ", hop " << at[1] << ", node " << at[2] << " drew neighbors " << draws_of(first) << " then " << draws_of(other);
      throw DiagnosisError(Diagnosis{DiagnosisKind::kNondeterminism, os.str(), r, -1});
    }
  }
  if (p.uniformity_node >= 0) {
    std::vector<std::int64_t> shape;
    const I64 rows = out.int64s(0, "uniformity", Declared::kInt64, &shape);
    if (shape.size() != 2 || shape[1] != 3) contract_violation(0, "uniformity", "expected int64 [n, 3] rows (call, src, eid)");
    const std::int64_t v = p.uniformity_node, degree = p.rows.degree(v);
    std::map<std::int64_t, std::int64_t> slot;
    const auto row0 = static_cast<std::size_t>(p.rows.indptr[static_cast<std::size_t>(v)]);
    for (std::int64_t k = 0; k < degree; ++k) slot[p.rows.edge_ids[row0 + static_cast<std::size_t>(k)]] = k;
    I64 counts(static_cast<std::size_t>(degree), 0);
    std::map<std::int64_t, std::int64_t> per_call;
    for (std::size_t i = 0; i < rows.size() / 3; ++i) {
      const std::int64_t call = rows[3 * i], eid = rows[3 * i + 2];
      auto it = slot.find(eid);
      if (it == slot.end() || call < 0 || call >= p.uniformity_calls) {
        throw DiagnosisError(Diagnosis{DiagnosisKind::kInvariantViolation,
                                       "uniformity: call " + std::to_string(call) + " drew edge " + std::to_string(eid) +
                                           ", which is not an in-edge of node " + std::to_string(v) + " (or the call is outside [0, " +
                                           std::to_string(p.uniformity_calls) + "))",
                                       0, -1});
      }
      ++counts[static_cast<std::size_t>(it->second)];
      ++per_call[call];
    }
    const std::int64_t want = ref::sample_count(degree, o.uniformity_fanout, o.replace);
    for (std::int64_t call = 0; call < p.uniformity_calls; ++call) {
      if (per_call[call] != want) {
        throw DiagnosisError(Diagnosis{DiagnosisKind::kInvariantViolation,
                                       "uniformity: call " + std::to_string(call) + " drew " + std::to_string(per_call[call]) +
                                           " edges of node " + std::to_string(v) + " (degree " + std::to_string(degree) +
                                           "), expected min(fanout, degree) = " + std::to_string(want),
                                       0, -1});
      }
    }
    const double pv = ref::chi_square_uniform_pvalue(counts);
    res.metrics["uniformity_p_value"] = pv;
    if (pv < kMinPValue) {
      const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
      std::ostringstream os;
      os << "node " << v << " (in-degree " << degree << "), " << p.uniformity_calls << " calls of fanout " << o.uniformity_fanout
         << ": chi-square p = " << pv << " < " << kMinPValue << "; edge counts range " << *lo << ".." << *hi << " around an expected "
         << static_cast<double>(p.uniformity_calls * want) / static_cast<double>(degree);
      throw DiagnosisError(Diagnosis{DiagnosisKind::kDistributionMismatch, os.str(), 0, -1});
    }
  }
  res.metrics["sampled_edges"] = static_cast<double>(total_edges);
  res.digest = workloads::digest_hex(digest_stream);
  return res;
}

}  // namespace

Capability sampling_capability() {
  return {"sampling", "multi-hop neighbor sampling, checked by invariants, repeat determinism and chi-square",
          [](const auto& s) { read_options(s); }, write_inputs, check};
}

}  // namespace lockstep::sut
