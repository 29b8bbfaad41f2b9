// Tests of the map partition book (reference/partition/book.h): lookups over both id types,
// errors, construction, and agreement with the range book on the same assignment. Expected
// values are worked out by hand in the comments, never from the books themselves.
#include "reference/partition/book.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/book_test_util.h"
#include "tests/test_util.h"

namespace lockstep::ref {
namespace {

using Ids = std::vector<std::int64_t>;

using book_test::kCpu;
using book_test::random_ids;
using book_test::random_offsets;
using test::message_of;

std::vector<std::int32_t> part_of_ranges(const Ids& offsets) {
  std::vector<std::int32_t> part_of;
  for (std::size_t p = 0; p + 1 < offsets.size(); ++p) {
    part_of.insert(part_of.end(), static_cast<std::size_t>(offsets[p + 1] - offsets[p]),
                   static_cast<std::int32_t>(p));
  }
  return part_of;
}

// ---- Map book -------------------------------------------------------------------------------

class MapBookTest : public ::testing::TestWithParam<IdType> {
 protected:
  IdArray ids(const Ids& v) const { return IdArray::from_host(v, GetParam(), kCpu); }
  // part_of {2, 0, 2, 1, 0, 2} with a 4th, empty part: part 0 = {1, 4}, part 1 = {3},
  // part 2 = {0, 2, 5}, part 3 = {}. Local ids: 0->0, 1->0, 2->1, 3->0, 4->1, 5->2.
  MapPartitionBook book_{{2, 0, 2, 1, 0, 2}, /*num_parts=*/4};
};

TEST_P(MapBookTest, PartAndLocalIds) {
  EXPECT_EQ(book_.num_parts(), 4);
  EXPECT_EQ(book_.num_nodes(), 6);
  EXPECT_EQ(book_.part_size(0), 2);
  EXPECT_EQ(book_.part_size(3), 0);
  const IdArray in = ids({5, 4, 3, 2, 1, 0, 2});
  const IdArray parts = book_.nid2partid(in.span());
  EXPECT_EQ(parts.type(), IdType::kI32);
  EXPECT_EQ(parts.to_host(), (Ids{2, 0, 1, 2, 0, 2, 2}));
  const IdArray local = book_.nid2localnid(in.span());
  EXPECT_EQ(local.type(), GetParam());
  EXPECT_EQ(local.to_host(), (Ids{2, 1, 0, 1, 0, 0, 1}));
}

TEST_P(MapBookTest, PartNodesAndRoundTrips) {
  EXPECT_EQ(book_.partid2nids(0, kCpu, GetParam()).to_host(), (Ids{1, 4}));
  EXPECT_EQ(book_.partid2nids(1, kCpu, GetParam()).to_host(), (Ids{3}));
  EXPECT_EQ(book_.partid2nids(2, kCpu, GetParam()).to_host(), (Ids{0, 2, 5}));
  EXPECT_EQ(book_.partid2nids(3, kCpu, GetParam()).to_host(), Ids{});
  EXPECT_EQ(book_.local2global(2, ids({2, 0, 1}).span()).to_host(), (Ids{5, 0, 2}));
  EXPECT_EQ(book_.global2local(2, ids({5, 0, 2}).span()).to_host(), (Ids{2, 0, 1}));
  EXPECT_EQ(book_.local2global(2, ids({2}).span()).type(), GetParam());
}

TEST_P(MapBookTest, ErrorsNameTheFirstBadValueAndPosition) {
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book_.nid2partid(ids({0, 5, 6, -1}).span());
            }),
            "node id 6 at position 2 is out of range [0, 6)");
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book_.nid2localnid(ids({-4, 6}).span());
            }),
            "node id -4 at position 0 is out of range [0, 6)");
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book_.global2local(0, ids({4, 1, 0}).span());
            }),
            "node id 0 at position 2 is not owned by part 0 (its part is 2)");
  EXPECT_EQ(message_of<std::out_of_range>([&] { book_.global2local(3, ids({3}).span()); }),
            "node id 3 at position 0 is not owned by part 3 (its part is 1)");
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book_.global2local(2, ids({5, 60}).span());
            }),
            "node id 60 at position 1 is out of range [0, 6)");
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book_.local2global(0, ids({1, 2}).span());
            }),
            "local id 2 at position 1 is out of range [0, 2) of part 0");
  EXPECT_EQ(message_of<std::out_of_range>([&] { book_.local2global(3, ids({0}).span()); }),
            "local id 0 at position 0 is out of range [0, 0) of part 3");
  EXPECT_EQ(message_of<std::out_of_range>([&] { book_.partid2nids(4, kCpu); }),
            "part 4 is out of range [0, 4)");
}

TEST_P(MapBookTest, EmptyInputsGiveEmptyOutputs) {
  const IdArray none = ids({});
  EXPECT_EQ(book_.nid2partid(none.span()).size(), 0);
  EXPECT_EQ(book_.nid2localnid(none.span()).size(), 0);
  EXPECT_EQ(book_.local2global(3, none.span()).size(), 0);
  EXPECT_EQ(book_.global2local(3, none.span()).size(), 0);
}

TEST_P(MapBookTest, AgreesWithTheRangeBookOnTheSameAssignment) {
  std::mt19937_64 rng(3);
  for (int parts : {1, 3, 8, 16, 17, 300}) {
    const std::int64_t nodes = 20000;
    const Ids offsets = random_offsets(parts, nodes, rng);
    RangePartitionBook range(offsets);
    MapPartitionBook map(part_of_ranges(offsets), parts);
    ASSERT_EQ(map.num_nodes(), range.num_nodes());
    const IdArray in = ids(random_ids(50000, nodes, rng));
    EXPECT_EQ(map.nid2partid(in.span()).to_host(), range.nid2partid(in.span()).to_host());
    EXPECT_EQ(map.nid2localnid(in.span()).to_host(), range.nid2localnid(in.span()).to_host());
    for (int p = 0; p < parts; ++p) {
      ASSERT_EQ(map.part_size(p), range.part_size(p));
      const IdArray owned = map.partid2nids(p, kCpu, GetParam());
      EXPECT_EQ(owned.to_host(), range.partid2nids(p, kCpu, GetParam()).to_host());
      const IdArray local = map.global2local(p, owned.span());
      EXPECT_EQ(local.to_host(), range.global2local(p, owned.span()).to_host());
      EXPECT_EQ(map.local2global(p, local.span()).to_host(), owned.to_host());
    }
  }
}

TEST_P(MapBookTest, ScatteredAssignmentResultsDoNotDependOnThreads) {
  std::mt19937_64 rng(5);
  const std::int64_t nodes = 1 << 20;
  for (int parts : {8, 1000}) {  // a byte-sized table and an int32 one
    std::vector<std::int32_t> part_of(static_cast<std::size_t>(nodes));
    for (auto& p : part_of)
      p = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(parts));
    MapPartitionBook book(part_of, parts);
    const Ids in = random_ids(std::int64_t{1} << 19, nodes, rng);
    const Ids got = book.nid2partid(ids(in).span()).to_host();
    for (std::size_t i = 0; i < in.size(); ++i) {
      ASSERT_EQ(got[i], part_of[static_cast<std::size_t>(in[i])]);
    }
    const Ids local = book.nid2localnid(ids(in).span()).to_host();
    for (int threads : {2, 3, 5}) {
      book.set_threads(threads);
      EXPECT_EQ(book.nid2partid(ids(in).span()).to_host(), got) << "threads " << threads;
      EXPECT_EQ(book.nid2localnid(ids(in).span()).to_host(), local) << "threads " << threads;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MapBookIds, MapBookTest, ::testing::Values(IdType::kI32, IdType::kI64),
                         [](const auto& info) { return to_string(info.param); });

TEST(MapBookBuildTest, InfersThePartCountAndRejectsBadMaps) {
  MapPartitionBook inferred({1, 1, 0});
  EXPECT_EQ(inferred.num_parts(), 2);
  EXPECT_EQ(
      message_of<std::invalid_argument>([] { MapPartitionBook(std::vector<std::int32_t>{}); }),
      "cannot infer the part count from an empty part_of; pass num_parts");
  EXPECT_EQ(message_of<std::invalid_argument>([] {
              MapPartitionBook({0, -2, 1});
            }),
            "part_of[1] = -2 is negative");
  EXPECT_EQ(message_of<std::invalid_argument>([] {
              MapPartitionBook({0, 1, 2, 1}, 2);
            }),
            "part_of[2] = 2 is out of range [0, 2)");
  EXPECT_EQ(message_of<std::invalid_argument>([] { MapPartitionBook({}, 0); }),
            "num_parts must be >= 1, got 0");
  // No nodes at all: every part is empty and every id is out of range.
  MapPartitionBook none({}, 2);
  EXPECT_EQ(none.nid2partid(IdArray::from_host({}, IdType::kI64, kCpu).span()).size(), 0);
  for (IdType type : {IdType::kI32, IdType::kI64}) {
    const IdArray zero = IdArray::from_host({0}, type, kCpu);
    EXPECT_EQ(message_of<std::out_of_range>([&] { none.nid2partid(zero.span()); }),
              "node id 0 at position 0 is out of range [0, 0)");
    EXPECT_EQ(message_of<std::out_of_range>([&] { none.nid2localnid(zero.span()); }),
              "node id 0 at position 0 is out of range [0, 0)");
    EXPECT_EQ(message_of<std::out_of_range>([&] { none.global2local(1, zero.span()); }),
              "node id 0 at position 0 is out of range [0, 0)");
    EXPECT_EQ(message_of<std::out_of_range>([&] { none.local2global(1, zero.span()); }),
              "local id 0 at position 0 is out of range [0, 0) of part 1");
  }
}

}  // namespace
}  // namespace lockstep::ref
