#include "bench/cuda/limits.h"

#include "reference/common/cuda/launch.cuh"

namespace lockstep::bench::cuda {

namespace {

using ref::cuda::grid_first;
using ref::cuda::grid_stride;

constexpr const char* kWork = "GPU benchmark limit";

void check(cudaError_t err, const char* what) { ref::cuda::check(err, kWork, what); }

__global__ void gather_kernel(const std::int64_t* __restrict__ table,
                              const std::int64_t* __restrict__ index, std::int64_t n,
                              std::int64_t* __restrict__ out) {
  for (std::int64_t i = grid_first(); i < n; i += grid_stride()) {
    out[i] = table[index[i]];
  }
}

// Times `launch` with events on the legacy default stream.
template <class F>
double timed(F launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, 0), "cudaEventRecord");
  launch();
  check(cudaGetLastError(), "launch");
  check(cudaEventRecord(stop, 0), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3;
}

}  // namespace

double gather_seconds(const std::int64_t* table, const std::int64_t* index, std::int64_t n,
                      std::int64_t* out) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  const int blocks = ref::cuda::grid_blocks(device, n, kWork);
  return timed([&] { gather_kernel<<<blocks, ref::cuda::kThreadsPerBlock>>>(table, index, n, out); });
}

double copy_seconds(void* dst, const void* src, std::size_t bytes) {
  return timed([&] { check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy"); });
}

}  // namespace lockstep::bench::cuda
