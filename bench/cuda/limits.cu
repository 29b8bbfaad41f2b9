#include "bench/cuda/limits.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace lockstep::bench::cuda {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("GPU benchmark limit: ") + what + ": " +
                             cudaGetErrorString(err));
  }
}

__global__ void gather_kernel(const std::int64_t* __restrict__ table,
                              const std::int64_t* __restrict__ index, std::int64_t n,
                              std::int64_t* __restrict__ out) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
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
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute");
  const std::int64_t wanted = (n + 255) / 256;
  const int blocks = static_cast<int>(wanted < 32LL * sms ? wanted : 32LL * sms);
  return timed([&] { gather_kernel<<<blocks, 256>>>(table, index, n, out); });
}

double copy_seconds(void* dst, const void* src, std::size_t bytes) {
  return timed([&] { check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy"); });
}

}  // namespace lockstep::bench::cuda
