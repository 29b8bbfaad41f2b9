#pragma once
// First-appearance relabelling, the step that turns one hop's sampled neighbors into a block's
// local ids (neighbor.h: src_nodes are the frontier, then new neighbors in order of first
// appearance), for values on the host or a CUDA device, by sorting (relabel_one.h): on a
// CUDA device with CUB and lockstep's kernels, on the host with the same steps, so the CPU
// tests prove the algorithm the GPU runs. A build without nvcc relabels CUDA values through
// the host.
#include <cstdint>

#include "reference/common/device.h"

namespace lockstep::ref {

struct Relabelled {
  IdArray unique;  // the distinct values, in order of first appearance
  IdArray local;   // per value: its index in unique
};

// Relabels int64 `values` (host or CUDA); results int64, on the values' device. Throws
// std::invalid_argument for int32 values, std::runtime_error when their CUDA device is not
// visible.
Relabelled relabel_first_appearance(IdSpan values);

// Block edge destinations from one hop's per-destination counts (int64, host or CUDA):
// `edges` (their sum) entries, edge k of destination d being d; on the counts' device.
IdArray edge_destinations(IdSpan counts, std::int64_t edges);

// a followed by b (both int64, on one device), on that device.
IdArray concat(IdSpan a, IdSpan b);

}  // namespace lockstep::ref
