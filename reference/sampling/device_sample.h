#pragma once
// One hop of neighbor sampling for nodes on any device, with its results on that device: on a
// CUDA device by lockstep's kernels (reference/sampling/cuda/, over the per-node functions of
// sample_one.h that the CPU's sample_node runs), so every node's sample is bit-identical to
// sample_hop's on the host. A build without nvcc (LOCKSTEP_HAVE_CUDA_KERNELS 0) samples CUDA
// nodes through the host instead.
#include <cstdint>
#include <memory>
#include <vector>

#include "reference/common/device.h"
#include "reference/graph/graph.h"
#include "reference/sampling/neighbor.h"

namespace lockstep::ref {

// A host graph's rows (as sample_hop takes them) for sampling on CUDA devices: copied to a
// device at the first sample there, and kept. `rows` must outlive this and not change.
// Copies share the device copies. Thread-safe.
class SampleRows {
 public:
  explicit SampleRows(const CsrGraph& rows) : rows_(&rows) {}
  const CsrGraph& host() const { return *rows_; }
  // Device copies of indptr, indices and edge_ids on CUDA device `device`.
  const std::vector<const void*>& on(int device) const;

 private:
  const CsrGraph* rows_;
  std::shared_ptr<DeviceMirror> mirror_ = std::make_shared<DeviceMirror>();
};

// HopSample's arrays, int64, on the nodes' device.
struct DeviceHopSample {
  IdArray counts;
  IdArray nbrs;
  IdArray eids;
};

// sample_hop(rows.host(), nodes, fanout, replace, key) for int32 or int64 `nodes` on the host
// or a CUDA device: the same counts, neighbors and edge ids, as int64 arrays on the nodes'
// device. Throws what sample_hop throws, with its messages (a bad fanout or key, the first node
// outside [0, num_nodes)), and std::runtime_error when the nodes' CUDA device is not visible.
DeviceHopSample sample_hop(const SampleRows& rows, IdSpan nodes, std::int64_t fanout,
                           bool replace, const SampleKey& key);

// A Block (neighbor.h) as int64 arrays on one device.
struct DeviceBlock {
  IdArray dst_nodes, src_nodes, edge_src, edge_dst, edge_ids;
};

// SampledBlocks (neighbor.h) as int64 arrays on one device.
struct DeviceSampledBlocks {
  IdArray seeds, seed_to_output;
  std::vector<DeviceBlock> blocks;
  SampledBlocks to_host() const;  // the same values in host vectors
};

// sample_neighbors(rows.host(), seeds, options, key) for int64 seeds on the host or a CUDA
// device, every step on the seeds' device: the unique seeds and each hop's src_nodes by
// first-appearance relabelling of (frontier, sampled neighbors) (relabel.h), the draws by
// sample_hop above, the edge destinations from its counts. The same blocks as
// sample_neighbors, bit for bit (options.num_threads and id_table do not apply). Throws what
// sample_neighbors throws for bad options or key, and for a seed outside [0, num_nodes), named
// as sample_hop names a node.
DeviceSampledBlocks sample_neighbors(const SampleRows& rows, IdSpan seeds, const SampleOptions& options,
                                     const SampleKey& key);

}  // namespace lockstep::ref
