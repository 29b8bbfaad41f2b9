#pragma once
// Neighbor sampling's CUDA kernels: thin launchers over reference/sampling/sample_one.h, whose
// per-node functions the CPU's sample_node runs, so the CPU sampling tests prove them.
// Compiled only when nvcc is present (LOCKSTEP_HAVE_CUDA_KERNELS); sample_hop on device ids
// (reference/sampling/device_sample.h) calls them.
#include <cstdint>

namespace lockstep::ref::cuda {

// A graph's CSR rows in the memory of one CUDA device.
struct CsrRows {
  const std::int64_t* indptr = nullptr;    // num_nodes + 1
  const std::int64_t* indices = nullptr;   // the neighbors
  const std::int64_t* edge_ids = nullptr;  // their edge ids
  std::int64_t num_nodes = 0;
};

// Plans one hop for n nodes (int32 when int32_ids, else int64) on CUDA device `device`:
// counts[i] = sample_one::count(degree of nodes[i], fanout, replace), offsets[0] = 0 and
// offsets[i + 1] = offsets[i] + counts[i] (int64, n and n + 1 entries on the device). Sets
// *total to offsets[n]. Returns -1, or the position of the first node outside
// [0, num_nodes) (counts, offsets and total are then unspecified). Waits for the device.
// Throws std::runtime_error naming a CUDA error.
std::int64_t sample_hop_plan(int device, CsrRows rows, const void* nodes, bool int32_ids,
                             std::int64_t n, std::int64_t fanout, bool replace,
                             std::int64_t* counts, std::int64_t* offsets, std::int64_t* total);

// Fanouts up to this many draw in each thread's own arrays and need no scratch.
constexpr std::int64_t kDrawInThread = 32;

// Draws the planned hop: node i's sample (sample_one::positions, then its neighbors and edge
// ids) to out_nbrs / out_eids[offsets[i], offsets[i + 1]). scratch: offsets[n] int64 on the
// device, or null when 0 < fanout <= kDrawInThread (or the sample takes whole rows: fanout -1,
// or draws with replacement, which displace nothing). Waits for the device. Throws
// std::runtime_error naming a CUDA error.
void sample_hop_draw(int device, CsrRows rows, const void* nodes, bool int32_ids, std::int64_t n,
                     std::int64_t fanout, bool replace, std::uint64_t hop_key,
                     const std::int64_t* offsets, std::int64_t* out_nbrs,
                     std::int64_t* out_eids, std::int64_t* scratch);

}  // namespace lockstep::ref::cuda
