#pragma once
// One id's partition-book lookup: the per-id work shared by the CPU reference and the CUDA
// kernels (reference/partition/cuda/lookup.cu, thin launchers over these functions). On the
// CPU, RangePartitionBook::owner() is range_owner(), and BookLookupOneTest checks every
// function below against hand-computed values and against the CPU's vectorised loops, for
// valid and invalid ids, so the kernels' per-id logic is proven without a GPU.
#include <cstdint>

#include "reference/common/hd.h"

namespace lockstep::ref::lookup_one {

// The operations, with PartitionBook::Op's values.
enum Op : int { kPartId = 0, kLocalId = 1, kLocalToGlobal = 2, kGlobalToLocal = 3 };

inline constexpr std::int64_t kInt32Max = 2147483647;

// A range book: part p owns [offsets[p], offsets[p + 1]) for p < num_parts (>= 1); offsets
// start at 0 and do not decrease.
struct RangeTable {
  const std::int64_t* offsets = nullptr;
  int num_parts = 0;
};

// The part owning a node id in [0, offsets[num_parts]): the last p with offsets[p] <= id, so
// empty parts (equal neighbouring offsets) never own an id. A binary search.
LOCKSTEP_HD inline int range_owner(RangeTable t, std::int64_t id) {
  int lo = 0;
  int hi = t.num_parts - 1;  // the owner is in [lo, hi]
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (t.offsets[mid] <= id) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// `op` on one id; `part` is the part of kLocalToGlobal and kGlobalToLocal (already checked).
// int32_ids: the ids, and so local and global results, are int32, and a global id past
// INT32_MAX is invalid. Returns false when the id is invalid for `op` (result then unset):
// a node id outside [0, num_nodes), a local id outside [0, part size), a global id not owned
// by `part`.
LOCKSTEP_HD inline bool range_lookup(RangeTable t, int op, int part, std::int64_t id,
                                     bool int32_ids, std::int64_t* result) {
  const std::int64_t* off = t.offsets;
  if (op == kLocalToGlobal) {
    if (id < 0 || id >= off[part + 1] - off[part]) return false;
    const std::int64_t global = off[part] + id;
    if (int32_ids && global > kInt32Max) return false;
    *result = global;
    return true;
  }
  if (op == kGlobalToLocal) {
    if (id < off[part] || id >= off[part + 1]) return false;
    *result = id - off[part];
    return true;
  }
  if (id < 0 || id >= off[t.num_parts]) return false;
  const int owner = range_owner(t, id);
  *result = op == kPartId ? owner : id - off[owner];
  return true;
}

// A map book over num_nodes nodes: part_of[v] is node v's part, local[v] its rank among its
// part's nodes; nodes holds the nodes grouped by part, ascending within a part, part p's at
// [ptr[p], ptr[p + 1]).
struct MapTable {
  const std::int32_t* part_of = nullptr;
  const std::int64_t* local = nullptr;
  const std::int64_t* ptr = nullptr;
  const std::int64_t* nodes = nullptr;
  std::int64_t num_nodes = 0;
};

// As range_lookup, for a map book.
LOCKSTEP_HD inline bool map_lookup(MapTable t, int op, int part, std::int64_t id,
                                   bool int32_ids, std::int64_t* result) {
  if (op == kLocalToGlobal) {
    if (id < 0 || id >= t.ptr[part + 1] - t.ptr[part]) return false;
    const std::int64_t global = t.nodes[t.ptr[part] + id];
    if (int32_ids && global > kInt32Max) return false;
    *result = global;
    return true;
  }
  if (id < 0 || id >= t.num_nodes) return false;
  if (op == kGlobalToLocal && t.part_of[id] != part) return false;
  *result = op == kPartId ? t.part_of[id] : t.local[id];
  return true;
}

}  // namespace lockstep::ref::lookup_one
