#pragma once
// DistEmbedding's shard: one part's rows and optimizer state, on the host or a CUDA device.
//
// Initialisation. Element (row, col) starts as embedding_init(seed, row, col, scale), a pure
// function of its global coordinates, so it never depends on the sharding, world size or
// storage dtype; it is then rounded once to the storage dtype.
//
// Devices. A shard may live on a CUDA device (EmbeddingOptions::device): its lookups, row
// gathers and fused reduce-and-update run there as kernels over the per-element functions of
// embedding_one.h, which the host shard runs too, so every pulled row and every stored bit is
// the same on either. Exchanges stay host buffers (the transport's).
#include <cstdint>
#include <vector>

#include "reference/common/device.h"
#include "reference/common/philox.h"
#include "reference/embedding/embedding_one.h"
#include "reference/embedding/optimizer.h"

namespace lockstep::ref {

// Returns the initial value of element (row, col): (2u - 1) * scale rounded to f32, where
// u = uniform01(philox_u64(seed, row, stream_counter(kEmbeddingInit, col))).
inline float embedding_init(std::uint64_t seed, std::int64_t row, std::int64_t col, double scale) {
  const double u = uniform01(philox_u64(seed, static_cast<std::uint64_t>(row),
                                        stream_counter(streams::kEmbeddingInit, static_cast<std::uint32_t>(col))));
  return static_cast<float>((2.0 * u - 1.0) * scale);
}

// One part's rows: storage and optimizer state, local ids [0, rows), on the host or in the
// memory of one CUDA device, where reference/embedding/cuda's kernels gather and update them
// with the per-element functions the host runs (embedding_one.h), so the rows are the same
// bits on either.
class EmbeddingShard {
 public:
  // Initialises local row l (global id global_ids[l]) with embedding_init, rounded to storage,
  // then moves rows and state to `device`. Throws std::invalid_argument when dim < 1, and
  // std::runtime_error for a CUDA device that is not visible or on a build without the CUDA
  // kernels (LOCKSTEP_HAVE_CUDA_KERNELS).
  EmbeddingShard(std::vector<std::int64_t> global_ids, std::int64_t dim, Storage storage, std::uint64_t seed,
                 double init_scale, const OptimizerOptions& opt, Device device = {});

  std::int64_t rows() const { return static_cast<std::int64_t>(global_ids_.size()); }
  std::int64_t dim() const { return dim_; }
  Storage storage() const { return storage_; }
  Device device() const { return device_; }
  const std::vector<std::int64_t>& global_ids() const { return global_ids_; }

  // Writes local row l as f32 into host out[0, dim). l must be in [0, rows()) (unchecked).
  void read_row(std::int64_t l, float* out) const;
  // Writes every row as f32, row-major (rows() x dim), on the host.
  std::vector<float> to_f32() const;
  // The rows themselves for kF32 storage on the host (rows() x dim, row-major), else null.
  const float* f32_data() const { return storage_ == Storage::kF32 && !device_.is_cuda() ? f32_.data() : nullptr; }
  // out[i * dim + c] = element c of local row locals[i], for i in [0, n) with part null or
  // part[i] == me. locals (int32 or int64), part and out live where the shard does; locals
  // must be in [0, rows()) (unchecked).
  void gather(const void* locals, IdType type, const std::int32_t* part, int me, std::int64_t n, float* out) const;
  // Applies the update of reduced gradient row g (host) to local row l at step t.
  void update_row(std::int64_t l, const float* g, std::int64_t t);
  // Applies every group's update at step t: local row locals[k] gets the reduction (`mode`) of
  // its contributions, grads (host, n x dim) rows groups.order[ptr[k] .. ptr[k + 1]), element
  // by element (update_from_contributions). locals must be in [0, rows()) (unchecked).
  void update_rows(const std::vector<std::int64_t>& locals, const GradGroups& groups, const float* grads,
                   std::int64_t n, DuplicateReduce mode, std::int64_t t);
  // THE KNOWN BUG, kept for fault injection (DGL #3561): the updates of one row from several
  // sources applied as concurrent read-modify-writes of its state and weights; each source
  // computes its update from the same snapshot and the last writer wins, so every other
  // source's update is lost. groups: the per-source reduced gradient rows (k x dim), in
  // source order.
  void update_row_racy(std::int64_t l, const std::vector<std::vector<float>>& groups, std::int64_t t);

 private:
  // Row l's weights (as f32) and state, to and from host buffers of dim values each (s1, s2
  // may be empty when the optimizer has no such state).
  void load_state(std::int64_t l, float* w, std::vector<float>& s1, std::vector<float>& s2) const;
  void save_state(std::int64_t l, const float* w, const std::vector<float>& s1, const std::vector<float>& s2);
  std::size_t element_bytes() const { return storage_ == Storage::kF32 ? 4 : 2; }
  const void* table() const;
  void* table() { return const_cast<void*>(static_cast<const EmbeddingShard*>(this)->table()); }
  float* state(int which);  // 1: s1, 2: s2; null when the optimizer has none

  std::vector<std::int64_t> global_ids_;
  std::int64_t dim_;
  Storage storage_;
  OptimizerOptions opt_;
  Device device_;
  bool has_s1_ = false, has_s2_ = false;
  std::vector<float> f32_;  // host storage and state
  std::vector<std::uint16_t> half_;
  std::vector<float> s1_, s2_;
  CudaBuffer table_d_, s1_d_, s2_d_;  // CUDA storage and state
};

}  // namespace lockstep::ref
