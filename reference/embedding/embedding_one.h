#pragma once
// DistEmbedding's per-element functions (semantics in optimizer.h), shared by the CPU shard and
// the CUDA kernels (reference/embedding/cuda/embedding.cu): loading and storing one element of
// a f32/bf16/f16 table, reducing one column of an id's gradient rows, and one optimizer update
// of one element. Plain C++17, so that nvcc compiles it; both sides compile it without fused
// multiply-adds (-ffp-contract=off, --fmad=false), and CUDA's sqrt and division are correctly
// rounded by default, as the CPU's are.
#include <cmath>
#include <cstdint>

#include "reference/common/half.h"
#include "reference/common/hd.h"

namespace lockstep::ref {

enum class Storage : std::uint8_t { kF32, kBF16, kF16 };
enum class DuplicateReduce : std::uint8_t { kSum, kMean };
enum class OptimizerKind : std::uint8_t { kSgd, kAdagrad, kAdam };

// Element i of a table stored as `s` (float for kF32, 16-bit bits otherwise), as f32.
LOCKSTEP_HD inline float load_element(Storage s, const void* table, std::int64_t i) {
  switch (s) {
    case Storage::kF32: return static_cast<const float*>(table)[i];
    case Storage::kBF16: return bf16_to_float(static_cast<const std::uint16_t*>(table)[i]);
    case Storage::kF16: return f16_to_float(static_cast<const std::uint16_t*>(table)[i]);
  }
  return 0.0f;
}

// Stores w into element i, rounded once to `s`.
LOCKSTEP_HD inline void store_element(Storage s, void* table, std::int64_t i, float w) {
  switch (s) {
    case Storage::kF32: static_cast<float*>(table)[i] = w; return;
    case Storage::kBF16: static_cast<std::uint16_t*>(table)[i] = float_to_bf16(w); return;
    case Storage::kF16: static_cast<std::uint16_t*>(table)[i] = float_to_f16(w); return;
  }
}

// Column c of one id's reduced gradient: its rows grads[order[k] * dim + c] for k in
// [begin, end), accumulated in that order from +0.0f; divided by float(end - begin) for kMean.
LOCKSTEP_HD inline float reduce_element(const float* grads, std::int64_t dim, const std::int64_t* order,
                                        std::int64_t begin, std::int64_t end, std::int64_t c, DuplicateReduce mode) {
  float sum = 0.0f;
  for (std::int64_t k = begin; k < end; ++k) sum = sum + grads[order[k] * dim + c];
  if (mode == DuplicateReduce::kMean) sum = sum / static_cast<float>(end - begin);
  return sum;
}

// One step's optimizer constants, each already rounded to f32 (update_rule() in optimizer.h
// computes them on the host: Adam's step size is worked out in double first).
struct UpdateRule {
  OptimizerKind kind = OptimizerKind::kSgd;
  float lr = 0, eps = 0;
  float one_minus_beta1 = 0, one_minus_beta2 = 0;  // Adam
  float neg_step = 0;                              // Adam: -(lr * sqrt(1 - beta2^t) / (1 - beta1^t))
};

// One element's update, in optimizer.h's order: w the weight (f32), s1 Adagrad's sum or Adam's
// m, s2 Adam's v (unused ones are left alone).
LOCKSTEP_HD inline void update_element(const UpdateRule& r, float g, float& w, float& s1, float& s2) {
  switch (r.kind) {
    case OptimizerKind::kSgd: w = w - r.lr * g; return;
    case OptimizerKind::kAdagrad:
      s1 = s1 + g * g;
      w = w - r.lr * (g / (std::sqrt(s1) + r.eps));
      return;
    case OptimizerKind::kAdam:
      s1 = (g - s1) * r.one_minus_beta1 + s1;
      s2 = (g * g - s2) * r.one_minus_beta2 + s2;
      w = w + r.neg_step * (s1 / (std::sqrt(s2) + r.eps));
      return;
  }
}

// Column c of table row `row` (dim columns) updated by the reduced gradient of its
// contributions (reduce_element over order[begin, end)): load, update_element, store. s1 and
// s2 are the optimizer's state tables (rows x dim f32), null when the optimizer has none.
LOCKSTEP_HD inline void update_from_contributions(const UpdateRule& r, Storage s, void* table, float* s1, float* s2,
                                                  std::int64_t row, std::int64_t dim, std::int64_t c,
                                                  const float* grads, const std::int64_t* order, std::int64_t begin,
                                                  std::int64_t end, DuplicateReduce mode) {
  const float g = reduce_element(grads, dim, order, begin, end, c, mode);
  const std::int64_t i = row * dim + c;
  float w = load_element(s, table, i);
  float a = s1 ? s1[i] : 0.0f;
  float b = s2 ? s2[i] : 0.0f;
  update_element(r, g, w, a, b);
  store_element(s, table, i, w);
  if (s1) s1[i] = a;
  if (s2) s2[i] = b;
}

}  // namespace lockstep::ref
