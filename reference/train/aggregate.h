#pragma once
// GraphSAGE mean aggregation over one block (sage.h), forward and backward, as per-element
// functions (aggregate_one.h) shared by the CPU model (train::forward and train::backward run
// them) and the CUDA kernels (reference/train/cuda/aggregate.cu, thin launchers over them).
// One output element sums its terms in block edge order, exactly as the edge-order loops they
// replaced, so results are bit-identical on every device: the training tests and
// MeanAggregationTest (the edge-order loops, hand-computed means) prove them on the CPU.
#include <cstdint>
#include <vector>

#include "reference/train/aggregate_one.h"
#include "reference/sampling/neighbor.h"

namespace lockstep::ref::train {

// A block's edges grouped by dst and by src, each group in block edge order (a stable
// counting sort: blocks need not be grouped).
struct EdgeGroups {
  std::vector<std::int64_t> dst_ptr;  // dst d's edges: positions dst_ptr[d] .. dst_ptr[d+1] of src_of
  std::vector<std::int64_t> src_of;   // the src (local index) of each edge, grouped by dst
  std::vector<std::int64_t> src_ptr;  // src s's edges: positions src_ptr[s] .. src_ptr[s+1] of dst_of
  std::vector<std::int64_t> dst_of;   // the dst (local index) of each edge, grouped by src
};
// Throws std::invalid_argument when the edge arrays differ in length or an endpoint is outside
// the block, naming it.
EdgeGroups edge_groups(const Block& block);

// The same on a CUDA device (device arrays of floats, fp32; bf16 mode feeds bf16-rounded
// floats, as on the CPU): agg (dst x in) from h (src x in), and dh (src x in) from dagg
// (dst x in) and start (src x in; rows past the dsts are 0). The groups are copied to the
// device per call. Throws std::runtime_error without lockstep's CUDA kernels or on a CUDA
// error.
void mean_aggregate_cuda(int device, const EdgeGroups& groups, const float* h, std::int64_t in,
                         float* agg);
void mean_aggregate_backward_cuda(int device, const EdgeGroups& groups, const float* dagg,
                                  const float* start, std::int64_t in, float* dh);

}  // namespace lockstep::ref::train
