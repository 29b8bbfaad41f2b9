// reference/sampling: hand-checked blocks on tiny graphs, the bit-exact draw definition
// (re-derived here from neighbor.h's text), invariants on R-MAT graphs, determinism across
// keys and thread counts, per-node exactness (what distributed samplers rely on). The sample
// checker, uniformity and the chi-square p-value are in sampling_checks_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "reference/common/philox.h"
#include "reference/graph/graph.h"
#include "reference/sampling/checks.h"
#include "reference/sampling/neighbor.h"
#include "tests/sampling_test_util.h"

namespace lockstep::ref {
namespace {

Block block_of(Ids dst, Ids src, Ids edge_src, Ids edge_dst, Ids edge_ids) {
  return Block{std::move(dst), std::move(src), std::move(edge_src), std::move(edge_dst),
               std::move(edge_ids)};
}

SampledBlocks run(const CsrGraph& g, const Ids& seeds, const SampleOptions& o,
                  const SampleKey& key = {}) {
  return sample_neighbors(sampling_graph(g, o.in_edges), seeds, o, key);
}

// ---- hand-checked tiny graphs -----------------------------------------------------------------

TEST(SamplingTinyTest, Path4InEdgesAllNeighborsOverThreeHops) {
  // 0 -> 1 -> 2 -> 3 with edge ids 0, 1, 2; in-neighbors walk backwards from 3.
  const SampleOptions o = options_of({-1, -1, -1}, false, /*in_edges=*/true);
  const SampledBlocks s = run(tiny("path4"), {3}, o);
  EXPECT_EQ(s.seeds, Ids{3});
  EXPECT_EQ(s.seed_to_output, Ids{0});
  ASSERT_EQ(s.blocks.size(), 3u);
  EXPECT_EQ(s.blocks[0], block_of({3}, {3, 2}, {1}, {0}, {2}));
  EXPECT_EQ(s.blocks[1], block_of({3, 2}, {3, 2, 1}, {1, 2}, {0, 1}, {2, 1}));
  EXPECT_EQ(s.blocks[2], block_of({3, 2, 1}, {3, 2, 1, 0}, {1, 2, 3}, {0, 1, 2}, {2, 1, 0}));
  EXPECT_EQ(check_sampled_blocks(tiny("path4"), s, o), std::nullopt);
}

TEST(SamplingTinyTest, Star5OutEdgesAllNeighbors) {
  // 0 -> 1, 2, 3, 4 (edge ids 0..3); the leaves have no out-edges.
  const SampleOptions o = options_of({-1, -1}, false, /*in_edges=*/false);
  const SampledBlocks s = run(tiny("star5"), {0}, o);
  ASSERT_EQ(s.blocks.size(), 2u);
  EXPECT_EQ(s.blocks[0], block_of({0}, {0, 1, 2, 3, 4}, {1, 2, 3, 4}, {0, 0, 0, 0}, {0, 1, 2, 3}));
  EXPECT_EQ(s.blocks[1],
            block_of({0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, {1, 2, 3, 4}, {0, 0, 0, 0}, {0, 1, 2, 3}));
  EXPECT_EQ(check_sampled_blocks(tiny("star5"), s, o), std::nullopt);

  // In-edges of leaf 2: only 0 -> 2 (edge id 1); the hub has none.
  const SampleOptions in = options_of({-1, -1}, false, /*in_edges=*/true);
  const SampledBlocks t = run(tiny("star5"), {2}, in);
  ASSERT_EQ(t.blocks.size(), 2u);
  EXPECT_EQ(t.blocks[0], block_of({2}, {2, 0}, {1}, {0}, {1}));
  EXPECT_EQ(t.blocks[1], block_of({2, 0}, {2, 0}, {1}, {0}, {1}));
}

TEST(SamplingTinyTest, TwoCliquesDegreeAtMostFanoutTakesAllWithDuplicateSeeds) {
  // Edge ids by source then destination: 0->1 0, 0->2 1, 1->0 2, 1->2 3, 2->0 4, 2->1 5,
  // 3->4 6, 3->5 7, 4->3 8, 4->5 9, 5->3 10, 5->4 11. Every in-degree is 2 <= fanout.
  const SampleOptions o = options_of({5, 2}, false, /*in_edges=*/true);
  const SampledBlocks s = run(tiny("two_cliques"), {4, 0, 4}, o, SampleKey{99, 3, 7, 0});
  EXPECT_EQ(s.seeds, (Ids{4, 0, 4}));
  EXPECT_EQ(s.seed_to_output, (Ids{0, 1, 0}));
  ASSERT_EQ(s.blocks.size(), 2u);
  // In-neighbors in reverse()'s order: 4: 3 (6), 5 (11); 0: 1 (2), 2 (4).
  EXPECT_EQ(s.blocks[0],
            block_of({4, 0}, {4, 0, 3, 5, 1, 2}, {2, 3, 4, 5}, {0, 0, 1, 1}, {6, 11, 2, 4}));
  // Locals 4:0 0:1 3:2 5:3 1:4 2:5. 3: 4 (8), 5 (10); 5: 3 (7), 4 (9); 1: 0 (0), 2 (5);
  // 2: 0 (1), 1 (3).
  EXPECT_EQ(s.blocks[1],
            block_of({4, 0, 3, 5, 1, 2}, {4, 0, 3, 5, 1, 2}, {2, 3, 4, 5, 0, 3, 2, 0, 1, 5, 1, 4},
                     {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}, {6, 11, 2, 4, 8, 10, 7, 9, 0, 5, 1, 3}));
  EXPECT_EQ(check_sampled_blocks(tiny("two_cliques"), s, o), std::nullopt);
}

TEST(SamplingTinyTest, IsolatedSeedsYieldNothing) {
  for (const bool replace : {false, true}) {
    const SampleOptions o = options_of({-1, 3}, replace, /*in_edges=*/true);
    const SampledBlocks s = run(tiny("isolated3"), {2, 0, 2}, o);
    EXPECT_EQ(s.seed_to_output, (Ids{0, 1, 0}));
    ASSERT_EQ(s.blocks.size(), 2u);
    for (const Block& b : s.blocks) EXPECT_EQ(b, block_of({2, 0}, {2, 0}, {}, {}, {}));
    EXPECT_EQ(check_sampled_blocks(tiny("isolated3"), s, o), std::nullopt);
  }
  Ids nbrs;
  Ids eids;
  sample_node(nullptr, nullptr, 0, 5, /*replace=*/true, SampleKey{}, 1, nbrs, eids);
  EXPECT_TRUE(nbrs.empty());
  EXPECT_TRUE(eids.empty());
}

TEST(SamplingTinyTest, NoHopsAndNoSeeds) {
  const SampledBlocks s = run(tiny("triangle"), {2, 2, 1}, options_of({}, false, true));
  EXPECT_TRUE(s.blocks.empty());
  EXPECT_EQ(s.seed_to_output, (Ids{0, 0, 1}));
  const SampledBlocks t = run(tiny("triangle"), {}, options_of({3, 3}, false, true));
  ASSERT_EQ(t.blocks.size(), 2u);
  for (const Block& b : t.blocks) EXPECT_EQ(b, Block{});
}

TEST(SamplingTinyTest, ZeroFanoutSamplesNothingAndReplacementDrawsFanoutTimes) {
  const CsrGraph g = tiny("triangle");  // 0->1 (0), 1->2 (1), 2->0 (2)
  const SampledBlocks zero = run(g, {0}, options_of({0}, true, false));
  EXPECT_EQ(zero.blocks[0], block_of({0}, {0}, {}, {}, {}));
  // Degree 1 with replacement: fanout draws, all of the one neighbor.
  const SampleOptions o = options_of({4}, true, /*in_edges=*/false);
  const SampledBlocks s = run(g, {0}, o);
  EXPECT_EQ(s.blocks[0], block_of({0}, {0, 1}, {1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}));
  EXPECT_EQ(check_sampled_blocks(g, s, o), std::nullopt);
}

// ---- the bit-exact definition, re-derived from neighbor.h ------------------------------------

// The header's definition with a materialised Fisher-Yates array.
void expected_sample(const Ids& nbrs, const Ids& eids, std::int64_t fanout, bool replace,
                     const SampleKey& key, std::int64_t node, Ids& out_n, Ids& out_e) {
  const std::uint64_t epoch_key =
      philox_u64(key.seed, static_cast<std::uint64_t>(key.epoch), (std::uint64_t{6} << 32) | 0);
  const std::uint64_t hop_key =
      philox_u64(epoch_key, static_cast<std::uint64_t>(key.batch),
                 (std::uint64_t{7} << 32) | static_cast<std::uint64_t>(key.hop));
  const auto bits = [&](std::int64_t k) {
    const auto w = philox4x32_10(
        {static_cast<std::uint32_t>(node), static_cast<std::uint32_t>(node >> 32),
         static_cast<std::uint32_t>(k / 2), 8},
        {static_cast<std::uint32_t>(hop_key), static_cast<std::uint32_t>(hop_key >> 32)});
    return k % 2 == 0 ? w[0] | (std::uint64_t{w[1]} << 32) : w[2] | (std::uint64_t{w[3]} << 32);
  };
  const auto d = static_cast<std::int64_t>(nbrs.size());
  std::vector<std::int64_t> positions;
  if (d == 0 || fanout == 0) {
  } else if (fanout == -1 || (!replace && d <= fanout)) {
    for (std::int64_t e = 0; e < d; ++e) positions.push_back(e);
  } else if (replace) {
    for (std::int64_t k = 0; k < fanout; ++k) {
      const auto wide = static_cast<unsigned __int128>(bits(k)) * static_cast<std::uint64_t>(d);
      positions.push_back(static_cast<std::int64_t>(wide >> 64));
    }
  } else {
    std::vector<std::int64_t> p(static_cast<std::size_t>(d));
    for (std::int64_t e = 0; e < d; ++e) p[static_cast<std::size_t>(e)] = e;
    for (std::int64_t k = 0; k < fanout; ++k) {
      const auto wide = static_cast<unsigned __int128>(bits(k)) * static_cast<std::uint64_t>(d - k);
      const std::int64_t j = k + static_cast<std::int64_t>(wide >> 64);
      std::swap(p[static_cast<std::size_t>(k)], p[static_cast<std::size_t>(j)]);
      positions.push_back(p[static_cast<std::size_t>(k)]);
    }
  }
  for (const std::int64_t e : positions) {
    out_n.push_back(nbrs[static_cast<std::size_t>(e)]);
    out_e.push_back(eids[static_cast<std::size_t>(e)]);
  }
}

TEST(SamplingDefinitionTest, SampleNodeFollowsTheDocumentedDraws) {
  ASSERT_EQ(streams::kSampleEpoch, 6u);
  ASSERT_EQ(streams::kSampleBatch, 7u);
  ASSERT_EQ(streams::kSampleDraw, 8u);
  int compared = 0;
  // Degrees around the list / table switch (fanout 32) and fanouts far above and below.
  for (const std::int64_t degree : {0, 1, 2, 5, 20, 33, 64, 200, 5000}) {
    Ids nbrs;
    Ids eids;
    for (std::int64_t e = 0; e < degree; ++e) {
      nbrs.push_back(1000 + 7 * e);
      eids.push_back(50000 - e);
    }
    for (const std::int64_t fanout : {-1, 0, 1, 3, 19, 32, 33, 40, 150, 4999}) {
      for (const bool replace : {false, true}) {
        for (const SampleKey key : {SampleKey{0, 0, 0, 0}, SampleKey{0xDEADBEEFCAFEull, 4, 91, 2},
                                    SampleKey{7, 1, 0, 5}}) {
          const std::int64_t node = 3 + degree;
          Ids got_n{-5};  // sample_node appends
          Ids got_e{-6};
          sample_node(nbrs.data(), eids.data(), degree, fanout, replace, key, node, got_n, got_e);
          Ids want_n{-5};
          Ids want_e{-6};
          expected_sample(nbrs, eids, fanout, replace, key, node, want_n, want_e);
          ASSERT_EQ(got_n, want_n) << "degree " << degree << " fanout " << fanout << " replace "
                                   << replace << " batch " << key.batch;
          ASSERT_EQ(got_e, want_e);
          ASSERT_EQ(static_cast<std::int64_t>(got_n.size()) - 1,
                    sample_count(degree, fanout, replace));
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 9 * 10 * 2 * 3);
}

TEST(SamplingDefinitionTest, WithoutReplacementGivesDistinctPositions) {
  Ids nbrs(100);
  Ids eids(100);
  for (std::int64_t e = 0; e < 100; ++e) nbrs[e] = eids[e] = e;
  for (std::int64_t batch = 0; batch < 200; ++batch) {
    Ids out_n;
    Ids out_e;
    sample_node(nbrs.data(), eids.data(), 100, 99, false, SampleKey{5, 0, batch, 0}, 12, out_n,
                out_e);
    std::sort(out_e.begin(), out_e.end());
    ASSERT_EQ(std::adjacent_find(out_e.begin(), out_e.end()), out_e.end()) << batch;
    ASSERT_EQ(out_e.size(), 99u);
  }
}

// ---- invariants on R-MAT graphs --------------------------------------------------------------

using InvariantParam = std::tuple<Ids, bool, bool>;  // fanouts, replace, in_edges

class SamplingInvariantsTest : public ::testing::TestWithParam<InvariantParam> {};

TEST_P(SamplingInvariantsTest, HoldOnRmatScale12) {
  const auto& [fanouts, replace, in_edges] = GetParam();
  const CsrGraph& g = rmat12();
  const CsrGraph sg = sampling_graph(g, in_edges);
  const Ids seeds = invariant_seeds(sg);
  const SampleOptions o = options_of(fanouts, replace, in_edges, /*num_threads=*/2);
  for (const std::int64_t batch : {0, 1, 2}) {
    const SampledBlocks s = sample_neighbors(sg, seeds, o, SampleKey{77, 0, batch, 0});
    EXPECT_EQ(check_sampled_blocks(g, s, o), std::nullopt) << "batch " << batch;
    ASSERT_EQ(s.blocks.size(), fanouts.size());
    std::int64_t edges = 0;
    for (const Block& b : s.blocks) edges += static_cast<std::int64_t>(b.edge_ids.size());
    EXPECT_GT(edges, 1000);
  }
}

TEST_P(SamplingInvariantsTest, SampleNodeOnOneAdjacencyReproducesEveryNode) {
  // A rank that owns node v has only v's row; it must draw exactly what the reference drew.
  const auto& [fanouts, replace, in_edges] = GetParam();
  const CsrGraph sg = sampling_graph(rmat12(), in_edges);
  const SampleKey key{31337, 2, 17, 0};
  const SampledBlocks s =
      sample_neighbors(sg, invariant_seeds(sg), options_of(fanouts, replace, in_edges, 3), key);
  for (std::size_t h = 0; h < s.blocks.size(); ++h) {
    const Block& b = s.blocks[h];
    SampleKey hop_key = key;
    hop_key.hop = static_cast<std::int64_t>(h);
    std::size_t e = 0;
    for (std::size_t i = 0; i < b.dst_nodes.size(); ++i) {
      const std::int64_t v = b.dst_nodes[i];
      const auto row = sg.neighbors(v);
      const Ids own_nbrs(row.begin(), row.end());
      const Ids own_eids(sg.edge_ids.begin() + sg.indptr[static_cast<std::size_t>(v)],
                         sg.edge_ids.begin() + sg.indptr[static_cast<std::size_t>(v) + 1]);
      Ids got_n;
      Ids got_e;
      sample_node(own_nbrs.data(), own_eids.data(), static_cast<std::int64_t>(own_nbrs.size()),
                  fanouts[h], replace, hop_key, v, got_n, got_e);
      for (std::size_t k = 0; k < got_n.size(); ++k, ++e) {
        ASSERT_LT(e, b.edge_ids.size());
        ASSERT_EQ(b.edge_dst[e], static_cast<std::int64_t>(i));
        ASSERT_EQ(b.src_nodes[static_cast<std::size_t>(b.edge_src[e])], got_n[k])
            << "hop " << h << " node " << v;
        ASSERT_EQ(b.edge_ids[e], got_e[k]) << "hop " << h << " node " << v;
      }
    }
    EXPECT_EQ(e, b.edge_ids.size()) << "hop " << h;
  }
}

TEST_P(SamplingInvariantsTest, SampleHopServesEachNodeAsSampleNodeDoes) {
  // An owner serves a hop's requests in one call; each node's pairs must be sample_node's.
  const auto& [fanouts, replace, in_edges] = GetParam();
  const CsrGraph sg = sampling_graph(rmat12(), in_edges);
  Ids nodes = invariant_seeds(sg);
  nodes.push_back(nodes.front());  // duplicates are served twice
  nodes.push_back(nodes.front());
  const SampleKey key{99, 1, 4, 1};
  const HopSample hs = sample_hop(sg, nodes, fanouts[0], replace, key);
  ASSERT_EQ(hs.counts.size(), nodes.size());
  std::size_t at = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::int64_t v = nodes[i];
    const auto begin = static_cast<std::size_t>(sg.indptr[static_cast<std::size_t>(v)]);
    Ids want_n, want_e;
    sample_node(sg.indices.data() + begin, sg.edge_ids.data() + begin, sg.degree(v), fanouts[0],
                replace, key, v, want_n, want_e);
    ASSERT_EQ(hs.counts[i], static_cast<std::int64_t>(want_n.size())) << "node " << v;
    for (std::size_t k = 0; k < want_n.size(); ++k, ++at) {
      ASSERT_EQ(hs.nbrs[at], want_n[k]) << "node " << v;
      ASSERT_EQ(hs.eids[at], want_e[k]) << "node " << v;
    }
  }
  EXPECT_EQ(at, hs.nbrs.size());
  EXPECT_THROW(sample_hop(sg, {sg.num_nodes}, 5, replace, key), std::out_of_range);
}

INSTANTIATE_TEST_SUITE_P(Sampling, SamplingInvariantsTest,
                         ::testing::Combine(::testing::Values(Ids{15, 10, 5}, Ids{25, 10}),
                                            ::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<InvariantParam>& info) {
                           std::string name = "fanouts";
                           for (const auto f : std::get<0>(info.param)) {
                             name.push_back('_');
                             name.append(std::to_string(f));
                           }
                           name.append(std::get<1>(info.param) ? "_replace" : "_noreplace");
                           name.append(std::get<2>(info.param) ? "_in" : "_out");
                           return name;
                         });

// ---- determinism -----------------------------------------------------------------------------

TEST(SamplingDeterminismTest, DigestDependsOnEveryKeyFieldButNotOnThreads) {
  const CsrGraph sg = sampling_graph(rmat12(), true);
  const Ids seeds = invariant_seeds(sg);
  for (const bool replace : {false, true}) {
    SampleOptions o = options_of({15, 10, 5}, replace, true, 1);
    const SampleKey key{123, 4, 5, 0};
    const SampledBlocks one = sample_neighbors(sg, seeds, o, key);
    ASSERT_GT(one.blocks[2].dst_nodes.size(), 1000u) << "several chunks per hop";
    const std::uint64_t d = digest(one);
    EXPECT_EQ(digest(sample_neighbors(sg, seeds, o, key)), d);
    SampleKey other_hop = key;
    other_hop.hop = 9;  // ignored by sample_neighbors
    EXPECT_EQ(digest(sample_neighbors(sg, seeds, o, other_hop)), d);
    for (const int threads : {2, 3, 4, 0}) {
      o.num_threads = threads;
      const SampledBlocks many = sample_neighbors(sg, seeds, o, key);
      EXPECT_EQ(digest(many), d) << threads << " threads";
      EXPECT_EQ(many, one) << threads << " threads";
    }
    o.num_threads = 1;
    EXPECT_NE(digest(sample_neighbors(sg, seeds, o, SampleKey{124, 4, 5, 0})), d);
    EXPECT_NE(digest(sample_neighbors(sg, seeds, o, SampleKey{123, 5, 5, 0})), d);
    EXPECT_NE(digest(sample_neighbors(sg, seeds, o, SampleKey{123, 4, 6, 0})), d);
  }
}

TEST(SamplingDeterminismTest, IdTableChoiceNeverChangesTheResult) {
  const CsrGraph sg = sampling_graph(rmat12(), true);
  const Ids seeds = invariant_seeds(sg);
  SampleOptions o = options_of({15, 10, 5}, false, true, 1);
  o.id_table = SampleOptions::IdTable::kHash;
  const SampledBlocks hashed = sample_neighbors(sg, seeds, o, SampleKey{5, 0, 1, 0});
  EXPECT_EQ(check_sampled_blocks(rmat12(), hashed, o), std::nullopt);
  // The flat table is cached per thread: a call on another graph in between must leave no
  // stale slot behind.
  const CsrGraph small = sampling_graph(rmat(6, 300, 3), true);
  for (const auto table : {SampleOptions::IdTable::kFlat, SampleOptions::IdTable::kAuto}) {
    for (const int threads : {1, 3}) {
      o.id_table = table;
      o.num_threads = threads;
      EXPECT_EQ(sample_neighbors(sg, seeds, o, SampleKey{5, 0, 1, 0}), hashed) << threads << " threads";
      const SampledBlocks tiny = sample_neighbors(small, {1, 2, 3}, o, SampleKey{5, 0, 1, 0});
      EXPECT_EQ(check_sampled_blocks(rmat(6, 300, 3), tiny, o), std::nullopt);
    }
  }
}

// Fanout -1 takes every neighbour, so the sampler cannot size its id table in advance: the
// hash table (1024 slots for a few seeds) must grow while a hop is merged. Two hops of all
// in-neighbours from 8 seeds of rmat12 reach well over 1024 nodes; the hashed result must equal
// the flat table's.
TEST(SamplingDeterminismTest, HashTableGrowsWhenEveryNeighbourIsTaken) {
  const CsrGraph& g = rmat12();
  const CsrGraph sg = sampling_graph(g, true);
  SampleOptions o = options_of({-1, -1}, false, true, 1);
  const Ids seeds{1, 2, 3, 5, 8, 13, 21, 34};
  o.id_table = SampleOptions::IdTable::kFlat;
  const SampledBlocks flat = sample_neighbors(sg, seeds, o, SampleKey{3, 0, 0, 0});
  ASSERT_GT(flat.blocks.back().src_nodes.size(), 1024u) << "too few nodes to make the table grow";
  o.id_table = SampleOptions::IdTable::kHash;
  const SampledBlocks hashed = sample_neighbors(sg, seeds, o, SampleKey{3, 0, 0, 0});
  EXPECT_EQ(check_sampled_blocks(g, hashed, o), std::nullopt);
  EXPECT_EQ(hashed, flat);
}

TEST(SamplingDeterminismTest, ConcurrentCallsAreSafeAndIndependent) {
  // Loaders call the sampler from several threads at once, each call itself multi-threaded.
  const CsrGraph sg = sampling_graph(rmat12(), true);
  const Ids seeds = invariant_seeds(sg);
  const SampleOptions o = options_of({15, 10, 5}, false, true, 2);
  std::vector<std::uint64_t> want(4);
  for (std::size_t i = 0; i < want.size(); ++i) {
    want[i] = digest(sample_neighbors(sg, seeds, o, SampleKey{9, 0, static_cast<int>(i), 0}));
  }
  std::vector<std::uint64_t> got(want.size());
  {
    std::vector<std::jthread> callers;
    for (std::size_t i = 0; i < got.size(); ++i) {
      callers.emplace_back([&, i] {
        got[i] = digest(sample_neighbors(sg, seeds, o, SampleKey{9, 0, static_cast<int>(i), 0}));
      });
    }
  }
  EXPECT_EQ(got, want);
}

TEST(SamplingDeterminismTest, DigestCoversEveryArray) {
  const SampledBlocks s = run(tiny("two_cliques"), {4, 0}, options_of({1, 1}, false, true));
  const std::uint64_t d = digest(s);
  for (int field = 0; field < 5; ++field) {
    SampledBlocks t = s;
    Block& b = t.blocks[1];
    std::vector<Ids*> arrays{&b.dst_nodes, &b.src_nodes, &b.edge_src, &b.edge_dst, &b.edge_ids};
    arrays[static_cast<std::size_t>(field)]->push_back(0);
    EXPECT_NE(digest(t), d) << field;
  }
  SampledBlocks u = s;
  u.seed_to_output[1] = 0;
  EXPECT_NE(digest(u), d);
}

// ---- arguments -------------------------------------------------------------------------------

TEST(SamplingArgumentsTest, RejectBadValuesNamingThem) {
  const CsrGraph g = tiny("path4");
  EXPECT_NE(message_of<std::invalid_argument>([&] {
              run(g, {0}, options_of({5, -2}, false, true));
            }).find("fanouts[1] must be -1 or in [0, 2^32), got -2"),
            std::string::npos);
  EXPECT_NE(message_of<std::out_of_range>([&] {
              run(g, {0, 4}, options_of({5}, false, true));
            }).find("seeds[1] = 4 is out of range [0, 4)"),
            std::string::npos);
  EXPECT_NE(message_of<std::out_of_range>([&] {
              run(g, {-1}, options_of({5}, false, true));
            }).find("seeds[0] = -1"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([&] {
              run(g, {0}, options_of({5}, false, true, -1));
            }).find("num_threads must be >= 0, got -1"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([&] {
              run(g, {0}, options_of({5}, false, true), SampleKey{0, -3, 0, 0});
            }).find("epoch must be >= 0, got -3"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([&] {
              run(g, {0}, options_of({5}, false, true), SampleKey{0, 0, -1, 0});
            }).find("batch must be >= 0, got -1"),
            std::string::npos);
  Ids n;
  Ids e;
  const Ids row{1, 2};
  EXPECT_NE(message_of<std::invalid_argument>([&] {
              sample_node(row.data(), row.data(), 2, std::int64_t{1} << 32, false, {}, 0, n, e);
            }).find("fanout must be -1 or in [0, 2^32), got 4294967296"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([&] {
              sample_node(row.data(), row.data(), 2, 1, false, SampleKey{0, 0, 0, -1}, 0, n, e);
            }).find("hop must be in [0, 2^32), got -1"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([&] {
              sample_node(nullptr, nullptr, 2, 1, false, {}, 3, n, e);
            }).find("node 3 has degree 2"),
            std::string::npos);
  EXPECT_NE(message_of<std::invalid_argument>([&] {
              sample_node(row.data(), row.data(), -1, 1, false, {}, 3, n, e);
            }).find("degree must be >= 0, got -1"),
            std::string::npos);
  CsrGraph broken = g;
  broken.indices[1] = 9;
  EXPECT_NE(message_of<std::out_of_range>([&] {
              sample_neighbors(broken, {1}, options_of({-1}, false, false), {});
            }).find("hop 0, node 1: neighbor 9 (edge id 1) is out of range [0, 4)"),
            std::string::npos);
  broken = g;
  broken.edge_ids.pop_back();
  EXPECT_NE(message_of<std::invalid_argument>([&] {
              sample_neighbors(broken, {1}, options_of({-1}, false, false), {});
            }).find("inconsistent graph sizes"),
            std::string::npos);
}

TEST(SamplingArgumentsTest, BadNeighborIsReportedTheSameOnAnyThreadCount) {
  // Many chunks per hop, and two corrupted rows: the one merged first is reported, whichever
  // thread sampled it.
  CsrGraph sg = sampling_graph(rmat12(), true);
  const Ids seeds = invariant_seeds(sg);
  const auto with_neighbors_from = [&](std::size_t i) {
    while (sg.degree(seeds[i]) == 0) ++i;
    return seeds[i];
  };
  const std::int64_t early = with_neighbors_from(20);
  const std::int64_t late = with_neighbors_from(290);
  sg.indices[static_cast<std::size_t>(sg.indptr[static_cast<std::size_t>(late)])] = -7;
  for (auto e = sg.indptr[static_cast<std::size_t>(early)];
       e < sg.indptr[static_cast<std::size_t>(early) + 1]; ++e) {
    sg.indices[static_cast<std::size_t>(e)] = sg.num_nodes + 3;
  }
  std::string first;
  for (const int threads : {1, 2, 4}) {
    const std::string msg = message_of<std::out_of_range>([&] {
      sample_neighbors(sg, seeds, options_of({-1, 5}, false, true, threads), {});
    });
    EXPECT_NE(msg.find("hop 0, node " + std::to_string(early) + ": neighbor " +
                       std::to_string(sg.num_nodes + 3)),
              std::string::npos)
        << msg;
    if (threads == 1) first = msg;
    EXPECT_EQ(msg, first) << threads << " threads";
  }
}

TEST(SamplingArgumentsTest, GraphSizesAreChecked) {
  CsrGraph broken = tiny("path4");
  broken.indptr.pop_back();
  EXPECT_NE(message_of<std::invalid_argument>([&] {
              sample_neighbors(broken, {1}, options_of({-1}, false, false), {});
            }).find("inconsistent graph sizes (num_nodes 4, indptr 4, indices 3, edge_ids 3)"),
            std::string::npos);
  broken = tiny("path4");
  broken.indptr.back() = 2;
  EXPECT_THROW(sample_neighbors(broken, {1}, options_of({-1}, false, false), {}),
               std::invalid_argument);
  // sampling_graph validates fully.
  broken = tiny("path4");
  broken.indices[0] = 4;
  EXPECT_THROW(sampling_graph(broken, false), std::invalid_argument);
  EXPECT_THROW(sampling_graph(broken, true), std::invalid_argument);
}

}  // namespace
}  // namespace lockstep::ref
