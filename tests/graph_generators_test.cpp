// reference/graph's generators (R-MAT, Erdos-Renyi, power law), checked against independent
// re-derivations of their documented definitions: determinism whatever the thread count,
// self-loop and repeat filtering, skew, and argument checks.
#include "tests/test_util.h"
#include "reference/graph/graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "reference/common/philox.h"
#include "tests/graph_test_util.h"

namespace lockstep::ref {
namespace {

using Ids = std::vector<std::int64_t>;

using graph_test::triples;
using test::message_of;

// In- plus out-degree of every node.
Ids total_degree(const CsrGraph& g) {
  Ids deg(static_cast<std::size_t>(g.num_nodes), 0);
  for (std::int64_t u = 0; u < g.num_nodes; ++u) {
    deg[static_cast<std::size_t>(u)] += g.degree(u);
    for (const auto v : g.neighbors(u)) ++deg[static_cast<std::size_t>(v)];
  }
  return deg;
}

// Applies GenOptions' filtering to raw draws with a std::set, independently of the library.
CsrGraph filter_expected(std::int64_t n, const Ids& src, const Ids& dst, bool self_loops,
                         bool multi_edges) {
  Ids s;
  Ids d;
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (!self_loops && src[i] == dst[i]) continue;
    if (!multi_edges && !seen.insert({src[i], dst[i]}).second) continue;
    s.push_back(src[i]);
    d.push_back(dst[i]);
  }
  return from_edges(n, s, d);
}

// The documented R-MAT definition, written out again.
CsrGraph rmat_expected(int scale, std::int64_t m, std::uint64_t seed, bool loops, bool multi) {
  Ids src;
  Ids dst;
  for (std::int64_t i = 0; i < m; ++i) {
    std::int64_t s = 0;
    std::int64_t d = 0;
    for (int l = 0; l < scale; ++l) {
      const auto w = philox_u64x2(seed, static_cast<std::uint64_t>(i),
                                  (std::uint64_t{1} << 32) | static_cast<std::uint64_t>(l / 2));
      const double u = uniform01(w[static_cast<std::size_t>(l % 2)]);
      const int quadrant = u < 0.57 ? 0 : u < 0.76 ? 1 : u < 0.95 ? 2 : 3;
      s = 2 * s + quadrant / 2;
      d = 2 * d + quadrant % 2;
    }
    src.push_back(s);
    dst.push_back(d);
  }
  return filter_expected(std::int64_t{1} << scale, src, dst, loops, multi);
}

TEST(RmatTest, MatchesItsDocumentedDefinition) {
  for (const bool loops : {false, true}) {
    for (const bool multi : {false, true}) {
      EXPECT_EQ(rmat(5, 400, /*seed=*/11, {.self_loops = loops, .multi_edges = multi}),
                rmat_expected(5, 400, 11, loops, multi))
          << loops << multi;
    }
  }
  const CsrGraph all = rmat(5, 400, 11, {.self_loops = true, .multi_edges = true});
  EXPECT_EQ(all.num_edges(), 400);
  EXPECT_EQ(all.num_nodes, 32);
  EXPECT_LT(rmat(5, 400, 11).num_edges(), 400);  // scale 5 with 400 edges must repeat pairs
}

TEST(RmatTest, DegreesAreSkewed) {
  const int scale = 14;
  const std::int64_t m = 16 << scale;
  const CsrGraph g = rmat(scale, m, /*seed=*/3);
  std::int64_t max_degree = 0;
  for (std::int64_t u = 0; u < g.num_nodes; ++u) max_degree = std::max(max_degree, g.degree(u));
  const double mean = static_cast<double>(g.num_edges()) / static_cast<double>(g.num_nodes);
  EXPECT_GT(static_cast<double>(max_degree), 50 * mean) << "max " << max_degree << " mean " << mean;
  EXPECT_EQ(max_degree, g.degree(0));  // ids are not permuted: node 0 is the hub
}

TEST(RmatTest, RejectsBadArguments) {
  EXPECT_EQ(message_of<std::invalid_argument>([] { rmat(41, 10, 0); }),
            "rmat: scale must be in [0, 40], got 41");
  EXPECT_THROW(rmat(-1, 10, 0), std::invalid_argument);
  EXPECT_EQ(message_of<std::invalid_argument>([] { rmat(3, -5, 0); }),
            "rmat: num_edges must be >= 0, got -5");
  EXPECT_THROW(rmat(3, 5, 0, {.num_threads = -1}), std::invalid_argument);
  EXPECT_EQ(rmat(0, 5, 0).num_edges(), 0);  // one node: every edge is a self-loop
}

TEST(GeneratorTest, ErdosRenyiMatchesItsDocumentedDefinition) {
  const std::int64_t n = 50;
  Ids src;
  Ids dst;
  for (std::uint64_t i = 0; i < 600; ++i) {
    const auto w = philox_u64x2(/*key=*/9, i, std::uint64_t{2} << 32);
    src.push_back(static_cast<std::int64_t>(uniform_below(w[0], n)));
    dst.push_back(static_cast<std::int64_t>(uniform_below(w[1], n)));
  }
  for (const bool loops : {false, true}) {
    for (const bool multi : {false, true}) {
      EXPECT_EQ(erdos_renyi(n, 600, 9, {.self_loops = loops, .multi_edges = multi}),
                filter_expected(n, src, dst, loops, multi));
    }
  }
}

TEST(GeneratorTest, ErdosRenyiRejectsBadArguments) {
  EXPECT_EQ(message_of<std::invalid_argument>([] { erdos_renyi(-3, 1, 0); }),
            "erdos_renyi: n must be >= 0, got -3");
  EXPECT_THROW(erdos_renyi(0, 1, 0), std::invalid_argument);
  EXPECT_EQ(erdos_renyi(0, 0, 0), CsrGraph{});
  EXPECT_EQ(erdos_renyi(1, 10, 0).num_edges(), 0);
  EXPECT_EQ(erdos_renyi(1, 10, 0, {.self_loops = true}).num_edges(), 1);
}

enum class Gen { kRmat, kErdosRenyi, kPowerLaw };

CsrGraph make(Gen gen, std::uint64_t seed, GenOptions options, std::int64_t m = 300'000) {
  switch (gen) {
    case Gen::kRmat: return rmat(15, m, seed, options);
    case Gen::kErdosRenyi: return erdos_renyi(20'000, m, seed, options);
    case Gen::kPowerLaw: return power_law(20'000, m, 1.2, 0.1, seed, options);
  }
  return {};
}

class GeneratorDeterminismTest : public ::testing::TestWithParam<Gen> {};

TEST_P(GeneratorDeterminismTest, SameSeedSameGraphWhateverTheThreadCount) {
  const CsrGraph one = make(GetParam(), 17, {.num_threads = 1});
  const CsrGraph four = make(GetParam(), 17, {.num_threads = 4});
  const CsrGraph seven = make(GetParam(), 17, {.num_threads = 7});
  const CsrGraph automatic = make(GetParam(), 17, {});
  EXPECT_EQ(digest(one), digest(four));
  EXPECT_EQ(one, four);
  EXPECT_EQ(one, seven);
  EXPECT_EQ(one, automatic);
  EXPECT_NE(digest(one), digest(make(GetParam(), 18, {.num_threads = 4})));
}

TEST_P(GeneratorDeterminismTest, DropsSelfLoopsAndRepeatsUnlessAsked) {
  const GenOptions plain{.num_threads = 2};
  const CsrGraph g = make(GetParam(), 4, plain, 100'000);
  std::set<std::pair<std::int64_t, std::int64_t>> pairs;
  for (const auto& [u, v, id] : triples(g)) {
    EXPECT_NE(u, v);
    EXPECT_TRUE(pairs.insert({u, v}).second) << u << "->" << v;
  }
  Ids ids = g.edge_ids;
  std::sort(ids.begin(), ids.end());
  for (std::size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], static_cast<std::int64_t>(i));

  const CsrGraph all = make(GetParam(), 4, {.self_loops = true, .multi_edges = true}, 100'000);
  EXPECT_EQ(all.num_edges(), 100'000);
  EXPECT_LE(g.num_edges(), all.num_edges());
  // The filtered graph is the unfiltered one minus loops and repeats, in edge order.
  Ids src(static_cast<std::size_t>(all.num_edges()));
  Ids dst(src.size());
  for (const auto& [u, v, id] : triples(all)) {
    src[static_cast<std::size_t>(id)] = u;
    dst[static_cast<std::size_t>(id)] = v;
  }
  EXPECT_EQ(g, filter_expected(all.num_nodes, src, dst, false, false));
}

INSTANTIATE_TEST_SUITE_P(Generator, GeneratorDeterminismTest,
                         ::testing::Values(Gen::kRmat, Gen::kErdosRenyi, Gen::kPowerLaw),
                         [](const auto& info) {
                           switch (info.param) {
                             case Gen::kRmat: return std::string("rmat");
                             case Gen::kErdosRenyi: return std::string("erdos_renyi");
                             case Gen::kPowerLaw: return std::string("power_law");
                           }
                           return std::string("unknown");
                         });

TEST(GeneratorTest, PowerLawIsolatedSetIsExactAndDocumented) {
  const std::int64_t n = 10'000;
  const double fraction = 0.2;
  const std::int64_t k = 2000;
  const std::uint64_t seed = 23;
  const Ids chosen = power_law_isolated(n, fraction, seed);
  ASSERT_EQ(static_cast<std::int64_t>(chosen.size()), k);
  EXPECT_TRUE(std::is_sorted(chosen.begin(), chosen.end()));

  // Re-derive the chosen set from its definition: the k smallest (philox key, id).
  std::vector<std::pair<std::uint64_t, std::int64_t>> keyed;
  for (std::int64_t u = 0; u < n; ++u) {
    keyed.emplace_back(philox_u64(seed, static_cast<std::uint64_t>(u), std::uint64_t{4} << 32), u);
  }
  std::sort(keyed.begin(), keyed.end());
  Ids expected;
  for (std::int64_t i = 0; i < k; ++i)
    expected.push_back(keyed[static_cast<std::size_t>(i)].second);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(chosen, expected);

  const CsrGraph g = power_law(n, 200'000, /*exponent=*/0.5, fraction, seed);
  const Ids deg = total_degree(g);
  for (const auto u : chosen) EXPECT_EQ(deg[static_cast<std::size_t>(u)], 0) << "node " << u;
  const auto isolated = std::count(deg.begin(), deg.end(), 0);
  EXPECT_GE(isolated, k);
  EXPECT_LE(isolated, k + n / 100);  // within 1% of n of the requested count

  // The set depends on the seed only.
  EXPECT_EQ(power_law_isolated(n, fraction, seed), chosen);
  EXPECT_NE(power_law_isolated(n, fraction, seed + 1), chosen);
  const CsrGraph other = power_law(n, 1000, 2.5, fraction, seed);
  const Ids other_deg = total_degree(other);
  for (const auto u : chosen) EXPECT_EQ(other_deg[static_cast<std::size_t>(u)], 0);
}

TEST(GeneratorTest, PowerLawRoundsTheIsolatedCount) {
  EXPECT_EQ(power_law_isolated(10, 0.25, 1).size(), 3u);  // llround(2.5) == 3
  EXPECT_EQ(power_law_isolated(10, 0.0, 1).size(), 0u);
  EXPECT_EQ(power_law_isolated(10, 1.0, 1).size(), 10u);
  EXPECT_EQ(power_law_isolated(0, 0.5, 1).size(), 0u);
}

TEST(GeneratorTest, PowerLawMatchesItsDocumentedDefinition) {
  const std::int64_t n = 40;
  const double exponent = 1.5;
  const std::uint64_t seed = 77;
  std::vector<std::pair<std::uint64_t, std::int64_t>> keyed;
  for (std::int64_t u = 0; u < n; ++u) {
    keyed.emplace_back(philox_u64(seed, static_cast<std::uint64_t>(u), std::uint64_t{4} << 32), u);
  }
  std::sort(keyed.begin(), keyed.end());
  const std::int64_t k = 10;  // llround(0.25 * 40)
  std::vector<double> cdf{0.0};
  for (std::int64_t r = 1; r <= n - k; ++r) {
    cdf.push_back(cdf.back() + std::pow(static_cast<double>(r), -exponent));
  }
  const auto endpoint = [&](std::uint64_t w) {
    const double target = uniform01(w) * cdf.back();
    std::int64_t r = 1;
    while (!(cdf[static_cast<std::size_t>(r)] > target)) ++r;
    return keyed[static_cast<std::size_t>(k + r - 1)].second;
  };
  Ids src;
  Ids dst;
  for (std::uint64_t i = 0; i < 500; ++i) {
    const auto w = philox_u64x2(seed, i, std::uint64_t{3} << 32);
    src.push_back(endpoint(w[0]));
    dst.push_back(endpoint(w[1]));
  }
  EXPECT_EQ(power_law(n, 500, exponent, 0.25, seed), filter_expected(n, src, dst, false, false));
  EXPECT_EQ(power_law(n, 500, exponent, 0.25, seed, {.self_loops = true, .multi_edges = true}),
            filter_expected(n, src, dst, true, true));
}

TEST(GeneratorTest, PowerLawIsSkewed) {
  const CsrGraph g = power_law(10'000, 100'000, 1.5, 0.0, 8, {.multi_edges = true});
  const Ids deg = total_degree(g);
  const auto max_degree = *std::max_element(deg.begin(), deg.end());
  const double mean = 2.0 * static_cast<double>(g.num_edges()) / 10'000.0;
  EXPECT_GT(static_cast<double>(max_degree), 100 * mean);
}

TEST(GeneratorTest, PowerLawRejectsBadArguments) {
  EXPECT_EQ(message_of<std::invalid_argument>([] { power_law(10, 5, 1.0, 1.5, 0); }),
            "power_law: isolated_fraction must be in [0, 1], got 1.500000");
  EXPECT_THROW(power_law(10, 5, 1.0, std::nan(""), 0), std::invalid_argument);
  EXPECT_THROW(power_law(10, 5, -1.0, 0.1, 0), std::invalid_argument);
  EXPECT_THROW(power_law(10, 5, INFINITY, 0.1, 0), std::invalid_argument);
  EXPECT_THROW(power_law(-1, 5, 1.0, 0.1, 0), std::invalid_argument);
  EXPECT_THROW(power_law(10, -5, 1.0, 0.1, 0), std::invalid_argument);
  EXPECT_THROW(power_law(10, 5, 1.0, 1.0, 0), std::invalid_argument);
  EXPECT_EQ(power_law(10, 0, 1.0, 1.0, 0).num_nodes, 10);
  // Exponent 0 is uniform over the non-isolated nodes.
  const CsrGraph flat = power_law(100, 50'000, 0.0, 0.5, 1, {.multi_edges = true});
  const Ids deg = total_degree(flat);
  EXPECT_EQ(std::count(deg.begin(), deg.end(), 0), 50);
  EXPECT_LT(*std::max_element(deg.begin(), deg.end()), 2 * 2 * 50'000 / 50);
}

}  // namespace
}  // namespace lockstep::ref
