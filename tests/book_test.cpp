// Tests of the range partition book (reference/partition/book.h): lookups over both id types,
// construction, and the int32 boundary. Expected values are worked out by hand in the comments,
// or come from a naive oracle in this file (a linear scan of the offsets), never from the book
// itself.
#include "reference/partition/book.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
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

// The part of `id` by a linear scan of the offsets: the last p with offsets[p] <= id among
// non-empty parts.
int oracle_part(const Ids& offsets, std::int64_t id) {
  for (std::size_t p = 0; p + 1 < offsets.size(); ++p) {
    if (offsets[p] <= id && id < offsets[p + 1]) return static_cast<int>(p);
  }
  return -1;
}

// ---- Range book, over both id types ---------------------------------------------------------

class RangeBookTest : public ::testing::TestWithParam<IdType> {
 protected:
  IdArray ids(const Ids& v) const { return IdArray::from_host(v, GetParam(), kCpu); }
  // offsets {0, 3, 3, 7}: part 0 owns 0 1 2, part 1 is empty, part 2 owns 3 4 5 6.
  RangePartitionBook book_{{0, 3, 3, 7}};
};

TEST_P(RangeBookTest, PartAndLocalIdsWithAnEmptyPart) {
  EXPECT_EQ(book_.num_parts(), 3);
  EXPECT_EQ(book_.num_nodes(), 7);
  EXPECT_EQ(book_.part_size(0), 3);
  EXPECT_EQ(book_.part_size(1), 0);
  EXPECT_EQ(book_.part_size(2), 4);

  const IdArray in = ids({6, 0, 3, 2, 5, 4, 1});
  const IdArray parts = book_.nid2partid(in.span());
  EXPECT_EQ(parts.type(), IdType::kI32);
  EXPECT_EQ(parts.device(), kCpu);
  EXPECT_EQ(parts.to_host(), (Ids{2, 0, 2, 0, 2, 2, 0}));

  const IdArray local = book_.nid2localnid(in.span());
  EXPECT_EQ(local.type(), GetParam());
  // 6 - 3, 0 - 0, 3 - 3, 2 - 0, 5 - 3, 4 - 3, 1 - 0.
  EXPECT_EQ(local.to_host(), (Ids{3, 0, 0, 2, 2, 1, 1}));
}

TEST_P(RangeBookTest, PartNodesAscending) {
  EXPECT_EQ(book_.partid2nids(0, kCpu, GetParam()).to_host(), (Ids{0, 1, 2}));
  EXPECT_EQ(book_.partid2nids(1, kCpu, GetParam()).to_host(), Ids{});
  const IdArray two = book_.partid2nids(2, kCpu, GetParam());
  EXPECT_EQ(two.type(), GetParam());
  EXPECT_EQ(two.to_host(), (Ids{3, 4, 5, 6}));
}

TEST_P(RangeBookTest, LocalGlobalRoundTrip) {
  const IdArray global = book_.local2global(2, ids({0, 3, 1}).span());
  EXPECT_EQ(global.type(), GetParam());
  EXPECT_EQ(global.to_host(), (Ids{3, 6, 4}));
  const IdArray local = book_.global2local(2, ids({6, 3, 5}).span());
  EXPECT_EQ(local.type(), GetParam());
  EXPECT_EQ(local.to_host(), (Ids{3, 0, 2}));
  EXPECT_EQ(book_.global2local(0, ids({2, 0}).span()).to_host(), (Ids{2, 0}));
}

TEST_P(RangeBookTest, OutOfRangeIdsNameTheFirstValueAndPosition) {
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book_.nid2partid(ids({0, 7, -1}).span());
            }),
            "node id 7 at position 1 is out of range [0, 7)");
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book_.nid2partid(ids({0, 1, -1, 9}).span());
            }),
            "node id -1 at position 2 is out of range [0, 7)");
  EXPECT_EQ(message_of<std::out_of_range>([&] { book_.nid2localnid(ids({1000}).span()); }),
            "node id 1000 at position 0 is out of range [0, 7)");
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book_.global2local(2, ids({3, 8}).span());
            }),
            "node id 8 at position 1 is out of range [0, 7)");
}

TEST_P(RangeBookTest, Global2LocalOfANonLocalIdThrows) {
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book_.global2local(0, ids({1, 4, 2}).span());
            }),
            "node id 4 at position 1 is not owned by part 0 (its part is 2)");
  EXPECT_EQ(message_of<std::out_of_range>([&] { book_.global2local(2, ids({2}).span()); }),
            "node id 2 at position 0 is not owned by part 2 (its part is 0)");
  // The empty part owns nothing; 3 is the first id of part 2.
  EXPECT_EQ(message_of<std::out_of_range>([&] { book_.global2local(1, ids({3}).span()); }),
            "node id 3 at position 0 is not owned by part 1 (its part is 2)");
}

TEST_P(RangeBookTest, LocalIdsBeyondThePartThrow) {
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book_.local2global(0, ids({2, 3}).span());
            }),
            "local id 3 at position 1 is out of range [0, 3) of part 0");
  EXPECT_EQ(message_of<std::out_of_range>([&] { book_.local2global(2, ids({-2}).span()); }),
            "local id -2 at position 0 is out of range [0, 4) of part 2");
  EXPECT_EQ(message_of<std::out_of_range>([&] { book_.local2global(1, ids({0}).span()); }),
            "local id 0 at position 0 is out of range [0, 0) of part 1");
}

TEST_P(RangeBookTest, BadPartsThrow) {
  EXPECT_EQ(message_of<std::out_of_range>([&] { book_.partid2nids(3, kCpu); }),
            "part 3 is out of range [0, 3)");
  EXPECT_EQ(message_of<std::out_of_range>([&] { book_.local2global(-1, ids({0}).span()); }),
            "part -1 is out of range [0, 3)");
  EXPECT_EQ(message_of<std::out_of_range>([&] { book_.global2local(3, ids({}).span()); }),
            "part 3 is out of range [0, 3)");
  EXPECT_THROW(book_.part_size(5), std::out_of_range);
}

TEST_P(RangeBookTest, EmptyInputsGiveEmptyOutputs) {
  const IdArray none = ids({});
  const IdArray parts = book_.nid2partid(none.span());
  EXPECT_EQ(parts.size(), 0);
  EXPECT_EQ(parts.type(), IdType::kI32);
  EXPECT_EQ(book_.nid2localnid(none.span()).type(), GetParam());
  EXPECT_EQ(book_.nid2localnid(none.span()).size(), 0);
  EXPECT_EQ(book_.local2global(1, none.span()).size(), 0);
  EXPECT_EQ(book_.global2local(1, none.span()).size(), 0);
  // A null pointer with size 0 is an empty input too.
  EXPECT_EQ(book_.nid2partid(IdSpan{nullptr, 0, GetParam(), kCpu}).size(), 0);
}

TEST_P(RangeBookTest, ManyPartsUseTheSearchAndAgreeWithAScan) {
  std::mt19937_64 rng(7);
  for (int parts : {1, 2, 15, 16, 17, 40, 333}) {
    const Ids offsets = random_offsets(parts, 5000, rng);
    RangePartitionBook book(offsets);
    Ids in = random_ids(3000, 5000, rng);
    in.insert(in.end(), offsets.begin(), offsets.end() - 1);  // every part start
    in.push_back(4999);
    const Ids got_parts = book.nid2partid(ids(in).span()).to_host();
    const Ids got_local = book.nid2localnid(ids(in).span()).to_host();
    for (std::size_t i = 0; i < in.size(); ++i) {
      const int p = oracle_part(offsets, in[i]);
      ASSERT_EQ(got_parts[i], p) << "parts " << parts << " id " << in[i];
      ASSERT_EQ(got_local[i], in[i] - offsets[static_cast<std::size_t>(p)]) << "id " << in[i];
    }
  }
}

TEST_P(RangeBookTest, ResultsDoNotDependOnThreads) {
  std::mt19937_64 rng(11);
  for (int parts : {8, 40}) {
    const std::int64_t nodes = 1 << 22;
    RangePartitionBook book(random_offsets(parts, nodes, rng));
    const IdArray in = ids(random_ids(std::int64_t{1} << 20, nodes, rng));
    const Ids one_parts = book.nid2partid(in.span()).to_host();
    const Ids one_local = book.nid2localnid(in.span()).to_host();
    for (int threads : {2, 3, 4, 7}) {
      book.set_threads(threads);
      EXPECT_EQ(book.nid2partid(in.span()).to_host(), one_parts) << "threads " << threads;
      EXPECT_EQ(book.nid2localnid(in.span()).to_host(), one_local) << "threads " << threads;
    }
  }
}

TEST_P(RangeBookTest, TheFirstBadIdIsNamedWhateverTheThreads) {
  const std::int64_t n = std::int64_t{1} << 20;
  RangePartitionBook book({0, 10, 100});
  Ids in(static_cast<std::size_t>(n), 5);
  in[700000] = -3;
  in[300001] = 100;
  in[900000] = 1 << 30;
  const IdArray a = ids(in);
  for (int threads : {1, 2, 4}) {
    book.set_threads(threads);
    EXPECT_EQ(message_of<std::out_of_range>([&] { book.nid2partid(a.span()); }),
              "node id 100 at position 300001 is out of range [0, 100)");
  }
}

TEST_P(RangeBookTest, IntoAReusedOutput) {
  IdArray out;
  book_.nid2partid(ids({6, 1}).span(), out);
  EXPECT_EQ(out.to_host(), (Ids{2, 0}));
  const void* data = out.data();
  book_.nid2partid(ids({3, 2}).span(), out);
  EXPECT_EQ(out.to_host(), (Ids{2, 0}));
  EXPECT_EQ(out.data(), data);  // same type, size and device: not reallocated
  book_.nid2localnid(ids({6, 1, 4}).span(), out);
  EXPECT_EQ(out.type(), GetParam());
  EXPECT_EQ(out.to_host(), (Ids{3, 1, 1}));
}

INSTANTIATE_TEST_SUITE_P(RangeBookIds, RangeBookTest, ::testing::Values(IdType::kI32, IdType::kI64),
                         [](const auto& info) { return to_string(info.param); });

// ---- Range book: construction and int32 edges ---------------------------------------------

TEST(RangeBookBuildTest, RejectsBadOffsets) {
  EXPECT_EQ(message_of<std::invalid_argument>([] { RangePartitionBook({}); }),
            "part_offsets needs at least 2 entries (one part), got 0");
  EXPECT_EQ(message_of<std::invalid_argument>([] { RangePartitionBook({0}); }),
            "part_offsets needs at least 2 entries (one part), got 1");
  EXPECT_EQ(message_of<std::invalid_argument>([] {
              RangePartitionBook({1, 3});
            }),
            "part_offsets[0] must be 0, got 1");
  EXPECT_EQ(message_of<std::invalid_argument>([] {
              RangePartitionBook({0, 5, 3});
            }),
            "part_offsets[2] = 3 is less than part_offsets[1] = 5");
  EXPECT_EQ(message_of<std::invalid_argument>([] {
              RangePartitionBook({0, 1}).set_threads(0);
            }),
            "threads must be >= 1, got 0");
}

TEST(RangeBookBuildTest, AllPartsEmptyRejectsEveryId) {
  // 2 parts (the counting path) and 20 parts (the search path), all empty.
  for (const Ids& offsets : {Ids(3, 0), Ids(21, 0)}) {
    RangePartitionBook book(offsets);
    EXPECT_EQ(book.num_nodes(), 0);
    EXPECT_EQ(book.nid2partid(IdArray::from_host({}, IdType::kI64, kCpu).span()).size(), 0);
    for (IdType type : {IdType::kI32, IdType::kI64}) {
      const IdArray zero = IdArray::from_host({0}, type, kCpu);
      EXPECT_EQ(message_of<std::out_of_range>([&] { book.nid2partid(zero.span()); }),
                "node id 0 at position 0 is out of range [0, 0)");
      EXPECT_EQ(message_of<std::out_of_range>([&] { book.nid2localnid(zero.span()); }),
                "node id 0 at position 0 is out of range [0, 0)");
      EXPECT_EQ(message_of<std::out_of_range>([&] { book.global2local(1, zero.span()); }),
                "node id 0 at position 0 is out of range [0, 0)");
    }
  }
}

TEST(RangeBookBuildTest, Int32IdsAgainstOffsetsBeyondInt32) {
  // Part 0 owns [0, 5), part 1 owns [5, 3e9): every non-negative int32 id is valid.
  RangePartitionBook book({0, 5, 3000000000});
  const std::int64_t max = std::numeric_limits<std::int32_t>::max();
  const IdArray in = IdArray::from_host({4, 5, max}, IdType::kI32, kCpu);
  EXPECT_EQ(book.nid2partid(in.span()).to_host(), (Ids{0, 1, 1}));
  EXPECT_EQ(book.nid2localnid(in.span()).to_host(), (Ids{4, 0, max - 5}));
  EXPECT_EQ(message_of<std::out_of_range>([&] { book.global2local(1, in.span()); }),
            "node id 4 at position 0 is not owned by part 1 (its part is 0)");
  // Local 2147483642 of part 1 is global 2147483647, the largest int32; one more does not fit.
  EXPECT_EQ(
      book.local2global(1, IdArray::from_host({max - 5}, IdType::kI32, kCpu).span()).to_host(),
      (Ids{max}));
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book.local2global(1, IdArray::from_host({0, max - 4}, IdType::kI32, kCpu).span());
            }),
            "global id 2147483648 of local id 2147483643 at position 1 does not fit int32");
  EXPECT_EQ(book.partid2nids(0, kCpu, IdType::kI32).to_host(), (Ids{0, 1, 2, 3, 4}));
}

TEST(RangeBookBuildTest, Int32LocalToGlobalPastInt32MaxThrows) {
  // Part 1 owns [2147483600, 2147483700): its local ids 0..99 are valid, but local 60 is global
  // 2147483660, which does not fit the int32 ids it was asked in.
  RangePartitionBook book({0, 2147483600, 2147483700});
  EXPECT_EQ(book.local2global(1, IdArray::from_host({10}, IdType::kI32, kCpu).span()).to_host(), (Ids{2147483610}));
  EXPECT_EQ(message_of<std::out_of_range>([&] {
              book.local2global(1, IdArray::from_host({10, 60}, IdType::kI32, kCpu).span());
            }),
            "global id 2147483660 of local id 60 at position 1 does not fit int32");
}

// The int32 boundary for every operation of the range book, on both of its lookup paths: a
// few parts (counted) and many (searched). A one-node part {2147483647} sits exactly on
// INT32_MAX; the part after it starts at 2^31, past every int32 id. Expected values are worked
// out by hand from the offsets.
class RangeBookInt32BoundaryTest : public ::testing::TestWithParam<int> {
 protected:
  static constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  // GetParam() small parts [0,1), [1,2), ... before the big one, then {kMax} and [2^31, 2^31+3).
  Ids offsets() const {
    Ids o;
    for (int k = 0; k <= GetParam(); ++k) o.push_back(k);
    for (std::int64_t v : {kMax, kMax + 1, kMax + 4}) o.push_back(v);
    return o;
  }
  int big() const { return GetParam(); }        // owns [GetParam(), kMax)
  int on_max() const { return GetParam() + 1; }  // owns {kMax}
  int past() const { return GetParam() + 2; }    // owns [2^31, 2^31 + 3)
  static IdArray i32(const Ids& v) { return IdArray::from_host(v, IdType::kI32, kCpu); }
};

TEST_P(RangeBookInt32BoundaryTest, EveryOperationAtInt32Max) {
  RangePartitionBook book(offsets());
  ASSERT_EQ(book.num_parts(), GetParam() + 3);
  const std::int64_t g = GetParam();  // first id of the big part
  const IdArray ids = i32({g, kMax - 1, kMax});
  EXPECT_EQ(book.nid2partid(ids.span()).to_host(), (Ids{big(), big(), on_max()}));
  EXPECT_EQ(book.nid2localnid(ids.span()).to_host(), (Ids{0, kMax - 1 - g, 0}));
  EXPECT_EQ(book.global2local(on_max(), i32({kMax}).span()).to_host(), (Ids{0}));
  EXPECT_EQ(book.global2local(big(), i32({kMax - 1}).span()).to_host(), (Ids{kMax - 1 - g}));
  EXPECT_EQ(message_of<std::out_of_range>([&] { book.global2local(big(), i32({kMax - 1, kMax}).span()); }),
            "node id 2147483647 at position 1 is not owned by part " + std::to_string(big()) + " (its part is " +
                std::to_string(on_max()) + ")");
  EXPECT_EQ(book.local2global(on_max(), i32({0}).span()).to_host(), (Ids{kMax}));
  EXPECT_EQ(book.local2global(big(), i32({kMax - 1 - g}).span()).to_host(), (Ids{kMax - 1}));
  EXPECT_EQ(message_of<std::out_of_range>([&] { book.local2global(on_max(), i32({0, 1}).span()); }),
            "local id 1 at position 1 is out of range [0, 1) of part " + std::to_string(on_max()));
  // Every local id of the part past INT32_MAX maps past it: none fits int32, all fit int64.
  EXPECT_EQ(message_of<std::out_of_range>([&] { book.local2global(past(), i32({2}).span()); }),
            "global id 2147483650 of local id 2 at position 0 does not fit int32");
  EXPECT_EQ(book.local2global(past(), IdArray::from_host({0, 2}, IdType::kI64, kCpu).span()).to_host(),
            (Ids{kMax + 1, kMax + 3}));
  EXPECT_EQ(book.partid2nids(on_max(), kCpu, IdType::kI32).to_host(), (Ids{kMax}));
  EXPECT_EQ(book.partid2nids(past(), kCpu, IdType::kI64).to_host(), (Ids{kMax + 1, kMax + 2, kMax + 3}));
  EXPECT_EQ(message_of<std::out_of_range>([&] { book.partid2nids(past(), kCpu, IdType::kI32); }),
            "id 2147483648 at position 0 does not fit int32");
}

TEST_P(RangeBookInt32BoundaryTest, NegativeInt32IdsAreOutOfRange) {
  RangePartitionBook book(offsets());
  const std::string range = "[0, " + std::to_string(kMax + 4) + ")";
  for (const std::int64_t bad : {std::int64_t{-1}, std::int64_t{std::numeric_limits<std::int32_t>::min()}}) {
    const IdArray ids = i32({kMax, bad});
    const std::string want = "node id " + std::to_string(bad) + " at position 1 is out of range " + range;
    EXPECT_EQ(message_of<std::out_of_range>([&] { book.nid2partid(ids.span()); }), want);
    EXPECT_EQ(message_of<std::out_of_range>([&] { book.nid2localnid(ids.span()); }), want);
    EXPECT_EQ(message_of<std::out_of_range>([&] { book.global2local(on_max(), ids.span()); }), want);
    EXPECT_EQ(message_of<std::out_of_range>([&] { book.local2global(on_max(), i32({0, bad}).span()); }),
              "local id " + std::to_string(bad) + " at position 1 is out of range [0, 1) of part " +
                  std::to_string(on_max()));
  }
}

// 0 small parts: 3 parts, counted; 17: 20 parts, searched (kMaxCountParts is 16).
INSTANTIATE_TEST_SUITE_P(CountedAndSearched, RangeBookInt32BoundaryTest, ::testing::Values(0, 17),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("FewParts") : std::string("ManyParts");
                         });

}  // namespace
}  // namespace lockstep::ref
