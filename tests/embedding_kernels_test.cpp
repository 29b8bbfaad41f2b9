// Tests of DistEmbedding's per-element functions (reference/embedding/embedding_one.h), which
// the host shard and the CUDA kernels (reference/embedding/cuda/) share, and of a shard on a
// CUDA device. Expected values are worked out by hand in the comments, or are the host shard's
// (which embedding_test.cpp checks by hand and against dense LibTorch). On a machine without a
// GPU the CUDA tests skip, naming the reason.
#include "reference/embedding/embedding.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/embedding_test_util.h"

namespace lockstep::ref {
namespace {

using namespace test_embedding;  // NOLINT: I64, Hub, TestTransport, Runner

TEST(EmbeddingOneTest, GroupDuplicatesByHand) {
  const I64 ids = {9, 1, 9, 1, 5};
  const auto g = group_duplicates(ids.data(), 5);
  EXPECT_EQ(g.ids, (I64{1, 5, 9}));
  EXPECT_EQ(g.ptr, (I64{0, 2, 3, 5}));
  EXPECT_EQ(g.order, (I64{1, 3, 4, 0, 2}));  // stable: each id's positions ascending
  const auto none = group_duplicates(ids.data(), 0);
  EXPECT_TRUE(none.ids.empty() && none.order.empty());
  EXPECT_EQ(none.ptr, I64{0});
  EXPECT_THROW(group_duplicates(ids.data(), -1), std::invalid_argument);
}

TEST(EmbeddingOneTest, StoreRoundsOnceToNearestEvenAndLoadIsExact) {
  std::uint16_t t[4] = {};
  // bf16 keeps 7 fraction bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (odd) -> 1;
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> 1 + 2^-6.
  store_element(Storage::kBF16, t, 0, 1.0f + 0x1.0p-8f);
  store_element(Storage::kBF16, t, 1, 1.0f + 3 * 0x1.0p-8f);
  EXPECT_EQ(t[0], 0x3f80);
  EXPECT_EQ(load_element(Storage::kBF16, t, 0), 1.0f);
  EXPECT_EQ(load_element(Storage::kBF16, t, 1), 1.0f + 0x1.0p-6f);
  // f16: 1 + 2^-11 ties to 1 (0x3c00); 2^-24 is its smallest subnormal (0x0001); 2^-25 ties
  // to even, zero.
  store_element(Storage::kF16, t, 2, 1.0f + 0x1.0p-11f);
  store_element(Storage::kF16, t, 3, 0x1.0p-24f);
  EXPECT_EQ(t[2], 0x3c00);
  EXPECT_EQ(t[3], 0x0001);
  EXPECT_EQ(load_element(Storage::kF16, t, 3), 0x1.0p-24f);
  store_element(Storage::kF16, t, 3, 0x1.0p-25f);
  EXPECT_EQ(t[3], 0x0000);
  float f[2] = {};
  store_element(Storage::kF32, f, 1, 0.1f);
  EXPECT_EQ(f[1], 0.1f);
  EXPECT_EQ(load_element(Storage::kF32, f, 1), 0.1f);
}

TEST(EmbeddingOneTest, UpdateRuleAndUpdateElementByHand) {
  OptimizerOptions opt;
  opt.kind = OptimizerKind::kAdam;
  opt.lr = 0.25;
  opt.beta1 = 0.5;
  opt.beta2 = 0.75;
  opt.eps = 0;
  // t = 1: 1 - beta1 = 0.5, 1 - beta2 = 0.25; step = 0.25 * sqrt(0.25) / 0.5 = 0.25.
  const UpdateRule adam = update_rule(opt, 1);
  EXPECT_EQ(adam.one_minus_beta1, 0.5f);
  EXPECT_EQ(adam.one_minus_beta2, 0.25f);
  EXPECT_EQ(adam.neg_step, -0.25f);
  // g = 2 from m = v = 0: m = (2 - 0) * 0.5 + 0 = 1, v = (4 - 0) * 0.25 + 0 = 1,
  // w = 3 + (-0.25) * (1 / (1 + 0)) = 2.75.
  float w = 3, m = 0, v = 0;
  update_element(adam, 2, w, m, v);
  EXPECT_EQ(m, 1.0f);
  EXPECT_EQ(v, 1.0f);
  EXPECT_EQ(w, 2.75f);
  // Adagrad, lr 1, eps 0: s = 0 + 3 * 3 = 9, w = 5 - 1 * (3 / (3 + 0)) = 4; s2 untouched.
  opt.kind = OptimizerKind::kAdagrad;
  opt.lr = 1;
  const UpdateRule adagrad = update_rule(opt, 7);
  float w2 = 5, s = 0, untouched = 42;
  update_element(adagrad, 3, w2, s, untouched);
  EXPECT_EQ(s, 9.0f);
  EXPECT_EQ(w2, 4.0f);
  EXPECT_EQ(untouched, 42.0f);
  // SGD, lr 0.5: w = 3 - 0.5 * 2 = 2; no state.
  opt.kind = OptimizerKind::kSgd;
  opt.lr = 0.5;
  float w3 = 3, a = 7, b = 8;
  update_element(update_rule(opt, 1), 2, w3, a, b);
  EXPECT_EQ(w3, 2.0f);
  EXPECT_EQ(a, 7.0f);
  EXPECT_EQ(b, 8.0f);
}

TEST(EmbeddingShardTest, UpdateRowsReducesEachGroupInArrivalOrder) {
  OptimizerOptions opt;  // SGD
  opt.lr = 1;
  for (auto mode : {DuplicateReduce::kSum, DuplicateReduce::kMean}) {
    EmbeddingShard shard({10, 11, 12}, 2, Storage::kF32, 3, 0.5, opt);
    // Arrivals: ids 7, 5, 7, 7 with rows (1e8, 1), (4, 2), (1, 3), (-1e8, 4). Id 7 (local 2):
    // column 0 ((0 + 1e8) + 1) + (-1e8) = 0 (1e8 + 1 rounds to 1e8), column 1 1 + 3 + 4 = 8,
    // mean 0 and 8 / 3; id 5 (local 0): (4, 2), its own mean.
    const I64 ids = {7, 5, 7, 7};
    const float grads[8] = {1e8f, 1, 4, 2, 1, 3, -1e8f, 4};
    const auto groups = group_duplicates(ids.data(), 4);
    shard.update_rows({0, 2}, groups, grads, 4, mode, 1);
    const auto t = shard.to_f32();
    const float third = mode == DuplicateReduce::kSum ? 8.0f : 8.0f / 3.0f;
    EXPECT_EQ(t[0], embedding_init(3, 10, 0, 0.5) - 4.0f) << to_string(mode);
    EXPECT_EQ(t[1], embedding_init(3, 10, 1, 0.5) - 2.0f) << to_string(mode);
    EXPECT_EQ(t[2], embedding_init(3, 11, 0, 0.5)) << to_string(mode);  // untouched
    EXPECT_EQ(t[4], embedding_init(3, 12, 0, 0.5) - 0.0f) << to_string(mode);
    EXPECT_EQ(t[5], embedding_init(3, 12, 1, 0.5) - third) << to_string(mode);
  }
}

TEST(EmbeddingShardTest, NamesWhyAShardCannotBeOnCudaWithoutGpu) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible: the refusal needs a machine without one";
  OptimizerOptions opt;
  try {
    EmbeddingShard shard({0, 1}, 2, Storage::kF32, 0, 0.5, opt, Device{DeviceKind::kCuda, 0});
    FAIL() << "a shard on cuda:0 was built without a visible CUDA device";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("an embedding shard on cuda:0"), std::string::npos) << what;
    EXPECT_TRUE(what.find("no CUDA device is visible") != std::string::npos ||
                what.find("needs lockstep built with its CUDA kernels") != std::string::npos)
        << what;
  }
}

// On a GPU: every table and every pulled row of a shard on cuda:0 is the same bits as the
// host shard's, for every optimizer and storage, duplicate reduction, world size 1 and 3
// (an empty part), host ids and CUDA ids, and the lost-update fault.
TEST(EmbeddingCudaTest, ShardOnTheGpuIsBitIdenticalToTheHost) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "requires a CUDA device";
  const std::vector<std::vector<I64>> one = {{{4, 4, 11, 0, 12, 4, 7, 11}}, {{12}}, {{}}, {{3, 3, 3, 5, 0}}};
  const std::vector<std::vector<I64>> three = {{{4, 4, 11}, {0, 12, 4}, {7, 11}}, {{12}, {}, {}}, {{}, {}, {}},
                                               {{3, 3}, {3, 5}, {0}}};
  auto fill_of = [](const std::vector<std::vector<I64>>& ids) {
    std::vector<std::vector<std::vector<float>>> f(ids.size());
    for (std::size_t s = 0; s < ids.size(); ++s) {
      for (std::size_t r = 0; r < ids[s].size(); ++r) {
        f[s].emplace_back();
        for (std::size_t k = 0; k < ids[s][r].size(); ++k) f[s][r].push_back(static_cast<float>((s * 7 + k * 3 + r) % 5) * 0.375f - 0.7f);
      }
    }
    return f;
  };
  const auto book1 = even_range_book(13, 1);
  const auto book3 = std::make_shared<RangePartitionBook>(I64{0, 0, 6, 13});
  int cases = 0;
  for (auto kind : {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam}) {
    for (auto st : {Storage::kF32, Storage::kBF16, Storage::kF16}) {
      for (auto mode : {DuplicateReduce::kSum, DuplicateReduce::kMean}) {
        for (bool lost : {false, true}) {
          for (const auto& [book, ids] : {std::make_pair(book1, one), std::make_pair(std::shared_ptr<const PartitionBook>(book3), three)}) {
            EmbeddingOptions eo;
            eo.dim = 5;
            eo.storage = st;
            eo.reduce = mode;
            eo.optimizer.kind = kind;
            eo.optimizer.lr = 0.1;
            eo.lost_update_bug = lost;
            const auto fill = fill_of(ids);
            std::vector<std::vector<std::vector<float>>> pulled_host, pulled_gpu;
            const auto host = Runner::run(book, eo, ids, fill, &pulled_host, 0.125f);
            eo.device = Device{DeviceKind::kCuda, 0};
            const auto gpu = Runner::run(book, eo, ids, fill, &pulled_gpu, 0.125f);
            const std::string what = to_string(kind) + " " + to_string(st) + " " + to_string(mode) +
                                     (lost ? " lost_update" : "") + " parts " + std::to_string(book->num_parts());
            ASSERT_EQ(host.size(), gpu.size()) << what;
            EXPECT_EQ(std::memcmp(host.data(), gpu.data(), host.size() * 4), 0) << what;
            EXPECT_EQ(pulled_host, pulled_gpu) << what;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 72);
}

TEST(EmbeddingCudaTest, CudaIdsOnACudaShardStayOnTheDevice) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "requires a CUDA device";
  Hub hub(1);
  TestTransport tp(hub, 0);
  EmbeddingOptions eo;
  eo.dim = 3;
  eo.storage = Storage::kBF16;
  eo.device = Device{DeviceKind::kCuda, 0};
  DistEmbedding emb(even_range_book(5, 1), eo, tp);
  EXPECT_EQ(emb.shard().device(), (Device{DeviceKind::kCuda, 0}));
  const auto ids = IdArray::from_host({3, 1, 3}, IdType::kI32, Device{DeviceKind::kCuda, 0});
  const auto rows = emb.pull(ids.span());
  EXPECT_EQ(rows.device(), (Device{DeviceKind::kCuda, 0}));
  const auto v = rows.to_host();
  ASSERT_EQ(v.size(), 9u);
  EXPECT_EQ(v[0], round_to_storage(embedding_init(0, 3, 0, 0.5), Storage::kBF16));
  EXPECT_EQ(v[5], round_to_storage(embedding_init(0, 1, 2, 0.5), Storage::kBF16));
  EXPECT_EQ(v[6], v[0]);
  const auto bad = IdArray::from_host({1, 5}, IdType::kI64, Device{DeviceKind::kCuda, 0});
  EXPECT_THROW(emb.pull(bad.span()), std::out_of_range);
}

}  // namespace
}  // namespace lockstep::ref
