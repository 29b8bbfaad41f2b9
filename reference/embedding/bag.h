#pragma once
// Embedding bags (torch.nn.EmbeddingBag, FBGEMM's pooled lookups, TorchRec's
// KeyedJaggedTensor): a batch of bags, bag b holding the ids at positions
// [offsets[b], offsets[b + 1]) of the id list, each pooled into one output row.
//
// Forward, per bag, in f32 with each operation rounded once, in position order from +0.0f:
//   sum:                  out = ((0 + r_1) + r_2) + ... + r_k
//   sum, sample weights:  out = ((0 + w_1 * r_1) + w_2 * r_2) + ... + w_k * r_k
//   mean:                 out = (((0 + r_1) + r_2) + ... + r_k) / float(k)
//   empty bag (k = 0):    out = 0 (for mean too, as torch: no division)
// Backward (torch's embedding_bag backward), the gradient row of the id at position p of bag b,
// whose output gradient is g_b:
//   sum: g_b;   sum, sample weights: g_b * w_p;   mean: g_b * (1 / float(k)), the reciprocal
//   rounded to f32 first (torch multiplies by the inverse bag size; g / k can differ).
// Those rows then reach the optimizer as one id's rows do (optimizer.h): duplicate ids, within
// a bag or across bags, are reduced in position order. Sample weights with mean pooling are
// refused, as torch refuses them.
#include <cstdint>
#include <string>
#include <vector>

#include "reference/common/philox.h"

namespace lockstep::ref {

enum class BagPooling : std::uint8_t { kSum, kMean };

std::string to_string(BagPooling p);  // "sum", "mean"
// Parses "sum" or "mean"; throws std::invalid_argument naming an unknown name.
BagPooling bag_pooling_from_string(const std::string& name);

// The per-sample weight of id position p of step s of the harness's bags: 2^k, k uniform in
// {-2, ..., 2} from philox_u64(seed, p, stream_counter(kEmbeddingWeights, s)). Powers of two
// keep w * r exact, so a fused multiply-add and a product then a sum agree.
inline float embedding_bag_weight(std::uint64_t seed, std::int64_t s, std::int64_t p) {
  const auto bits = philox_u64(seed, static_cast<std::uint64_t>(p), stream_counter(streams::kEmbeddingWeights, static_cast<std::uint32_t>(s)));
  const int k = static_cast<int>(uniform_below(bits, 5)) - 2;
  return k >= 0 ? static_cast<float>(1 << k) : 1.0f / static_cast<float>(1 << -k);
}

// How a bag's mean divides when it has per-sample weights: by the sum of the bag's weights plus
// `eps` (a system may add an epsilon against an all-zero bag), or, with `by_count`, by the bag's
// length as an unweighted mean does. Without weights a mean divides by the length.
struct BagMean {
  bool by_count = false;
  float eps = 0.0f;
};

// Pools `bags` bags: rows holds one f32 row of `dim` values per id position (offsets[bags]
// rows), offsets the bags' bounds ([bags + 1], non-decreasing, from 0), weights one value per
// position or null. Sum: the rows (times their weights) summed in position order. Mean: that sum
// divided by the bag's divisor (its length; with weights, `mean`'s: the weights summed in
// position order, plus mean.eps), an empty bag pooling to zeros. Returns bags x dim values.
// Throws std::invalid_argument on bad offsets or dim < 1.
std::vector<float> pool_bags(const float* rows, const std::int64_t* offsets, std::int64_t bags, std::int64_t dim, BagPooling pooling,
                             const float* weights, BagMean mean = {});

// The gradient row of every id position (offsets[bags] x dim) from the bags' output gradients
// (bags x dim): g (sum), g * w (weighted sum), g * (1 / length) (mean), g * (w / divisor)
// (weighted mean). Throws as pool_bags.
std::vector<float> bag_backward(const float* bag_grads, const std::int64_t* offsets, std::int64_t bags, std::int64_t dim,
                                BagPooling pooling, const float* weights, BagMean mean = {});

}  // namespace lockstep::ref
