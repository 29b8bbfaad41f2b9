// Tests of sample_hop for nodes on a device (reference/sampling/device_sample.h). Expected
// values are the host's sample_hop (reference/sampling/cpu/), whose draws the sampling tests
// check against the documented definition. On a machine without a GPU the CUDA tests skip,
// naming the reason; the per-node functions the kernels run are proven there by the sampling
// tests, through sample_node.
#include "reference/sampling/device_sample.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "lockstep/config.h"
#include "reference/graph/graph.h"
#include "tests/test_util.h"

namespace lockstep::ref {
namespace {

using Ids = std::vector<std::int64_t>;
using test::message_of;

const CsrGraph& rows() {
  static const CsrGraph g = sampling_graph(rmat(10, 12000, 5), /*in_edges=*/true);
  return g;
}

// Nodes of every degree class: isolated, low, hubs, with duplicates.
Ids some_nodes(std::int64_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Ids nodes;
  for (std::int64_t i = 0; i < count; ++i) {
    nodes.push_back(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows().num_nodes)));
  }
  nodes.push_back(nodes.front());
  return nodes;
}

void expect_same(const DeviceHopSample& got, const HopSample& want, Device device) {
  EXPECT_EQ(got.counts.device(), device);
  EXPECT_EQ(got.nbrs.device(), device);
  EXPECT_EQ(got.eids.device(), device);
  EXPECT_EQ(got.counts.to_host(), want.counts);
  EXPECT_EQ(got.nbrs.to_host(), want.nbrs);
  EXPECT_EQ(got.eids.to_host(), want.eids);
}

class DeviceSampleTest : public ::testing::TestWithParam<IdType> {};

TEST_P(DeviceSampleTest, HostNodesGiveSampleHopsResultOnTheHost) {
  const SampleRows r(rows());
  const Ids nodes = some_nodes(300, 1);
  const SampleKey key{42, 1, 3, 1};
  for (const bool replace : {false, true}) {
    for (const std::int64_t fanout : {-1, 0, 1, 7}) {
      const IdArray in = IdArray::from_host(nodes, GetParam(), Device{});
      expect_same(sample_hop(r, in.span(), fanout, replace, key),
                  sample_hop(rows(), nodes, fanout, replace, key), Device{});
    }
  }
}

TEST_P(DeviceSampleTest, BadArgumentsGiveTheHostsMessages) {
  const SampleRows r(rows());
  const IdArray in = IdArray::from_host({3, rows().num_nodes, -1}, GetParam(), Device{});
  EXPECT_EQ(message_of<std::out_of_range>([&] { sample_hop(r, in.span(), 5, false, {}); }),
            "sample_hop: nodes[1] = 1024 is out of range [0, 1024)");
  const IdArray ok = IdArray::from_host({3}, GetParam(), Device{});
  EXPECT_EQ(message_of<std::invalid_argument>([&] { sample_hop(r, ok.span(), -2, false, {}); }),
            message_of<std::invalid_argument>([&] { sample_hop(rows(), Ids{3}, -2, false, {}); }));
}

TEST_P(DeviceSampleTest, NodesOnAnInvisibleCudaDeviceAreRefusedNamingIt) {
  const SampleRows r(rows());
  const int visible = cuda_device_count();
  const std::int64_t host[1] = {3};
  const IdSpan span{host, 1, GetParam(), Device{DeviceKind::kCuda, visible}};
  const std::string msg = message_of<std::runtime_error>([&] { sample_hop(r, span, 5, false, {}); });
  EXPECT_NE(msg.find("nodes are on cuda:" + std::to_string(visible)), std::string::npos) << msg;
}

// On a GPU: the device's samples are the host's, bit for bit, for every fanout kind, with and
// without replacement, across hops (with nvcc, the CUDA kernels; without, the host round trip).
TEST_P(DeviceSampleTest, CudaNodesGiveTheHostsSampleBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  const Device gpu{DeviceKind::kCuda, 0};
  const SampleRows r(rows());
  const Ids nodes = some_nodes(20000, 2);
  const IdArray in = IdArray::from_host(nodes, GetParam(), gpu);
  for (const bool replace : {false, true}) {
    for (const std::int64_t fanout : {-1, 0, 1, 2, 10, 25, 32, 33, 200}) {  // 32 | 33: the thread-local draw | the scratch one
      for (const std::int64_t hop : {0, 3}) {
        const SampleKey key{7, 2, 11, hop};
        SCOPED_TRACE("fanout " + std::to_string(fanout) + " replace " + std::to_string(replace) +
                     " hop " + std::to_string(hop));
        expect_same(sample_hop(r, in.span(), fanout, replace, key),
                    sample_hop(rows(), nodes, fanout, replace, key), gpu);
      }
    }
  }
  const IdArray none = IdArray::from_host({}, GetParam(), gpu);
  expect_same(sample_hop(r, none.span(), 5, false, {}), HopSample{}, gpu);
}

TEST_P(DeviceSampleTest, BadCudaNodesGiveTheHostsMessage) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  const SampleRows r(rows());
  Ids nodes(100000, 3);
  nodes[70001] = rows().num_nodes;
  nodes[90000] = -1;
  const IdArray in = IdArray::from_host(nodes, GetParam(), Device{DeviceKind::kCuda, 0});
  EXPECT_EQ(message_of<std::out_of_range>([&] { sample_hop(r, in.span(), 5, true, {}); }),
            "sample_hop: nodes[70001] = 1024 is out of range [0, 1024)");
}

INSTANTIATE_TEST_SUITE_P(Ids, DeviceSampleTest, ::testing::Values(IdType::kI32, IdType::kI64),
                         [](const auto& info) { return to_string(info.param); });

}  // namespace
}  // namespace lockstep::ref
