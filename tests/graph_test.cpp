// reference/graph: CSR construction, reverse, digests and loaders. The generators are tested in
// graph_generators_test.cpp.
#include "tests/test_util.h"
#include "reference/graph/graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "reference/common/device.h"
#include "reference/io/npy.h"
#include "tests/graph_test_util.h"

namespace lockstep::ref {
namespace {

using Ids = std::vector<std::int64_t>;

using graph_test::triples;
using test::message_of;

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
