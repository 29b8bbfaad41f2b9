// Tests of first-appearance relabelling by sorting (reference/sampling/relabel.h) and of
// multi-hop sampling on a device (sample_neighbors(SampleRows, IdSpan, ...) in
// reference/sampling/device_sample.h). Expected values are worked out by hand, or are the
// host's sample_neighbors (reference/sampling/cpu/, hash-indexed relabelling, checked against
// the documented definition by the sampling tests): the sort-based steps the GPU runs are
// proven here on the host path, which runs the same per-element functions (relabel_one.h).
// On a machine without a GPU the CUDA tests skip, naming the reason.
#include "reference/sampling/relabel.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/graph/graph.h"
#include "reference/sampling/device_sample.h"
#include "reference/sampling/neighbor.h"
#include "tests/test_util.h"

namespace lockstep::ref {
namespace {

using Ids = std::vector<std::int64_t>;
using test::message_of;

IdArray host(const Ids& v) { return IdArray::from_host(v, IdType::kI64, Device{}); }

TEST(RelabelTest, FirstAppearanceByHand) {
  const IdArray v = host({7, 3, 7, -2, 3, 9, 9});
  const Relabelled r = relabel_first_appearance(v.span());
  EXPECT_EQ(r.unique.to_host(), (Ids{7, 3, -2, 9}));
  EXPECT_EQ(r.local.to_host(), (Ids{0, 1, 0, 2, 1, 3, 3}));
  EXPECT_EQ(r.unique.device(), Device{});
  // A unique prefix keeps its order and ids: the frontier of a hop comes first.
  const IdArray w = host({5, 1, 4, 4, 8, 1, 2, 8});
  const Relabelled s = relabel_first_appearance(w.span());
  EXPECT_EQ(s.unique.to_host(), (Ids{5, 1, 4, 8, 2}));
  EXPECT_EQ(s.local.to_host(), (Ids{0, 1, 2, 2, 3, 1, 4, 3}));
  const Relabelled none = relabel_first_appearance(IdSpan{nullptr, 0, IdType::kI64, Device{}});
  EXPECT_EQ(none.unique.size(), 0);
  EXPECT_EQ(none.local.size(), 0);
  const IdArray i32 = IdArray::from_host({1, 2}, IdType::kI32, Device{});
  EXPECT_THROW(relabel_first_appearance(i32.span()), std::invalid_argument);
}

TEST(RelabelTest, EdgeDestinationsAndConcatByHand) {
  const IdArray counts = host({2, 0, 3, 1});
  EXPECT_EQ(edge_destinations(counts.span(), 6).to_host(), (Ids{0, 0, 2, 2, 2, 3}));
  EXPECT_EQ(edge_destinations(host({}).span(), 0).size(), 0);
  EXPECT_NE(message_of<std::invalid_argument>([&] { edge_destinations(counts.span(), 5); }).find("the counts sum to 6, not 5"), std::string::npos);
  const IdArray a = host({1, 2}), b = host({3});
  EXPECT_EQ(concat(a.span(), b.span()).to_host(), (Ids{1, 2, 3}));
  EXPECT_EQ(concat(b.span(), IdSpan{nullptr, 0, IdType::kI64, Device{}}).to_host(), (Ids{3}));
}

TEST(RelabelTest, MatchesAHashIndexOnRandomValues) {
  std::mt19937_64 rng(7);
  for (const std::int64_t range : {std::int64_t{1}, std::int64_t{5}, std::int64_t{1000}, std::int64_t{1} << 40}) {
    Ids v(3000);
    for (auto& x : v) x = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(range)) - range / 2;
    // The expected result by a plain sequential scan with a linear search.
    Ids unique, local;
    for (const auto x : v) {
      std::size_t k = 0;
      while (k < unique.size() && unique[k] != x) ++k;
      if (k == unique.size()) unique.push_back(x);
      local.push_back(static_cast<std::int64_t>(k));
    }
    const IdArray in = host(v);
    const Relabelled r = relabel_first_appearance(in.span());
    EXPECT_EQ(r.unique.to_host(), unique) << range;
    EXPECT_EQ(r.local.to_host(), local) << range;
  }
}

const CsrGraph& rows() {
  static const CsrGraph g = sampling_graph(rmat(10, 12000, 5), /*in_edges=*/true);
  return g;
}

Ids some_seeds(std::int64_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Ids s;
  for (std::int64_t i = 0; i < count; ++i) s.push_back(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows().num_nodes)));
  s.push_back(s.front());  // a duplicate seed
  s.push_back(s[1]);
  return s;
}

// The hop plans of the comparison: fanouts with -1 (all), 0, small and large, 1 to 3 hops.
const std::vector<std::vector<std::int64_t>> kFanouts = {{10, 5}, {-1, 3}, {0, 2}, {25, 10, 4}, {1}};

void expect_same_blocks(Device device) {
  const SampleRows r(rows());
  for (const bool replace : {false, true}) {
    for (const auto& fanouts : kFanouts) {
      SampleOptions o;
      o.fanouts = fanouts;
      o.replace = replace;
      const SampleKey key{11, 2, 5, 0};
      const Ids seeds = some_seeds(200, fanouts.size() + (replace ? 10 : 0));
      const SampledBlocks want = sample_neighbors(rows(), seeds, o, key);
      const IdArray in = IdArray::from_host(seeds, IdType::kI64, device);
      const DeviceSampledBlocks got = sample_neighbors(r, in.span(), o, key);
      ASSERT_EQ(got.blocks.size(), fanouts.size());
      for (const auto& b : got.blocks) {
        EXPECT_EQ(b.src_nodes.device(), device);
        EXPECT_EQ(b.edge_src.device(), device);
        EXPECT_EQ(b.edge_dst.device(), device);
      }
      const SampledBlocks host_copy = got.to_host();
      EXPECT_EQ(host_copy, want) << "replace " << replace << " fanouts[0] " << fanouts[0] << " on " << to_string(device);
      EXPECT_EQ(digest(host_copy), digest(want));
    }
  }
}

TEST(DeviceSampleNeighborsTest, HostPathEqualsSampleNeighbors) { expect_same_blocks(Device{}); }

TEST(DeviceSampleNeighborsTest, BadSeedsAndOptionsGiveTheHostsErrors) {
  const SampleRows r(rows());
  SampleOptions o;
  o.fanouts = {3};
  const IdArray bad = host({1, rows().num_nodes});
  EXPECT_THROW(sample_neighbors(r, bad.span(), o, SampleKey{}), std::out_of_range);
  o.fanouts = {};
  EXPECT_THROW(sample_neighbors(r, bad.span(), o, SampleKey{}), std::out_of_range);
  o.fanouts = {-2};
  const IdArray ok = host({1});
  EXPECT_THROW(sample_neighbors(r, ok.span(), o, SampleKey{}), std::invalid_argument);
}

TEST(DeviceSampleNeighborsTest, CudaSeedsGiveTheHostsBlocksBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  expect_same_blocks(Device{DeviceKind::kCuda, 0});
}

TEST(RelabelTest, CudaMatchesTheHostPath) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  std::mt19937_64 rng(3);
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{1000}, std::int64_t{300000}}) {
    Ids v(static_cast<std::size_t>(n));
    for (auto& x : v) x = static_cast<std::int64_t>(rng() % 5000) - 2500;
    const Relabelled want = relabel_first_appearance(host(v).span());
    const IdArray in = IdArray::from_host(v, IdType::kI64, Device{DeviceKind::kCuda, 0});
    const Relabelled got = relabel_first_appearance(in.span());
    EXPECT_EQ(got.unique.device(), (Device{DeviceKind::kCuda, 0}));
    EXPECT_EQ(got.unique.to_host(), want.unique.to_host()) << n;
    EXPECT_EQ(got.local.to_host(), want.local.to_host()) << n;
    const IdArray counts = IdArray::from_host({2, 0, 3, 1}, IdType::kI64, Device{DeviceKind::kCuda, 0});
    EXPECT_EQ(edge_destinations(counts.span(), 6).to_host(), (Ids{0, 0, 2, 2, 2, 3}));
    EXPECT_THROW(edge_destinations(counts.span(), 5), std::invalid_argument);
  }
}

}  // namespace
}  // namespace lockstep::ref
