#pragma once
// Helpers shared by the benchmarks.
#include <algorithm>
#include <vector>

namespace lockstep::bench {

// The median (upper middle for an even count) of `v`; 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace lockstep::bench
