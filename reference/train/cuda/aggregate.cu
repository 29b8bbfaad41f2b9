// GraphSAGE mean aggregation's CUDA kernels (reference/train/cuda/aggregate.h): one thread
// per output element, each running the per-element function the CPU model runs. Compiled
// with --fmad=false, as the CPU never contracts a multiply and an add.
#include "reference/train/cuda/aggregate.h"

#include "reference/common/cuda/launch.cuh"
#include "reference/train/aggregate_one.h"

namespace lockstep::ref::train::cuda {

namespace {

using ref::cuda::grid_blocks;
using ref::cuda::grid_first;
using ref::cuda::grid_stride;
using ref::cuda::kThreadsPerBlock;

constexpr int kThreads = kThreadsPerBlock;

__global__ void forward_kernel(const std::int64_t* __restrict__ dst_ptr,
                               const std::int64_t* __restrict__ src_of, std::int64_t n,
                               const float* __restrict__ h, std::int64_t in,
                               float* __restrict__ agg) {
  for (std::int64_t i = grid_first(); i < n; i += grid_stride()) {
    const std::int64_t d = i / in, j = i % in;
    agg[i] = mean_of_neighbors(h, in, src_of, dst_ptr[d], dst_ptr[d + 1], j);
  }
}

__global__ void backward_kernel(const std::int64_t* __restrict__ dst_ptr,
                                const std::int64_t* __restrict__ src_ptr,
                                const std::int64_t* __restrict__ dst_of, std::int64_t n,
                                const float* __restrict__ dagg, const float* __restrict__ start,
                                std::int64_t in, float* __restrict__ dh) {
  for (std::int64_t i = grid_first(); i < n; i += grid_stride()) {
    const std::int64_t s = i / in, j = i % in;
    dh[i] = neighbor_gradient(start[i], dagg, in, dst_of, dst_ptr, src_ptr[s], src_ptr[s + 1], j);
  }
}

}  // namespace

void mean_aggregate(int device, const std::int64_t* dst_ptr, const std::int64_t* src_of,
                    std::int64_t num_dst, const float* h, std::int64_t in, float* agg) {
  const std::int64_t n = num_dst * in;
  if (n <= 0) return;
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
  forward_kernel<<<grid_blocks(device, n), kThreads>>>(dst_ptr, src_of, n, h, in, agg);
  LOCKSTEP_CUDA_CHECK(cudaGetLastError(), "forward kernel");
  LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(0), "forward kernel");
}

void mean_aggregate_backward(int device, const std::int64_t* dst_ptr,
                             const std::int64_t* src_ptr, const std::int64_t* dst_of,
                             std::int64_t num_src, const float* dagg, const float* start,
                             std::int64_t in, float* dh) {
  const std::int64_t n = num_src * in;
  if (n <= 0) return;
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
  backward_kernel<<<grid_blocks(device, n), kThreads>>>(dst_ptr, src_ptr, dst_of, n, dagg, start,
                                                        in, dh);
  LOCKSTEP_CUDA_CHECK(cudaGetLastError(), "backward kernel");
  LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(0), "backward kernel");
}

}  // namespace lockstep::ref::train::cuda
