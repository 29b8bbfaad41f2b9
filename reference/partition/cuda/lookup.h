#pragma once
// The partition books' CUDA kernels: thin launchers over reference/partition/lookup_one.h,
// whose per-id functions the CPU tests prove. Compiled only when nvcc is present
// (LOCKSTEP_HAVE_CUDA_KERNELS in lockstep/config.h); the books call them for ids on a CUDA
// device, and copy the ids to the host and back when they are not compiled.
#include <cstdint>

#include "reference/partition/lookup_one.h"

namespace lockstep::ref::cuda {

// Runs lookup_one's `op` on n ids (int32 when int32_ids, else int64) in the memory of CUDA
// device `device`, writing int32 part ids (kPartId) or ids of the input's type to `out`, on
// that device. The table's arrays are that device's. Launches on the legacy default stream,
// so it is ordered after the copies that filled `ids`, and waits for the kernel. Returns -1
// when every id was valid, else the position of the first invalid id (`out` is then
// unspecified). Throws std::runtime_error naming a CUDA error.
std::int64_t range_lookup(int device, lookup_one::RangeTable table, int op, int part,
                          const void* ids, bool int32_ids, std::int64_t n, void* out);
std::int64_t map_lookup(int device, lookup_one::MapTable table, int op, int part,
                        const void* ids, bool int32_ids, std::int64_t n, void* out);

}  // namespace lockstep::ref::cuda
