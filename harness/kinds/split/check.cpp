#include "harness/kinds/split/check.h"

#include <algorithm>
#include <string>
#include <utility>

#include "reference/common/philox.h"

namespace lockstep::workloads {

std::vector<std::int64_t> split_ids(std::int64_t n, std::uint64_t seed) {
  std::vector<std::pair<std::uint64_t, std::int64_t>> keyed(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) keyed[static_cast<std::size_t>(i)] = {ref::philox_u64(seed, 0x5eed, static_cast<std::uint64_t>(i)), i};
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = keyed[static_cast<std::size_t>(i)].second;
  return ids;
}

std::optional<Diagnosis> split_cover(std::int64_t num_ids, const std::vector<std::vector<std::int64_t>>& shares) {
  auto problem = [](const std::string& msg, int rank) { return Diagnosis{DiagnosisKind::kSplitCoverage, msg, rank, -1}; };
  std::vector<int> owner(static_cast<std::size_t>(std::max<std::int64_t>(num_ids, 0)), -1);
  for (std::size_t r = 0; r < shares.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (const std::int64_t id : shares[r]) {
      if (id < 0 || id >= num_ids) {
        return problem("rank " + std::to_string(rank) + " holds id " + std::to_string(id) + ", outside [0, " +
                           std::to_string(num_ids) + ")",
                       rank);
      }
      int& o = owner[static_cast<std::size_t>(id)];
      if (o >= 0) {
        return problem(o == rank ? "id " + std::to_string(id) + " is twice on rank " + std::to_string(rank)
                                 : "id " + std::to_string(id) + " is on rank " + std::to_string(o) + " and rank " + std::to_string(rank),
                       rank);
      }
      o = rank;
    }
  }
  const auto missing = std::count(owner.begin(), owner.end(), -1);
  if (missing > 0) {
    const auto first = std::find(owner.begin(), owner.end(), -1) - owner.begin();
    return problem("id " + std::to_string(first) + " is on no rank (" + std::to_string(missing) + " of " +
                       std::to_string(num_ids) + " ids are on none)",
                   -1);
  }
  if (shares.empty()) return std::nullopt;
  std::size_t lo = 0, hi = 0;
  for (std::size_t r = 0; r < shares.size(); ++r) {
    if (shares[r].size() < shares[lo].size()) lo = r;
    if (shares[r].size() > shares[hi].size()) hi = r;
  }
  if (shares[hi].size() - shares[lo].size() > 1) {
    return problem("chunk sizes differ by more than one: rank " + std::to_string(hi) + " has " + std::to_string(shares[hi].size()) +
                       ", rank " + std::to_string(lo) + " has " + std::to_string(shares[lo].size()),
                   static_cast<int>(hi));
  }
  return std::nullopt;
}

}  // namespace lockstep::workloads
