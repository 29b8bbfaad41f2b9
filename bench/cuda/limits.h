#pragma once
// Device limits for the GPU benchmarks (bench/gpu_bench.cpp), measured in the same run as the
// kernels they bound. Compiled only with nvcc (LOCKSTEP_HAVE_CUDA_KERNELS).
#include <cstdint>

namespace lockstep::bench::cuda {

// Seconds of one gather out[i] = table[index[i]] of n int64 values on the current CUDA device
// (one thread per element, grid-stride), timed with CUDA events around the kernel alone: the
// device's random-gather rate when index is uniformly random over a table far larger than
// the L2 cache.
double gather_seconds(const std::int64_t* table, const std::int64_t* index, std::int64_t n,
                      std::int64_t* out);
// The same of int32 values (a map partition book's part_of table).
double gather_seconds(const std::int32_t* table, const std::int64_t* index, std::int64_t n,
                      std::int32_t* out);

// Seconds of one device-to-device cudaMemcpy of `bytes`, timed with CUDA events.
double copy_seconds(void* dst, const void* src, std::size_t bytes);

}  // namespace lockstep::bench::cuda
