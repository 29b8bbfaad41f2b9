#pragma once
// The per-element steps of first-appearance relabelling by sorting (relabel.h), shared by the
// host path and the CUDA kernels (reference/sampling/cuda/relabel.cu). Plain C++17.
//
// For values v[0, n): sort the positions stably by value (sorted values s, positions q); a run
// of equal values starts at k when run_start(s, k) is k; an inclusive max-scan of run_start
// gives each sorted element its run's start r[k], and first[q[k]] = q[r[k]] is the first
// position of its value (the sort is stable, so q is ascending within a run). Position p is a
// first appearance when first[p] == p; an exclusive sum of those marks numbers the distinct
// values in order of first appearance: local[p] = id[first[p]], unique[id[p]] = v[p].
#include <cstdint>

#include "reference/common/hd.h"

namespace lockstep::ref::relabel_one {

// k when sorted element k starts a run of equal values (k == 0 or a new value), else 0.
LOCKSTEP_HD inline std::int64_t run_start(const std::int64_t* sorted, std::int64_t k) {
  return (k == 0 || sorted[k] != sorted[k - 1]) ? k : 0;
}

// The first position of sorted element k's value: the position at its run's start.
LOCKSTEP_HD inline std::int64_t first_position(const std::int64_t* positions, const std::int64_t* run, std::int64_t k) {
  return positions[run[k]];
}

// 1 when position p is its value's first appearance, else 0.
LOCKSTEP_HD inline std::int64_t first_mark(const std::int64_t* first, std::int64_t p) {
  return first[p] == p ? 1 : 0;
}

// Writes position p's results: local[p] = id[first[p]], and unique[id[p]] = values[p] when p
// is a first appearance.
LOCKSTEP_HD inline void relabel_position(const std::int64_t* values, const std::int64_t* first, const std::int64_t* id,
                                         std::int64_t p, std::int64_t* local, std::int64_t* unique) {
  local[p] = id[first[p]];
  if (first[p] == p) unique[id[p]] = values[p];
}

// Block edge destinations from per-destination counts: edges offsets[d] .. offsets[d + 1] - 1
// get d.
LOCKSTEP_HD inline void fill_destination(const std::int64_t* offsets, std::int64_t d, std::int64_t* edge_dst) {
  for (std::int64_t k = offsets[d]; k < offsets[d + 1]; ++k) edge_dst[k] = d;
}

}  // namespace lockstep::ref::relabel_one
