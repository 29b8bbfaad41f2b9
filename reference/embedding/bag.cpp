#include "reference/embedding/bag.h"

#include <stdexcept>

namespace lockstep::ref {

std::string to_string(BagPooling p) { return p == BagPooling::kMean ? "mean" : "sum"; }

BagPooling bag_pooling_from_string(const std::string& name) {
  if (name == "sum") return BagPooling::kSum;
  if (name == "mean") return BagPooling::kMean;
  throw std::invalid_argument("unknown pooling \"" + name + "\"; allowed: sum, mean");
}

namespace {

void check_bags(const std::int64_t* offsets, std::int64_t bags, std::int64_t dim) {
  if (bags < 0 || dim < 1) throw std::invalid_argument("bags: need bags >= 0 and dim >= 1, got " + std::to_string(bags) + " and " + std::to_string(dim));
  if (offsets[0] != 0) throw std::invalid_argument("bags: offsets[0] must be 0, got " + std::to_string(offsets[0]));
  for (std::int64_t b = 0; b < bags; ++b) {
    if (offsets[b + 1] < offsets[b]) {
      throw std::invalid_argument("bags: offsets must not decrease, got offsets[" + std::to_string(b) + "] = " + std::to_string(offsets[b]) +
                                  " > offsets[" + std::to_string(b + 1) + "] = " + std::to_string(offsets[b + 1]));
    }
  }
}

// Bag b's mean divisor (pooling kMean): its length, or with weights its weights summed in position
// order plus mean.eps (its length with mean.by_count).
float divisor(const std::int64_t* offsets, std::int64_t b, const float* weights, BagMean mean) {
  if (!weights || mean.by_count) return static_cast<float>(offsets[b + 1] - offsets[b]);
  float sum = 0.0f;
  for (std::int64_t p = offsets[b]; p < offsets[b + 1]; ++p) sum = sum + weights[p];
  return sum + mean.eps;
}

}  // namespace

std::vector<float> pool_bags(const float* rows, const std::int64_t* offsets, std::int64_t bags, std::int64_t dim, BagPooling pooling,
                             const float* weights, BagMean mean) {
  check_bags(offsets, bags, dim);
  const auto d = static_cast<std::size_t>(dim);
  std::vector<float> out(static_cast<std::size_t>(bags) * d, 0.0f);
  for (std::int64_t b = 0; b < bags; ++b) {
    float* o = out.data() + static_cast<std::size_t>(b) * d;
    for (std::int64_t p = offsets[b]; p < offsets[b + 1]; ++p) {
      const float* r = rows + static_cast<std::size_t>(p) * d;
      for (std::size_t c = 0; c < d; ++c) o[c] = o[c] + (weights ? weights[p] * r[c] : r[c]);
    }
    if (pooling == BagPooling::kMean && offsets[b + 1] > offsets[b]) {
      const float k = divisor(offsets, b, weights, mean);
      for (std::size_t c = 0; c < d; ++c) o[c] = o[c] / k;
    }
  }
  return out;
}

std::vector<float> bag_backward(const float* bag_grads, const std::int64_t* offsets, std::int64_t bags, std::int64_t dim,
                                BagPooling pooling, const float* weights, BagMean mean) {
  check_bags(offsets, bags, dim);
  const auto d = static_cast<std::size_t>(dim);
  std::vector<float> out(static_cast<std::size_t>(offsets[bags]) * d);
  for (std::int64_t b = 0; b < bags; ++b) {
    const float* g = bag_grads + static_cast<std::size_t>(b) * d;
    const bool mean_pool = pooling == BagPooling::kMean;
    const float k = mean_pool && offsets[b + 1] > offsets[b] ? divisor(offsets, b, weights, mean) : 1.0f;
    const float inv = 1.0f / k;
    for (std::int64_t p = offsets[b]; p < offsets[b + 1]; ++p) {
      float* o = out.data() + static_cast<std::size_t>(p) * d;
      // Each position's factor: 1, its weight, 1 / length, or its weight / the divisor.
      const float f = mean_pool ? (weights ? weights[p] / k : inv) : (weights ? weights[p] : 1.0f);
      for (std::size_t c = 0; c < d; ++c) o[c] = mean_pool || weights ? g[c] * f : g[c];
    }
  }
  return out;
}

}  // namespace lockstep::ref
