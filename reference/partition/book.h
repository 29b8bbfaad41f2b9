#pragma once
// Partition books: which partition owns a node, and the node's id within that partition.
// RangePartitionBook is DGL's range book over relabelled ids; MapPartitionBook takes any
// node -> part map (DGL's basic book, PyG's node-to-partition map).
//
// Device policy. Ids are int32 or int64, on the host or a CUDA device, and every result is on
// the input's device. Partition ids are int32; local and global ids keep the input's IdType.
// For CUDA inputs the lookup runs on that device: a CUDA kernel per lookup
// (reference/partition/cuda/), over the same per-id functions as the CPU
// (reference/partition/lookup_one.h), with the book's tables copied to the device on its
// first lookup there. A build without nvcc (LOCKSTEP_HAVE_CUDA_KERNELS 0) copies the ids to
// the host, computes there and copies the result back. CUDA ids therefore need that CUDA
// device at run time; without it every lookup throws std::runtime_error naming the device.
// Lookups never fail on CUDA ids for any other reason (DGL 2.1.0's did: it converted CUDA
// ids to NumPy). Results and errors are the same on every device.
//
// Validation. Every id is checked. A negative id, a node id >= num_nodes(), or a local id >=
// the part's size throws std::out_of_range naming the first offending value and its position,
// e.g. "node id 1000 at position 17 is out of range [0, 1000)". A part index outside
// [0, num_parts()) throws std::out_of_range. global2local of a node the part does not own
// throws; it never returns -1 (PyG's map does, and the caller then reads the last row).
// Empty parts are valid; an empty input gives an empty output. An IdSpan with a negative
// size, or null data and a positive size, throws std::invalid_argument.
//
// Threads. Lookups are const and may run concurrently. One lookup of at least 2^17 ids runs
// on up to threads() std::threads over contiguous slices, started per call; results never
// depend on the thread count. set_threads() must not race lookups.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "reference/common/device.h"
#include "reference/partition/lookup_one.h"

namespace lockstep::ref {

class PartitionBook {
 public:
  virtual ~PartitionBook() = default;

  // The number of partitions (>= 1).
  virtual int num_parts() const = 0;
  // The number of nodes: node ids are [0, num_nodes()).
  virtual std::int64_t num_nodes() const = 0;
  // The number of nodes `part` owns. Throws std::out_of_range on a bad part.
  virtual std::int64_t part_size(int part) const = 0;

  // Returns the partition of each id: int32, on ids' device.
  // Throws std::out_of_range on the first id outside [0, num_nodes()).
  IdArray nid2partid(IdSpan ids) const;
  // Returns each id's local id within its owning partition: ids' IdType, on ids' device.
  // Throws std::out_of_range on the first id outside [0, num_nodes()).
  IdArray nid2localnid(IdSpan ids) const;
  // As above, but writes into `out`, which is reallocated only when its type, size or device
  // differ from the result's (a caller that reuses `out` allocates once). Throws as above;
  // `out` is then unspecified.
  void nid2partid(IdSpan ids, IdArray& out) const;
  void nid2localnid(IdSpan ids, IdArray& out) const;

  // Returns the global ids `part` owns, ascending, as `type` on `device`.
  // Throws std::out_of_range on a bad part, or when an id does not fit int32.
  IdArray partid2nids(int part, Device device, IdType type = IdType::kI64) const;
  // Returns the global id of each local id of `part`: local's IdType, on local's device.
  // Throws std::out_of_range on a bad part, on the first local id outside
  // [0, part_size(part)), or when a global id does not fit int32.
  IdArray local2global(int part, IdSpan local) const;
  // Returns the local id within `part` of each global id: global's IdType, on global's device.
  // Throws std::out_of_range on a bad part, or on the first id outside [0, num_nodes()) or
  // not owned by `part` (never -1).
  IdArray global2local(int part, IdSpan global) const;

  // The most threads one lookup uses (default 1).
  int threads() const { return threads_; }
  // Throws std::invalid_argument when threads < 1.
  void set_threads(int threads);

 protected:
  enum class Op : std::uint8_t {
    kPartId = lookup_one::kPartId,
    kLocalId = lookup_one::kLocalId,
    kLocalToGlobal = lookup_one::kLocalToGlobal,
    kGlobalToLocal = lookup_one::kGlobalToLocal,
  };

  // Computes `op` for host ids[0, n) of `type` into host `out` (int32 for kPartId, else
  // `type`). Returns false, with `out` unspecified, when some input is invalid for `op`;
  // the caller then finds and reports the first one. Must not throw.
  virtual bool lookup_host(Op op, int part, const void* ids, IdType type, std::int64_t n,
                           void* out) const = 0;
  // Computes `op` for CUDA ids (ids.size > 0) into `out` on their device with lockstep's
  // kernels; returns -1, or the position of the first invalid input. Called only when the
  // kernels are compiled (LOCKSTEP_HAVE_CUDA_KERNELS).
  virtual std::int64_t lookup_cuda(Op op, int part, IdSpan ids, void* out) const = 0;
  // The global ids `part` owns, ascending (part already checked).
  virtual std::vector<std::int64_t> part_nodes(int part) const = 0;
  // The partition of a valid node id, and the global id of a valid local id of `part`.
  virtual int owner(std::int64_t id) const = 0;
  virtual std::int64_t to_global(int part, std::int64_t local) const = 0;

  // Runs fn(begin, end) over contiguous slices of [0, n) on up to threads() threads (one
  // for small n). Returns whether every call returned true. fn must not throw.
  bool parallel_all(std::int64_t n,
                    const std::function<bool(std::int64_t, std::int64_t)>& fn) const;
  // Throws std::out_of_range when part is outside [0, num_parts()).
  void check_part(int part) const;

 private:
  void run(Op op, int part, IdSpan ids, IdArray& out, const char* what) const;
  [[noreturn]] void report_invalid(Op op, int part, const void* ids, IdType type,
                                   std::int64_t n) const;

  int threads_ = 1;

 protected:
  // The tables' copies on CUDA devices, shared by copies of the book (books do not change).
  std::shared_ptr<DeviceMirror> mirror_ = std::make_shared<DeviceMirror>();
};

// DGL's range book over relabelled ids: part p owns [part_offsets[p], part_offsets[p+1]).
class RangePartitionBook final : public PartitionBook {
 public:
  // Throws std::invalid_argument unless part_offsets has >= 2 entries, starts at 0 and does
  // not decrease. Equal neighbours are empty parts.
  explicit RangePartitionBook(std::vector<std::int64_t> part_offsets);

  int num_parts() const override { return static_cast<int>(offsets_.size()) - 1; }
  std::int64_t num_nodes() const override { return offsets_.back(); }
  std::int64_t part_size(int part) const override;
  // The offsets the book was built from (num_parts() + 1 entries).
  const std::vector<std::int64_t>& part_offsets() const { return offsets_; }

 protected:
  // Defined with the hot loops in reference/partition/cpu/lookup.cpp.
  bool lookup_host(Op op, int part, const void* ids, IdType type, std::int64_t n,
                   void* out) const override;
  std::int64_t lookup_cuda(Op op, int part, IdSpan ids, void* out) const override;
  std::vector<std::int64_t> part_nodes(int part) const override;
  int owner(std::int64_t id) const override;
  std::int64_t to_global(int part, std::int64_t local) const override;

 private:
  std::vector<std::int64_t> offsets_;
};

// Any node -> part map. A node's local id is its rank among its part's nodes in ascending
// global order.
class MapPartitionBook final : public PartitionBook {
 public:
  // num_parts = max(part_of) + 1. Throws std::invalid_argument when part_of is empty (the
  // part count cannot be inferred) or holds a negative part.
  explicit MapPartitionBook(std::vector<std::int32_t> part_of);
  // Throws std::invalid_argument when num_parts < 1 or part_of holds a part outside
  // [0, num_parts), naming the first such entry. Parts no node maps to are empty.
  MapPartitionBook(std::vector<std::int32_t> part_of, int num_parts);

  int num_parts() const override { return num_parts_; }
  std::int64_t num_nodes() const override { return static_cast<std::int64_t>(part_of_.size()); }
  std::int64_t part_size(int part) const override;
  // The map the book was built from.
  const std::vector<std::int32_t>& part_of() const { return part_of_; }

 protected:
  // Defined with the hot loops in reference/partition/cpu/lookup.cpp.
  bool lookup_host(Op op, int part, const void* ids, IdType type, std::int64_t n,
                   void* out) const override;
  std::int64_t lookup_cuda(Op op, int part, IdSpan ids, void* out) const override;
  std::vector<std::int64_t> part_nodes(int part) const override;
  int owner(std::int64_t id) const override;
  std::int64_t to_global(int part, std::int64_t local) const override;

 private:
  std::vector<std::int32_t> part_of_;
  int num_parts_ = 0;
  std::vector<std::uint8_t> part8_;  // part_of_ as bytes when num_parts_ <= 256 (a smaller
                                     // table for the random gathers of nid2partid)
  std::vector<std::int64_t> local_;  // node -> local id
  std::vector<std::int64_t> ptr_;    // part -> start in nodes_ (num_parts_ + 1)
  std::vector<std::int64_t> nodes_;  // nodes grouped by part, ascending within each part
};

}  // namespace lockstep::ref
