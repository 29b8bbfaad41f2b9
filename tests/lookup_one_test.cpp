// Tests of one id's partition-book lookup (reference/partition/lookup_one.h): the per-id
// functions that the CUDA kernels (reference/partition/cuda/) are thin launchers over, so
// these tests prove the kernels' logic on machines without a GPU. Expected values are worked
// out by hand in the comments, or are the CPU books' vectorised loops (reference/partition/
// cpu/lookup.cpp), a separate implementation that shares none of this code.
#include "reference/partition/lookup_one.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include "reference/partition/book.h"

namespace lockstep::ref {
namespace {

using Ids = std::vector<std::int64_t>;
using lookup_one::kGlobalToLocal;
using lookup_one::kLocalId;
using lookup_one::kLocalToGlobal;
using lookup_one::kPartId;

std::optional<std::int64_t> range(const Ids& offsets, int op, int part, std::int64_t id,
                                  bool int32_ids = false) {
  std::int64_t r = -12345;
  const lookup_one::RangeTable t{offsets.data(), static_cast<int>(offsets.size()) - 1};
  if (!lookup_one::range_lookup(t, op, part, id, int32_ids, &r)) return std::nullopt;
  return r;
}

TEST(BookLookupOneTest, RangeOwnerSkipsEmptyParts) {
  // Parts [0, 3), [3, 3) (empty), [3, 7).
  const Ids off{0, 3, 3, 7};
  const lookup_one::RangeTable t{off.data(), 3};
  EXPECT_EQ(lookup_one::range_owner(t, 0), 0);
  EXPECT_EQ(lookup_one::range_owner(t, 2), 0);
  EXPECT_EQ(lookup_one::range_owner(t, 3), 2);
  EXPECT_EQ(lookup_one::range_owner(t, 6), 2);
  // Leading and trailing empty parts: [0, 0), [0, 0), [0, 5), [5, 5).
  const Ids edges{0, 0, 0, 5, 5};
  const lookup_one::RangeTable e{edges.data(), 4};
  EXPECT_EQ(lookup_one::range_owner(e, 0), 2);
  EXPECT_EQ(lookup_one::range_owner(e, 4), 2);
  // One part.
  const Ids one{0, 9};
  EXPECT_EQ(lookup_one::range_owner({one.data(), 1}, 8), 0);
}

TEST(BookLookupOneTest, RangeEveryOperationByHand) {
  const Ids off{0, 3, 3, 7};
  EXPECT_EQ(range(off, kPartId, 0, 5), 2);
  EXPECT_EQ(range(off, kLocalId, 0, 5), 2);  // 5 - 3
  EXPECT_EQ(range(off, kLocalId, 0, 1), 1);
  EXPECT_EQ(range(off, kLocalToGlobal, 2, 3), 6);  // 3 + 3
  EXPECT_EQ(range(off, kLocalToGlobal, 0, 0), 0);
  EXPECT_EQ(range(off, kGlobalToLocal, 2, 3), 0);
  EXPECT_EQ(range(off, kGlobalToLocal, 0, 2), 2);
  // Invalid: node ids outside [0, 7), local ids outside the part, foreign global ids.
  for (const int op : {kPartId, kLocalId}) {
    EXPECT_EQ(range(off, op, 0, 7), std::nullopt);
    EXPECT_EQ(range(off, op, 0, -1), std::nullopt);
  }
  EXPECT_EQ(range(off, kLocalToGlobal, 2, 4), std::nullopt);
  EXPECT_EQ(range(off, kLocalToGlobal, 2, -1), std::nullopt);
  EXPECT_EQ(range(off, kLocalToGlobal, 1, 0), std::nullopt);  // the empty part
  EXPECT_EQ(range(off, kGlobalToLocal, 2, 2), std::nullopt);
  EXPECT_EQ(range(off, kGlobalToLocal, 2, 7), std::nullopt);
  EXPECT_EQ(range(off, kGlobalToLocal, 0, -1), std::nullopt);
  EXPECT_EQ(range(off, kGlobalToLocal, 1, 3), std::nullopt);
}

TEST(BookLookupOneTest, Int32GlobalIdsPastInt32MaxAreInvalid) {
  // Part 1 is [2147483600, 2147483700): its local id 10 is global 2147483610, which int32
  // holds; local 60 is 2147483660 = INT32_MAX + 13, which it does not. int64 ids hold both.
  const Ids off{0, 2147483600, 2147483700};
  EXPECT_EQ(range(off, kLocalToGlobal, 1, 10, true), 2147483610);
  EXPECT_EQ(range(off, kLocalToGlobal, 1, 47, true), 2147483647);
  EXPECT_EQ(range(off, kLocalToGlobal, 1, 48, true), std::nullopt);
  EXPECT_EQ(range(off, kLocalToGlobal, 1, 60, true), std::nullopt);
  EXPECT_EQ(range(off, kLocalToGlobal, 1, 60, false), 2147483660);
  // Node and local ids of int32 inputs are at most INT32_MAX, and so are their results.
  EXPECT_EQ(range(off, kPartId, 0, 2147483647, true), 1);
  EXPECT_EQ(range(off, kLocalId, 0, 2147483647, true), 47);
}

// A map book by hand: part_of {1, 0, 1, 2, 0}. Part 0 holds nodes {1, 4}, part 1 {0, 2},
// part 2 {3}; a node's local id is its rank in its part.
struct HandMap {
  std::vector<std::int32_t> part_of{1, 0, 1, 2, 0};
  Ids local{0, 0, 1, 0, 1};
  Ids ptr{0, 2, 4, 5};
  Ids nodes{1, 4, 0, 2, 3};
  std::optional<std::int64_t> operator()(int op, int part, std::int64_t id,
                                         bool int32_ids = false) const {
    const lookup_one::MapTable t{part_of.data(), local.data(), ptr.data(), nodes.data(), 5};
    std::int64_t r = -12345;
    if (!lookup_one::map_lookup(t, op, part, id, int32_ids, &r)) return std::nullopt;
    return r;
  }
};

TEST(BookLookupOneTest, MapEveryOperationByHand) {
  const HandMap map;
  EXPECT_EQ(map(kPartId, 0, 3), 2);
  EXPECT_EQ(map(kPartId, 0, 1), 0);
  EXPECT_EQ(map(kLocalId, 0, 4), 1);
  EXPECT_EQ(map(kLocalId, 0, 2), 1);
  EXPECT_EQ(map(kLocalToGlobal, 1, 1), 2);
  EXPECT_EQ(map(kLocalToGlobal, 0, 1), 4);
  EXPECT_EQ(map(kGlobalToLocal, 0, 4), 1);
  EXPECT_EQ(map(kGlobalToLocal, 2, 3), 0);
  for (const int op : {kPartId, kLocalId, kGlobalToLocal}) {
    EXPECT_EQ(map(op, 0, 5), std::nullopt);
    EXPECT_EQ(map(op, 0, -1), std::nullopt);
  }
  EXPECT_EQ(map(kGlobalToLocal, 0, 0), std::nullopt);  // node 0 is part 1's
  EXPECT_EQ(map(kLocalToGlobal, 2, 1), std::nullopt);  // part 2 has one node
  EXPECT_EQ(map(kLocalToGlobal, 0, -1), std::nullopt);
}

// The CPU book's answer for one id, or nullopt when it throws std::out_of_range.
std::optional<std::int64_t> book_answer(const PartitionBook& book, int op, int part,
                                        std::int64_t id, IdType type) {
  const IdArray in = IdArray::from_host({id}, type, Device{});
  try {
    switch (op) {
      case kPartId: return book.nid2partid(in.span()).to_host()[0];
      case kLocalId: return book.nid2localnid(in.span()).to_host()[0];
      case kLocalToGlobal: return book.local2global(part, in.span()).to_host()[0];
      default: return book.global2local(part, in.span()).to_host()[0];
    }
  } catch (const std::out_of_range&) {
    return std::nullopt;
  }
}

// Every operation on every id in [-2, num_nodes + 2), both id types.
template <class One>
void expect_agreement(const PartitionBook& book, One one) {
  for (const IdType type : {IdType::kI32, IdType::kI64}) {
    for (const int op : {kPartId, kLocalId, kLocalToGlobal, kGlobalToLocal}) {
      const bool per_part = op == kLocalToGlobal || op == kGlobalToLocal;
      // The first 8 parts and the last (300 parts over 97 nodes are mostly empty).
      const int parts = per_part ? book.num_parts() : 1;
      for (int part = 0; part < parts; part = part == 7 ? std::max(8, parts - 1) : part + 1) {
        for (std::int64_t id = -2; id < book.num_nodes() + 2; ++id) {
          EXPECT_EQ(one(op, part, id, type == IdType::kI32), book_answer(book, op, part, id, type))
              << "op " << op << " part " << part << " id " << id << " " << to_string(type);
        }
      }
    }
  }
}

TEST(BookLookupOneTest, RangeAgreesWithTheCpuLoops) {
  // Few parts (the CPU counts part starts) and many (it searches), with empty parts.
  std::mt19937_64 rng(7);
  for (const int parts : {1, 3, 16, 40}) {
    Ids off{0};
    for (int p = 0; p < parts; ++p) off.push_back(off.back() + (p % 4 == 1 ? 0 : rng() % 5));
    const RangePartitionBook book(off);
    expect_agreement(book, [&](int op, int part, std::int64_t id, bool i32) {
      return range(off, op, part, id, i32);
    });
  }
}

TEST(BookLookupOneTest, MapAgreesWithTheCpuLoops) {
  std::mt19937_64 rng(11);
  for (const int parts : {1, 4, 300}) {
    std::vector<std::int32_t> part_of(97);
    for (auto& p : part_of) p = static_cast<std::int32_t>(rng() % parts);
    const MapPartitionBook book(part_of, parts);
    // The tables by a direct count, not the book's.
    Ids local(part_of.size()), ptr(static_cast<std::size_t>(parts) + 1, 0), nodes;
    for (int p = 0; p < parts; ++p) {
      ptr[static_cast<std::size_t>(p)] = static_cast<std::int64_t>(nodes.size());
      for (std::size_t v = 0; v < part_of.size(); ++v) {
        if (part_of[v] != p) continue;
        local[v] = static_cast<std::int64_t>(nodes.size()) - ptr[static_cast<std::size_t>(p)];
        nodes.push_back(static_cast<std::int64_t>(v));
      }
    }
    ptr.back() = static_cast<std::int64_t>(nodes.size());
    const lookup_one::MapTable t{part_of.data(), local.data(), ptr.data(), nodes.data(),
                                 static_cast<std::int64_t>(part_of.size())};
    expect_agreement(book, [&](int op, int part, std::int64_t id, bool i32) {
      std::int64_t r = 0;
      return lookup_one::map_lookup(t, op, part, id, i32, &r) ? std::optional(r) : std::nullopt;
    });
  }
}

}  // namespace
}  // namespace lockstep::ref
