// Sampling properties a reimplementation could break while every invariance still holds:
// degree fanout + 1 draws every neighbour, and draws of other nodes and other hops are
// independent. Each property has a statistical test and one without statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "reference/graph/graph.h"
#include "reference/sampling/checks.h"
#include "reference/sampling/neighbor.h"

namespace lockstep::ref {
namespace {

using Ids = std::vector<std::int64_t>;

// Without replacement, a node of degree exactly fanout + 1 leaves out one neighbour per draw,
// each of the f + 1 equally often: over 6000 batches each position is drawn 6000 f / (f + 1)
// times on average, the last one included. Fanouts on both sides of the list / table switch (32).
TEST(SamplingUniformityTest, DegreeFanoutPlusOneDrawsEveryPositionUniformly) {
  for (const std::int64_t fanout : {1, 2, 3, 7, 32, 33}) {
    const std::int64_t degree = fanout + 1;
    Ids nbrs, eids;
    for (std::int64_t e = 0; e < degree; ++e) {
      nbrs.push_back(900 + e);
      eids.push_back(e);
    }
    Ids counts(static_cast<std::size_t>(degree), 0);
    for (std::int64_t batch = 0; batch < 6000; ++batch) {
      Ids out_n, out_e;
      sample_node(nbrs.data(), eids.data(), degree, fanout, false, SampleKey{77, 3, batch, 0}, 31, out_n, out_e);
      ASSERT_EQ(static_cast<std::int64_t>(out_e.size()), fanout);
      for (const std::int64_t e : out_e) ++counts[static_cast<std::size_t>(e)];
    }
    EXPECT_GT(chi_square_uniform_pvalue(counts), 1e-4) << "fanout " << fanout;
    EXPECT_GT(counts.back(), 6000 * fanout / degree / 2) << "the last neighbour, fanout " << fanout;
  }
}

// The same, without statistics, through the multi-hop sampler: a node of degree f + 1 keeps its
// last in-neighbour in some batch, and leaves out each of the others in some batch.
TEST(SamplingUniformityTest, DegreeFanoutPlusOneLeavesOutEachNeighbourSometimes) {
  for (const std::int64_t fanout : {1, 4, 32}) {
    // Node 0's in-neighbours are 1 .. fanout + 1.
    Ids src, dst;
    for (std::int64_t v = 1; v <= fanout + 1; ++v) {
      src.push_back(v);
      dst.push_back(0);
    }
    const CsrGraph sg = sampling_graph(from_edges(fanout + 2, src, dst), true);
    SampleOptions o;
    o.fanouts = {fanout};
    std::vector<int> kept(static_cast<std::size_t>(fanout + 2), 0);
    for (std::int64_t batch = 0; batch < 200; ++batch) {
      const SampledBlocks b = sample_neighbors(sg, {0}, o, SampleKey{5, 0, batch, 0});
      ASSERT_EQ(static_cast<std::int64_t>(b.blocks[0].edge_src.size()), fanout);
      for (const std::int64_t s : b.blocks[0].edge_src) ++kept[static_cast<std::size_t>(b.blocks[0].src_nodes[static_cast<std::size_t>(s)])];
    }
    for (std::int64_t v = 1; v <= fanout + 1; ++v) {
      EXPECT_GT(kept[static_cast<std::size_t>(v)], 0) << "neighbour " << v << " never kept, fanout " << fanout;
      EXPECT_LT(kept[static_cast<std::size_t>(v)], 200) << "neighbour " << v << " never left out, fanout " << fanout;
    }
  }
}

// ---- independence across nodes and hops ------------------------------------------------------

// Draws of different nodes, and of one node at different hops, are independent. One draw with
// replacement from 20 positions: two independent draws agree with probability 1/20, so over
// 4000 batches the agreements are Binomial(4000, 0.05): mean 200, standard deviation 13.8. The
// bounds are 6 standard deviations out; the seed is fixed, so the test is deterministic. A key
// that ignores the node id (or the hop) agrees in all 4000; the correlation of the two draws,
// about 0 for independent ones (standard error 1/sqrt(4000) = 0.016), would be 1.
TEST(SamplingIndependenceTest, DrawsOfOtherNodesAndOtherHopsAreUncorrelated) {
  constexpr std::int64_t kDegree = 20, kBatches = 4000;
  Ids nbrs, eids;
  for (std::int64_t e = 0; e < kDegree; ++e) {
    nbrs.push_back(e);
    eids.push_back(e);
  }
  const auto draw = [&](std::int64_t node, std::int64_t batch, std::int64_t hop) {
    Ids out_n, out_e;
    sample_node(nbrs.data(), eids.data(), kDegree, 1, true, SampleKey{99, 2, batch, hop}, node, out_n, out_e);
    return out_e.at(0);
  };
  struct Pair {
    const char* what;
    std::int64_t node_a, hop_a, node_b, hop_b;
  };
  for (const Pair& p : {Pair{"nodes 10 and 11", 10, 0, 11, 0}, Pair{"nodes 0 and 2^40", 0, 1, std::int64_t{1} << 40, 1},
                        Pair{"hops 0 and 1", 10, 0, 10, 1}, Pair{"hops 1 and 2", 7, 1, 7, 2}}) {
    std::int64_t agree = 0;
    double sa = 0, sb = 0, sab = 0, saa = 0, sbb = 0;
    for (std::int64_t batch = 0; batch < kBatches; ++batch) {
      const double a = static_cast<double>(draw(p.node_a, batch, p.hop_a));
      const double b = static_cast<double>(draw(p.node_b, batch, p.hop_b));
      agree += a == b;
      sa += a, sb += b, sab += a * b, saa += a * a, sbb += b * b;
    }
    const double n = kBatches;
    const double corr = (sab / n - sa / n * sb / n) /
                        std::sqrt((saa / n - sa / n * sa / n) * (sbb / n - sb / n * sb / n));
    EXPECT_GT(agree, 200 - 6 * 14) << p.what;
    EXPECT_LT(agree, 200 + 6 * 14) << p.what;
    EXPECT_LT(std::abs(corr), 6 / std::sqrt(n)) << p.what;
  }
}

// Without statistics: one row sampled for 64 node ids (or 64 hops) under one batch gives 64
// different samples (10 of 1000 neighbours: two equal by chance with probability below 1e-20).
TEST(SamplingIndependenceTest, EveryNodeIdAndEveryHopGetsItsOwnSample) {
  Ids nbrs(1000), eids(1000);
  for (std::int64_t e = 0; e < 1000; ++e) nbrs[static_cast<std::size_t>(e)] = eids[static_cast<std::size_t>(e)] = e;
  std::set<Ids> by_node, by_hop;
  for (std::int64_t i = 0; i < 64; ++i) {
    Ids n1, e1, n2, e2;
    sample_node(nbrs.data(), eids.data(), 1000, 10, false, SampleKey{3, 0, 8, 0}, 500 + i, n1, e1);
    sample_node(nbrs.data(), eids.data(), 1000, 10, false, SampleKey{3, 0, 8, i}, 500, n2, e2);
    by_node.insert(e1);
    by_hop.insert(e2);
  }
  EXPECT_EQ(by_node.size(), 64u) << "node ids share draws";
  EXPECT_EQ(by_hop.size(), 64u) << "hops share draws";
  std::set<std::uint64_t> keys;
  for (std::int64_t hop = 0; hop < 64; ++hop) keys.insert(sample_hop_key(SampleKey{3, 0, 8, hop}));
  EXPECT_EQ(keys.size(), 64u) << "the hop is not mixed into the hop key";
}

}  // namespace
}  // namespace lockstep::ref
