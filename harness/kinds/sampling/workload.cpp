// Workload "sampling": distributed multi-hop neighbor sampling over the partitions. Each rank
// samples its share of every global batch; at each hop it sends the frontier nodes it does not
// own to their owners with an uneven all_to_all, the owners draw their neighbors with the
// reference primitive (a pure function of seed, epoch, batch, hop and node), and the replies
// come back the same way. Every rank takes part in every hop, even with nothing to ask.
// Checks, in order: draws for one node over many keys pass a chi-square uniformity test
// (distribution_mismatch; optional), the same batch sampled twice is identical
// (nondeterminism), the blocks satisfy the sampling invariants (invariant_violation), and they
// equal single-process reference sampling of the same seeds, delivered by the reference
// NeighborLoader with its workers (result_mismatch). The canonical output, per
// (epoch, batch, hop, node), the node's sampled edges, is the same for any world size and
// partitioning: it is the run's digest.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <sstream>
#include <unordered_map>

#include "harness/comm/board.h"
#include "harness/comm/communicator.h"
#include "harness/comm/dtype.h"
#include "harness/core/error.h"
#include "harness/report/dump.h"
#include "harness/workloads/digest.h"
#include "harness/workloads/exchange.h"
#include "harness/workloads/graph_spec.h"
#include "harness/workloads/preflight.h"
#include "harness/kinds/sampling/spec.h"
#include "harness/workloads/workload.h"
#include "reference/common/philox.h"
#include "reference/loader/loader.h"
#include "reference/partition/partition.h"
#include "reference/sampling/checks.h"
#include "reference/sampling/device_sample.h"
#include "reference/sampling/neighbor.h"
#include "reference/split/split.h"

namespace lockstep::workloads {
namespace {

using I64 = std::vector<std::int64_t>;

// The shared keys (SamplingSpec), then how lockstep's own ranks run them.
struct Options : SamplingSpec {
  ref::PartitionMethod method = ref::PartitionMethod::kRange;
  ref::SampleOptions sample;  // fanouts, replace and in_edges from SamplingSpec
  std::int64_t epochs = 1;
  bool repeat_check = true;
  // seed_split: "even" (each rank an equal slice of every global batch, rank_split) or "owner"
  // (each rank the batch's seeds its part owns, as DGL's node_split: a part with more edges
  // gives its rank more to sample, the partition-skew straggler).
  bool owner_split = false;
  bool duplicate_seeds = false;     // every third training seed appears twice in a row
  std::int64_t uniformity_draws = 0;  // 0: no uniformity check
  ref::LoaderOptions loader;
  bool shared_generator = false;  // [[inject]] bugs
  bool wrong_slot = false;
  bool fanout_overflow = false;
  bool skip_empty_hop = false;
  bool biased_draw = false;
};

// The uniformity check fails below this p-value. With a fixed seed the test is a pure
// function of the scenario, so it never flakes; 1e-4 keeps a correct sampler far away from it
// while a modulo-biased one lands many orders of magnitude below.
constexpr double kUniformityMinPValue = 1e-4;

class Sampling final : public Workload {
 public:
  explicit Sampling(Options o) : o_(std::move(o)) {}

  void run(RankContext& ctx) override {
    const int ws = ctx.world_size;
    const int me = ctx.rank;
    graph_ = build_graph(o_.graph);
    rows_ = ref::sampling_graph(graph_, o_.sample.in_edges);
    part_of_ = ref::partition_graph(graph_, ws, o_.method, o_.graph.seed).part_of;
    const ref::SampleChecker checker(graph_, o_.sample);
    rng_.seed(ctx.scenario.seed);

    // Training seeds: a seed-fixed permutation of the nodes, cut to num_seeds.
    const std::int64_t n = graph_.num_nodes;
    std::vector<std::pair<std::uint64_t, std::int64_t>> keyed(static_cast<std::size_t>(n));
    for (std::int64_t v = 0; v < n; ++v) keyed[static_cast<std::size_t>(v)] = {ref::philox_u64(ctx.scenario.seed, 0x5a3d, static_cast<std::uint64_t>(v)), v};
    std::sort(keyed.begin(), keyed.end());
    I64 train;
    for (std::int64_t i = 0; i < std::min(o_.num_seeds, n); ++i) {
      train.push_back(keyed[static_cast<std::size_t>(i)].second);
      if (o_.duplicate_seeds && i % 3 == 0) train.push_back(train.back());
    }
    const std::int64_t steps = (static_cast<std::int64_t>(train.size()) + o_.batch_size - 1) / o_.batch_size;

    if (o_.uniformity_draws > 0 && me == 0) check_uniformity(ctx);
    ctx.comm.set_phase("sample");
    preflight_steps(ctx.comm, steps * o_.epochs, "global batches x epochs");
    I64 canonical;  // (epoch, batch, hop, node, hash of its sampled edges) tuples
    std::int64_t sampled_edges = 0;
    double sampling_s = 0;  // the distributed sampling alone, without the checks
    std::vector<I64> shares;  // this rank's share of every global batch
    for (std::int64_t b = 0; b < steps; ++b) {
      const I64 global(train.begin() + b * o_.batch_size,
                       train.begin() + std::min<std::int64_t>((b + 1) * o_.batch_size, static_cast<std::int64_t>(train.size())));
      if (o_.owner_split) {
        I64 owned;
        for (std::int64_t v : global)
          if (part_of_[static_cast<std::size_t>(v)] == me) owned.push_back(v);
        shares.push_back(std::move(owned));
      } else {
        shares.push_back(ref::rank_split(global, ws)[static_cast<std::size_t>(me)]);
      }
    }
    ref::SampleOptions loader_sample = o_.sample;
    loader_sample.num_threads = o_.loader.num_workers > 0 ? 0 : 1;
    for (std::int64_t e = 0; e < o_.epochs; ++e) {
      // The single-process reference, sampled ahead by the loader's workers.
      ref::NeighborLoader loader(rows_, shares, loader_sample, ref::SampleKey{ctx.scenario.seed, e, 0, 0}, o_.loader);
      for (std::int64_t b = 0; b < steps; ++b) {
        ctx.comm.set_step(e * steps + b);
        const I64& mine = shares[static_cast<std::size_t>(b)];
        const ref::SampleKey key{ctx.scenario.seed, e, b, 0};
        const auto t_sample = std::chrono::steady_clock::now();
        const auto got = sample(ctx, mine, key);
        sampling_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_sample).count();
        if (o_.repeat_check) {
          const auto again = sample(ctx, mine, key);
          if (!(again == got)) fail_with(DiagnosisKind::kNondeterminism, me, first_difference("sampling batch " + std::to_string(b) + " twice", got, again, me));
        }
        if (auto bad = checker.check(got)) {
          fail_with(DiagnosisKind::kInvariantViolation, me, "rank " + std::to_string(me) + " epoch " + std::to_string(e) + " batch " + std::to_string(b) + ": " + *bad);
        }
        const auto reference = loader.next();
        if (!reference) fail_with(DiagnosisKind::kResultMismatch, me, "rank " + std::to_string(me) + ": the loader ended before batch " + std::to_string(b));
        if (!(*reference == got)) fail_with(DiagnosisKind::kResultMismatch, me, first_difference("single-process loader vs distributed sampling", *reference, got, me));
        if (ctx.scenario.device == scenario::Device::kCuda) {
          // Every hop of the rank's share on its GPU (draws, relabelling, edge destinations:
          // the reference's kernels) must give the distributed sample bit for bit.
          const ref::Device gpu{ref::DeviceKind::kCuda, ctx.local_rank % std::max(1, ref::cuda_device_count())};
          const ref::IdArray seeds = ref::IdArray::from_host(mine, ref::IdType::kI64, gpu);
          const auto on_gpu = ref::sample_neighbors(device_rows_, seeds.span(), o_.sample, key).to_host();
          if (!(on_gpu == got)) fail_with(DiagnosisKind::kResultMismatch, me, first_difference("multi-hop sampling on the GPU vs distributed sampling", on_gpu, got, me));
        }
        for (std::size_t h = 0; h < got.blocks.size(); ++h) {
          const auto& blk = got.blocks[h];
          std::vector<std::uint64_t> hash(blk.dst_nodes.size(), 1469598103934665603ull);
          for (std::size_t i = 0; i < blk.edge_ids.size(); ++i) {
            auto& x = hash[static_cast<std::size_t>(blk.edge_dst[i])];
            x = (x ^ static_cast<std::uint64_t>(blk.src_nodes[static_cast<std::size_t>(blk.edge_src[i])])) * 1099511628211ull;
            x = (x ^ static_cast<std::uint64_t>(blk.edge_ids[i])) * 1099511628211ull;
          }
          for (std::size_t d = 0; d < blk.dst_nodes.size(); ++d) {
            canonical.insert(canonical.end(), {e, b, static_cast<std::int64_t>(h), blk.dst_nodes[d], static_cast<std::int64_t>(hash[d])});
          }
          sampled_edges += static_cast<std::int64_t>(blk.edge_ids.size());
        }
      }
    }
    ctx.metrics["sampled_edges"] = static_cast<double>(sampled_edges);
    ctx.metrics["sampled_edges_per_s"] = sampling_s > 0 ? static_cast<double>(sampled_edges) / sampling_s : 0;
    ctx.metrics["batches"] = static_cast<double>(steps * o_.epochs);
    ctx.metrics["loader_workers"] = static_cast<double>(o_.loader.num_workers);
    ctx.dump.write("sampled_node_hashes", canonical, "(epoch, batch, hop, node, FNV-1a of its sampled (src, edge id) list) per sampled node");
    combine(ctx, canonical);
  }

 private:
  // One batch share, sampled across the ranks.
  ref::SampledBlocks sample(RankContext& ctx, const I64& seeds, ref::SampleKey key) {
    ref::SampledBlocks out;
    out.seeds = seeds;
    I64 dst;
    std::unordered_map<std::int64_t, std::int64_t> pos(seeds.size() * 2);
    for (std::int64_t s : seeds) {
      auto [it, fresh] = pos.emplace(s, static_cast<std::int64_t>(dst.size()));
      if (fresh) dst.push_back(s);
      out.seed_to_output.push_back(it->second);
    }
    for (std::size_t h = 0; h < o_.sample.fanouts.size(); ++h) {
      key.hop = static_cast<std::int64_t>(h);
      if (o_.skip_empty_hop && dst.empty()) {  // the injected bug: nothing to ask, so no hop
        comm::mark_fired("skip_empty_hop");
        ref::Block blk;
        out.blocks.push_back(blk);
        continue;
      }
      const Replies replies = exchange(ctx, dst, o_.sample.fanouts[h], key);
      ref::Block blk;
      blk.dst_nodes = dst;
      blk.src_nodes = dst;
      std::unordered_map<std::int64_t, std::int64_t> src_pos(dst.size() * 4);
      for (std::size_t i = 0; i < dst.size(); ++i) src_pos.emplace(dst[i], static_cast<std::int64_t>(i));
      for (std::size_t d = 0; d < dst.size(); ++d) {
        const std::int64_t* pair = replies.pairs.data() + 2 * replies.offset[d];
        for (std::int64_t k = 0; k < replies.count[d]; ++k, pair += 2) {
          auto [it, fresh] = src_pos.emplace(pair[0], static_cast<std::int64_t>(blk.src_nodes.size()));
          if (fresh) blk.src_nodes.push_back(pair[0]);
          blk.edge_src.push_back(it->second);
          blk.edge_dst.push_back(static_cast<std::int64_t>(d));
          blk.edge_ids.push_back(pair[1]);
        }
      }
      dst = blk.src_nodes;
      out.blocks.push_back(std::move(blk));
    }
    return out;
  }

  // Per frontier node, its sampled (neighbor, edge id) pairs as drawn by its owner: count[i]
  // pairs from pair offset[i] of `pairs` (neighbor and edge id interleaved).
  struct Replies {
    I64 count, offset, pairs;
  };

  Replies exchange(RankContext& ctx, const I64& frontier, std::int64_t fanout,
                                            const ref::SampleKey& key) {
    const int ws = ctx.world_size;
    const int me = ctx.rank;
    std::vector<std::vector<std::size_t>> asked(static_cast<std::size_t>(ws));  // frontier positions per owner
    for (std::size_t i = 0; i < frontier.size(); ++i) asked[static_cast<std::size_t>(part_of_[static_cast<std::size_t>(frontier[i])])].push_back(i);
    I64 send(static_cast<std::size_t>(ws)), request;
    for (int r = 0; r < ws; ++r) {
      send[static_cast<std::size_t>(r)] = static_cast<std::int64_t>(asked[static_cast<std::size_t>(r)].size());
      for (std::size_t i : asked[static_cast<std::size_t>(r)]) request.push_back(frontier[i]);
    }
    const I64 recv = exchange_counts(ctx.comm, send);
    const I64 incoming = workloads::exchange(ctx.comm, std::move(request), send, recv);

    // Serve: draw the neighbors of every requested node this rank owns, all at once with the
    // reference's hop kernel (node by node when an injected bug changes the draw).
    for (const std::int64_t v : incoming) {
      if (part_of_[static_cast<std::size_t>(v)] != me) {
        fail_with(DiagnosisKind::kInvariantViolation, me, "rank " + std::to_string(me) + " was asked for node " + std::to_string(v) + ", owned by rank " + std::to_string(part_of_[static_cast<std::size_t>(v)]));
      }
    }
    ref::HopSample served;
    if (o_.shared_generator || o_.fanout_overflow || o_.biased_draw) {
      for (const std::int64_t v : incoming) {
        const std::size_t before = served.nbrs.size();
        draw(v, fanout, key, ctx.world_size, served.nbrs, served.eids);
        served.counts.push_back(static_cast<std::int64_t>(served.nbrs.size() - before));
      }
    } else if (ctx.scenario.device == scenario::Device::kCuda) {
      // The owner draws on its GPU with the reference's CUDA kernels (reference/sampling/
      // cuda/): the host's pairs bit for bit, so the digest is the CPU variant's. The
      // exchange stays on the host.
      const ref::Device gpu{ref::DeviceKind::kCuda, ctx.local_rank % std::max(1, ref::cuda_device_count())};
      const ref::IdArray ids = ref::IdArray::from_host(incoming, ref::IdType::kI64, gpu);
      const ref::DeviceHopSample drawn = ref::sample_hop(device_rows_, ids.span(), fanout, o_.sample.replace, key);
      served = ref::HopSample{drawn.counts.to_host(), drawn.nbrs.to_host(), drawn.eids.to_host()};
    } else {
      served = ref::sample_hop(rows_, incoming, fanout, o_.sample.replace, key);
    }
    const I64& counts = served.counts;
    I64 pairs(2 * served.nbrs.size()), pair_send(static_cast<std::size_t>(ws), 0);
    for (std::size_t j = 0; j < served.nbrs.size(); ++j) {
      pairs[2 * j] = served.nbrs[j];
      pairs[2 * j + 1] = served.eids[j];
    }
    std::size_t at = 0;
    for (int r = 0; r < ws; ++r) {
      for (std::int64_t k = 0; k < recv[static_cast<std::size_t>(r)]; ++k, ++at) pair_send[static_cast<std::size_t>(r)] += 2 * counts[at];
    }
    const I64 got_counts = workloads::exchange(ctx.comm, counts, recv, send);
    I64 pair_recv(static_cast<std::size_t>(ws), 0);
    std::size_t c = 0;
    for (int r = 0; r < ws; ++r) {
      for (std::int64_t k = 0; k < send[static_cast<std::size_t>(r)]; ++k) pair_recv[static_cast<std::size_t>(r)] += 2 * got_counts[c++];
    }
    I64 got_pairs = workloads::exchange(ctx.comm, std::move(pairs), pair_send, pair_recv);

    // Per-owner segments of the replies, in rank order.
    struct Segment { std::size_t count_at, pair_at, nodes; };
    std::vector<Segment> seg(static_cast<std::size_t>(ws));
    std::size_t ca = 0, pa = 0;
    for (int r = 0; r < ws; ++r) {
      seg[static_cast<std::size_t>(r)] = {ca, pa, static_cast<std::size_t>(send[static_cast<std::size_t>(r)])};
      for (std::int64_t k = 0; k < send[static_cast<std::size_t>(r)]; ++k) pa += 2 * static_cast<std::size_t>(got_counts[ca++]);
    }
    Replies out;
    out.count.assign(frontier.size(), 0);
    out.offset.assign(frontier.size(), 0);
    out.pairs = std::move(got_pairs);
    std::size_t nonempty = 0;
    for (int r = 0; r < ws; ++r) {
      const auto& mine = asked[static_cast<std::size_t>(r)];
      if (mine.empty()) continue;
      // The injected bug (PyG #9685): replies indexed by position among the owners that were
      // asked, not by owner, which shifts them once an owner before them got no request.
      const Segment& s = seg[o_.wrong_slot ? nonempty : static_cast<std::size_t>(r)];
      if (o_.wrong_slot && nonempty != static_cast<std::size_t>(r)) comm::mark_fired("wrong_slot");
      ++nonempty;
      std::size_t p = s.pair_at;
      for (std::size_t k = 0; k < mine.size() && k < s.nodes; ++k) {
        out.count[mine[k]] = got_counts[s.count_at + k];
        out.offset[mine[k]] = static_cast<std::int64_t>(p / 2);
        p += 2 * static_cast<std::size_t>(got_counts[s.count_at + k]);
      }
    }
    return out;
  }

  // Draws the neighbors of the highest-degree node (lowest id among ties) under many keys,
  // through the same owner-side draw as the distributed path, and runs Pearson's chi-square
  // test of how often each of its edges was drawn against the uniform distribution (df =
  // degree - 1). Without replacement a draw picks min(fanout, degree) distinct edges, which
  // lowers the variance of the counts: the test is then conservative, never looser.
  void check_uniformity(RankContext& ctx) {
    std::int64_t v = 0;
    for (std::int64_t u = 1; u < rows_.num_nodes; ++u) {
      if (rows_.degree(u) > rows_.degree(v)) v = u;
    }
    const std::int64_t degree = rows_.degree(v);
    const std::int64_t fanout = o_.sample.fanouts[0];
    const std::int64_t per_draw = ref::sample_count(degree, fanout, o_.sample.replace);
    if (degree < 2 || per_draw >= degree) {
      throw InputError(ctx.scenario.file + ": uniformity_draws: node " + std::to_string(v) + " (the highest degree, " + std::to_string(degree) +
                       ") leaves no choice with fanout " + std::to_string(fanout) + "; use a graph with higher degrees or a smaller first fanout");
    }
    // At least 20 expected draws per edge, so the chi-square approximation holds.
    const std::int64_t draws = std::max(o_.uniformity_draws, (20 * degree + per_draw - 1) / per_draw);
    std::map<std::int64_t, std::int64_t> slot;  // edge id -> position in the row
    const auto row = static_cast<std::size_t>(rows_.indptr[static_cast<std::size_t>(v)]);
    for (std::int64_t k = 0; k < degree; ++k) slot[rows_.edge_ids[row + static_cast<std::size_t>(k)]] = k;
    I64 counts(static_cast<std::size_t>(degree), 0);
    for (std::int64_t i = 0; i < draws; ++i) {
      I64 nbrs, eids;
      draw(v, fanout, ref::SampleKey{ctx.scenario.seed, 0x7fff, i, 0}, ctx.world_size, nbrs, eids);
      for (auto eid : eids) ++counts[static_cast<std::size_t>(slot.at(eid))];
    }
    const double p = ref::chi_square_uniform_pvalue(counts);
    ctx.metrics["uniformity_p_value"] = p;
    if (p < kUniformityMinPValue) {
      const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
      std::ostringstream os;
      os << "node " << v << " (degree " << degree << "), " << draws << " draws of " << per_draw << ": chi-square p = " << p << " < " << kUniformityMinPValue
         << "; edge counts range " << *lo << ".." << *hi << " around an expected " << static_cast<double>(draws * per_draw) / static_cast<double>(degree);
      fail_with(DiagnosisKind::kDistributionMismatch, ctx.rank, os.str());
    }
  }

  void draw(std::int64_t v, std::int64_t fanout, const ref::SampleKey& key, int ws, I64& nbrs, I64& eids) {
    const auto b = static_cast<std::size_t>(rows_.indptr[static_cast<std::size_t>(v)]);
    const std::int64_t degree = rows_.degree(v);
    if (o_.biased_draw && degree > 0) {
      // The injected bug: an index drawn as 8 random bits modulo the degree (the rand() % n
      // pattern with a short generator), which favours the low positions of every row.
      const std::int64_t n = ref::sample_count(degree, fanout, true);
      if (!fired_) comm::mark_fired("biased_draw");
      fired_ = true;
      for (std::int64_t k = 0; k < n; ++k) {
        const std::uint64_t bits = ref::philox_u64(ref::sample_hop_key(key), static_cast<std::uint64_t>(v), static_cast<std::uint64_t>(k));
        const auto e = b + static_cast<std::size_t>((bits & 0xff) % static_cast<std::uint64_t>(degree));
        nbrs.push_back(rows_.indices[e]);
        eids.push_back(rows_.edge_ids[e]);
      }
      return;
    }
    if (o_.shared_generator && degree > 0) {
      // The injected bug (pyg-lib #527): one stateful generator shared by every draw, so the
      // result depends on what was drawn before.
      const std::int64_t n = fanout < 0 ? degree : (o_.sample.replace ? fanout : std::min(degree, fanout));
      if (!fired_) comm::mark_fired("shared_generator");
      fired_ = true;
      for (std::int64_t k = 0; k < n; ++k) {
        const auto e = b + static_cast<std::size_t>(rng_() % static_cast<std::uint64_t>(degree));
        nbrs.push_back(rows_.indices[e]);
        eids.push_back(rows_.edge_ids[e]);
      }
      return;
    }
    // The injected bug (cuGraph #2761): more samples than the fanout as the world grows.
    const std::int64_t f = o_.fanout_overflow && fanout > 0 ? fanout + ws - 1 : fanout;
    if (f != fanout && !fired_) comm::mark_fired("fanout_overflow");
    if (f != fanout) fired_ = true;
    ref::sample_node(rows_.indices.data() + b, rows_.edge_ids.data() + b, degree, f, o_.sample.replace || (o_.fanout_overflow && ws > 1), key, v, nbrs, eids);
  }

  static std::string first_difference(const std::string& what, const ref::SampledBlocks& a, const ref::SampledBlocks& b, int rank) {
    return "rank " + std::to_string(rank) + ", " + what + ": " + ref::first_difference(a, b).value_or("no difference");
  }

  // Gathers every rank's tuples on rank 0, which checks that ranks that sampled the same
  // (epoch, batch, hop, node) agree and digests the sorted, de-duplicated set.
  void combine(RankContext& ctx, const I64& canonical) {
    const int ws = ctx.world_size;
    I64 mine{static_cast<std::int64_t>(canonical.size())}, sizes(static_cast<std::size_t>(ws));
    ctx.comm.set_phase("combine");
    ctx.comm.all_gather(comm::view_of(mine), comm::view_of(sizes));
    const std::int64_t width = std::max<std::int64_t>(5, *std::max_element(sizes.begin(), sizes.end()));
    I64 padded(static_cast<std::size_t>(width), 0), all(static_cast<std::size_t>(width * ws));
    std::copy(canonical.begin(), canonical.end(), padded.begin());
    ctx.comm.all_gather(comm::view_of(padded), comm::view_of(all));
    if (ctx.rank != 0) return;
    std::map<std::array<std::int64_t, 4>, std::int64_t> seen;
    for (int r = 0; r < ws; ++r) {
      for (std::int64_t i = 0; i < sizes[static_cast<std::size_t>(r)]; i += 5) {
        const auto* t = all.data() + r * width + i;
        auto [it, fresh] = seen.emplace(std::array<std::int64_t, 4>{t[0], t[1], t[2], t[3]}, t[4]);
        if (!fresh && it->second != t[4]) {
          fail_with(DiagnosisKind::kNondeterminism, r, "epoch " + std::to_string(t[0]) + " batch " + std::to_string(t[1]) + " hop " +
                   std::to_string(t[2]) + " node " + std::to_string(t[3]) + ": rank " + std::to_string(r) + " sampled other edges than another rank");
        }
      }
    }
    I64 flat;
    for (const auto& [k, v] : seen) flat.insert(flat.end(), {k[0], k[1], k[2], k[3], v});
    ctx.digest = digest_hex(flat);
  }

  Options o_;
  ref::CsrGraph graph_, rows_;
  ref::SampleRows device_rows_{rows_};  // rows_ on the GPU, copied at the first draw there
  std::vector<std::int32_t> part_of_;
  std::mt19937_64 rng_;
  bool fired_ = false;  // the per-node injected bug was marked as fired (once: draw() is hot)
};

std::unique_ptr<Workload> make(const scenario::Scenario& s) {
  const scenario::Config& c = s.workload_config;
  Options o;
  (void)c.get_string("kind");
  static_cast<SamplingSpec&>(o) = SamplingSpec::read(c, s.seed);
  o.method = read_partition_method(c);
  o.sample.fanouts = o.fanouts;
  o.sample.replace = o.replace;
  o.sample.in_edges = o.in_edges;
  o.sample.num_threads = 1;  // the owners' draws; the thread count never changes a result
  o.loader.num_workers = static_cast<int>(c.get_int("num_workers", 0));
  if (o.loader.num_workers < 0 || o.loader.num_workers > 64) c.fail("num_workers", "must be in 0..64");
  o.loader.prefetch = static_cast<int>(c.get_int("prefetch", 2));
  if (o.loader.prefetch < 1 || o.loader.prefetch > 64) c.fail("prefetch", "must be in 1..64");
  const std::string mode = c.get_string("worker_mode", "threads");
  if (mode != "threads" && mode != "processes") c.fail("worker_mode", "must be 'threads' or 'processes', got '" + mode + "'");
  o.loader.mode = mode == "threads" ? ref::LoaderOptions::Mode::kThreads : ref::LoaderOptions::Mode::kProcesses;
  if (o.loader.mode == ref::LoaderOptions::Mode::kProcesses && s.device == scenario::Device::kCuda) {
    c.fail("worker_mode", "process workers fork, and a child forked after CUDA was initialised crashes; use 'threads' with device 'cuda'");
  }
  o.duplicate_seeds = c.get_bool("duplicate_seeds", false);
  o.uniformity_draws = c.get_int("uniformity_draws", 0);
  if (o.uniformity_draws < 0 || o.uniformity_draws > 10'000'000) c.fail("uniformity_draws", "must be in 0..10000000");
  o.epochs = c.get_int("epochs", 1);
  if (o.epochs < 1 || o.epochs > 100) c.fail("epochs", "must be in 1..100");
  o.repeat_check = c.get_bool("repeat_check", true);
  o.owner_split = scenario::read_choice(c, "seed_split", "even", {"even", "owner"}) == "owner";
  c.finish();
  o.shared_generator = has_switch_injection(s, "shared_generator");
  o.wrong_slot = has_switch_injection(s, "wrong_slot");
  o.fanout_overflow = has_switch_injection(s, "fanout_overflow");
  o.skip_empty_hop = has_switch_injection(s, "skip_empty_hop");
  o.biased_draw = has_switch_injection(s, "biased_draw");
  if (o.biased_draw && o.uniformity_draws == 0) c.fail("uniformity_draws", "the biased_draw injection needs the uniformity check (uniformity_draws > 0)");
  return std::make_unique<Sampling>(std::move(o));
}

}  // namespace

WorkloadSpec sampling_spec() {
  return WorkloadSpec{"sampling",
                      "distributed multi-hop neighbor sampling through owner ranks, checked for repeatability, invariants and equality with single-process sampling",
                      make, {"shared_generator", "wrong_slot", "fanout_overflow", "skip_empty_hop", "biased_draw"},
                      /*gpu_compute_host_exchange=*/true};
}

}  // namespace lockstep::workloads
