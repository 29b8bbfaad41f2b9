#pragma once
// GraphSAGE mean aggregation's CUDA kernels: thin launchers over reference/train/aggregate_one.h's
// per-element functions. All pointers are device memory of CUDA device `device`; each
// launcher waits for its kernel and throws std::runtime_error naming a CUDA error.
#include <cstdint>

namespace lockstep::ref::train::cuda {

// agg[d * in + j] = mean_of_neighbors(h, in, src_of, dst_ptr[d], dst_ptr[d + 1], j).
void mean_aggregate(int device, const std::int64_t* dst_ptr, const std::int64_t* src_of,
                    std::int64_t num_dst, const float* h, std::int64_t in, float* agg);
// dh[s * in + j] = neighbor_gradient(start[s * in + j], dagg, in, dst_of, dst_ptr,
// src_ptr[s], src_ptr[s + 1], j).
void mean_aggregate_backward(int device, const std::int64_t* dst_ptr,
                             const std::int64_t* src_ptr, const std::int64_t* dst_of,
                             std::int64_t num_src, const float* dagg, const float* start,
                             std::int64_t in, float* dh);

}  // namespace lockstep::ref::train::cuda
