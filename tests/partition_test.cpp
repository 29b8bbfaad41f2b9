// reference/partition: hand-checked partitions, relabelling and local graphs, METIS on graphs
// with an obvious best cut, and invariants over random graphs for every method and 1..16 parts.
#include "reference/partition/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "reference/common/philox.h"
#include "reference/graph/graph.h"
#include "tests/test_util.h"

namespace lockstep::ref {
namespace {

using Ids = std::vector<std::int64_t>;
using Parts = std::vector<std::int32_t>;

using test::message_of;

std::uint64_t splitmix64_expected(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

const PartitionMethod kMethods[] = {PartitionMethod::kRange, PartitionMethod::kHash,
                                    PartitionMethod::kRandom, PartitionMethod::kMetis};

TEST(PartitionTest, MethodNamesRoundTrip) {
  for (const auto m : kMethods) EXPECT_EQ(partition_method_from_string(to_string(m)), m);
  EXPECT_EQ(to_string(PartitionMethod::kMetis), "metis");
  EXPECT_EQ(partition_method_from_string("range"), PartitionMethod::kRange);
  EXPECT_EQ(partition_method_from_string("METIS"), std::nullopt);
  EXPECT_EQ(partition_method_from_string(""), std::nullopt);
  EXPECT_EQ(partition_method_from_string("metis2"), std::nullopt);
}

TEST(PartitionTest, RangeGivesTheFirstPartsOneMore) {
  const CsrGraph g = erdos_renyi(10, 20, 1);
  const Partitioning p = partition_graph(g, 3, PartitionMethod::kRange, 0);
  EXPECT_EQ(p.part_of, (Parts{0, 0, 0, 0, 1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(p.part_offsets, (Ids{0, 4, 7, 10}));
  EXPECT_EQ(p.new_id, (Ids{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(p.orig_id, p.new_id);

  const Partitioning five = partition_graph(erdos_renyi(5, 0, 1), 4, PartitionMethod::kRange, 0);
  EXPECT_EQ(five.part_of, (Parts{0, 0, 1, 2, 3}));
  EXPECT_EQ(five.part_offsets, (Ids{0, 2, 3, 4, 5}));
}

TEST(PartitionTest, MorePartsThanNodesLeavesPartsEmpty) {
  for (const auto m : kMethods) {
    const Partitioning p = partition_graph(tiny("triangle"), 8, m, 3);
    EXPECT_EQ(p.num_parts, 8);
    ASSERT_EQ(p.part_offsets.size(), 9u);
    EXPECT_EQ(p.part_offsets.back(), 3);
    std::set<std::int32_t> used(p.part_of.begin(), p.part_of.end());
    EXPECT_LE(used.size(), 3u) << to_string(m);
    for (const auto q : p.part_of) EXPECT_TRUE(q >= 0 && q < 8) << to_string(m);
  }
  const Partitioning range = partition_graph(tiny("triangle"), 8, PartitionMethod::kRange, 0);
  EXPECT_EQ(range.part_of, (Parts{0, 1, 2}));
  EXPECT_EQ(range.part_offsets, (Ids{0, 1, 2, 3, 3, 3, 3, 3, 3}));
  const Partitioning empty = partition_graph(CsrGraph{}, 4, PartitionMethod::kMetis, 0);
  EXPECT_EQ(empty.part_offsets, (Ids{0, 0, 0, 0, 0}));
}

TEST(PartitionTest, HashAndRandomFollowTheirDefinitions) {
  const CsrGraph g = erdos_renyi(1000, 0, 1);
  const Partitioning hash = partition_graph(g, 7, PartitionMethod::kHash, /*seed=*/99);
  EXPECT_EQ(hash, partition_graph(g, 7, PartitionMethod::kHash, /*seed=*/5));  // no seed
  const Partitioning random = partition_graph(g, 7, PartitionMethod::kRandom, /*seed=*/99);
  for (std::uint64_t u = 0; u < 1000; ++u) {
    EXPECT_EQ(hash.part_of[u], static_cast<std::int32_t>(splitmix64_expected(u) % 7));
    EXPECT_EQ(random.part_of[u],
              static_cast<std::int32_t>(philox_u64(99, u, std::uint64_t{5} << 32) % 7));
  }
  EXPECT_NE(random, partition_graph(g, 7, PartitionMethod::kRandom, /*seed=*/100));
}

TEST(PartitionTest, MakePartitioningRelabelsDglStyle) {
  const Partitioning p = make_partitioning(3, {1, 0, 1, 0, 2});
  EXPECT_EQ(p.part_offsets, (Ids{0, 2, 4, 5}));
  EXPECT_EQ(p.orig_id, (Ids{1, 3, 0, 2, 4}));
  EXPECT_EQ(p.new_id, (Ids{2, 0, 3, 1, 4}));
  EXPECT_EQ(message_of<std::out_of_range>([] {
              make_partitioning(2, {0, 2});
            }),
            "make_partitioning: part_of[1] = 2 is out of range [0, 2)");
  EXPECT_EQ(message_of<std::invalid_argument>([] { make_partitioning(0, {}); }),
            "make_partitioning: num_parts must be >= 1, got 0");
}

// path4 with nodes {1, 3} in part 0 and {0, 2} in part 1: new ids 0->2, 1->0, 2->3, 3->1.
TEST(PartitionTest, RelabelAndLocalGraphsHandChecked) {
  const Partitioning p = make_partitioning(2, {1, 0, 1, 0});
  EXPECT_EQ(p.new_id, (Ids{2, 0, 3, 1}));
  const CsrGraph r = relabel(tiny("path4"), p);
  // v0 = old 1: 1->2 (e1) is 0->3; v1 = old 3: none; v2 = old 0: 0->1 (e0) is 2->0;
  // v3 = old 2: 2->3 (e2) is 3->1.
  EXPECT_EQ(r.indptr, (Ids{0, 1, 1, 2, 3}));
  EXPECT_EQ(r.indices, (Ids{3, 0, 1}));
  EXPECT_EQ(r.edge_ids, (Ids{1, 0, 2}));

  const LocalGraph l0 = local_graph(r, p, 0);
  EXPECT_EQ(l0.part, 0);
  EXPECT_EQ(l0.num_owned, 2);
  EXPECT_EQ(l0.global_ids, (Ids{0, 1, 3}));
  EXPECT_EQ(l0.graph.num_nodes, 3);
  EXPECT_EQ(l0.graph.indptr, (Ids{0, 1, 1, 1}));
  EXPECT_EQ(l0.graph.indices, (Ids{2}));
  EXPECT_EQ(l0.graph.edge_ids, (Ids{1}));

  const LocalGraph l1 = local_graph(r, p, 1);
  EXPECT_EQ(l1.num_owned, 2);
  EXPECT_EQ(l1.global_ids, (Ids{2, 3, 0, 1}));
  EXPECT_EQ(l1.graph.indptr, (Ids{0, 1, 2, 2, 2}));
  EXPECT_EQ(l1.graph.indices, (Ids{2, 3}));
  EXPECT_EQ(l1.graph.edge_ids, (Ids{0, 2}));

  EXPECT_EQ(message_of<std::out_of_range>([&] { local_graph(r, p, 2); }),
            "local_graph: part 2 is out of range [0, 2)");
  EXPECT_THROW(local_graph(r, p, -1), std::out_of_range);
  EXPECT_THROW(relabel(tiny("star5"), p), std::invalid_argument);
  EXPECT_THROW(local_graph(tiny("star5"), p, 0), std::invalid_argument);
  Partitioning broken = p;
  broken.orig_id[0] = 0;
  EXPECT_THROW(relabel(tiny("path4"), broken), std::invalid_argument);
}

TEST(PartitionTest, MetisSeparatesTwoCliques) {
  for (std::uint64_t seed : {0ull, 1ull, 12345ull, 0xFFFFFFFFFFFFFFFFull}) {
    const Partitioning p = partition_graph(tiny("two_cliques"), 2, PartitionMethod::kMetis, seed);
    EXPECT_EQ(p.part_of[0], p.part_of[1]);
    EXPECT_EQ(p.part_of[0], p.part_of[2]);
    EXPECT_EQ(p.part_of[3], p.part_of[4]);
    EXPECT_EQ(p.part_of[3], p.part_of[5]);
    EXPECT_NE(p.part_of[0], p.part_of[3]);
    EXPECT_EQ(p.part_offsets, (Ids{0, 3, 6}));
  }
}

TEST(PartitionTest, MetisCutsFewEdgesOfTwoLooselyJoinedCommunities) {
  // Two dense 100-node random communities joined by 5 edges; both directions and self-loops
  // are present to exercise symmetrisation.
  const CsrGraph a = erdos_renyi(100, 1500, 1, {.self_loops = true});
  const CsrGraph b = erdos_renyi(100, 1500, 2, {.self_loops = true});
  Ids src;
  Ids dst;
  for (std::int64_t u = 0; u < 100; ++u) {
    for (const auto v : a.neighbors(u)) {
      src.push_back(u);
      dst.push_back(v);
    }
    for (const auto v : b.neighbors(u)) {
      src.push_back(u + 100);
      dst.push_back(v + 100);
    }
  }
  for (std::int64_t i = 0; i < 5; ++i) {
    src.push_back(i * 7);
    dst.push_back(100 + i * 11);
  }
  const CsrGraph g = from_edges(200, src, dst);
  const Partitioning p = partition_graph(g, 2, PartitionMethod::kMetis, 4);
  std::int64_t cut = 0;
  for (std::size_t i = 0; i < src.size(); ++i) {
    cut +=
        p.part_of[static_cast<std::size_t>(src[i])] != p.part_of[static_cast<std::size_t>(dst[i])];
  }
  EXPECT_EQ(cut, 5);
}

TEST(PartitionTest, MetisIsDeterministicForASeed) {
  const CsrGraph g = power_law(3000, 20000, 1.0, 0.05, 6);
  for (const int parts : {2, 5, 16}) {
    const Partitioning first = partition_graph(g, parts, PartitionMethod::kMetis, 42);
    EXPECT_EQ(first, partition_graph(g, parts, PartitionMethod::kMetis, 42)) << parts;
    EXPECT_EQ(first.part_of, metis_part_of(g, parts, 42));
  }
  EXPECT_EQ(partition_graph(g, 1, PartitionMethod::kMetis, 42).part_of, Parts(3000, 0));
}

TEST(PartitionTest, RejectsBadArguments) {
  for (const auto m : kMethods) {
    EXPECT_EQ(message_of<std::invalid_argument>([&] { partition_graph(tiny("path4"), 0, m, 0); }),
              "partition_graph: num_parts must be >= 1, got 0");
  }
  CsrGraph bad = tiny("path4");
  bad.indices[0] = 7;
  EXPECT_THROW(partition_graph(bad, 2, PartitionMethod::kMetis, 0), std::invalid_argument);
  EXPECT_THROW(metis_part_of(tiny("path4"), -1, 0), std::invalid_argument);
}

// ---- properties over random graphs ----------------------------------------------------------

void check_partitioning(const CsrGraph& g, const Partitioning& p, int num_parts,
                        PartitionMethod method) {
  const auto n = static_cast<std::size_t>(g.num_nodes);
  ASSERT_EQ(p.num_parts, num_parts);
  ASSERT_EQ(p.part_of.size(), n);
  ASSERT_EQ(p.part_offsets.size(), static_cast<std::size_t>(num_parts) + 1);
  EXPECT_EQ(p.part_offsets.front(), 0);
  EXPECT_EQ(p.part_offsets.back(), g.num_nodes);
  // Every node in exactly one part, and the offsets count each part's nodes.
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(num_parts), 0);
  for (const auto q : p.part_of) {
    ASSERT_TRUE(q >= 0 && q < num_parts) << q;
    ++sizes[static_cast<std::size_t>(q)];
  }
  for (int q = 0; q < num_parts; ++q) {
    EXPECT_EQ(p.part_offsets[static_cast<std::size_t>(q) + 1] -
                  p.part_offsets[static_cast<std::size_t>(q)],
              sizes[static_cast<std::size_t>(q)]);
  }
  // new_id is a bijection with inverse orig_id, contiguous per part, order kept within a part.
  std::vector<char> hit(n, 0);
  for (std::size_t u = 0; u < n; ++u) {
    const std::int64_t v = p.new_id[u];
    ASSERT_TRUE(v >= 0 && v < g.num_nodes);
    EXPECT_FALSE(hit[static_cast<std::size_t>(v)]);
    hit[static_cast<std::size_t>(v)] = 1;
    EXPECT_EQ(p.orig_id[static_cast<std::size_t>(v)], static_cast<std::int64_t>(u));
    const auto q = static_cast<std::size_t>(p.part_of[u]);
    EXPECT_GE(v, p.part_offsets[q]);
    EXPECT_LT(v, p.part_offsets[q + 1]);
  }
  for (std::size_t v = 1; v < n; ++v) {
    const auto a = static_cast<std::size_t>(p.orig_id[v - 1]);
    const auto b = static_cast<std::size_t>(p.orig_id[v]);
    if (p.part_of[a] == p.part_of[b]) {
      EXPECT_LT(a, b);
    }
  }
  if (method == PartitionMethod::kRange) {
    const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
    EXPECT_LE(*hi - *lo, 1);
    EXPECT_TRUE(std::is_sorted(sizes.rbegin(), sizes.rend()));  // bigger parts first
    EXPECT_TRUE(std::is_sorted(p.part_of.begin(), p.part_of.end()));
  }
}

void check_local_graphs(const CsrGraph& g, const Partitioning& p) {
  const CsrGraph r = relabel(g, p);
  ASSERT_NO_THROW(validate(r));
  // relabel maps every edge (u, v, id) to (new_id[u], new_id[v], id) with the same order per node.
  for (std::int64_t u = 0; u < g.num_nodes; ++u) {
    const std::int64_t v = p.new_id[static_cast<std::size_t>(u)];
    ASSERT_EQ(r.degree(v), g.degree(u));
    for (std::int64_t k = 0; k < g.degree(u); ++k) {
      const auto eg = static_cast<std::size_t>(g.indptr[static_cast<std::size_t>(u)] + k);
      const auto er = static_cast<std::size_t>(r.indptr[static_cast<std::size_t>(v)] + k);
      EXPECT_EQ(r.indices[er], p.new_id[static_cast<std::size_t>(g.indices[eg])]);
      EXPECT_EQ(r.edge_ids[er], g.edge_ids[eg]);
    }
  }
  std::vector<std::int64_t> owners(static_cast<std::size_t>(g.num_nodes), 0);
  std::int64_t edges_seen = 0;
  for (int q = 0; q < p.num_parts; ++q) {
    const LocalGraph l = local_graph(r, p, q);
    ASSERT_NO_THROW(validate(l.graph));
    const std::int64_t lo = p.part_offsets[static_cast<std::size_t>(q)];
    EXPECT_EQ(l.part, q);
    EXPECT_EQ(l.num_owned, p.part_offsets[static_cast<std::size_t>(q) + 1] - lo);
    ASSERT_EQ(l.graph.num_nodes, static_cast<std::int64_t>(l.global_ids.size()));
    for (std::int64_t i = 0; i < l.num_owned; ++i) {
      EXPECT_EQ(l.global_ids[static_cast<std::size_t>(i)], lo + i);
      ++owners[static_cast<std::size_t>(lo + i)];
    }
    // Halo nodes: sorted, distinct, owned elsewhere, without out-edges.
    for (std::int64_t i = l.num_owned; i < l.graph.num_nodes; ++i) {
      const std::int64_t gid = l.global_ids[static_cast<std::size_t>(i)];
      EXPECT_TRUE(gid < lo || gid >= lo + l.num_owned);
      if (i > l.num_owned) {
        EXPECT_LT(l.global_ids[static_cast<std::size_t>(i) - 1], gid);
      }
      EXPECT_EQ(l.graph.degree(i), 0);
    }
    // Every owned node's out-edges are present, in order, with their ids; every halo is used.
    std::set<std::int64_t> used_halo;
    for (std::int64_t i = 0; i < l.num_owned; ++i) {
      const std::int64_t v = lo + i;
      ASSERT_EQ(l.graph.degree(i), r.degree(v));
      for (std::int64_t k = 0; k < r.degree(v); ++k) {
        const auto el = static_cast<std::size_t>(l.graph.indptr[static_cast<std::size_t>(i)] + k);
        const auto er = static_cast<std::size_t>(r.indptr[static_cast<std::size_t>(v)] + k);
        const std::int64_t local_dst = l.graph.indices[el];
        EXPECT_EQ(l.global_ids[static_cast<std::size_t>(local_dst)], r.indices[er]);
        EXPECT_EQ(l.graph.edge_ids[el], r.edge_ids[er]);
        if (local_dst >= l.num_owned) used_halo.insert(local_dst);
      }
      edges_seen += r.degree(v);
    }
    EXPECT_EQ(static_cast<std::int64_t>(used_halo.size()), l.graph.num_nodes - l.num_owned);
  }
  EXPECT_EQ(edges_seen, g.num_edges());
  for (const auto c : owners) EXPECT_EQ(c, 1);
}

class PartitionPropertyTest : public ::testing::TestWithParam<PartitionMethod> {};

TEST_P(PartitionPropertyTest, InvariantsHoldOverRandomGraphsAndPartCounts) {
  for (std::uint64_t trial = 0; trial < 9; ++trial) {
    // Sizes from the seed: n in [0, 20) (often fewer nodes than parts) for the first three
    // trials, else in [0, 400); fewer than 8 edges per node.
    const auto n =
        static_cast<std::int64_t>(uniform_below(philox_u64(trial, 0, 0), trial < 3 ? 20 : 400));
    const auto m = n == 0 ? 0
                          : static_cast<std::int64_t>(uniform_below(
                                philox_u64(trial, 1, 0), static_cast<std::uint64_t>(8 * n)));
    const CsrGraph g = trial % 2 == 0
                           ? erdos_renyi(n, m, trial, {.self_loops = true, .multi_edges = true})
                           : power_law(n, m, 1.3, 0.1, trial);
    for (int parts = 1; parts <= 16; ++parts) {
      SCOPED_TRACE("trial " + std::to_string(trial) + " n " + std::to_string(n) + " parts " +
                   std::to_string(parts));
      const Partitioning p = partition_graph(g, parts, GetParam(), trial);
      check_partitioning(g, p, parts, GetParam());
      check_local_graphs(g, p);
      EXPECT_EQ(p, partition_graph(g, parts, GetParam(), trial));
      if (parts == 1) {
        EXPECT_EQ(p.part_of, Parts(static_cast<std::size_t>(n), 0));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Partition, PartitionPropertyTest, ::testing::ValuesIn(kMethods),
                         [](const auto& info) { return to_string(info.param); });

}  // namespace
}  // namespace lockstep::ref
