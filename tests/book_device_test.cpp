// Tests of the partition books' device policy (reference/partition/book.h): ids on a CUDA device
// that is not visible are refused naming it, and on a GPU every lookup returns on the ids' device
// with the CPU's results. Without a GPU the CUDA tests skip, naming the reason.
#include "reference/partition/book.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/config.h"
#include "tests/book_test_util.h"
#include "tests/test_util.h"

namespace lockstep::ref {
namespace {

using Ids = std::vector<std::int64_t>;

using book_test::kCpu;
using test::message_of;

// ---- Device policy ----------------------------------------------------------------------------

TEST(BookDeviceTest, CudaIdsWithoutTheirDeviceThrowNamingIt) {
  // A CUDA device index that is not visible: the lookup fails before reading the ids.
  const int missing = cuda_device_count();
  const Device device{DeviceKind::kCuda, missing};
  const std::int64_t host[2] = {0, 1};
  const IdSpan span{host, 2, IdType::kI64, device};
  RangePartitionBook range({0, 3, 3, 7});
  MapPartitionBook map({0, 1, 1});
  const std::string seen = missing == 0
                               ? "no CUDA device is visible"
                               : "only " + std::to_string(missing) + " CUDA device(s) are visible";
  const std::string where = to_string(device);
  EXPECT_EQ(message_of<std::runtime_error>([&] { range.nid2partid(span); }),
            "nid2partid: ids are on " + where + " but " + seen +
                (LOCKSTEP_HAVE_CUDA_KERNELS
                     ? " (the reference looks CUDA ids up on their device)"
                     : " (the reference copies CUDA ids to the host and back)"));
  for (const PartitionBook* book :
       {static_cast<const PartitionBook*>(&range), static_cast<const PartitionBook*>(&map)}) {
    EXPECT_NE(message_of<std::runtime_error>([&] { book->nid2localnid(span); }).find(where),
              std::string::npos);
    EXPECT_NE(message_of<std::runtime_error>([&] { book->global2local(0, span); }).find(where),
              std::string::npos);
    EXPECT_NE(message_of<std::runtime_error>([&] { book->local2global(0, span); }).find(where),
              std::string::npos);
    EXPECT_NE(message_of<std::runtime_error>([&] { book->partid2nids(0, device); }).find(where),
              std::string::npos);
  }
}

class BookCudaTest : public ::testing::TestWithParam<IdType> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  }
  static constexpr Device kGpu{DeviceKind::kCuda, 0};
};

TEST_P(BookCudaTest, LookupsOnCudaIdsReturnOnTheDevice) {
  RangePartitionBook range({0, 3, 3, 7});
  MapPartitionBook map({0, 0, 0, 2, 2, 2, 2}, 3);  // the same assignment
  const IdArray in = IdArray::from_host({6, 0, 3, 2, 5}, GetParam(), kGpu);
  for (const PartitionBook* book :
       {static_cast<const PartitionBook*>(&range), static_cast<const PartitionBook*>(&map)}) {
    const IdArray parts = book->nid2partid(in.span());
    EXPECT_EQ(parts.device(), kGpu);
    EXPECT_EQ(parts.type(), IdType::kI32);
    EXPECT_EQ(parts.to_host(), (Ids{2, 0, 2, 0, 2}));
    const IdArray local = book->nid2localnid(in.span());
    EXPECT_EQ(local.device(), kGpu);
    EXPECT_EQ(local.type(), GetParam());
    EXPECT_EQ(local.to_host(), (Ids{3, 0, 0, 2, 2}));
    const IdArray owned = book->partid2nids(2, kGpu, GetParam());
    EXPECT_EQ(owned.device(), kGpu);
    EXPECT_EQ(owned.to_host(), (Ids{3, 4, 5, 6}));
    const IdArray back = book->global2local(2, owned.span());
    EXPECT_EQ(back.device(), kGpu);
    EXPECT_EQ(back.to_host(), (Ids{0, 1, 2, 3}));
    const IdArray global = book->local2global(2, back.span());
    EXPECT_EQ(global.device(), kGpu);
    EXPECT_EQ(global.to_host(), (Ids{3, 4, 5, 6}));
    EXPECT_EQ(book->nid2partid(IdArray::from_host({}, GetParam(), kGpu).span()).device(), kGpu);
  }
}

TEST_P(BookCudaTest, BadCudaIdsThrowLikeHostIds) {
  RangePartitionBook book({0, 3, 3, 7});
  const IdArray in = IdArray::from_host({1, 7, -1}, GetParam(), kGpu);
  EXPECT_EQ(message_of<std::out_of_range>([&] { book.nid2partid(in.span()); }),
            "node id 7 at position 1 is out of range [0, 7)");
  const IdArray foreign = IdArray::from_host({0, 4}, GetParam(), kGpu);
  EXPECT_EQ(message_of<std::out_of_range>([&] { book.global2local(0, foreign.span()); }),
            "node id 4 at position 1 is not owned by part 0 (its part is 2)");
}

// Many ids, every operation: the device's results are the CPU's, bit for bit (with nvcc, the
// CUDA kernels over lookup_one.h; without, the host round trip).
TEST_P(BookCudaTest, ManyIdsGiveTheCpuResultsOnEveryOperation) {
  std::mt19937_64 rng(3);
  const std::int64_t nodes = 1 << 20;
  Ids off{0};
  for (int p = 0; p < 40; ++p) off.push_back(p == 39 ? nodes : (p % 5 == 2 ? off.back() : off.back() + static_cast<std::int64_t>(rng() % (nodes / 40))));
  std::vector<std::int32_t> part_of(static_cast<std::size_t>(nodes));
  for (auto& p : part_of) p = static_cast<std::int32_t>(rng() % 300);
  const RangePartitionBook few({0, nodes / 3, nodes / 3, nodes});
  const RangePartitionBook many(off);
  const MapPartitionBook map(part_of, 300);
  Ids ids(3 << 20);
  for (auto& v : ids) v = static_cast<std::int64_t>(rng() % nodes);
  const IdArray host = IdArray::from_host(ids, GetParam(), kCpu);
  const IdArray gpu = IdArray::from_host(ids, GetParam(), kGpu);
  for (const PartitionBook* book : {static_cast<const PartitionBook*>(&few),
                                    static_cast<const PartitionBook*>(&many),
                                    static_cast<const PartitionBook*>(&map)}) {
    EXPECT_EQ(book->nid2partid(gpu.span()).to_host(), book->nid2partid(host.span()).to_host());
    const IdArray local_host = book->nid2localnid(host.span());
    const IdArray local_gpu = book->nid2localnid(gpu.span());
    EXPECT_EQ(local_gpu.to_host(), local_host.to_host());
    const int part = book->num_parts() - 1;
    const IdArray owned = book->partid2nids(part, kGpu, GetParam());
    const IdArray back = book->global2local(part, owned.span());
    EXPECT_EQ(back.to_host(), book->global2local(part, book->partid2nids(part, kCpu, GetParam()).span()).to_host());
    EXPECT_EQ(book->local2global(part, back.span()).to_host(), owned.to_host());
  }
}

// The first invalid id is named, however many ids follow it and whichever thread meets it.
TEST_P(BookCudaTest, TheFirstOfManyBadIdsIsNamed) {
  const RangePartitionBook range({0, 1000, 1000, 4000});
  std::vector<std::int32_t> part_of(4000);
  for (std::size_t v = 0; v < part_of.size(); ++v) part_of[v] = static_cast<std::int32_t>(v % 7);
  const MapPartitionBook map(part_of);
  Ids ids(1 << 20, 5);
  ids[700001] = 4000;
  ids[900000] = -3;
  const IdArray in = IdArray::from_host(ids, GetParam(), kGpu);
  for (const PartitionBook* book :
       {static_cast<const PartitionBook*>(&range), static_cast<const PartitionBook*>(&map)}) {
    EXPECT_EQ(message_of<std::out_of_range>([&] { book->nid2localnid(in.span()); }),
              "node id 4000 at position 700001 is out of range [0, 4000)");
  }
}

// int32 ids whose global ids pass INT32_MAX (part 1 of {0, 2147483600, 2147483700}: local 60 is
// global 2147483660).
TEST_P(BookCudaTest, Int32GlobalIdsPastInt32MaxThrow) {
  const RangePartitionBook book({0, 2147483600, 2147483700});
  const IdArray in = IdArray::from_host({10, 60}, GetParam(), kGpu);
  if (GetParam() == IdType::kI32) {
    EXPECT_EQ(message_of<std::out_of_range>([&] { book.local2global(1, in.span()); }),
              "global id 2147483660 of local id 60 at position 1 does not fit int32");
  } else {
    EXPECT_EQ(book.local2global(1, in.span()).to_host(), (Ids{2147483610, 2147483660}));
  }
}

INSTANTIATE_TEST_SUITE_P(BookCudaIds, BookCudaTest, ::testing::Values(IdType::kI32, IdType::kI64),
                         [](const auto& info) { return to_string(info.param); });

}  // namespace
}  // namespace lockstep::ref
