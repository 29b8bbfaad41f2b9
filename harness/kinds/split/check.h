#pragma once
// The split contract, judged alike for lockstep's own `split` workload and for a system under
// test's split (harness/kinds/split/capability.cpp): N global ids [0, N) over W ranks, every id on
// exactly one rank, and the ranks' shares within one id of each other (as rank_split makes
// them, reference/split/split.h).
#include <cstdint>
#include <optional>
#include <vector>

#include "harness/core/diagnosis.h"

namespace lockstep::workloads {

// The global ids to split: a permutation of [0, n) fixed by the seed.
std::vector<std::int64_t> split_ids(std::int64_t n, std::uint64_t seed);

// shares[r]: the global ids rank r holds. Returns split_coverage for the first problem, in this
// order: an id outside [0, num_ids) (blaming its rank), an id on two ranks (blaming the later
// one), ids on no rank (naming how many and the first, blaming none), shares more than one id
// apart (blaming the largest); or nothing.
std::optional<Diagnosis> split_cover(std::int64_t num_ids, const std::vector<std::vector<std::int64_t>>& shares);

}  // namespace lockstep::workloads
