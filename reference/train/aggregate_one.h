#pragma once
// GraphSAGE mean aggregation's per-element functions (see aggregate.h), shared by the CPU model
// and the CUDA kernels (reference/train/cuda/aggregate.cu). Plain C++17, no block types, so
// that nvcc compiles it.
#include <cstdint>

#include "reference/common/hd.h"

namespace lockstep::ref::train {

// agg[d][j]: the mean over d's edges (begin .. end of src_of) of h[src][j] (in columns a
// row), summed in edge order from 0, then multiplied by 1 / degree; 0 without edges.
template <class T>
LOCKSTEP_HD T mean_of_neighbors(const T* h, std::int64_t in, const std::int64_t* src_of,
                                std::int64_t begin, std::int64_t end, std::int64_t j) {
  if (end == begin) return T(0);
  T sum = T(0);
  for (std::int64_t k = begin; k < end; ++k) sum += h[src_of[k] * in + j];
  const T inv = T(1) / static_cast<T>(end - begin);
  return sum * inv;
}

// dh[s][j] of src s: `start` (its self-path term, 0 for a src that is no dst), plus, in edge
// order over s's edges (begin .. end of dst_of), dagg[d][j] * (1 / degree of d).
template <class T>
LOCKSTEP_HD T neighbor_gradient(T start, const T* dagg, std::int64_t in,
                                const std::int64_t* dst_of, const std::int64_t* dst_ptr,
                                std::int64_t begin, std::int64_t end, std::int64_t j) {
  T acc = start;
  for (std::int64_t k = begin; k < end; ++k) {
    const std::int64_t d = dst_of[k];
    const T inv = T(1) / static_cast<T>(dst_ptr[d + 1] - dst_ptr[d]);
    acc += dagg[d * in + j] * inv;
  }
  return acc;
}

}  // namespace lockstep::ref::train
