// reference/train: the hand-written backward against central finite differences (double),
// world-size invariance at the reference level (a batch split over ranks gives the same logits
// and, summed, the same gradient), mean aggregation in closed form, the node data, and label
// learnability. bf16 and the optimizer are tested in training_precision_test.cpp, the suite's
// comparison of per-step series and the workload's keys in training_suite_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "reference/common/philox.h"
#include "reference/graph/graph.h"
#include "reference/sampling/neighbor.h"
#include "reference/split/split.h"
#include "reference/train/sage.h"
#include "tests/training_test_util.h"

namespace lockstep::ref::train {
namespace {

using Ids = std::vector<std::int64_t>;

using train_test::Fixture;
using train_test::make_fixture;
using train_test::sample;

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

double loss_of(const SageConfig& c, const std::vector<double>& p, const SampledBlocks& b, const std::vector<double>& x,
               const std::vector<std::int32_t>& y) {
  const auto acts = forward(c, p, b, x);
  std::vector<double> dl;
  double s = 0;
  for (double l : cross_entropy(c, b, acts.logits, y, dl)) s += l;
  return s;
}

// ---- gradient check -------------------------------------------------------------------------

class GradientCheckTest : public ::testing::TestWithParam<std::tuple<int, SageConfig::Activation>> {};

TEST_P(GradientCheckTest, BackwardMatchesCentralDifferences) {
  const auto [layers, act] = GetParam();
  SageConfig c;
  c.in_dim = 5;
  c.hidden = 6;
  c.num_classes = 3;
  c.num_layers = layers;
  c.activation = act;
  const Fixture f = make_fixture(60, 240, c.in_dim, 3, 11);
  const Ids seeds(f.train.begin(), f.train.begin() + 6);
  const auto blocks = sample(f, seeds, Ids(static_cast<std::size_t>(layers), 3), 0);
  std::vector<float> xf;
  node_features(11, c.in_dim, blocks.blocks.back().src_nodes, xf);
  const auto x = to_double(xf);
  std::vector<std::int32_t> y;
  for (auto v : seeds) y.push_back(f.labels[static_cast<std::size_t>(v)]);
  // Non-zero biases, so every parameter's gradient is exercised away from symmetric points.
  auto p = to_double(init_params(c, 3));
  for (std::size_t i = 0; i < p.size(); ++i) p[i] += 0.05 * std::sin(static_cast<double>(i));

  const auto acts = forward(c, p, blocks, x);
  std::vector<double> dlogits;
  (void)cross_entropy(c, blocks, acts.logits, y, dlogits);
  std::vector<double> grads(p.size(), 0.0);
  std::vector<double> dx;
  backward(c, p, blocks, acts, dlogits, grads, &dx);

  // Compares `analytic` with central differences of the loss in each entry of `v` (the
  // parameters or the inputs, as `loss_at` reads it); returns how many carry a gradient.
  const auto check = [](std::vector<double> v, const std::vector<double>& analytic, const auto& loss_at, const char* what) {
    const double h = 1e-6;
    int nonzero = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double keep = v[i];
      v[i] = keep + h;
      const double up = loss_at(v);
      v[i] = keep - h;
      const double down = loss_at(v);
      v[i] = keep;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(analytic[i], numeric, 1e-6 + 1e-5 * std::fabs(numeric)) << what << " " << i << " of " << v.size();
      nonzero += std::fabs(numeric) > 1e-6;
    }
    return nonzero;
  };
  // The input-feature gradient (learnable inputs: DistEmbedding rows).
  ASSERT_EQ(dx.size(), x.size());
  const int dx_nonzero = check(x, dx, [&](const std::vector<double>& xv) { return loss_of(c, p, blocks, xv, y); }, "input");
  EXPECT_GT(dx_nonzero, static_cast<int>(x.size()) / 4) << "too few inputs carry a gradient to make the check meaningful";
  std::vector<double> grads_again(p.size(), 0.0);
  backward(c, p, blocks, acts, dlogits, grads_again);
  EXPECT_EQ(grads_again, grads) << "asking for the input gradient must not change the parameter gradient";

  const int nonzero = check(p, grads, [&](const std::vector<double>& pv) { return loss_of(c, pv, blocks, x, y); }, "parameter");
  EXPECT_GT(nonzero, static_cast<int>(p.size()) / 2) << "too few parameters carry a gradient to make the check meaningful";
}

INSTANTIATE_TEST_SUITE_P(LayersXActivation, GradientCheckTest,
                         ::testing::Combine(::testing::Values(1, 2, 3),
                                            ::testing::Values(SageConfig::Activation::kRelu, SageConfig::Activation::kSilu)),
                         [](const auto& info) {
                           return "layers" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == SageConfig::Activation::kRelu ? "_relu" : "_silu");
                         });

// ---- world-size invariance at the reference level -------------------------------------------

class SplitInvarianceTest : public ::testing::TestWithParam<int> {};

TEST_P(SplitInvarianceTest, SharesGiveTheSameLogitsAndSummedGradient) {
  const int ws = GetParam();
  SageConfig c;
  c.activation = SageConfig::Activation::kSilu;
  const Fixture f = make_fixture(1000, 8000, c.in_dim, 4, 5);
  const Ids global(f.train.begin(), f.train.begin() + 61);  // does not divide by 2, 3 or 4
  const auto params = init_params(c, 5);

  auto run = [&](const Ids& seeds, std::vector<float>& grads, std::vector<float>& logits) {
    const auto blocks = sample(f, seeds, {5, 5}, 3);
    std::vector<float> x;
    node_features(5, c.in_dim, blocks.blocks.back().src_nodes, x);
    std::vector<std::int32_t> y;
    for (auto v : seeds) y.push_back(f.labels[static_cast<std::size_t>(v)]);
    const Batch b = collate(blocks, x, c.in_dim, y, Precision::kF32);
    const double loss = train_step_grads(c, params, b, grads);
    if (seeds.empty()) return loss;
    const auto acts = forward(c, params, b.blocks, b.inputs);
    for (auto row : b.blocks.seed_to_output) {
      for (std::int64_t k = 0; k < c.num_classes; ++k) logits.push_back(acts.logits[static_cast<std::size_t>(row * c.num_classes + k)]);
    }
    return loss;
  };
  std::vector<float> whole(params.size(), 0.0f), whole_logits;
  const double whole_loss = run(global, whole, whole_logits);

  std::vector<float> summed(params.size(), 0.0f), split_logits;
  double split_loss = 0;
  for (const auto& share : rank_split(global, ws)) {
    std::vector<float> g(params.size(), 0.0f);
    split_loss += run(share, g, split_logits);
    for (std::size_t i = 0; i < g.size(); ++i) summed[i] += g[i];
  }
  // A sample's computation never depends on the other samples of its batch: bit-identical.
  EXPECT_EQ(split_logits, whole_logits);
  EXPECT_NEAR(split_loss, whole_loss, 1e-9 * std::fabs(whole_loss));
  double scale = 0;
  for (float g : whole) scale = std::max(scale, static_cast<double>(std::fabs(g)));
  ASSERT_GT(scale, 0.0);
  for (std::size_t i = 0; i < whole.size(); ++i) {
    EXPECT_NEAR(summed[i], whole[i], 1e-5 * scale) << "parameter " << i << " with world size " << ws;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SplitInvarianceTest, ::testing::Values(1, 2, 3, 4, 61, 64));

// ---- data and learnability -------------------------------------------------------------------

// Mean aggregation divides by the node's own in-degree in the block, not by the fanout: one
// destination with two sampled neighbours whose inputs are 2 and 4, w_neigh = 1, w_self = 0 and
// no bias gives logits (2 + 4) / 2 = 3 exactly.
TEST(SageForwardTest, MeanDividesByTheSampledInDegree) {
  SageConfig c;
  c.in_dim = 1;
  c.num_classes = 2;
  c.num_layers = 1;
  SampledBlocks b;
  b.seeds = {0};
  b.seed_to_output = {0};
  Block blk;
  blk.dst_nodes = {0};
  blk.src_nodes = {0, 1, 2};
  blk.edge_src = {1, 2};
  blk.edge_dst = {0, 0};
  blk.edge_ids = {0, 1};
  b.blocks = {blk};
  const auto shapes = layer_shapes(c);
  ASSERT_EQ(shapes.size(), 1u);
  std::vector<float> p(static_cast<std::size_t>(num_params(c)), 0.0f);
  for (std::int64_t k = 0; k < 2; ++k) p[static_cast<std::size_t>(shapes[0].w_neigh + k)] = 1.0f;
  const auto acts = forward(c, p, b, std::vector<float>{0.0f, 2.0f, 4.0f});
  ASSERT_EQ(acts.logits.size(), 2u);
  EXPECT_EQ(acts.logits[0], 3.0f);
  EXPECT_EQ(acts.logits[1], 3.0f);
  // The same destination with one neighbour (input 4): the mean is 4.
  b.blocks[0].edge_src = {2};
  b.blocks[0].edge_dst = {0};
  b.blocks[0].edge_ids = {1};
  EXPECT_EQ(forward(c, p, b, std::vector<float>{0.0f, 2.0f, 4.0f}).logits[0], 4.0f);
  // One parameter more or fewer than num_params is refused.
  for (const std::size_t n : {p.size() + 1, p.size() - 1}) {
    const std::vector<float> wrong(n, 0.0f);
    try {
      (void)forward(c, wrong, b, std::vector<float>{0.0f, 2.0f, 4.0f});
      ADD_FAILURE() << n << " parameters were accepted; the model has " << p.size();
    } catch (const std::invalid_argument& e) {
      EXPECT_STREQ(e.what(), "forward: wrong parameter count");
    }
  }
}

// Mean aggregation, forward and backward, in closed form. One layer (in_dim 1, 2 classes) on a
// hand-built block whose destinations have in-degree 2, 3 and 5 (below, equal to and above a
// fanout of 3) and 0 (isolated). w_neigh = [1, 0], w_self = [0, 1], bias = [0.125, 0], so
// logits[d] = [mean of d's neighbour inputs + 0.125, d's own input]. Backward gets dlogits[d] =
// [c_d, 0] with c = 1, 2, 3, 4, so by hand:
//   d/d w_neigh[0][0] = sum_d mean_d c_d,   d/d w_self[0][0] = sum_d self_d c_d,   d/d bias[0] = 10,
//   d/d input of a neighbour of d = w_neigh[0][0] c_d / deg(d) = c_d / deg(d), of a destination 0.
class SageMeanClosedFormTest : public ::testing::Test {
 protected:
  SageMeanClosedFormTest() {
    c_.in_dim = 1;
    c_.num_classes = 2;
    c_.num_layers = 1;
    Block blk;
    blk.dst_nodes = {100, 101, 102, 103};
    blk.src_nodes = {100, 101, 102, 103, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    blk.edge_dst = {0, 0, 1, 1, 1, 2, 2, 2, 2, 2};
    blk.edge_src = {4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
    for (std::int64_t e = 0; e < 10; ++e) blk.edge_ids.push_back(e);
    b_.seeds = {100, 101, 102, 103};
    b_.seed_to_output = {0, 1, 2, 3};
    b_.blocks = {blk};
    const auto s = layer_shapes(c_).at(0);
    p_.assign(static_cast<std::size_t>(num_params(c_)), 0.0f);
    p_[static_cast<std::size_t>(s.w_neigh)] = 1.0f;     // w_neigh[0][0]
    p_[static_cast<std::size_t>(s.w_self + 1)] = 1.0f;  // w_self[0][1]
    p_[static_cast<std::size_t>(s.bias)] = 0.125f;
    shape_ = s;
  }
  // Own inputs 0.5, 0.25, 0.75, 1 (exact in bf16), then the neighbours': d0 gets 1 + 2^-8 and 3,
  // d1 gets 1 + 2^-8, 1 + 2^-8 and 2, d2 gets 1, 1, 1, 1 and 16. 1 + 2^-8 is halfway between
  // two bf16 values and rounds to 1 (ties to even).
  static std::vector<float> inputs() {
    const float t = 1.00390625f;
    return {0.5f, 0.25f, 0.75f, 1.0f, t, 3, t, t, 2, 1, 1, 1, 1, 16};
  }
  void check(const std::vector<float>& in, const double (&mean)[4]) {
    const auto acts = forward(c_, p_, b_, in);
    ASSERT_EQ(acts.logits.size(), 8u);
    const double self[4] = {0.5, 0.25, 0.75, 1.0};
    for (int d = 0; d < 4; ++d) {
      EXPECT_NEAR(acts.logits[2 * d], mean[d] + 0.125, 1e-6) << "destination " << d;
      EXPECT_EQ(acts.logits[2 * d + 1], self[d]) << "destination " << d;
    }
    std::vector<float> dlogits(8, 0.0f), grads(p_.size(), 0.0f), dinputs;
    for (int d = 0; d < 4; ++d) dlogits[2 * d] = static_cast<float>(d + 1);
    backward(c_, p_, b_, acts, dlogits, grads, &dinputs);
    double want_neigh = 0;
    for (int d = 0; d < 4; ++d) want_neigh += mean[d] * (d + 1);
    EXPECT_NEAR(grads[static_cast<std::size_t>(shape_.w_neigh)], want_neigh, 1e-5);
    EXPECT_EQ(grads[static_cast<std::size_t>(shape_.w_neigh + 1)], 0.0f);
    EXPECT_NEAR(grads[static_cast<std::size_t>(shape_.w_self)], 0.5 * 1 + 0.25 * 2 + 0.75 * 3 + 1.0 * 4, 1e-6);
    EXPECT_EQ(grads[static_cast<std::size_t>(shape_.bias)], 10.0f);
    const std::vector<double> want_in{0, 0, 0, 0, 1.0 / 2, 1.0 / 2, 2.0 / 3, 2.0 / 3, 2.0 / 3, 3.0 / 5, 3.0 / 5, 3.0 / 5, 3.0 / 5, 3.0 / 5};
    ASSERT_EQ(dinputs.size(), want_in.size());
    for (std::size_t i = 0; i < want_in.size(); ++i) EXPECT_NEAR(dinputs[i], want_in[i], 1e-6) << "input row " << i;
  }
  SageConfig c_;
  SampledBlocks b_;
  std::vector<float> p_;
  LayerShape shape_;
};

TEST_F(SageMeanClosedFormTest, Fp32) {
  const double t = 1.00390625;
  const double mean[4] = {(t + 3) / 2, (t + t + 2) / 3, 20.0 / 5, 0};
  check(inputs(), mean);
}

TEST_F(SageMeanClosedFormTest, Bf16RoundsTheInputsInCollateOnly) {
  const Batch batch = collate(b_, inputs(), 1, {0, 0, 0, 0}, Precision::kBF16);
  const double mean[4] = {(1.0 + 3) / 2, (1.0 + 1 + 2) / 3, 20.0 / 5, 0};
  check(batch.inputs, mean);
}

TEST(TrainDataTest, FeatureFollowsThePhiloxDefinition) {
  // Re-derived from sage.h's text: stream 20, c0 = node, sub = j / 2, word j % 2.
  for (std::int64_t v : {0, 1, 977}) {
    for (std::int64_t j : {0, 1, 2, 7}) {
      const auto w = philox_u64x2(42, static_cast<std::uint64_t>(v), (std::uint64_t{20} << 32) | static_cast<std::uint64_t>(j / 2));
      const double expect = 2.0 * (static_cast<double>(w[static_cast<std::size_t>(j % 2)] >> 11) * 0x1.0p-53) - 1.0;
      EXPECT_EQ(node_feature(42, v, j), static_cast<float>(expect)) << v << ' ' << j;
    }
  }
}

TEST(TrainDataTest, LabelsOnATinyGraphFollowTheDefinition) {
  // path4 reversed: node 0 has no in-neighbor, node k has in-neighbor k-1.
  const CsrGraph rows = sampling_graph(tiny("path4"), true);
  const std::int64_t dim = 3;
  const int classes = 2;
  const auto labels = node_labels(rows, 9, dim, classes);
  for (std::int64_t v = 0; v < 4; ++v) {
    double score[2] = {0, 0};
    for (int cl = 0; cl < classes; ++cl) {
      for (std::int64_t j = 0; j < dim; ++j) {
        const double pj = 2.0 * uniform01(philox_u64(9, static_cast<std::uint64_t>(cl * dim + j), std::uint64_t{21} << 32)) - 1.0;
        const double x = node_feature(9, v, j) + (v > 0 ? static_cast<double>(node_feature(9, v - 1, j)) : 0.0);
        score[cl] += pj * x;
      }
    }
    EXPECT_EQ(labels[static_cast<std::size_t>(v)], score[1] > score[0] ? 1 : 0) << "node " << v;
  }
}

// Nodes with several in-neighbours: node v >= 1 has in-neighbours max(0, v-3) .. v-1 (1 to 3 of
// them), so the mean is over up to three feature rows. The expected labels follow the
// definition in sage.h with the features and projection drawn here; the test also checks that
// a label using only the first in-neighbour would differ somewhere, so it can tell the two.
TEST(TrainDataTest, LabelsAverageEveryInNeighbour) {
  const std::int64_t n = 24, dim = 6;
  const int classes = 4;
  const std::uint64_t seed = 5;
  CsrGraph rows;
  rows.num_nodes = n;
  rows.indptr = {0};
  for (std::int64_t v = 0; v < n; ++v) {
    for (std::int64_t u = std::max<std::int64_t>(0, v - 3); u < v; ++u) {
      rows.indices.push_back(u);
      rows.edge_ids.push_back(static_cast<std::int64_t>(rows.edge_ids.size()));
    }
    rows.indptr.push_back(static_cast<std::int64_t>(rows.indices.size()));
  }
  auto label = [&](std::int64_t v, bool first_only) {
    const std::int64_t lo = std::max<std::int64_t>(0, v - 3), hi = first_only ? std::min(v, lo + 1) : v;
    int best = 0;
    double best_score = 0;
    for (int c = 0; c < classes; ++c) {
      double s = 0;
      for (std::int64_t j = 0; j < dim; ++j) {
        double mean = 0;
        for (std::int64_t u = lo; u < hi; ++u) mean += node_feature(seed, u, j);
        if (v > 0) mean /= static_cast<double>(v - lo);
        const double pj = 2.0 * uniform01(philox_u64(seed, static_cast<std::uint64_t>(c * dim + j), std::uint64_t{21} << 32)) - 1.0;
        s += pj * (node_feature(seed, v, j) + mean);
      }
      if (c == 0 || s > best_score) {
        best = c;
        best_score = s;
      }
    }
    return best;
  };
  const auto labels = node_labels(rows, seed, dim, classes);
  ASSERT_EQ(labels.size(), static_cast<std::size_t>(n));
  int differ = 0;
  for (std::int64_t v = 0; v < n; ++v) {
    EXPECT_EQ(labels[static_cast<std::size_t>(v)], label(v, false)) << "node " << v;
    differ += label(v, true) != label(v, false);
  }
  EXPECT_GT(differ, 0) << "no node's label depends on its later in-neighbours: the test cannot tell";
  // Bad arguments are named.
  EXPECT_THROW((void)node_labels(rows, seed, dim, 1), std::invalid_argument);
  try {
    (void)node_labels(rows, seed, dim, 1);
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "node_labels: num_classes must be >= 2, got 1");
  }
  try {
    (void)node_labels(rows, seed, 0, classes);
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "node_labels: dim must be >= 1, got 0");
  }
}

TEST(TrainDataTest, SplitIsDisjointAndSeedFixed) {
  Ids a, b, a2, b2;
  train_eval_split(100, 3, 60, 30, a, b);
  train_eval_split(100, 3, 60, 30, a2, b2);
  EXPECT_EQ(a, a2);
  EXPECT_EQ(b, b2);
  std::vector<int> seen(100, 0);
  for (auto v : a) ++seen[static_cast<std::size_t>(v)];
  for (auto v : b) ++seen[static_cast<std::size_t>(v)];
  int total = 0;
  for (int s : seen) {
    EXPECT_LE(s, 1);
    total += s;
  }
  EXPECT_EQ(total, 90);
  EXPECT_THROW(train_eval_split(100, 3, 80, 30, a, b), std::invalid_argument);
}

TEST(TrainLearnabilityTest, AccuracyRisesWellAboveChance) {
  SageConfig c;  // 16 features, hidden 32, 4 classes, 2 layers
  c.activation = SageConfig::Activation::kSilu;
  const Fixture f = make_fixture(2000, 16000, c.in_dim, 4, 0);
  std::vector<int> count(4, 0);
  for (auto l : f.labels) ++count[static_cast<std::size_t>(l)];
  for (int n : count) EXPECT_GT(n, 2000 / 10) << "classes should be roughly balanced";
  auto params = init_params(c, 0);
  auto accuracy = [&] {
    const auto blocks = sample(f, f.eval, {5, 5}, 999);
    std::vector<float> x;
    node_features(0, c.in_dim, blocks.blocks.back().src_nodes, x);
    const auto pred = predictions(c, blocks, forward(c, params, blocks, x).logits);
    int ok = 0;
    for (std::size_t i = 0; i < pred.size(); ++i) ok += pred[i] == f.labels[static_cast<std::size_t>(f.eval[i])];
    return static_cast<double>(ok) / static_cast<double>(pred.size());
  };
  const double before = accuracy();
  Optimizer opt;
  opt.lr = 0.1f;
  const std::int64_t batch = 64;
  for (std::int64_t s = 0; s < 40; ++s) {
    Ids seeds;
    for (std::int64_t i = 0; i < batch; ++i) seeds.push_back(f.train[static_cast<std::size_t>((s * batch + i) % static_cast<std::int64_t>(f.train.size()))]);
    const auto blocks = sample(f, seeds, {5, 5}, s);
    std::vector<float> x;
    node_features(0, c.in_dim, blocks.blocks.back().src_nodes, x);
    std::vector<std::int32_t> y;
    for (auto v : seeds) y.push_back(f.labels[static_cast<std::size_t>(v)]);
    std::vector<float> g(params.size(), 0.0f);
    train_step_grads(c, params, collate(blocks, x, c.in_dim, y, Precision::kF32), g);
    for (auto& v : g) v /= static_cast<float>(batch);
    opt.step(params, g);
  }
  const double after = accuracy();
  EXPECT_LT(before, 0.4);
  EXPECT_GT(after, 0.25 + 0.35) << "chance is 0.25; before training " << before;
}

}  // namespace
}  // namespace lockstep::ref::train
