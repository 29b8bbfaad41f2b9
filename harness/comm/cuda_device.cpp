#include "harness/comm/cuda_device.h"

#include "harness/core/error.h"
#include "lockstep/config.h"

#if LOCKSTEP_HAVE_CUDA
#include <cuda_runtime.h>
// Every CUDA runtime call goes through this: the library's own message in an exception.
#define LOCKSTEP_CUDA_CHECK(expr)                                                   \
  do {                                                                              \
    const cudaError_t err_ = (expr);                                                \
    LOCKSTEP_CHECK(err_ == cudaSuccess, #expr, ": ", cudaGetErrorString(err_));     \
  } while (0)
#endif

namespace lockstep::comm {

#if LOCKSTEP_HAVE_CUDA
int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}
void cuda_set_device(int device) { LOCKSTEP_CUDA_CHECK(cudaSetDevice(device)); }
void* cuda_alloc(std::size_t bytes) {
  void* p = nullptr;
  LOCKSTEP_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
  return p;
}
void cuda_free(void* p) noexcept {
  if (p) cudaFree(p);
}
void cuda_copy_to_device(void* dst, const void* src, std::size_t bytes) {
  LOCKSTEP_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void cuda_copy_to_host(void* dst, const void* src, std::size_t bytes) {
  LOCKSTEP_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
#else
int cuda_device_count() { return 0; }
void cuda_set_device(int) { LOCKSTEP_CHECK(false, "this build of lockstep has no CUDA"); }
void* cuda_alloc(std::size_t) { LOCKSTEP_CHECK(false, "this build of lockstep has no CUDA"); return nullptr; }
void cuda_free(void*) noexcept {}
void cuda_copy_to_device(void*, const void*, std::size_t) { LOCKSTEP_CHECK(false, "this build of lockstep has no CUDA"); }
void cuda_copy_to_host(void*, const void*, std::size_t) { LOCKSTEP_CHECK(false, "this build of lockstep has no CUDA"); }
#endif

}  // namespace lockstep::comm
