// reference/train's precision and parameters: bf16 rounding (closed form, and against the
// harness's conversion), collate's rounding and gradient dtype per precision, seed-fixed Glorot
// initialisation, and the optimizers (SGD with momentum, Adam) in closed form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "harness/comm/dtype.h"
#include "reference/common/philox.h"
#include "reference/train/sage.h"
#include "tests/training_test_util.h"

namespace lockstep::ref::train {
namespace {

using Ids = std::vector<std::int64_t>;

using train_test::Fixture;
using train_test::make_fixture;
using train_test::sample;

// ---- precision and collate -------------------------------------------------------------------

TEST(Bf16RoundingTest, ClosedFormCases) {
  EXPECT_EQ(round_bf16(1.0f), 1.0f);
  EXPECT_EQ(round_bf16(1.0f + 0x1.0p-8f), 1.0f);                            // tie, even stays
  EXPECT_EQ(round_bf16(1.0f + 0x1.0p-7f + 0x1.0p-8f), 1.0f + 0x1.0p-6f);     // tie, odd rounds up
  EXPECT_EQ(round_bf16(1.0f + 0x1.0p-8f + 0x1.0p-20f), 1.0f + 0x1.0p-7f);   // above the tie
  EXPECT_EQ(round_bf16(-(1.0f + 0x1.0p-8f + 0x1.0p-20f)), -(1.0f + 0x1.0p-7f));
  EXPECT_EQ(round_bf16(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(round_bf16(-0.0f)));
  EXPECT_EQ(round_bf16(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_bf16(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(Bf16RoundingTest, AgreesWithTheHarnessConversion) {
  for (std::uint64_t i = 0; i < 20000; ++i) {
    const float v = static_cast<float>((uniform01(philox_u64(1, i, 0)) - 0.5) * std::ldexp(1.0, static_cast<int>(i % 40) - 20));
    EXPECT_EQ(round_bf16(v), comm::to_float(comm::to_bfloat16(v))) << v;
  }
}

TEST(CollateTest, OnlyTheBf16ModesRoundAndTheyDecideTheGradientDtype) {
  const Fixture f = make_fixture(200, 800, 4, 3, 2);
  const Ids seeds(f.train.begin(), f.train.begin() + 5);
  const auto blocks = sample(f, seeds, {3, 3}, 0);
  std::vector<float> x;
  node_features(2, 4, blocks.blocks.back().src_nodes, x);
  const std::vector<std::int32_t> y(seeds.size(), 1);
  const Batch f32 = collate(blocks, x, 4, y, Precision::kF32);
  EXPECT_EQ(f32.inputs, x);
  EXPECT_EQ(f32.compute, BatchDType::kF32);
  EXPECT_EQ(f32.grad_sync, BatchDType::kF32);
  int changed = 0;
  for (Precision p : {Precision::kBF16, Precision::kBF16Reduce}) {
    const Batch b = collate(blocks, x, 4, y, p);
    ASSERT_EQ(b.inputs.size(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(b.inputs[i], comm::to_float(comm::to_bfloat16(x[i])));
      changed += b.inputs[i] != x[i];
    }
    EXPECT_EQ(b.compute, BatchDType::kBF16);
    EXPECT_EQ(b.grad_sync, p == Precision::kBF16Reduce ? BatchDType::kBF16 : BatchDType::kF32);
  }
  EXPECT_GT(changed, 0);
  EXPECT_THROW(collate(blocks, std::vector<float>(3), 4, y, Precision::kF32), std::invalid_argument);
  EXPECT_EQ(precision_from_string("bf16_reduce"), Precision::kBF16Reduce);
  EXPECT_EQ(to_string(Precision::kBF16), "bf16");
  EXPECT_THROW(precision_from_string("fp16"), std::invalid_argument);
}

// ---- parameters and optimizer -----------------------------------------------------------------

TEST(ParamsTest, InitIsSeedFixedGlorotAndChecksummed) {
  SageConfig c;
  EXPECT_EQ(num_params(c), 2 * 16 * 32 + 32 + 2 * 32 * 4 + 4);
  const auto a = init_params(c, 1), b = init_params(c, 1), d = init_params(c, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, d);
  EXPECT_EQ(param_checksum(a), param_checksum(b));
  EXPECT_NE(param_checksum(a), param_checksum(d));
  const double limit0 = std::sqrt(6.0 / (16 + 32));
  for (std::size_t i = 0; i < 2 * 16 * 32; ++i) EXPECT_LE(std::fabs(a[i]), limit0);
  for (std::size_t i = 2 * 16 * 32; i < 2 * 16 * 32 + 32; ++i) EXPECT_EQ(a[i], 0.0f);  // bias
}

TEST(OptimizerTest, SgdMomentumAndAdamInClosedForm) {
  Optimizer sgd;
  sgd.lr = 0.5f;
  sgd.momentum = 0.5f;
  std::vector<float> p{1.0f, -2.0f};
  sgd.step(p, {0.25f, 1.0f});  // v = g
  EXPECT_EQ(p, (std::vector<float>{0.875f, -2.5f}));
  sgd.step(p, {0.25f, 1.0f});  // v = 0.5 g + g = 1.5 g
  EXPECT_EQ(p, (std::vector<float>{0.6875f, -3.25f}));
  Optimizer adam;
  adam.kind = Optimizer::Kind::kAdam;
  adam.lr = 0.01f;
  std::vector<float> q{1.0f, 1.0f};
  adam.step(q, {4.0f, -0.001f});  // first bias-corrected step: lr * g / (|g| + eps)
  EXPECT_NEAR(q[0], 1.0f - 0.01f, 1e-6f);
  EXPECT_NEAR(q[1], 1.0f + 0.01f, 1e-5f);
  EXPECT_THROW(adam.step(q, {1.0f}), std::invalid_argument);
}

}  // namespace
}  // namespace lockstep::ref::train
