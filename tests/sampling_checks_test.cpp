// reference/sampling/checks.cpp: the sample checker's verdicts and exact messages on corrupted
// blocks, per-neighbour uniformity under the chi-square test, and the p-value
// (regularized_gamma_q) against known values and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "reference/common/philox.h"
#include "reference/graph/graph.h"
#include "reference/sampling/checks.h"
#include "reference/sampling/neighbor.h"
#include "tests/sampling_test_util.h"

namespace lockstep::ref {
namespace {

TEST(SamplingChecksTest, ReportHopNodeAndEdgeOfCorruptedBlocks) {
  const CsrGraph& g = rmat12();
  const CsrGraph sg = sampling_graph(g, true);
  const SampleOptions o = options_of({10, 5}, false, true);
  const SampledBlocks good = sample_neighbors(sg, invariant_seeds(sg), o, SampleKey{1, 0, 0, 0});
  ASSERT_EQ(check_sampled_blocks(g, good, o), std::nullopt);
  ASSERT_GT(good.blocks[1].edge_ids.size(), 10u);

  SampledBlocks bad_id = good;
  bad_id.blocks[1].edge_ids[7] = bad_id.blocks[1].edge_ids[7] == 0 ? 1 : 0;
  const auto msg = check_sampled_blocks(g, bad_id, o);
  ASSERT_TRUE(msg.has_value());
  const std::int64_t node =
      good.blocks[1].dst_nodes[static_cast<std::size_t>(good.blocks[1].edge_dst[7])];
  EXPECT_NE(msg->find("hop 1, node " + std::to_string(node) + ", edge 7"), std::string::npos)
      << *msg;

  // Out-edge semantics on an in-edge sample: edges point the wrong way.
  SampleOptions out = o;
  out.in_edges = false;
  EXPECT_TRUE(check_sampled_blocks(g, good, out).has_value());

  SampledBlocks dropped = good;
  dropped.blocks[0].edge_ids.pop_back();
  dropped.blocks[0].edge_src.pop_back();
  dropped.blocks[0].edge_dst.pop_back();
  EXPECT_TRUE(check_sampled_blocks(g, dropped, o).has_value());

  SampledBlocks duplicated = good;  // a repeated edge without replacement
  Block& b = duplicated.blocks[1];
  const auto num_dst = static_cast<std::int64_t>(b.dst_nodes.size());
  for (std::size_t e = 1; e < b.edge_ids.size(); ++e) {
    // Overwrite an edge to an old node, so that src_nodes stay in first-seen order.
    if (b.edge_dst[e] == b.edge_dst[e - 1] && b.edge_src[e] < num_dst) {
      b.edge_ids[e] = b.edge_ids[e - 1];
      b.edge_src[e] = b.edge_src[e - 1];
      break;
    }
  }
  const auto dup = check_sampled_blocks(g, duplicated, o);
  ASSERT_TRUE(dup.has_value());
  EXPECT_NE(dup->find("distinct"), std::string::npos) << *dup;

  SampledBlocks unlinked = good;
  unlinked.blocks[1].dst_nodes.pop_back();
  EXPECT_TRUE(check_sampled_blocks(g, unlinked, o).has_value());

  SampledBlocks wrong_map = good;
  wrong_map.seed_to_output[0] += 1;
  EXPECT_TRUE(check_sampled_blocks(g, wrong_map, o).has_value());

  SampledBlocks extra = good;  // with replacement every node would need exactly 10 edges
  SampleOptions with = o;
  with.replace = true;
  EXPECT_TRUE(check_sampled_blocks(g, extra, with).has_value());
}

// Exact messages for corruptions made by hand: the sizes of the three edge arrays, and an edge
// moved ahead of the edges of an earlier dst node.
TEST(SamplingChecksTest, NameMismatchedEdgeArraysAndUngroupedEdgesExactly) {
  const CsrGraph& g = rmat12();
  const CsrGraph sg = sampling_graph(g, true);
  const SampleOptions o = options_of({10, 5}, false, true);
  const SampledBlocks good = sample_neighbors(sg, invariant_seeds(sg), o, SampleKey{1, 0, 0, 0});
  ASSERT_EQ(check_sampled_blocks(g, good, o), std::nullopt);
  const std::size_t m = good.blocks[0].edge_src.size();
  ASSERT_GT(m, 2u);

  SampledBlocks short_dst = good;
  short_dst.blocks[0].edge_dst.pop_back();
  EXPECT_EQ(check_sampled_blocks(g, short_dst, o),
            "hop 0: edge_src, edge_dst and edge_ids have sizes " + std::to_string(m) + ", " + std::to_string(m - 1) + ", " +
                std::to_string(m));
  SampledBlocks long_dst = good;
  long_dst.blocks[0].edge_dst.push_back(0);
  EXPECT_EQ(check_sampled_blocks(g, long_dst, o),
            "hop 0: edge_src, edge_dst and edge_ids have sizes " + std::to_string(m) + ", " + std::to_string(m + 1) + ", " +
                std::to_string(m));
  SampledBlocks short_ids = good;
  short_ids.blocks[0].edge_ids.pop_back();
  EXPECT_EQ(check_sampled_blocks(g, short_ids, o),
            "hop 0: edge_src, edge_dst and edge_ids have sizes " + std::to_string(m) + ", " + std::to_string(m) + ", " +
                std::to_string(m - 1));

  // Swap two neighbouring edges of different dst nodes whose srcs are both dst nodes (so the
  // src first-seen order still holds): the later dst now comes first.
  SampledBlocks swapped = good;
  Block& b = swapped.blocks[1];
  const auto num_dst = static_cast<std::int64_t>(b.dst_nodes.size());
  std::size_t at = 0;
  for (std::size_t e = 1; e < b.edge_dst.size() && !at; ++e) {
    if (b.edge_dst[e - 1] < b.edge_dst[e] && b.edge_src[e - 1] < num_dst && b.edge_src[e] < num_dst) at = e;
  }
  ASSERT_GT(at, 0u) << "no two neighbouring edges to swap";
  std::swap(b.edge_src[at - 1], b.edge_src[at]);
  std::swap(b.edge_dst[at - 1], b.edge_dst[at]);
  std::swap(b.edge_ids[at - 1], b.edge_ids[at]);
  EXPECT_EQ(check_sampled_blocks(g, swapped, o), "hop 1, edge " + std::to_string(at) + ": edges are not grouped by dst");
}

// Two samples of seeds {5, 7} built by hand, hop 0 then hop 1, so every expected message below
// is read off the arrays: hop 0 gives node 5 edges 10 and 11, node 7 edge 12.
SampledBlocks two_hop_sample() {
  SampledBlocks s;
  s.seeds = {5, 7};
  s.seed_to_output = {0, 1};
  Block h0;
  h0.dst_nodes = {5, 7};
  h0.src_nodes = {5, 7, 9, 3};
  h0.edge_src = {2, 3, 2};
  h0.edge_dst = {0, 0, 1};
  h0.edge_ids = {10, 11, 12};
  Block h1;
  h1.dst_nodes = {5, 7, 9, 3};
  h1.src_nodes = {5, 7, 9, 3};
  h1.edge_src = {1};
  h1.edge_dst = {2};
  h1.edge_ids = {40};
  s.blocks = {h0, h1};
  return s;
}

TEST(SamplingChecksTest, FirstDifferenceNamesHopNodeAndBothFirstEdges) {
  const SampledBlocks a = two_hop_sample();
  EXPECT_EQ(first_difference(a, a), std::nullopt);
  // Node 7 (destination 1 of hop 0) drew edge 13 instead of 12.
  SampledBlocks b = a;
  b.blocks[0].edge_ids[2] = 13;
  EXPECT_EQ(first_difference(a, b), "hop 0 node 7 got 1 edges vs 1 (first edge id 12 vs 13)");
  EXPECT_EQ(first_difference(b, a), "hop 0 node 7 got 1 edges vs 1 (first edge id 13 vs 12)");
  // Node 5's second edge is gone: the first edge ids agree, the counts do not.
  SampledBlocks c = a;
  c.blocks[0].edge_src = {2, 2};
  c.blocks[0].edge_dst = {0, 1};
  c.blocks[0].edge_ids = {10, 12};
  EXPECT_EQ(first_difference(a, c), "hop 0 node 5 got 2 edges vs 1 (first edge id 10 vs 10)");
  // Node 9 (hop 1, destination 2) drew nothing: no edge ids to name.
  SampledBlocks d = a;
  d.blocks[1].edge_src.clear();
  d.blocks[1].edge_dst.clear();
  d.blocks[1].edge_ids.clear();
  EXPECT_EQ(first_difference(a, d), "hop 1 node 9 got 1 edges vs 0");
  // Same edges, another new neighbour order in src_nodes.
  SampledBlocks e = a;
  e.blocks[1].src_nodes = {5, 7, 3, 9};
  EXPECT_EQ(first_difference(a, e), "hop 1 differs in its node lists");
  SampledBlocks f = a;
  f.blocks.pop_back();
  EXPECT_EQ(first_difference(a, f), "different number of hops");
  SampledBlocks g = a;
  g.seeds = {5, 7, 5};
  g.seed_to_output = {0, 1, 0};
  EXPECT_EQ(first_difference(a, g), "the seeds differ");
}

TEST(SamplingChecksTest, RegularizedGammaQRefusesBadArgumentsNamingThem) {
  auto message = [](double a, double x) {
    try {
      (void)regularized_gamma_q(a, x);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(1.0, -1.0), "regularized_gamma_q: x must be >= 0, got -1.000000");
  EXPECT_EQ(message(1.0, std::nan("")), "regularized_gamma_q: x must be >= 0, got nan");
  EXPECT_EQ(message(0.0, 1.0), "regularized_gamma_q: a must be finite and > 0, got 0.000000");
  EXPECT_EQ(message(1.0, 0.0), "no error");
}

// ---- uniformity ------------------------------------------------------------------------------

// A node of degree 20 sampled under 20000 batch indices with a fixed seed. The threshold 1e-4 is
// the chance that a correct sampler fails it for a random seed; with the seed fixed the test is
// deterministic and can never flake, while a biased sampler (a position never or twice as often
// drawn, modulo bias on a small range) gives p far below 1e-30. Without replacement the cells
// are negatively correlated, which only makes the test conservative.
TEST(SamplingUniformityTest, PerNeighborCountsPassChiSquare) {
  constexpr std::int64_t kDegree = 20;
  constexpr std::int64_t kBatches = 20000;
  Ids nbrs;
  Ids eids;
  for (std::int64_t e = 0; e < kDegree; ++e) {
    nbrs.push_back(500 + e);
    eids.push_back(e);
  }
  for (const auto& [fanout, replace] : {std::pair{std::int64_t{5}, false}, {1, true}}) {
    Ids counts(kDegree, 0);
    Ids first(kDegree, 0);  // which neighbor comes first (the order is random too)
    for (std::int64_t batch = 0; batch < kBatches; ++batch) {
      Ids out_n;
      Ids out_e;
      sample_node(nbrs.data(), eids.data(), kDegree, fanout, replace,
                  SampleKey{20240601, 0, batch, 1}, /*node=*/4242, out_n, out_e);
      ASSERT_EQ(static_cast<std::int64_t>(out_e.size()), fanout);
      for (const std::int64_t e : out_e) ++counts[static_cast<std::size_t>(e)];
      ++first[static_cast<std::size_t>(out_e[0])];
    }
    const double p = chi_square_uniform_pvalue(counts);
    EXPECT_GT(p, 1e-4) << "fanout " << fanout << " replace " << replace;
    EXPECT_GT(chi_square_uniform_pvalue(first), 1e-4) << "fanout " << fanout;
    // The test has power: moving a fifth of one neighbor's expected count to another fails it.
    Ids biased = counts;
    const std::int64_t moved = kBatches * fanout / kDegree / 5;
    biased[0] -= moved;
    biased[1] += moved;
    EXPECT_LT(chi_square_uniform_pvalue(biased), 1e-4);
  }
}

TEST(SamplingUniformityTest, PValueMatchesKnownValues) {
  EXPECT_NEAR(chi_square_pvalue(3.841458820694124, 1), 0.05, 1e-12);
  EXPECT_NEAR(chi_square_pvalue(3.84, 1), 0.05004352, 1e-7);
  EXPECT_NEAR(chi_square_pvalue(18.307038053275146, 10), 0.05, 1e-12);
  EXPECT_NEAR(chi_square_pvalue(18.307, 10), 0.05, 1e-5);
  EXPECT_NEAR(chi_square_pvalue(6.634896601021214, 1), 0.01, 1e-12);
  EXPECT_NEAR(chi_square_pvalue(30.143527205646155, 19), 0.05, 1e-12);
  EXPECT_EQ(chi_square_pvalue(0, 1), 1.0);
  EXPECT_EQ(chi_square_pvalue(0, 19), 1.0);
  // Closed forms: df 2 -> exp(-x/2), df 4 -> exp(-x/2) (1 + x/2), on both sides of a + 1.
  for (const double x : {0.1, 1.0, 2.5, 3.9, 4.1, 10.0, 40.0, 200.0}) {
    EXPECT_NEAR(chi_square_pvalue(x, 2) / std::exp(-x / 2), 1.0, 1e-12) << x;
    EXPECT_NEAR(chi_square_pvalue(x, 4) / (std::exp(-x / 2) * (1 + x / 2)), 1.0, 1e-12) << x;
  }
  EXPECT_NEAR(regularized_gamma_q(0.5, 2.0), std::erfc(std::sqrt(2.0)), 1e-14);
  EXPECT_EQ(chi_square_uniform_pvalue({10, 10, 10, 10}), 1.0);
  // counts 30, 10 -> chi2 = 10, df 1.
  EXPECT_NEAR(chi_square_uniform_pvalue({30, 10}), std::erfc(std::sqrt(5.0)), 1e-14);
  EXPECT_NE(message_of<std::invalid_argument>([] {
              chi_square_uniform_pvalue({5});
            }).find("at least 2 cells"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([] {
              chi_square_uniform_pvalue({0, 0});
            }).find("sum to 0"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([] {
              chi_square_uniform_pvalue({3, -1});
            }).find("counts[1] = -1"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([] { chi_square_pvalue(1, 0); }).find("df"),
            std::string::npos);
}

}  // namespace
}  // namespace lockstep::ref
