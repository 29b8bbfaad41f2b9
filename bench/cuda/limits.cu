#include "bench/cuda/limits.h"

#include "reference/common/cuda/launch.cuh"

namespace lockstep::bench::cuda {

namespace {

using ref::cuda::grid_first;
using ref::cuda::grid_stride;

template <class T>
__global__ void gather_kernel(const T* __restrict__ table, const std::int64_t* __restrict__ index,
                              std::int64_t n, T* __restrict__ out) {
  for (std::int64_t i = grid_first(); i < n; i += grid_stride()) {
    out[i] = table[index[i]];
  }
}

// Times `launch` with events on the legacy default stream.
template <class F>
double timed(F launch) {
  cudaEvent_t start, stop;
  LOCKSTEP_CUDA_CHECK(cudaEventCreate(&start));
  LOCKSTEP_CUDA_CHECK(cudaEventCreate(&stop));
  LOCKSTEP_CUDA_CHECK(cudaEventRecord(start, 0));
  launch();
  LOCKSTEP_CUDA_CHECK(cudaGetLastError(), "launch");
  LOCKSTEP_CUDA_CHECK(cudaEventRecord(stop, 0));
  LOCKSTEP_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  LOCKSTEP_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3;
}

}  // namespace

template <class T>
double gather(const T* table, const std::int64_t* index, std::int64_t n, T* out) {
  int device = 0;
  LOCKSTEP_CUDA_CHECK(cudaGetDevice(&device));
  const int blocks = ref::cuda::grid_blocks(device, n);
  return timed([&] { gather_kernel<T><<<blocks, ref::cuda::kThreadsPerBlock>>>(table, index, n, out); });
}

double gather_seconds(const std::int64_t* table, const std::int64_t* index, std::int64_t n,
                      std::int64_t* out) {
  return gather(table, index, n, out);
}

double gather_seconds(const std::int32_t* table, const std::int64_t* index, std::int64_t n,
                      std::int32_t* out) {
  return gather(table, index, n, out);
}

double copy_seconds(void* dst, const void* src, std::size_t bytes) {
  return timed([&] { LOCKSTEP_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice)); });
}

}  // namespace lockstep::bench::cuda
