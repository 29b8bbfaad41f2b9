// Neighbor sampling's CUDA kernels (reference/sampling/cuda/sample.h): one thread per node,
// each running the per-node function the CPU's sample_node runs; CUB's prefix sum for the
// output offsets.
#include "reference/sampling/cuda/sample.h"

#include <cub/device/device_scan.cuh>

#include "reference/common/cuda/launch.cuh"

#include "reference/sampling/sample_one.h"

namespace lockstep::ref::cuda {

namespace {

constexpr unsigned long long kNone = ~0ULL;
constexpr int kThreads = kThreadsPerBlock;

template <class In>
__global__ void plan_kernel(CsrRows rows, const In* __restrict__ nodes, std::int64_t n,
                            std::int64_t fanout, bool replace, std::int64_t* __restrict__ counts,
                            unsigned long long* first_bad) {
  for (std::int64_t i = grid_first(); i < n; i += grid_stride()) {
    const auto v = static_cast<std::int64_t>(nodes[i]);
    if (v < 0 || v >= rows.num_nodes) {
      atomicMin(first_bad, static_cast<unsigned long long>(i));
      counts[i] = 0;
      continue;
    }
    counts[i] = sample_one::count(rows.indptr[v + 1] - rows.indptr[v], fanout, replace);
  }
}

template <class In>
__global__ void draw_kernel(CsrRows rows, const In* __restrict__ nodes, std::int64_t n,
                            std::int64_t fanout, bool replace, std::uint64_t hop_key,
                            const std::int64_t* __restrict__ offsets,
                            std::int64_t* __restrict__ out_nbrs,
                            std::int64_t* __restrict__ out_eids,
                            std::int64_t* __restrict__ scratch) {
  for (std::int64_t i = grid_first(); i < n; i += grid_stride()) {
    const auto v = static_cast<std::int64_t>(nodes[i]);
    const std::int64_t row = rows.indptr[v];
    const std::int64_t degree = rows.indptr[v + 1] - row;
    const std::int64_t at = offsets[i];
    const std::int64_t c = offsets[i + 1] - at;
    if (fanout > 0 && fanout <= kDrawInThread) {
      // The positions and the displaced entries in the thread's own arrays (local memory,
      // interleaved across the warp), then each neighbor and edge id read once.
      std::int64_t pos[kDrawInThread], swap_pos[kDrawInThread], swap_val[kDrawInThread];
      sample_one::positions(degree, fanout, replace, hop_key, v, pos, swap_pos, swap_val);
      for (std::int64_t t = 0; t < c; ++t) {
        const std::int64_t p = row + pos[t];
        out_nbrs[at + t] = rows.indices[p];
        out_eids[at + t] = rows.edge_ids[p];
      }
      continue;
    }
    // As the CPU's sample_node: positions to out_nbrs, displaced entries to out_eids and
    // scratch, then the neighbors and edge ids at those positions.
    sample_one::positions(degree, fanout, replace, hop_key, v, out_nbrs + at, out_eids + at,
                          scratch + at);
    for (std::int64_t t = 0; t < c; ++t) {
      const std::int64_t p = row + out_nbrs[at + t];
      out_nbrs[at + t] = rows.indices[p];
      out_eids[at + t] = rows.edge_ids[p];
    }
  }
}

}  // namespace

std::int64_t sample_hop_plan(int device, CsrRows rows, const void* nodes, bool int32_ids,
                             std::int64_t n, std::int64_t fanout, bool replace,
                             std::int64_t* counts, std::int64_t* offsets, std::int64_t* total) {
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
  LOCKSTEP_CUDA_CHECK(cudaMemset(offsets, 0, sizeof(std::int64_t)));
  *total = 0;
  if (n <= 0) return -1;
  unsigned long long* first_bad = nullptr;
  // Stream-ordered (pool) allocations: no device-wide synchronisation per call.
  LOCKSTEP_CUDA_CHECK(cudaMallocAsync(&first_bad, sizeof *first_bad, 0));
  unsigned long long bad = kNone;
  void* temp = nullptr;
  cudaError_t err = cudaMemsetAsync(first_bad, 0xFF, sizeof *first_bad, 0);  // kNone
  if (err == cudaSuccess) {
    const int blocks = grid_blocks(device, n);
    if (int32_ids) {
      plan_kernel<<<blocks, kThreads>>>(rows, static_cast<const std::int32_t*>(nodes), n, fanout,
                                        replace, counts, first_bad);
    } else {
      plan_kernel<<<blocks, kThreads>>>(rows, static_cast<const std::int64_t*>(nodes), n, fanout,
                                        replace, counts, first_bad);
    }
    err = cudaGetLastError();
  }
  std::size_t temp_bytes = 0;
  if (err == cudaSuccess) {
    err = cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, counts, offsets + 1, n);
  }
  if (err == cudaSuccess) err = cudaMallocAsync(&temp, temp_bytes, 0);
  if (err == cudaSuccess) {
    err = cub::DeviceScan::InclusiveSum(temp, temp_bytes, counts, offsets + 1, n);
  }
  // Blocking copies: they wait for the kernel and the scan.
  if (err == cudaSuccess) err = cudaMemcpy(&bad, first_bad, sizeof bad, cudaMemcpyDeviceToHost);
  if (err == cudaSuccess) {
    err = cudaMemcpy(total, offsets + n, sizeof *total, cudaMemcpyDeviceToHost);
  }
  if (temp != nullptr) cudaFreeAsync(temp, 0);
  cudaFreeAsync(first_bad, 0);
  LOCKSTEP_CUDA_CHECK(err, "plan");
  return bad == kNone ? -1 : static_cast<std::int64_t>(bad);
}

void sample_hop_draw(int device, CsrRows rows, const void* nodes, bool int32_ids, std::int64_t n,
                     std::int64_t fanout, bool replace, std::uint64_t hop_key,
                     const std::int64_t* offsets, std::int64_t* out_nbrs,
                     std::int64_t* out_eids, std::int64_t* scratch) {
  if (n <= 0) return;
  LOCKSTEP_CUDA_CHECK(cudaSetDevice(device));
  const int blocks = grid_blocks(device, n);
  if (int32_ids) {
    draw_kernel<<<blocks, kThreads>>>(rows, static_cast<const std::int32_t*>(nodes), n, fanout,
                                      replace, hop_key, offsets, out_nbrs, out_eids, scratch);
  } else {
    draw_kernel<<<blocks, kThreads>>>(rows, static_cast<const std::int64_t*>(nodes), n, fanout,
                                      replace, hop_key, offsets, out_nbrs, out_eids, scratch);
  }
  LOCKSTEP_CUDA_CHECK(cudaGetLastError(), "draw kernel");
  LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(0), "draw kernel");
}

}  // namespace lockstep::ref::cuda
