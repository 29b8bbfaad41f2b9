#include "reference/train/aggregate.h"

#include <stdexcept>
#include <string>

#include "lockstep/config.h"
#include "reference/common/device.h"
#if LOCKSTEP_HAVE_CUDA_KERNELS
#include "reference/train/cuda/aggregate.h"
#endif

namespace lockstep::ref::train {

namespace {

// A stable counting sort of the edges by key[e] in [0, n): ptr (n + 1) and, per edge in
// group order, value[e].
void group(const std::vector<std::int64_t>& key, const std::vector<std::int64_t>& value,
           std::size_t n, std::vector<std::int64_t>& ptr, std::vector<std::int64_t>& out) {
  ptr.assign(n + 1, 0);
  for (const std::int64_t k : key) {
    if (k < 0 || static_cast<std::size_t>(k) >= n) {
      throw std::invalid_argument("edge_groups: edge endpoint " + std::to_string(k) +
                                  " is outside [0, " + std::to_string(n) + ")");
    }
    ++ptr[static_cast<std::size_t>(k) + 1];
  }
  for (std::size_t i = 0; i < n; ++i) ptr[i + 1] += ptr[i];
  std::vector<std::int64_t> next(ptr.begin(), ptr.end() - 1);
  out.resize(key.size());
  for (std::size_t e = 0; e < key.size(); ++e) {
    out[static_cast<std::size_t>(next[static_cast<std::size_t>(key[e])]++)] = value[e];
  }
}

}  // namespace

EdgeGroups edge_groups(const Block& block) {
  if (block.edge_src.size() != block.edge_dst.size()) {
    throw std::invalid_argument("edge_groups: " + std::to_string(block.edge_src.size()) +
                                " edge sources but " + std::to_string(block.edge_dst.size()) +
                                " edge destinations");
  }
  EdgeGroups g;
  group(block.edge_dst, block.edge_src, block.dst_nodes.size(), g.dst_ptr, g.src_of);
  group(block.edge_src, block.edge_dst, block.src_nodes.size(), g.src_ptr, g.dst_of);
  return g;
}

#if LOCKSTEP_HAVE_CUDA_KERNELS
namespace {

const std::int64_t* i64(const CudaBuffer& b) { return static_cast<const std::int64_t*>(b.data()); }

}  // namespace

void mean_aggregate_cuda(int device, const EdgeGroups& groups, const float* h, std::int64_t in,
                         float* agg) {
  cuda_set_device(device);
  const CudaBuffer dst_ptr = cuda_upload(groups.dst_ptr), src_of = cuda_upload(groups.src_of);
  cuda::mean_aggregate(device, i64(dst_ptr), i64(src_of),
                       static_cast<std::int64_t>(groups.dst_ptr.size()) - 1, h, in, agg);
}

void mean_aggregate_backward_cuda(int device, const EdgeGroups& groups, const float* dagg,
                                  const float* start, std::int64_t in, float* dh) {
  cuda_set_device(device);
  const CudaBuffer dst_ptr = cuda_upload(groups.dst_ptr), src_ptr = cuda_upload(groups.src_ptr),
                   dst_of = cuda_upload(groups.dst_of);
  cuda::mean_aggregate_backward(device, i64(dst_ptr), i64(src_ptr), i64(dst_of),
                                static_cast<std::int64_t>(groups.src_ptr.size()) - 1, dagg,
                                start, in, dh);
}
#else
void mean_aggregate_cuda(int, const EdgeGroups&, const float*, std::int64_t, float*) {
  throw std::runtime_error("mean_aggregate_cuda: this build of lockstep has no CUDA kernels");
}
void mean_aggregate_backward_cuda(int, const EdgeGroups&, const float*, const float*,
                                  std::int64_t, float*) {
  throw std::runtime_error(
      "mean_aggregate_backward_cuda: this build of lockstep has no CUDA kernels");
}
#endif

}  // namespace lockstep::ref::train
