#pragma once
// First-appearance relabelling and block edge destinations on a CUDA device: CUB's stable
// radix sort and scans, and kernels over reference/sampling/relabel_one.h's per-element steps,
// which the host path of relabel.h runs too. Compiled only when nvcc is present
// (LOCKSTEP_HAVE_CUDA_KERNELS). All pointers are memory of CUDA device `device`; each call
// waits for the device and throws std::runtime_error naming a CUDA error.
#include <cstdint>

namespace lockstep::ref::cuda {

// For values[0, n): local[p] (n entries) and unique (its first *count entries), as
// relabel_one.h defines them. Returns the number of distinct values.
std::int64_t relabel_first_appearance(int device, const std::int64_t* values, std::int64_t n, std::int64_t* local,
                                      std::int64_t* unique);

// edge_dst[offsets[d] .. offsets[d + 1]) = d for d in [0, n), where offsets is the exclusive
// sum of counts[0, n), when their total is `edges` (edge_dst has that many entries). Returns
// the total; writes nothing when it is not `edges`.
std::int64_t edge_destinations(int device, const std::int64_t* counts, std::int64_t n, std::int64_t edges,
                               std::int64_t* edge_dst);

}  // namespace lockstep::ref::cuda
