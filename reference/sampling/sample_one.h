#pragma once
// One node's neighbor sample (the definition at the top of reference/sampling/neighbor.h), as
// per-node functions shared by the CPU reference and the CUDA kernels
// (reference/sampling/cuda/sample.cu, thin launchers over these). On the CPU, sample_node()
// runs sample_positions_one, so the sampling tests that compare sample_node with the
// documented draws and with the vectorised hop sampler (reference/sampling/cpu/) prove the
// kernels' per-node logic without a GPU.
#include <cstdint>

#include "reference/common/hd.h"
#include "reference/common/philox.h"

namespace lockstep::ref::sample_one {

// How many positions a node of `degree` samples: 0 when degree or fanout is 0, degree when
// fanout is -1, fanout with replacement, min(degree, fanout) without.
LOCKSTEP_HD constexpr std::int64_t count(std::int64_t degree, std::int64_t fanout, bool replace) {
  if (degree == 0 || fanout == 0) return 0;
  if (fanout < 0) return degree;
  return replace ? fanout : (degree < fanout ? degree : fanout);
}

// Whether the sample draws random numbers (otherwise it takes the whole row in CSR order).
LOCKSTEP_HD constexpr bool draws(std::int64_t degree, std::int64_t fanout, bool replace) {
  return degree > 0 && fanout > 0 && (replace || degree > fanout);
}

// Draw k of node v: philox_u64x2(hop_key, c0 = v, c1 = stream_counter(kSampleDraw, k / 2))[k % 2].
LOCKSTEP_HD constexpr std::uint64_t draw_bits(std::uint64_t hop_key, std::int64_t node,
                                              std::int64_t k) {
  std::uint64_t w0 = 0, w1 = 0;
  philox_u64x2_words(hop_key, static_cast<std::uint64_t>(node),
                     (std::uint64_t{streams::kSampleDraw} << 32) | static_cast<std::uint64_t>(k >> 1),
                     &w0, &w1);
  return (k & 1) != 0 ? w1 : w0;
}

// Writes the count(degree, fanout, replace) row positions (each in [0, degree)) that `node`
// samples to pos, in output order. Without replacement and degree > fanout it runs the
// partial Fisher-Yates on the virtual array (0, 1, ..., degree-1), keeping the displaced
// entries in swap_pos / swap_val (fanout entries each, scratch; a linear scan, O(fanout^2)).
LOCKSTEP_HD inline void positions(std::int64_t degree, std::int64_t fanout, bool replace,
                                  std::uint64_t hop_key, std::int64_t node, std::int64_t* pos,
                                  std::int64_t* swap_pos, std::int64_t* swap_val) {
  if (!draws(degree, fanout, replace)) {
    const std::int64_t n = count(degree, fanout, replace);
    for (std::int64_t e = 0; e < n; ++e) pos[e] = e;
    return;
  }
  const auto d = static_cast<std::uint64_t>(degree);
  if (replace) {
    for (std::int64_t k = 0; k < fanout; ++k) {
      pos[k] = static_cast<std::int64_t>(uniform_below_unchecked(draw_bits(hop_key, node, k), d));
    }
    return;
  }
  std::int64_t displaced = 0;  // entries in swap_pos / swap_val
  const auto get = [&](std::int64_t j) {
    for (std::int64_t i = 0; i < displaced; ++i) {
      if (swap_pos[i] == j) return swap_val[i];
    }
    return j;
  };
  for (std::int64_t k = 0; k < fanout; ++k) {
    const std::int64_t j =
        k + static_cast<std::int64_t>(uniform_below_unchecked(
                draw_bits(hop_key, node, k), d - static_cast<std::uint64_t>(k)));
    pos[k] = get(j);
    if (j == k) continue;
    // p[j] = p[k]; p[k] is never read again (later draws pick j' > k).
    const std::int64_t moved = get(k);
    std::int64_t i = 0;
    while (i < displaced && swap_pos[i] != j) ++i;
    swap_pos[i] = j;
    swap_val[i] = moved;
    if (i == displaced) ++displaced;
  }
}

}  // namespace lockstep::ref::sample_one
