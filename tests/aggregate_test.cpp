// Tests of GraphSAGE mean aggregation's per-element functions (reference/train/aggregate.h),
// which the CPU model and the CUDA kernels share. Expected values are worked out by hand, or
// come from the plain edge-order loops written here (what train::forward and backward ran
// before they used these functions): the same operations in the same order, so every element
// must be bit-identical. On a GPU, the kernels must give the CPU's bits.
#include "reference/train/aggregate.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "reference/common/device.h"
#include "reference/train/sage.h"
#include "tests/test_util.h"

namespace lockstep::ref::train {
namespace {

using test::message_of;

// dst 0 <- src 1, 2; dst 1 <- nothing; dst 2 <- src 3 (edges listed out of dst order).
Block tiny() {
  Block b;
  b.dst_nodes = {10, 11, 12};
  b.src_nodes = {10, 11, 12, 13};
  b.edge_src = {1, 3, 2};
  b.edge_dst = {0, 2, 0};
  b.edge_ids = {0, 1, 2};
  return b;
}

TEST(MeanAggregationTest, TinyBlockByHand) {
  const Block b = tiny();
  const EdgeGroups g = edge_groups(b);
  EXPECT_EQ(g.dst_ptr, (std::vector<std::int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(g.src_of, (std::vector<std::int64_t>{1, 2, 3}));  // dst 0's in edge order, then dst 2's
  EXPECT_EQ(g.src_ptr, (std::vector<std::int64_t>{0, 0, 1, 2, 3}));
  EXPECT_EQ(g.dst_of, (std::vector<std::int64_t>{0, 0, 2}));
  // One column: h = 1, 2, 4, 8 for src 0..3.
  const std::vector<float> h{1, 2, 4, 8};
  EXPECT_EQ(mean_of_neighbors(h.data(), 1, g.src_of.data(), 0, 2, 0), 3.0f);  // (2 + 4) / 2
  EXPECT_EQ(mean_of_neighbors(h.data(), 1, g.src_of.data(), 2, 2, 0), 0.0f);  // isolated
  EXPECT_EQ(mean_of_neighbors(h.data(), 1, g.src_of.data(), 2, 3, 0), 8.0f);
  // Backward: dagg = 6, 5, 7 for dst 0..2; src 1 and 2 each get 6 / 2, src 3 gets 7 / 1.
  const std::vector<float> dagg{6, 5, 7};
  EXPECT_EQ(neighbor_gradient(0.5f, dagg.data(), 1, g.dst_of.data(), g.dst_ptr.data(), 0, 1, 0), 3.5f);
  EXPECT_EQ(neighbor_gradient(0.0f, dagg.data(), 1, g.dst_of.data(), g.dst_ptr.data(), 2, 3, 0), 7.0f);
  EXPECT_EQ(neighbor_gradient(0.25f, dagg.data(), 1, g.dst_of.data(), g.dst_ptr.data(), 0, 0, 0), 0.25f);
}

TEST(MeanAggregationTest, EndpointsOutsideTheBlockAreRefused) {
  Block b = tiny();
  b.edge_dst[1] = 3;
  EXPECT_EQ(message_of<std::invalid_argument>([&] { edge_groups(b); }),
            "edge_groups: edge endpoint 3 is outside [0, 3)");
  b = tiny();
  b.edge_src.pop_back();
  EXPECT_EQ(message_of<std::invalid_argument>([&] { edge_groups(b); }),
            "edge_groups: 2 edge sources but 3 edge destinations");
}

// A random block: nd dsts, ns >= nd srcs, edges in random order (not grouped by dst), some
// dsts isolated, degrees up to 40.
Block random_block(std::mt19937_64& rng, std::size_t nd, std::size_t ns) {
  Block b;
  for (std::size_t i = 0; i < nd; ++i) b.dst_nodes.push_back(static_cast<std::int64_t>(i));
  for (std::size_t i = 0; i < ns; ++i) b.src_nodes.push_back(static_cast<std::int64_t>(i));
  for (std::size_t d = 0; d < nd; ++d) {
    const std::size_t deg = d % 7 == 3 ? 0 : rng() % 40;
    for (std::size_t k = 0; k < deg; ++k) {
      b.edge_dst.push_back(static_cast<std::int64_t>(d));
      b.edge_src.push_back(static_cast<std::int64_t>(rng() % ns));
    }
  }
  for (std::size_t e = b.edge_dst.size(); e > 1; --e) {  // shuffle the edge order
    const std::size_t k = rng() % e;
    std::swap(b.edge_dst[e - 1], b.edge_dst[k]);
    std::swap(b.edge_src[e - 1], b.edge_src[k]);
  }
  b.edge_ids.resize(b.edge_dst.size());
  return b;
}

template <class T>
std::vector<T> random_values(std::mt19937_64& rng, std::size_t n) {
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(u(rng));
  return v;
}

// The edge-order loops (train::forward and backward before aggregate.h).
template <class T>
std::vector<T> loop_forward(const Block& b, const std::vector<T>& h, std::size_t in) {
  const std::size_t nd = b.dst_nodes.size();
  std::vector<T> agg(nd * in, T(0));
  std::vector<std::int64_t> deg(nd, 0);
  for (std::size_t e = 0; e < b.edge_src.size(); ++e) {
    const auto d = static_cast<std::size_t>(b.edge_dst[e]);
    const auto src = static_cast<std::size_t>(b.edge_src[e]);
    ++deg[d];
    for (std::size_t j = 0; j < in; ++j) agg[d * in + j] += h[src * in + j];
  }
  for (std::size_t d = 0; d < nd; ++d) {
    if (deg[d] == 0) continue;
    const T inv = T(1) / static_cast<T>(deg[d]);
    for (std::size_t j = 0; j < in; ++j) agg[d * in + j] *= inv;
  }
  return agg;
}

template <class T>
std::vector<T> loop_backward(const Block& b, std::vector<T> dh, const std::vector<T>& dagg,
                             std::size_t in) {
  std::vector<std::int64_t> deg(b.dst_nodes.size(), 0);
  for (auto d : b.edge_dst) ++deg[static_cast<std::size_t>(d)];
  for (std::size_t e = 0; e < b.edge_src.size(); ++e) {
    const auto d = static_cast<std::size_t>(b.edge_dst[e]);
    const auto src = static_cast<std::size_t>(b.edge_src[e]);
    const T inv = T(1) / static_cast<T>(deg[d]);
    for (std::size_t j = 0; j < in; ++j) dh[src * in + j] += dagg[d * in + j] * inv;
  }
  return dh;
}

template <class T>
void expect_bitwise(const std::vector<T>& a, const std::vector<T>& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)), 0);
}

template <class T>
void check_against_loops() {
  std::mt19937_64 rng(5);
  for (const std::size_t in : {1u, 3u, 16u}) {
    const Block b = random_block(rng, 50, 200);
    const EdgeGroups g = edge_groups(b);
    const auto h = random_values<T>(rng, 200 * in);
    std::vector<T> agg(50 * in);
    for (std::size_t d = 0; d < 50; ++d) {
      for (std::size_t j = 0; j < in; ++j) {
        agg[d * in + j] = mean_of_neighbors(h.data(), static_cast<std::int64_t>(in), g.src_of.data(),
                                            g.dst_ptr[d], g.dst_ptr[d + 1], static_cast<std::int64_t>(j));
      }
    }
    expect_bitwise(agg, loop_forward(b, h, in));
    const auto start = random_values<T>(rng, 200 * in);
    const auto dagg = random_values<T>(rng, 50 * in);
    std::vector<T> dh(200 * in);
    for (std::size_t s = 0; s < 200; ++s) {
      for (std::size_t j = 0; j < in; ++j) {
        dh[s * in + j] = neighbor_gradient(start[s * in + j], dagg.data(), static_cast<std::int64_t>(in),
                                           g.dst_of.data(), g.dst_ptr.data(), g.src_ptr[s],
                                           g.src_ptr[s + 1], static_cast<std::int64_t>(j));
      }
    }
    expect_bitwise(dh, loop_backward(b, start, dagg, in));
  }
}

TEST(MeanAggregationTest, BitIdenticalToTheEdgeOrderLoopsFloat) { check_against_loops<float>(); }
TEST(MeanAggregationTest, BitIdenticalToTheEdgeOrderLoopsDouble) { check_against_loops<double>(); }

// On a GPU: the kernels give the CPU's bits (fp32; bf16 mode feeds bf16-rounded floats).
TEST(MeanAggregationCudaTest, KernelsGiveTheCpuBits) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  std::mt19937_64 rng(6);
  const std::size_t nd = 3000, ns = 20000, in = 32;
  const Block b = random_block(rng, nd, ns);
  const EdgeGroups g = edge_groups(b);
  const auto h = random_values<float>(rng, ns * in);
  const auto start = random_values<float>(rng, ns * in);
  const auto dagg = random_values<float>(rng, nd * in);
  cuda_set_device(0);
  CudaBuffer dh_in(h.size() * 4), dagg_d(dagg.size() * 4), start_d(start.size() * 4),
      agg_d(nd * in * 4), dh_d(ns * in * 4);
  cuda_copy_to_device(dh_in.data(), h.data(), h.size() * 4);
  cuda_copy_to_device(dagg_d.data(), dagg.data(), dagg.size() * 4);
  cuda_copy_to_device(start_d.data(), start.data(), start.size() * 4);
  mean_aggregate_cuda(0, g, static_cast<const float*>(dh_in.data()), in, static_cast<float*>(agg_d.data()));
  mean_aggregate_backward_cuda(0, g, static_cast<const float*>(dagg_d.data()),
                               static_cast<const float*>(start_d.data()), in,
                               static_cast<float*>(dh_d.data()));
  std::vector<float> agg(nd * in), dh(ns * in);
  cuda_copy_to_host(agg.data(), agg_d.data(), agg.size() * 4);
  cuda_copy_to_host(dh.data(), dh_d.data(), dh.size() * 4);
  expect_bitwise(agg, loop_forward(b, h, in));
  expect_bitwise(dh, loop_backward(b, start, dagg, in));
}

TEST(MeanAggregationCudaTest, ThrowsWithoutGpu) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible; this checks the CPU-only path";
  const EdgeGroups g = edge_groups(tiny());
  EXPECT_THROW(mean_aggregate_cuda(0, g, nullptr, 1, nullptr), std::runtime_error);
}

// forward and backward with the aggregation on a device: fp32 only, and loud without one.
TEST(SageAggregateOnTest, DoubleOnCudaIsRefusedAndNoGpuIsNamed) {
  SageConfig c;
  c.in_dim = 2;
  c.hidden = 3;
  c.num_classes = 2;
  c.num_layers = 1;
  SampledBlocks blocks;
  blocks.seeds = {0};
  blocks.seed_to_output = {0};
  blocks.blocks.push_back(tiny());
  const std::size_t ns = blocks.blocks[0].src_nodes.size();
  const Device gpu{DeviceKind::kCuda, 0};
  const auto pf = init_params(c, 1);
  const std::vector<double> pd(pf.begin(), pf.end());
  const std::vector<double> in_d(ns * 2, 0.5);
  EXPECT_NE(message_of<std::invalid_argument>([&] { forward(c, pd, blocks, in_d, false, gpu); }).find("fp32 only"),
            std::string::npos);
  if (cuda_device_count() > 0) return;  // the rest checks the CPU-only path
  const std::vector<float> in_f(ns * 2, 0.5f);
  EXPECT_THROW(forward(c, pf, blocks, in_f, false, gpu), std::runtime_error);
}

// On a GPU: a training step's activations and gradients are the same bits with the mean
// aggregation on the device as on the host, in fp32 and with bf16 hidden rounding.
TEST(SageAggregateOnCudaTest, ForwardAndBackwardGiveTheHostBits) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA: no CUDA device is visible";
  std::mt19937_64 rng(9);
  SageConfig c;
  c.in_dim = 8;
  c.hidden = 16;
  c.num_classes = 4;
  c.num_layers = 2;
  SampledBlocks blocks;
  blocks.blocks.push_back(random_block(rng, 50, 400));   // hop 0: the seeds' block
  blocks.blocks.push_back(random_block(rng, 400, 3000));  // hop 1
  for (std::int64_t i = 0; i < 50; ++i) {
    blocks.seeds.push_back(i);
    blocks.seed_to_output.push_back(i);
  }
  const auto params = init_params(c, 4);
  const auto inputs = random_values<float>(rng, 3000 * 8);
  for (const bool bf16 : {false, true}) {
    const auto host = forward(c, params, blocks, inputs, bf16);
    const auto gpu = forward(c, params, blocks, inputs, bf16, Device{DeviceKind::kCuda, 0});
    for (std::size_t l = 0; l < host.agg.size(); ++l) expect_bitwise(gpu.agg[l], host.agg[l]);
    expect_bitwise(gpu.logits, host.logits);
    std::vector<float> dlogits(host.logits.size());
    for (std::size_t i = 0; i < dlogits.size(); ++i) dlogits[i] = static_cast<float>(i % 7) * 0.125f - 0.375f;
    std::vector<float> gh(params.size(), 0.0f), gg(params.size(), 0.0f), dih, dig;
    backward(c, params, blocks, host, dlogits, gh, &dih);
    backward(c, params, blocks, host, dlogits, gg, &dig, Device{DeviceKind::kCuda, 0});
    expect_bitwise(gg, gh);
    expect_bitwise(dig, dih);
  }
}

}  // namespace
}  // namespace lockstep::ref::train
