#pragma once
// Helpers shared by the capabilities' input writers and checks.
#include <cstdint>
#include <string>
#include <vector>

#include "harness/scenario/scenario.h"

namespace lockstep::sut {

// Offsets [world_size + 1] of rank_split's chunks of n rows starting at `base`: chunk r has
// floor(n / ws) + (r < n % ws) rows (reference/split).
std::vector<std::int64_t> share_offsets(std::int64_t n, int world_size, std::int64_t base = 0);

// "rank 1" / "ranks 0,2" style list of the first few values, for messages.
std::string preview(const std::vector<std::int64_t>& values, std::size_t max = 8);

}  // namespace lockstep::sut
