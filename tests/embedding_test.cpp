// Tests of the DistEmbedding reference (reference/embedding/embedding.h) and its 16-bit
// storage formats (reference/common/half.h). Expected values are worked out by hand in the
// comments (exactly representable inputs), or are closed forms evaluated in double; none come
// from the code under test. Multi-rank cases run one DistEmbedding per thread over an
// in-process test transport (tests/embedding_test_util.h). The per-element functions and the
// CUDA shard are in embedding_kernels_test.cpp.
// DenseEmbeddingTest checks the LibTorch dense reference (harness/torch) against them.
#include "reference/embedding/embedding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "harness/torch/dense_embedding.h"
#include "reference/common/half.h"
#include "tests/embedding_test_util.h"
#include "tests/test_util.h"

namespace lockstep::ref {
namespace {

using namespace test_embedding;  // NOLINT: I64, span_of, Hub, TestTransport, Runner

// ---- 16-bit storage ----

TEST(HalfTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1.0p-8f), 0x3f80);         // halfway: to even (1.0)
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1.0p-8f), 0x3f82);     // halfway: to even (1 + 2^-6)
  EXPECT_EQ(float_to_bf16(1.0f + 0x1.0p-8f + 0x1.0p-20f), 0x3f81);  // above halfway: up
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_float(0x3f81), 1.0f + 0x1.0p-7f);
}

TEST(HalfTest, F16RoundsToNearestEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(1.0f + 0x1.0p-11f), 0x3c00);      // halfway: to even
  EXPECT_EQ(float_to_f16(1.0f + 3 * 0x1.0p-11f), 0x3c02);  // halfway: to even
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);               // largest finite
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);               // halfway to 2^16: to even = inf
  EXPECT_EQ(float_to_f16(0x1.0p-24f), 0x0001);             // smallest subnormal
  EXPECT_EQ(float_to_f16(0x1.0p-25f), 0x0000);             // halfway: to even (0)
  EXPECT_EQ(float_to_f16(3 * 0x1.0p-25f), 0x0002);         // halfway: to even
  EXPECT_EQ(float_to_f16(0x1.0p-14f), 0x0400);             // smallest normal
  EXPECT_EQ(float_to_f16(-0.5f), 0xb800);
  EXPECT_EQ(f16_to_float(0x0001), 0x1.0p-24f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0xb800), -0.5f);
  EXPECT_TRUE(std::isinf(f16_to_float(0x7c00)));
}

// ---- initialisation ----

TEST(EmbeddingTest, InitialisationDoesNotDependOnSharding) {
  constexpr std::int64_t kRows = 13, kDim = 3;
  const std::uint64_t seed = 42;
  std::vector<std::shared_ptr<const PartitionBook>> books = {
      even_range_book(kRows, 1), even_range_book(kRows, 2), even_range_book(kRows, 4),
      std::make_shared<RangePartitionBook>(I64{0, 0, 5, 5, 13}),  // two empty parts
      std::make_shared<MapPartitionBook>(std::vector<std::int32_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, 3)};
  for (Storage st : {Storage::kF32, Storage::kBF16, Storage::kF16}) {
    std::vector<float> first;
    for (const auto& book : books) {
      std::vector<float> table(kRows * kDim, std::numeric_limits<float>::quiet_NaN());
      for (int p = 0; p < book->num_parts(); ++p) {
        EmbeddingShard shard(book->partid2nids(p, Device{}).to_host(), kDim, st, seed, 0.5, OptimizerOptions{});
        EXPECT_EQ(shard.rows(), book->part_size(p));
        const auto vals = shard.to_f32();
        for (std::int64_t l = 0; l < shard.rows(); ++l) {
          std::copy_n(vals.begin() + l * kDim, kDim, table.begin() + shard.global_ids()[static_cast<std::size_t>(l)] * kDim);
        }
      }
      for (std::int64_t r = 0; r < kRows; ++r) {
        for (std::int64_t c = 0; c < kDim; ++c) {
          const float v = table[static_cast<std::size_t>(r * kDim + c)];
          const float f = embedding_init(seed, r, c, 0.5);
          EXPECT_TRUE(f >= -0.5f && f < 0.5f) << f;
          const float want = st == Storage::kF32 ? f : st == Storage::kBF16 ? bf16_to_float(float_to_bf16(f)) : f16_to_float(float_to_f16(f));
          EXPECT_EQ(v, want) << "row " << r << " col " << c << " storage " << to_string(st);
        }
      }
      if (first.empty()) first = table;
      EXPECT_EQ(std::memcmp(first.data(), table.data(), table.size() * 4), 0);
    }
  }
  EXPECT_NE(embedding_init(1, 0, 0, 1.0), embedding_init(2, 0, 0, 1.0));
  EXPECT_NE(embedding_init(1, 0, 0, 1.0), embedding_init(1, 0, 1, 1.0));
  EXPECT_NE(embedding_init(1, 0, 0, 1.0), embedding_init(1, 1, 0, 1.0));
}

// ---- optimizers, one row at a time ----

TEST(EmbeddingTest, SgdMatchesHandComputedValues) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.lr = 0.5;
  float w[2] = {1.0f, -2.0f};
  const float g[2] = {0.25f, 1.0f};
  apply_update(o, 1, 2, g, w, nullptr, nullptr);
  EXPECT_EQ(w[0], 0.875f);  // 1 - 0.5 * 0.25
  EXPECT_EQ(w[1], -2.5f);   // -2 - 0.5 * 1
}

TEST(EmbeddingTest, RowwiseAdagradMatchesHandComputedValues) {
  // One state value per row: the running sum of mean(g^2) over the row.
  float w[2] = {1.0f, -2.0f}, s = 0.0f;
  const float g1[2] = {2.0f, -4.0f};
  apply_rowwise_adagrad(0.5f, 0.0f, 2, g1, w, &s);
  EXPECT_EQ(s, 10.0f);  // (4 + 16) / 2
  EXPECT_EQ(w[0], 1.0f - (0.5f / std::sqrt(10.0f)) * 2.0f);
  EXPECT_NEAR(w[0], 1 - 0.5 * 2 / std::sqrt(10.0), 2e-7);    // 0.68377223
  EXPECT_NEAR(w[1], -2 + 0.5 * 4 / std::sqrt(10.0), 4e-7);   // -1.36754447
  const float g2[2] = {3.0f, 0.0f};
  apply_rowwise_adagrad(0.5f, 0.0f, 2, g2, w, &s);
  EXPECT_EQ(s, 14.5f);  // 10 + 9 / 2
  EXPECT_NEAR(w[1], -2 + 0.5 * 4 / std::sqrt(10.0), 4e-7);   // a zero gradient column moves nothing
  // eps is added to the square root: lr / (sqrt(0 + 1) + 1) = lr / 2.
  float w1 = 3.0f, s1 = 0.0f;
  const float g3 = 1.0f;
  apply_rowwise_adagrad(1.0f, 1.0f, 1, &g3, &w1, &s1);
  EXPECT_EQ(s1, 1.0f);
  EXPECT_EQ(w1, 2.5f);
}

TEST(EmbeddingTest, AdagradMatchesHandComputedValues) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdagrad;
  o.lr = 0.5;
  o.eps = 0;
  float w[2] = {1.0f, -2.0f}, s[2] = {0.0f, 0.0f};
  const float g1[2] = {2.0f, -4.0f};
  apply_update(o, 1, 2, g1, w, s, nullptr);
  EXPECT_EQ(s[0], 4.0f);
  EXPECT_EQ(s[1], 16.0f);
  EXPECT_EQ(w[0], 0.5f);   // 1 - 0.5 * 2 / sqrt(4)
  EXPECT_EQ(w[1], -1.5f);  // -2 - 0.5 * (-4) / sqrt(16)
  const float g2[2] = {2.0f, 0.0f};
  apply_update(o, 2, 2, g2, w, s, nullptr);
  EXPECT_EQ(s[0], 8.0f);
  EXPECT_NEAR(w[0], 0.5 - 0.5 * 2 / std::sqrt(8.0), 2e-7);  // 0.14644661
  EXPECT_EQ(w[1], -1.5f);  // a zero gradient moves nothing

  // Torch's default eps (1e-10) and an initial accumulator of 1.
  OptimizerOptions d;
  d.kind = OptimizerKind::kAdagrad;
  d.lr = 1;
  d.initial_accumulator_value = 1;
  EXPECT_EQ(d.resolved_eps(), 1e-10);
  float w1 = 0.0f, s1 = 1.0f;
  const float g3 = 1.0f;
  apply_update(d, 1, 1, &g3, &w1, &s1, nullptr);
  EXPECT_EQ(s1, 2.0f);
  EXPECT_NEAR(w1, -1 / std::sqrt(2.0), 1e-7);
}

TEST(EmbeddingTest, EpsIsAddedAfterTheSquareRoot) {
  // torch.optim.Adagrad and SparseAdam: g / (sqrt(state) + eps). With eps = 1 the placement
  // shows: eps inside the root would give 2 / sqrt(5) and 1 / sqrt(2) below.
  OptimizerOptions a;
  a.kind = OptimizerKind::kAdagrad;
  a.lr = 0.5;
  a.eps = 1;
  float w = 1.0f, s = 0.0f;
  const float g = 2.0f;
  apply_update(a, 1, 1, &g, &w, &s, nullptr);
  EXPECT_EQ(s, 4.0f);
  EXPECT_NEAR(w, 1 - 0.5 * 2 / (2 + 1.0), 1e-7);  // 2/3
  OptimizerOptions m;
  m.kind = OptimizerKind::kAdam;
  m.lr = 0.25;
  m.beta1 = 0.5;
  m.beta2 = 0.75;
  m.eps = 1;
  float w2 = 1.0f, m1 = 0.0f, v1 = 0.0f;
  apply_update(m, 1, 1, &g, &w2, &m1, &v1);
  EXPECT_EQ(w2, 0.875f);  // 1 - 0.25 * sqrt(0.25) / 0.5 * 1 / (sqrt(1) + 1)
}

TEST(EmbeddingTest, AdamMatchesHandComputedValues) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.25;
  o.beta1 = 0.5;
  o.beta2 = 0.75;
  o.eps = 0;
  float w = 1.0f, m = 0.0f, v = 0.0f;
  const float g = 2.0f;
  apply_update(o, 1, 1, &g, &w, &m, &v);
  EXPECT_EQ(m, 1.0f);    // (2 - 0) * 0.5 + 0
  EXPECT_EQ(v, 1.0f);    // (4 - 0) * 0.25 + 0
  EXPECT_EQ(w, 0.75f);   // 1 - 0.25 * sqrt(1 - 0.75) / (1 - 0.5) * 1 / sqrt(1)
  apply_update(o, 2, 1, &g, &w, &m, &v);
  EXPECT_EQ(m, 1.5f);    // (2 - 1) * 0.5 + 1
  EXPECT_EQ(v, 1.75f);   // (4 - 1) * 0.25 + 1
  const double step = 0.25 * std::sqrt(1 - 0.5625) / (1 - 0.25);
  EXPECT_NEAR(w, 0.75 - step * 1.5 / std::sqrt(1.75), 2e-7);
  EXPECT_EQ(o.resolved_eps(), 0.0);
  OptimizerOptions d;
  d.kind = OptimizerKind::kAdam;
  EXPECT_EQ(d.resolved_eps(), 1e-8);
}

// ---- DistEmbedding at world size 1 and over threads ----

TEST(EmbeddingTest, SumAndMeanOfDuplicateIds) {
  EmbeddingOptions eo;
  eo.dim = 2;
  eo.optimizer.kind = OptimizerKind::kSgd;
  eo.optimizer.lr = 1;
  const auto book = even_range_book(7, 1);
  const std::vector<std::vector<I64>> ids = {{{5, 5, 2}}};
  const std::vector<std::vector<std::vector<float>>> fill = {{{1.0f, 2.0f, 4.0f}}};
  const float w5 = embedding_init(0, 5, 0, 0.5), w2 = embedding_init(0, 2, 1, 0.5);
  eo.reduce = DuplicateReduce::kSum;
  auto t = Runner::run(book, eo, ids, fill);
  EXPECT_EQ(t[5 * 2], w5 - 3.0f);      // (1 + 2) summed
  EXPECT_EQ(t[2 * 2 + 1], w2 - 4.0f);
  EXPECT_EQ(t[0], embedding_init(0, 0, 0, 0.5));  // untouched
  eo.reduce = DuplicateReduce::kMean;
  t = Runner::run(book, eo, ids, fill);
  EXPECT_EQ(t[5 * 2], w5 - 1.5f);      // (1 + 2) / 2
  EXPECT_EQ(t[2 * 2 + 1], w2 - 4.0f);  // a single contribution is its own mean
}

TEST(EmbeddingTest, DuplicatesAccumulateInBatchOrderFromZero) {
  // In f32, 1e8 + 1 rounds back to 1e8 (the spacing there is 8), so the order shows:
  // ((0 + 1e8) + 1) + (-1e8) = 0, while 1e8 + (-1e8) + 1 would be 1.
  const I64 ids = {3, 3, 3};
  const float g[3] = {1e8f, 1.0f, -1e8f};
  const auto r = reduce_duplicates(ids.data(), g, 3, 1, DuplicateReduce::kSum);
  ASSERT_EQ(r.ids, I64{3});
  EXPECT_EQ(r.counts, I64{3});
  EXPECT_EQ(r.grads[0], 0.0f);
  const I64 mixed = {9, 1, 9, 1};
  const float h[4] = {1.0f, 10.0f, 3.0f, 20.0f};
  const auto m = reduce_duplicates(mixed.data(), h, 4, 1, DuplicateReduce::kMean);
  EXPECT_EQ(m.ids, (I64{1, 9}));
  EXPECT_EQ(m.grads, (std::vector<float>{15.0f, 2.0f}));
  EXPECT_THROW(reduce_duplicates(mixed.data(), h, 4, 0, DuplicateReduce::kSum), std::invalid_argument);
}

TEST(EmbeddingTest, LazyAdamCountsEveryStepButUpdatesOnlyTouchedRows) {
  EmbeddingOptions eo;
  eo.dim = 1;
  eo.optimizer.kind = OptimizerKind::kAdam;
  eo.optimizer.lr = 0.25;
  eo.optimizer.beta1 = 0.5;
  eo.optimizer.beta2 = 0.75;
  eo.optimizer.eps = 0;
  // Row 0 gets gradient 2 at steps 1 and 3; step 2 touches row 1 only.
  const std::vector<std::vector<I64>> ids = {{{0}}, {{1}}, {{0}}};
  const std::vector<std::vector<std::vector<float>>> fill = {{{2.0f}}, {{2.0f}}, {{2.0f}}};
  const auto t = Runner::run(even_range_book(3, 1), eo, ids, fill);
  const double w0 = embedding_init(0, 0, 0, 0.5);
  // Step 1: m = 1, v = 1, step size 0.25 -> w0 - 0.25. Step 3 (t = 3): m = 1.5, v = 1.75,
  // bias corrections 1 - 0.5^3 and 1 - 0.75^3.
  const double step3 = 0.25 * std::sqrt(1 - 0.421875) / (1 - 0.125);
  EXPECT_NEAR(t[0], (w0 - 0.25) - step3 * 1.5 / std::sqrt(1.75), 4e-7);
  EXPECT_EQ(t[2], embedding_init(0, 2, 0, 0.5));  // never touched: unchanged
}

TEST(EmbeddingTest, WorldSizeAndEmptyShardsDoNotChangeResults) {
  // One global batch per step, split into contiguous chunks; rank 0 of the 3-rank run owns no
  // rows, and some ranks have no ids at some steps.
  const std::vector<I64> global = {{4, 4, 11, 0, 12, 4, 7, 11}, {12}, {}, {3, 3, 3, 5}};
  std::vector<std::vector<float>> gfill;
  for (std::size_t s = 0; s < global.size(); ++s) {
    std::vector<float> f;
    for (std::size_t k = 0; k < global[s].size(); ++k) f.push_back(static_cast<float>((s * 7 + k * 3) % 5) * 0.375f - 0.7f);
    gfill.push_back(f);
  }
  auto split = [&](int ws) {
    std::vector<std::vector<I64>> ids(global.size());
    std::vector<std::vector<std::vector<float>>> fill(global.size());
    for (std::size_t s = 0; s < global.size(); ++s) {
      const auto n = static_cast<std::int64_t>(global[s].size());
      std::int64_t lo = 0;
      for (int r = 0; r < ws; ++r) {
        const std::int64_t hi = lo + n / ws + (r < n % ws ? 1 : 0);
        ids[s].emplace_back(global[s].begin() + lo, global[s].begin() + hi);
        fill[s].emplace_back(gfill[s].begin() + lo, gfill[s].begin() + hi);
        lo = hi;
      }
    }
    return std::make_pair(ids, fill);
  };
  for (auto kind : {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam}) {
    for (auto st : {Storage::kF32, Storage::kBF16}) {
      EmbeddingOptions eo;
      eo.dim = 3;
      eo.storage = st;
      eo.optimizer.kind = kind;
      eo.optimizer.lr = 0.1;
      const auto [ids1, fill1] = split(1);
      const auto one = Runner::run(even_range_book(13, 1), eo, ids1, fill1);
      const auto [ids3, fill3] = split(3);
      std::vector<std::vector<std::vector<float>>> pulled;
      const auto three = Runner::run(std::make_shared<RangePartitionBook>(I64{0, 0, 6, 13}), eo, ids3, fill3, &pulled);
      EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * 4), 0) << to_string(kind) << " " << to_string(st);
      const auto [ids4, fill4] = split(4);
      std::vector<std::int32_t> mod(13);
      for (int i = 0; i < 13; ++i) mod[static_cast<std::size_t>(i)] = i % 4;
      const auto four = Runner::run(std::make_shared<MapPartitionBook>(mod, 4), eo, ids4, fill4);
      EXPECT_EQ(std::memcmp(one.data(), four.data(), one.size() * 4), 0) << to_string(kind) << " " << to_string(st);
      // Step 3 has no ids at all; at step 1 only rank 0 has one.
      EXPECT_TRUE(pulled[2][0].empty() && pulled[2][1].empty() && pulled[2][2].empty());
      EXPECT_EQ(pulled[1][0].size(), 3u);
      EXPECT_TRUE(pulled[1][1].empty());
    }
  }
  // Something moved: the table differs from its initial values.
  EmbeddingOptions eo;
  eo.dim = 3;
  const auto [ids1, fill1] = split(1);
  const auto t = Runner::run(even_range_book(13, 1), eo, ids1, fill1);
  EXPECT_NE(t[4 * 3], embedding_init(0, 4, 0, 0.5));
}

TEST(EmbeddingTest, PullChecksIdsAndKeepsTheirDevice) {
  Hub hub(1);
  TestTransport tp(hub, 0);
  EmbeddingOptions eo;
  eo.dim = 2;
  DistEmbedding emb(even_range_book(5, 1), eo, tp);
  const std::vector<std::int32_t> ids32 = {4, 0, 4};
  const auto rows = emb.pull(IdSpan{ids32.data(), 3, IdType::kI32, Device{}});
  EXPECT_EQ(rows.device(), Device{});
  const auto v = rows.to_host();
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v[0], embedding_init(0, 4, 0, 0.5));
  EXPECT_EQ(v[3], embedding_init(0, 0, 1, 0.5));
  EXPECT_EQ(v[4], v[0]);
  EXPECT_EQ(emb.pulled_bytes(), 3 * 2 * 4);  // three rows of two f32 values
  const I64 bad = {5};
  EXPECT_THROW(emb.pull(span_of(bad)), std::out_of_range);
  EXPECT_THROW(emb.accumulate_grad(span_of(bad), nullptr), std::out_of_range);
  EXPECT_THROW(DistEmbedding(even_range_book(5, 2), eo, tp), std::invalid_argument);
}

TEST(EmbeddingTest, PullReturnsRowsOnTheCudaIdsDevice) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "requires CUDA";
  Hub hub(1);
  TestTransport tp(hub, 0);
  EmbeddingOptions eo;
  eo.dim = 2;
  DistEmbedding emb(even_range_book(5, 1), eo, tp);
  const auto ids = IdArray::from_host({3, 1}, IdType::kI32, Device{DeviceKind::kCuda, 0});
  const auto rows = emb.pull(ids.span());
  EXPECT_EQ(rows.device(), (Device{DeviceKind::kCuda, 0}));
  EXPECT_EQ(rows.to_host()[0], embedding_init(0, 3, 0, 0.5));
}

// ---- bf16 / f16 tolerance ----

TEST(EmbeddingTest, StorageToleranceClosedForm) {
  EXPECT_EQ(storage_tolerance(Storage::kF32, 5, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(storage_tolerance(Storage::kBF16, 1, 1.0), 0x1.0p-8 * (1 + 0x1.0p-8) + 0x1.0p-22);
  EXPECT_DOUBLE_EQ(storage_tolerance(Storage::kF16, 2, 0.5), 2 * (0x1.0p-11 * (1 + 2 * 0x1.0p-11) + 0x1.0p-22) * 0.5 + 2 * 0x1.0p-25);
  // One rounding can lose a whole update: 1 - 2^-9 is halfway between bf16's 1 - 2^-8 (odd)
  // and 1 (even), so it is stored as 1; one rounding's tolerance covers it.
  EXPECT_EQ(round_to_storage(1.0f - 0x1.0p-9f, Storage::kBF16), 1.0f);
  EXPECT_LE(0x1.0p-9, storage_tolerance(Storage::kBF16, 1, 1.0));
}

TEST(EmbeddingTest, Bf16AndF16StayWithinToleranceOfF32) {
  const std::vector<std::vector<I64>> ids = {{{0, 1, 1, 2}}, {{1, 2}}, {{0, 0, 0}}, {{2}}, {{1}}};
  const std::vector<std::vector<std::vector<float>>> fill = {{{0.3f, -0.7f, 0.2f, 0.9f}}, {{0.1f, -0.4f}}, {{0.5f, 0.5f, -0.2f}}, {{0.8f}}, {{-0.6f}}};
  const std::int64_t touched[3] = {1 + 2, 1 + 3, 1 + 3};  // roundings per row: init + steps that touch it
  for (auto kind : {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam}) {
    EmbeddingOptions eo;
    eo.dim = 4;
    eo.optimizer.kind = kind;
    eo.optimizer.lr = 0.05;
    std::vector<double> max_abs(12, 0.0);
    // The f32 trajectory bounds |value| (replayed step by step).
    for (std::size_t s = 0; s <= ids.size(); ++s) {
      const std::vector<std::vector<I64>> pre(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(s));
      const std::vector<std::vector<std::vector<float>>> pf(fill.begin(), fill.begin() + static_cast<std::ptrdiff_t>(s));
      const auto t = Runner::run(even_range_book(3, 1), eo, pre, pf);
      for (std::size_t i = 0; i < 12; ++i) max_abs[i] = std::max(max_abs[i], std::fabs(static_cast<double>(t[i])));
    }
    const auto f32 = Runner::run(even_range_book(3, 1), eo, ids, fill);
    for (auto st : {Storage::kBF16, Storage::kF16}) {
      eo.storage = st;
      const auto low = Runner::run(even_range_book(3, 1), eo, ids, fill);
      int differ = 0;
      for (std::size_t i = 0; i < 12; ++i) {
        const double tol = storage_tolerance(st, touched[i / 4], max_abs[i]);
        EXPECT_LE(std::fabs(static_cast<double>(low[i]) - f32[i]), tol) << to_string(kind) << " " << to_string(st) << " element " << i;
        differ += low[i] != f32[i];
      }
      EXPECT_GT(differ, 0) << "16-bit storage rounded nothing";
    }
  }
}

TEST(EmbeddingTest, LostUpdateBugDropsAllButTheLastSource) {
  // Rows 0 and 1 (both on rank 0) get 1 and 10 from rank 0, 2 and 20 from rank 1: correct
  // SGD (lr 1) subtracts 3 and 30; the racy owner applies each source's update to the same
  // snapshot and keeps the last, subtracting 2 and 20. Row 3 (rank 1's) gets 5 from rank 0
  // only: one source, no race.
  EmbeddingOptions eo;
  eo.dim = 2;
  eo.optimizer.lr = 1;
  const std::vector<std::vector<I64>> ids = {{{0, 1, 3}, {1, 0}}};
  const std::vector<std::vector<std::vector<float>>> fill = {{{1.0f, 10.0f, 5.0f}, {20.0f, 2.0f}}};
  auto w = [](std::int64_t row, std::int64_t col) { return embedding_init(0, row, col, 0.5); };
  const auto right = Runner::run(even_range_book(4, 2), eo, ids, fill);
  eo.lost_update_bug = true;
  const auto racy = Runner::run(even_range_book(4, 2), eo, ids, fill);
  for (std::int64_t c = 0; c < 2; ++c) {
    SCOPED_TRACE("column " + std::to_string(c));
    EXPECT_EQ(right[0 * 2 + c], w(0, c) - 3.0f);
    EXPECT_EQ(right[1 * 2 + c], w(1, c) - 30.0f);
    EXPECT_EQ(right[3 * 2 + c], w(3, c) - 5.0f);
    EXPECT_EQ(racy[0 * 2 + c], w(0, c) - 2.0f);
    EXPECT_EQ(racy[1 * 2 + c], w(1, c) - 20.0f);
    EXPECT_EQ(racy[3 * 2 + c], w(3, c) - 5.0f);
    EXPECT_EQ(racy[2 * 2 + c], w(2, c));  // untouched
  }
}

// A transport at world size 2 seen from rank 0, whose peer asks for `asked` (local rows of
// rank 0's part); rank 0 itself asks for nothing.
class PeerAsks final : public EmbeddingTransport {
 public:
  explicit PeerAsks(I64 asked) : asked_(std::move(asked)) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  I64 exchange_ids(const I64&, const I64&, I64& recv_counts) override {
    recv_counts = {0, static_cast<std::int64_t>(asked_.size())};
    return asked_;
  }
  std::vector<float> exchange_values(const std::vector<float>&, const I64&, const I64& recv_counts) override {
    return std::vector<float>(static_cast<std::size_t>(recv_counts[0] + recv_counts[1]) * 2, 0.0f);
  }

 private:
  I64 asked_;
};

TEST(EmbeddingTest, APeersRequestOutsideThePartIsRefusedAndNamed) {
  // Rank 0 owns rows 0..2 of 5: local rows 0, 1 and 2 exist, -1 and 3 do not.
  EmbeddingOptions eo;
  eo.dim = 2;
  const I64 none;
  for (std::int64_t row : {-1, 3}) {
    PeerAsks tp({0, row});
    DistEmbedding emb(even_range_book(5, 2), eo, tp);
    try {
      emb.pull(span_of(none));
      ADD_FAILURE() << "local row " << row << " was served";
    } catch (const std::out_of_range& e) {
      EXPECT_CONTAINS(e.what(), "rank 0 was asked for local row " + std::to_string(row) + " of a part with 3 rows");
    }
  }
  PeerAsks fine({2, 0});
  DistEmbedding emb(even_range_book(5, 2), eo, fine);
  EXPECT_NO_THROW(emb.pull(span_of(none)));
}

TEST(EmbeddingTest, NamesParseAndRejectUnknowns) {
  EXPECT_EQ(optimizer_from_string("adagrad"), OptimizerKind::kAdagrad);
  EXPECT_EQ(storage_from_string("bf16"), Storage::kBF16);
  EXPECT_EQ(duplicate_reduce_from_string("mean"), DuplicateReduce::kMean);
  EXPECT_THROW(optimizer_from_string("adamw"), std::invalid_argument);
  EXPECT_THROW(storage_from_string("f64"), std::invalid_argument);
  EXPECT_THROW(duplicate_reduce_from_string("max"), std::invalid_argument);
}

}  // namespace
}  // namespace lockstep::ref

// ---- the dense LibTorch reference against the reference semantics ----

namespace lockstep::ref {
namespace {

// D = 37 exercises both the vectorised body and the scalar tail of LibTorch's CPU kernels.
TEST(DenseEmbeddingTest, LibTorchMatchesTheReferenceBitForBit) {
  constexpr std::int64_t kRows = 31, kDim = 37;
  std::vector<I64> batches;
  std::vector<std::vector<float>> grads;
  for (int s = 0; s < 6; ++s) {
    I64 ids;
    std::vector<float> g;
    for (int p = 0; p < 5 + 3 * s; ++p) {
      ids.push_back(static_cast<std::int64_t>(philox_u64(7, static_cast<std::uint64_t>(p), static_cast<std::uint64_t>(s)) % (p % 2 ? 4 : kRows)));
      for (std::int64_t c = 0; c < kDim; ++c) g.push_back(static_cast<float>(uniform01(philox_u64(8, static_cast<std::uint64_t>(p * kDim + c), static_cast<std::uint64_t>(s))) * 2 - 1));
    }
    batches.push_back(ids);
    grads.push_back(g);
  }
  batches[2].clear();  // a step without ids
  grads[2].clear();
  for (auto kind : {OptimizerKind::kSgd, OptimizerKind::kAdagrad, OptimizerKind::kAdam}) {
    for (auto reduce : {DuplicateReduce::kSum, DuplicateReduce::kMean}) {
      EmbeddingOptions eo;
      eo.dim = kDim;
      eo.seed = 3;
      eo.reduce = reduce;
      eo.optimizer.kind = kind;
      eo.optimizer.lr = 0.03;
      std::vector<float> init;
      for (std::int64_t r = 0; r < kRows; ++r) {
        for (std::int64_t c = 0; c < kDim; ++c) init.push_back(embedding_init(3, r, c, 0.5));
      }
      torchref::DenseEmbedding dense(kRows, kDim, init, eo.optimizer, reduce);
      Hub hub(1);
      TestTransport tp(hub, 0);
      DistEmbedding emb(even_range_book(kRows, 1), eo, tp);
      for (std::size_t s = 0; s < batches.size(); ++s) {
        const auto before = dense.step(batches[s], grads[s]);
        const auto pulled = emb.pull(span_of(batches[s])).to_host();
        ASSERT_EQ(before.size(), pulled.size());
        EXPECT_EQ(std::memcmp(before.data(), pulled.data(), before.size() * 4), 0) << to_string(kind) << " step " << s;
        emb.accumulate_grad(span_of(batches[s]), grads[s].data());
        emb.step();
        const auto want = dense.weights();
        const auto got = emb.shard().to_f32();
        for (std::size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(std::memcmp(&want[i], &got[i], 4), 0)
              << to_string(kind) << "/" << to_string(reduce) << " step " << s << " row " << i / kDim << " col " << i % kDim << ": torch "
              << want[i] << " reference " << got[i];
        }
      }
      EXPECT_NE(dense.weights(), init);
    }
  }
}

}  // namespace
}  // namespace lockstep::ref
