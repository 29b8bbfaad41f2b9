#pragma once
// Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random
// numbers: as easy as 1, 2, 3", SC 2011), bit-identical to Random123, cuRAND and ATen.
// Every random draw in the reference is a pure function of (seed, counter), so results never
// depend on thread count, world size or the order in which work is done.
//
// Exact definition, for reimplementation elsewhere:
//   M0 = 0xD2511F53, M1 = 0xCD9E8D57 (round multipliers), W0 = 0x9E3779B9, W1 = 0xBB67AE85
//   (key increments). One round maps counter (c0, c1, c2, c3) and key (k0, k1) to
//     p0 = M0 * c0 (64-bit product), p1 = M1 * c2 (64-bit product)
//     (hi32(p1) ^ c1 ^ k0, lo32(p1), hi32(p0) ^ c3 ^ k1, lo32(p0)).
//   Philox4x32-10 applies 10 rounds; the key is bumped (k0 += W0, k1 += W1, mod 2^32) between
//   consecutive rounds (9 bumps), never before the first.
//   philox_u64x2(key, c0, c1) runs it on counter (lo32(c0), hi32(c0), lo32(c1), hi32(c1)) and
//   key (lo32(key), hi32(key)) and returns (w0 | w1 << 32, w2 | w3 << 32);
//   philox_u64 returns the first of those.
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "reference/common/hd.h"

namespace lockstep::ref {

inline constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;
inline constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;

// Philox4x32-10 of counter words c[0..4) under key (k0, k1), in place: the one implementation,
// for the host and (under nvcc) CUDA kernels, which the std::array forms below call.
LOCKSTEP_HD constexpr void philox4x32_10_words(std::uint32_t* c, std::uint32_t k0,
                                               std::uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    const std::uint64_t p0 = std::uint64_t{kPhiloxM0} * c[0];
    const std::uint64_t p1 = std::uint64_t{kPhiloxM1} * c[2];
    const std::uint32_t x0 = static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k0;
    const std::uint32_t x2 = static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k1;
    c[0] = x0;
    c[1] = static_cast<std::uint32_t>(p1);
    c[2] = x2;
    c[3] = static_cast<std::uint32_t>(p0);
  }
}

// philox_u64x2 (below) as two words w0, w1, for the host and CUDA kernels.
LOCKSTEP_HD constexpr void philox_u64x2_words(std::uint64_t key, std::uint64_t c0,
                                              std::uint64_t c1, std::uint64_t* w0,
                                              std::uint64_t* w1) {
  std::uint32_t c[4] = {static_cast<std::uint32_t>(c0), static_cast<std::uint32_t>(c0 >> 32),
                        static_cast<std::uint32_t>(c1), static_cast<std::uint32_t>(c1 >> 32)};
  philox4x32_10_words(c, static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32));
  *w0 = c[0] | (std::uint64_t{c[1]} << 32);
  *w1 = c[2] | (std::uint64_t{c[3]} << 32);
}

// Returns Philox4x32-10 of `counter` under `key` (Random123's philox4x32_R(10, ...)).
constexpr std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                                     std::array<std::uint32_t, 2> key) {
  philox4x32_10_words(counter.data(), key[0], key[1]);
  return counter;
}

// Returns the 128 bits of Philox4x32-10 at counter (c0, c1) under `key` as two 64-bit words
// (see the definition at the top of this file).
constexpr std::array<std::uint64_t, 2> philox_u64x2(std::uint64_t key, std::uint64_t c0,
                                                    std::uint64_t c1) {
  std::array<std::uint64_t, 2> w{};
  philox_u64x2_words(key, c0, c1, &w[0], &w[1]);
  return w;
}

// Returns the first 64-bit word of philox_u64x2(key, c0, c1): words 0 | 1 << 32.
constexpr std::uint64_t philox_u64(std::uint64_t key, std::uint64_t c0, std::uint64_t c1) {
  return philox_u64x2(key, c0, c1)[0];
}

// Returns a double in [0, 1): the top 53 bits of `bits` divided by 2^53 (exact, no rounding).
constexpr double uniform01(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// uniform_below (below) without its check of n (n >= 1), for the host and CUDA kernels: the
// high 64 bits of the 128-bit product.
LOCKSTEP_HD constexpr std::uint64_t uniform_below_unchecked(std::uint64_t bits, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(bits) * n) >> 64);
}

// Returns an integer in [0, n): floor(bits * n / 2^64) (Lemire's multiply-high, no rejection
// loop, so exactly one draw per call). Bias: each result has probability within 2^-64 of 1/n
// (it is hit by floor(2^64/n) or ceil(2^64/n) of the 2^64 inputs). Throws
// std::invalid_argument when n == 0.
constexpr std::uint64_t uniform_below(std::uint64_t bits, std::uint64_t n) {
  if (n == 0) throw std::invalid_argument("uniform_below: n must be >= 1, got 0");
  return uniform_below_unchecked(bits, n);
}

// The second counter word c1 used by each consumer: stream_counter(stream, sub) =
// stream << 32 | sub, so that no two consumers ever share a counter for the same seed.
// Register new streams here.
namespace streams {
inline constexpr std::uint32_t kRmat = 1;             // c0 = edge index, sub = level / 2
inline constexpr std::uint32_t kErdosRenyi = 2;       // c0 = edge index, sub = 0
inline constexpr std::uint32_t kPowerLawEdges = 3;    // c0 = edge index, sub = 0
inline constexpr std::uint32_t kPowerLawNodes = 4;    // c0 = node id, sub = 0
inline constexpr std::uint32_t kRandomPartition = 5;  // c0 = node id, sub = 0
inline constexpr std::uint32_t kSampleEpoch = 6;      // key = seed, c0 = epoch, sub = 0
inline constexpr std::uint32_t kSampleBatch = 7;      // key = epoch key, c0 = batch, sub = hop
inline constexpr std::uint32_t kSampleDraw = 8;       // key = hop key, c0 = node id, sub = draw / 2
inline constexpr std::uint32_t kEmbeddingInit = 9;    // key = seed, c0 = row, sub = column
inline constexpr std::uint32_t kEmbeddingIds = 10;    // key = seed, c0 = batch position, sub = step
inline constexpr std::uint32_t kEmbeddingGrads = 11;  // key = seed, c0 = position << 16 | column, sub = step
inline constexpr std::uint32_t kEmbeddingWeights = 12;  // key = seed, c0 = id position, sub = step (bag weights)
// Training (reference/train), numbered from 20 so other streams can be added below.
inline constexpr std::uint32_t kTrainFeature = 20;    // key = seed, c0 = node id, sub = feature / 2
inline constexpr std::uint32_t kTrainLabel = 21;      // key = seed, c0 = class * dim + feature, sub = 0
inline constexpr std::uint32_t kTrainInit = 22;       // key = seed, c0 = parameter index, sub = 0
inline constexpr std::uint32_t kTrainSplit = 23;      // key = seed, c0 = node id, sub = 0
inline constexpr std::uint32_t kTrainOrder = 24;      // key = seed, c0 = node id, sub = epoch
inline constexpr std::uint32_t kSutQueries = 30;    // key = seed, c0 = query index, sub = query group
inline constexpr std::uint32_t kSutBook = 31;       // key = seed, c0 = node id (a shuffle's swap), sub = 0
}  // namespace streams

// Returns stream << 32 | sub, the c1 word for `stream`.
constexpr std::uint64_t stream_counter(std::uint32_t stream, std::uint32_t sub) {
  return (std::uint64_t{stream} << 32) | sub;
}

}  // namespace lockstep::ref
