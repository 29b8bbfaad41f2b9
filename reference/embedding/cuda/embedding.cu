// DistEmbedding's CUDA kernels (reference/embedding/cuda/embedding.h): one thread per output
// element, each running the per-element function the CPU shard runs. Compiled with
// --fmad=false, as the CPU never contracts a multiply and an add.
#include "reference/embedding/cuda/embedding.h"

#include "reference/common/cuda/launch.cuh"

namespace lockstep::ref::cuda {

namespace {

template <class R>
__global__ void gather_kernel(Storage storage, const void* __restrict__ table, std::int64_t dim,
                              const R* __restrict__ rows, const std::int32_t* __restrict__ part, int me,
                              std::int64_t n, float* __restrict__ out) {
  for (std::int64_t i = grid_first(); i < n; i += grid_stride()) {
    const std::int64_t r = i / dim, c = i % dim;
    if (part && part[r] != me) continue;
    out[i] = load_element(storage, table, static_cast<std::int64_t>(rows[r]) * dim + c);
  }
}

__global__ void scatter_kernel(const float* __restrict__ src, const std::int64_t* __restrict__ where,
                               std::int64_t n, std::int64_t dim, float* __restrict__ out) {
  for (std::int64_t i = grid_first(); i < n; i += grid_stride()) {
    const std::int64_t k = i / dim, c = i % dim;
    out[where[k] * dim + c] = src[i];
  }
}

__global__ void update_kernel(UpdateRule rule, Storage storage, void* table, float* s1, float* s2, std::int64_t dim,
                              const std::int64_t* __restrict__ locals, const std::int64_t* __restrict__ ptr,
                              const std::int64_t* __restrict__ order, std::int64_t n,
                              const float* __restrict__ grads, DuplicateReduce mode) {
  for (std::int64_t i = grid_first(); i < n; i += grid_stride()) {
    const std::int64_t k = i / dim, c = i % dim;
    update_from_contributions(rule, storage, table, s1, s2, locals[k], dim, c, grads, order, ptr[k], ptr[k + 1],
                              mode);
  }
}

void launched(const char* what) {
  LOCKSTEP_CUDA_CHECK(cudaGetLastError(), what);
  LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(0), what);
}

}  // namespace

void gather_rows(int device, Storage storage, const void* table, std::int64_t dim, const void* rows,
                 bool int32_rows, const std::int32_t* part, int me, std::int64_t n, float* out) {
  const std::int64_t total = n * dim;
  if (total <= 0) return;
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
  const int blocks = grid_blocks(device, total);
  if (int32_rows) {
    gather_kernel<<<blocks, kThreadsPerBlock>>>(storage, table, dim, static_cast<const std::int32_t*>(rows), part,
                                                me, total, out);
  } else {
    gather_kernel<<<blocks, kThreadsPerBlock>>>(storage, table, dim, static_cast<const std::int64_t*>(rows), part,
                                                me, total, out);
  }
  launched("gather kernel");
}

void scatter_rows(int device, const float* src, const std::int64_t* where, std::int64_t n, std::int64_t dim,
                  float* out) {
  const std::int64_t total = n * dim;
  if (total <= 0) return;
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
  scatter_kernel<<<grid_blocks(device, total), kThreadsPerBlock>>>(src, where, total, dim, out);
  launched("scatter kernel");
}

void update_rows(int device, const UpdateRule& rule, Storage storage, void* table, float* s1, float* s2,
                 std::int64_t dim, const std::int64_t* locals, const std::int64_t* ptr, const std::int64_t* order,
                 std::int64_t groups, const float* grads, DuplicateReduce mode) {
  const std::int64_t total = groups * dim;
  if (total <= 0) return;
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
  update_kernel<<<grid_blocks(device, total), kThreadsPerBlock>>>(rule, storage, table, s1, s2, dim, locals, ptr,
                                                                  order, total, grads, mode);
  launched("update kernel");
}

}  // namespace lockstep::ref::cuda
