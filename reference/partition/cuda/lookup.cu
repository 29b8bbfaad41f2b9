// The partition books' CUDA kernels (reference/partition/cuda/lookup.h): one thread per id,
// each calling the per-id function the CPU reference shares, and the first invalid position
// kept with atomicMin.
#include "reference/partition/cuda/lookup.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace lockstep::ref::cuda {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("partition lookup on CUDA: ") + what + ": " +
                             cudaGetErrorString(err));
  }
}

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
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
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
  check(cudaSetDevice(device), "cudaSetDevice");
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute");
  constexpr int kThreads = 256;
  const std::int64_t wanted = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 32LL * sms ? wanted : 32LL * sms);
  unsigned long long* first_bad = nullptr;
  // Stream-ordered (pool) allocations: no device-wide synchronisation per call.
  check(cudaMallocAsync(&first_bad, sizeof *first_bad, 0), "cudaMallocAsync");
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
  check(err, "lookup kernel");
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
