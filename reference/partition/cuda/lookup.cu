// The partition books' CUDA kernels (reference/partition/cuda/lookup.h): one thread per id,
// each calling the per-id function the CPU reference shares, and the first invalid position
// kept with atomicMin.
#include "reference/partition/cuda/lookup.h"

#include "reference/common/cuda/launch.cuh"

namespace lockstep::ref::cuda {

namespace {

constexpr unsigned long long kNone = ~0ULL;

struct Range {
  lookup_one::RangeTable t;
  __device__ bool operator()(int op, int part, std::int64_t id, bool int32_ids,
                             std::int64_t* r) const {
    return lookup_one::range_lookup(t, op, part, id, int32_ids, r);
  }
};
struct Map {
  lookup_one::MapTable t;
  __device__ bool operator()(int op, int part, std::int64_t id, bool int32_ids,
                             std::int64_t* r) const {
    return lookup_one::map_lookup(t, op, part, id, int32_ids, r);
  }
};

template <class Book, class In, class Out>
__global__ void lookup_kernel(Book book, int op, int part, const In* __restrict__ ids,
                              std::int64_t n, Out* __restrict__ out,
                              unsigned long long* first_bad) {
  for (std::int64_t i = grid_first(); i < n; i += grid_stride()) {
    std::int64_t r = 0;
    if (book(op, part, static_cast<std::int64_t>(ids[i]), sizeof(In) == 4, &r)) {
      out[i] = static_cast<Out>(r);
    } else {
      atomicMin(first_bad, static_cast<unsigned long long>(i));
    }
  }
}

template <class Book>
std::int64_t launch(int device, Book book, int op, int part, const void* ids, bool int32_ids,
                    std::int64_t n, void* out) {
  if (n <= 0) return -1;
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
  const int blocks = grid_blocks(device, n);
  constexpr int kThreads = kThreadsPerBlock;
  unsigned long long* first_bad = nullptr;
  // Stream-ordered (pool) allocations: no device-wide synchronisation per call.
  LOCKSTEP_CUDA_CHECK(cudaMallocAsync(&first_bad, sizeof *first_bad, 0));
  unsigned long long bad = kNone;
  cudaError_t err = cudaMemsetAsync(first_bad, 0xFF, sizeof *first_bad, 0);  // kNone
  if (err == cudaSuccess) {
    const bool part_ids = op == lookup_one::kPartId;
    if (int32_ids) {
      lookup_kernel<<<blocks, kThreads>>>(book, op, part, static_cast<const std::int32_t*>(ids),
                                          n, static_cast<std::int32_t*>(out), first_bad);
    } else if (part_ids) {
      lookup_kernel<<<blocks, kThreads>>>(book, op, part, static_cast<const std::int64_t*>(ids),
                                          n, static_cast<std::int32_t*>(out), first_bad);
    } else {
      lookup_kernel<<<blocks, kThreads>>>(book, op, part, static_cast<const std::int64_t*>(ids),
                                          n, static_cast<std::int64_t*>(out), first_bad);
    }
    err = cudaGetLastError();
  }
  // A blocking copy: it waits for the kernel.
  if (err == cudaSuccess) err = cudaMemcpy(&bad, first_bad, sizeof bad, cudaMemcpyDeviceToHost);
  cudaFreeAsync(first_bad, 0);
  LOCKSTEP_CUDA_CHECK(err, "lookup kernel");
  return bad == kNone ? -1 : static_cast<std::int64_t>(bad);
}

}  // namespace

std::int64_t range_lookup(int device, lookup_one::RangeTable table, int op, int part,
                          const void* ids, bool int32_ids, std::int64_t n, void* out) {
  return launch(device, Range{table}, op, part, ids, int32_ids, n, out);
}

std::int64_t map_lookup(int device, lookup_one::MapTable table, int op, int part,
                        const void* ids, bool int32_ids, std::int64_t n, void* out) {
  return launch(device, Map{table}, op, part, ids, int32_ids, n, out);
}

}  // namespace lockstep::ref::cuda
