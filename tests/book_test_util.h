#pragma once
// What the tests of the partition books share (book_test.cpp, the range book; book_map_test.cpp,
// the map book; book_device_test.cpp, ids on a CUDA device): the host device, and random offsets
// and ids for the tests that compare against a naive oracle.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "reference/partition/book.h"

namespace lockstep::ref::book_test {

using Ids = std::vector<std::int64_t>;

inline const Device kCpu{};

// Offsets of `parts` parts over `nodes` nodes with random sizes; every third part is empty.
inline Ids random_offsets(int parts, std::int64_t nodes, std::mt19937_64& rng) {
  Ids cuts;
  for (int p = 1; p < parts; ++p) {
    cuts.push_back(p % 3 == 1 && p > 1 ? -1 : static_cast<std::int64_t>(rng() % (nodes + 1)));
  }
  for (std::size_t i = 0; i < cuts.size(); ++i) {
    if (cuts[i] < 0) cuts[i] = i > 0 ? cuts[i - 1] : 0;  // repeat the previous cut: empty part
  }
  std::sort(cuts.begin(), cuts.end());
  Ids offsets{0};
  offsets.insert(offsets.end(), cuts.begin(), cuts.end());
  offsets.push_back(nodes);
  return offsets;
}

inline Ids random_ids(std::int64_t count, std::int64_t nodes, std::mt19937_64& rng) {
  Ids ids(static_cast<std::size_t>(count));
  for (auto& id : ids) id = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(nodes));
  return ids;
}

}  // namespace lockstep::ref::book_test
