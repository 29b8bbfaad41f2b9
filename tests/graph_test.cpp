// reference/graph: CSR construction, reverse, digests, generators (checked against independent re-derivations of their
// documented definitions) and loaders.
#include "tests/test_util.h"
#include "reference/graph/graph.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "reference/common/device.h"
#include "reference/common/philox.h"
#include "reference/io/npy.h"

namespace lockstep::ref {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<std::int64_t>;

using test::message_of;

// (src, dst, edge id) of every edge, in CSR order.
std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> triples(const CsrGraph& g) {
  std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> out;
  for (std::int64_t u = 0; u < g.num_nodes; ++u) {
    for (auto e = g.indptr[static_cast<std::size_t>(u)];
         e < g.indptr[static_cast<std::size_t>(u) + 1]; ++e) {
      out.emplace_back(u, g.indices[static_cast<std::size_t>(e)],
                       g.edge_ids[static_cast<std::size_t>(e)]);
    }
  }
  return out;
}

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

// A fresh directory, removed with everything in it on destruction.
using test::TempDir;

std::string write_text(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return path;
}

// ---- CSR ------------------------------------------------------------------------------------

// Edges by id: 0: 2->3, 1: 0->1, 2: 2->0, 3: 1->2, 4: 0->3.
CsrGraph example() { return from_edges(4, {2, 0, 2, 1, 0}, {3, 1, 0, 2, 3}); }

TEST(GraphTest, FromEdgesIsStableCsr) {
  const CsrGraph g = example();
  EXPECT_EQ(g.num_nodes, 4);
  EXPECT_EQ(g.num_edges(), 5);
  EXPECT_EQ(g.indptr, (Ids{0, 2, 3, 5, 5}));
  EXPECT_EQ(g.indices, (Ids{1, 3, 2, 3, 0}));
  EXPECT_EQ(g.edge_ids, (Ids{1, 4, 3, 0, 2}));
  EXPECT_EQ(g.degree(0), 2);
  EXPECT_EQ(g.degree(3), 0);
  EXPECT_EQ(Ids(g.neighbors(2).begin(), g.neighbors(2).end()), (Ids{3, 0}));
  EXPECT_NO_THROW(validate(g));
}

TEST(GraphTest, FromEdgesEmpty) {
  const CsrGraph g = from_edges(0, Ids{}, Ids{});
  EXPECT_EQ(g.indptr, (Ids{0}));
  EXPECT_EQ(g.num_edges(), 0);
  EXPECT_EQ(g, CsrGraph{});
}

TEST(GraphTest, FromEdgesNamesTheFirstBadIdAndPosition) {
  EXPECT_EQ(message_of<std::out_of_range>([] {
              from_edges(4, {0, 4, 9}, {1, 1, 1});
            }),
            "from_edges: src[1] = 4 is out of range [0, 4)");
  EXPECT_EQ(message_of<std::out_of_range>([] {
              from_edges(4, {0, 1}, {1, -2});
            }),
            "from_edges: dst[1] = -2 is out of range [0, 4)");
  EXPECT_EQ(message_of<std::invalid_argument>([] {
              from_edges(4, {0, 1}, {1});
            }),
            "from_edges: src has 2 ids but dst has 1");
  EXPECT_EQ(message_of<std::invalid_argument>([] { from_edges(-1, Ids{}, Ids{}); }),
            "from_edges: num_nodes must be >= 0, got -1");
}

TEST(GraphTest, FromEdgesAcceptsInt32AndInt64IdSpans) {
  const Ids src{2, 0, 2, 1, 0};
  const Ids dst{3, 1, 0, 2, 3};
  for (const IdType st : {IdType::kI32, IdType::kI64}) {
    for (const IdType dt : {IdType::kI32, IdType::kI64}) {
      const IdArray s = IdArray::from_host(src, st, Device{});
      const IdArray d = IdArray::from_host(dst, dt, Device{});
      EXPECT_EQ(from_edges(4, s.span(), d.span()), example())
          << to_string(st) << " / " << to_string(dt);
    }
  }
  const IdArray s = IdArray::from_host({0, 7}, IdType::kI32, Device{});
  const IdArray d = IdArray::from_host({1, 1}, IdType::kI32, Device{});
  const IdArray short_d = IdArray::from_host({1}, IdType::kI32, Device{});
  EXPECT_EQ(message_of<std::out_of_range>([&] { from_edges(4, s.span(), d.span()); }),
            "from_edges: src[1] = 7 is out of range [0, 4)");
  EXPECT_THROW(from_edges(4, s.span(), short_d.span()), std::invalid_argument);
}

TEST(GraphTest, FromEdgesAcceptsCudaIdSpans) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA";
  const Device cuda{DeviceKind::kCuda, 0};
  const IdArray s = IdArray::from_host({2, 0, 2, 1, 0}, IdType::kI32, cuda);
  const IdArray d = IdArray::from_host({3, 1, 0, 2, 3}, IdType::kI64, cuda);
  EXPECT_EQ(from_edges(4, s.span(), d.span()), example());
}

TEST(GraphTest, DegreeAndNeighborsCheckTheNode) {
  const CsrGraph g = example();
  EXPECT_EQ(message_of<std::out_of_range>([&] { (void)g.degree(4); }),
            "degree: node 4 is out of range [0, 4)");
  EXPECT_THROW((void)g.neighbors(-1), std::out_of_range);
}

TEST(GraphTest, ValidateNamesTheInconsistency) {
  CsrGraph g = example();
  g.indices[2] = 9;
  EXPECT_EQ(message_of<std::invalid_argument>([&] { validate(g); }),
            "csr graph: indices[2] = 9 is out of range [0, 4)");
  g = example();
  g.indptr = {0, 3, 2, 5, 5};
  EXPECT_NE(message_of<std::invalid_argument>([&] { validate(g); }).find("decreases at 2"),
            std::string::npos);
  g = example();
  g.edge_ids.pop_back();
  EXPECT_THROW(validate(g), std::invalid_argument);
  g = example();
  g.indptr.pop_back();
  EXPECT_THROW(validate(g), std::invalid_argument);
}

// Each array one entry too long or too short, with the exact message (example(): 4 nodes,
// indptr {0, 2, 3, 5, 5}, 5 indices, 5 edge ids).
TEST(GraphTest, ValidateNamesArraysOfTheWrongLengthBothWays) {
  CsrGraph g = example();
  g.indices.push_back(1);
  g.edge_ids.push_back(5);
  EXPECT_EQ(message_of<std::invalid_argument>([&] { validate(g); }), "csr graph: indptr ends at 5 but there are 6 indices");
  g = example();
  g.indices.pop_back();
  g.edge_ids.pop_back();
  EXPECT_EQ(message_of<std::invalid_argument>([&] { validate(g); }), "csr graph: indptr ends at 5 but there are 4 indices");
  g = example();
  g.edge_ids.push_back(5);
  EXPECT_EQ(message_of<std::invalid_argument>([&] { validate(g); }), "csr graph: 6 edge ids for 5 edges");
  g = example();
  g.edge_ids.pop_back();
  EXPECT_EQ(message_of<std::invalid_argument>([&] { validate(g); }), "csr graph: 4 edge ids for 5 edges");
}

TEST(GraphTest, TinyGraphsAreAsDocumented) {
  const CsrGraph path = tiny("path4");
  EXPECT_EQ(path.num_nodes, 4);
  EXPECT_EQ(path.indptr, (Ids{0, 1, 2, 3, 3}));
  EXPECT_EQ(path.indices, (Ids{1, 2, 3}));
  EXPECT_EQ(path.edge_ids, (Ids{0, 1, 2}));

  const CsrGraph star = tiny("star5");
  EXPECT_EQ(star.indptr, (Ids{0, 4, 4, 4, 4, 4}));
  EXPECT_EQ(star.indices, (Ids{1, 2, 3, 4}));

  const CsrGraph tri = tiny("triangle");
  EXPECT_EQ(tri.indptr, (Ids{0, 1, 2, 3}));
  EXPECT_EQ(tri.indices, (Ids{1, 2, 0}));

  const CsrGraph iso = tiny("isolated3");
  EXPECT_EQ(iso.num_nodes, 3);
  EXPECT_EQ(iso.indptr, (Ids{0, 0, 0, 0}));
  EXPECT_TRUE(iso.indices.empty());

  const CsrGraph cliques = tiny("two_cliques");
  EXPECT_EQ(cliques.num_nodes, 6);
  EXPECT_EQ(cliques.indptr, (Ids{0, 2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(cliques.indices, (Ids{1, 2, 0, 2, 0, 1, 4, 5, 3, 5, 3, 4}));
  EXPECT_EQ(cliques.edge_ids, (Ids{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));

  const std::string msg = message_of<std::invalid_argument>([] { tiny("square"); });
  EXPECT_NE(msg.find("'square'"), std::string::npos) << msg;
  for (const char* name : {"path4", "star5", "triangle", "isolated3", "two_cliques"}) {
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

TEST(GraphTest, ReverseIsStableTranspose) {
  // In-edges in CSR order: 0 <- 2 (e2); 1 <- 0 (e1); 2 <- 1 (e3); 3 <- 0 (e4), 2 (e0).
  const CsrGraph r = reverse(example());
  EXPECT_EQ(r.num_nodes, 4);
  EXPECT_EQ(r.indptr, (Ids{0, 1, 2, 3, 5}));
  EXPECT_EQ(r.indices, (Ids{2, 0, 1, 0, 2}));
  EXPECT_EQ(r.edge_ids, (Ids{2, 1, 3, 4, 0}));
  EXPECT_EQ(reverse(tiny("isolated3")), tiny("isolated3"));
}

TEST(GraphTest, ReverseKeepsEveryEdgeAndIdFlipped) {
  const CsrGraph g = erdos_renyi(300, 3000, /*seed=*/5, {.self_loops = true, .multi_edges = true});
  const CsrGraph r = reverse(g);
  auto forward = triples(g);
  auto flipped = triples(r);
  for (auto& [a, b, id] : flipped) std::swap(a, b);
  std::sort(forward.begin(), forward.end());
  std::sort(flipped.begin(), flipped.end());
  EXPECT_EQ(forward, flipped);
  // Transposing twice gives back each node's edges (as a sorted set, since order is by source).
  const CsrGraph rr = reverse(r);
  EXPECT_EQ(rr.indptr, g.indptr);
  auto back = triples(rr);
  std::sort(back.begin(), back.end());
  EXPECT_EQ(back, forward);
}

TEST(GraphTest, DigestSeesEveryField) {
  const CsrGraph g = example();
  EXPECT_EQ(digest(g), digest(example()));
  CsrGraph h = g;
  h.edge_ids[0] = 99;
  EXPECT_NE(digest(h), digest(g));
  h = g;
  h.indices[0] = 2;
  EXPECT_NE(digest(h), digest(g));
  h = g;
  h.num_nodes = 5;
  h.indptr.push_back(5);
  EXPECT_NE(digest(h), digest(g));
  EXPECT_NE(digest(tiny("isolated3")), digest(CsrGraph{}));
  EXPECT_NE(digest(tiny("path4")), digest(tiny("triangle")));
}

// ---- generators -----------------------------------------------------------------------------

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

// ---- loaders --------------------------------------------------------------------------------

TEST(LoaderTest, ReadsWhitespaceTextWithCommentsAndBlankLines) {
  TempDir dir("lockstep_graph");
  const std::string path = write_text(dir, "g.txt",
                                      "# a graph\n"
                                      "\n"
                                      "2 3\n"
                                      "0\t1   # trailing comment\n"
                                      "   \n"
                                      "2 0\r\n"
                                      "1 2 0.5\n"  // further fields are ignored
                                      "0 3");      // no final newline
  EXPECT_EQ(load_edge_list(path), example());
  const CsrGraph wider = load_edge_list(path, /*num_nodes=*/6);
  EXPECT_EQ(wider.num_nodes, 6);
  EXPECT_EQ(wider.num_edges(), 5);
}

TEST(LoaderTest, ReadsCsvWithHeader) {
  TempDir dir("lockstep_graph");
  const std::string path =
      write_text(dir, "g.csv", "# exported\nsrc,dst\n2,3\n0, 1\n2,0\n1 ,2\n0,3\n");
  EXPECT_EQ(load_edge_list(path), example());
  const std::string one_field = write_text(dir, "h.csv", "edges\n0,1\n");
  EXPECT_EQ(load_edge_list(one_field), from_edges(2, {0}, {1}));
}

TEST(LoaderTest, EmptyFileIsAnEmptyGraph) {
  TempDir dir("lockstep_graph");
  const std::string path = write_text(dir, "empty.txt", "# nothing\n\n");
  EXPECT_EQ(load_edge_list(path), CsrGraph{});
  EXPECT_EQ(load_edge_list(path, 3), tiny("isolated3"));
}

TEST(LoaderTest, BadLinesReportPathAndLine) {
  TempDir dir("lockstep_graph");
  const std::string bad = write_text(dir, "bad.txt", "0 1\n\n1 x\n");
  EXPECT_EQ(message_of<std::runtime_error>([&] { load_edge_list(bad); }),
            bad + ":3: 'x' is not an integer node id");
  const std::string late_header = write_text(dir, "late.csv", "0,1\nsrc,dst\n");
  EXPECT_EQ(message_of<std::runtime_error>([&] { load_edge_list(late_header); }),
            late_header + ":2: 'src' is not an integer node id");
  const std::string lonely = write_text(dir, "lonely.txt", "0 1\n5\n");
  EXPECT_EQ(message_of<std::runtime_error>([&] { load_edge_list(lonely); }),
            lonely + ":2: expected two node ids, got '5'");
  const std::string negative = write_text(dir, "neg.txt", "# c\n0 -1\n");
  EXPECT_EQ(message_of<std::out_of_range>([&] { load_edge_list(negative); }),
            negative + ":2: node id -1 is negative");
  const std::string big = write_text(dir, "big.txt", "0 1\n4 1\n");
  EXPECT_EQ(message_of<std::out_of_range>([&] { load_edge_list(big, 4); }),
            big + ":2: node id 4 is out of range [0, 4)");
  const std::string overflow = write_text(dir, "overflow.txt", "0 99999999999999999999\n");
  EXPECT_NE(
      message_of<std::runtime_error>([&] { load_edge_list(overflow); }).find(overflow + ":1:"),
      std::string::npos);
  const std::string missing = dir / "missing.txt";
  EXPECT_NE(message_of<std::runtime_error>([&] { load_edge_list(missing); }).find(missing),
            std::string::npos);
  EXPECT_THROW(load_edge_list(bad, -2), std::invalid_argument);
}

template <class T>
void write_ids(const std::string& path, const std::string& descr, const Ids& values,
               std::vector<std::int64_t> shape) {
  std::vector<T> data(values.begin(), values.end());
  io::write_npy(path, descr, shape, data.data(), data.size() * sizeof(T));
}

TEST(LoaderTest, ReadsNpySrcDstInt32AndInt64) {
  TempDir dir("lockstep_graph");
  write_ids<std::int64_t>(dir / "src64.npy", "<i8", {2, 0, 2, 1, 0}, {5});
  write_ids<std::int32_t>(dir / "dst32.npy", "<i4", {3, 1, 0, 2, 3}, {5});
  EXPECT_EQ(load_npy_edges(dir / "src64.npy", dir / "dst32.npy"), example());
  EXPECT_EQ(load_npy_edges(dir / "src64.npy", dir / "dst32.npy", 9).num_nodes, 9);
  EXPECT_EQ(message_of<std::out_of_range>(
                [&] { load_npy_edges(dir / "src64.npy", dir / "dst32.npy", 3); }),
            dir / "dst32.npy" + ": dst[0] = 3 is out of range [0, 3)");

  write_ids<std::int32_t>(dir / "short.npy", "<i4", {1, 2}, {2});
  EXPECT_THROW(load_npy_edges(dir / "src64.npy", dir / "short.npy"), std::runtime_error);
  std::vector<float> floats{1, 2};
  io::write_npy(dir / "f.npy", "<f4", {2}, floats.data(), sizeof(float) * 2);
  EXPECT_NE(message_of<std::runtime_error>([&] {
              load_npy_edges(dir / "f.npy", dir / "short.npy");
            }).find("'<f4'"),
            std::string::npos);
  write_ids<std::int32_t>(dir / "neg.npy", "<i4", {1, -4}, {2});
  EXPECT_EQ(
      message_of<std::out_of_range>([&] { load_npy_edges(dir / "neg.npy", dir / "short.npy"); }),
      dir / "neg.npy" + ": src[1] = -4 is negative");
}

TEST(LoaderTest, ReadsNpyEdgeIndex) {
  TempDir dir("lockstep_graph");
  write_ids<std::int64_t>(dir / "ei64.npy", "<i8", {2, 0, 2, 1, 0, 3, 1, 0, 2, 3}, {2, 5});
  write_ids<std::int32_t>(dir / "ei32.npy", "<i4", {2, 0, 2, 1, 0, 3, 1, 0, 2, 3}, {2, 5});
  EXPECT_EQ(load_npy_edge_index(dir / "ei64.npy"), example());
  EXPECT_EQ(load_npy_edge_index(dir / "ei32.npy"), example());
  EXPECT_EQ(message_of<std::out_of_range>([&] { load_npy_edge_index(dir / "ei32.npy", 3); }),
            dir / "ei32.npy" + ": edge_index[1][0] = 3 is out of range [0, 3)");
  write_ids<std::int64_t>(dir / "e0.npy", "<i8", {}, {2, 0});
  EXPECT_EQ(load_npy_edge_index(dir / "e0.npy"), CsrGraph{});

  write_ids<std::int64_t>(dir / "flat.npy", "<i8", {0, 1, 1, 2}, {4});
  EXPECT_EQ(message_of<std::runtime_error>([&] { load_npy_edge_index(dir / "flat.npy"); }),
            dir / "flat.npy" + ": expected an edge_index of shape [2, E], got [4]");
  write_ids<std::int64_t>(dir / "t.npy", "<i8", {0, 1, 1, 2, 2, 3}, {3, 2});
  EXPECT_THROW(load_npy_edge_index(dir / "t.npy"), std::runtime_error);
  EXPECT_THROW(load_npy_edge_index(dir / "missing.npy"), std::runtime_error);
}

}  // namespace
}  // namespace lockstep::ref
