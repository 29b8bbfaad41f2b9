#pragma once
// What every CUDA launcher of lockstep's shares (included by .cu files only): the CUDA check
// (LOCKSTEP_CUDA_CHECK) and the grid of a grid-stride loop.
#include <cuda_runtime.h>

#include <cstdint>

#include "reference/common/cuda_check.h"

namespace lockstep::ref::cuda {

inline constexpr int kThreadsPerBlock = 256;

// Blocks of kThreadsPerBlock for a grid-stride loop over n elements on `device`: enough for
// every element, at most 32 per multiprocessor.
inline int grid_blocks(int device, std::int64_t n) {
  int sms = 0;
  LOCKSTEP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t wanted = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<int>(wanted < 32LL * sms ? wanted : 32LL * sms);
}

// The first index and the stride of this thread's grid-stride loop.
__device__ inline std::int64_t grid_first() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace lockstep::ref::cuda
