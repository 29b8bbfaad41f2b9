// reference/common/philox.h: Philox4x32-10 against Random123's known answers, and the
// helpers built on it (packing, uniform01, uniform_below).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "reference/common/philox.h"
#include "tests/test_util.h"

namespace lockstep::ref {
namespace {

using test::message_of;
using Words4 = std::array<std::uint32_t, 4>;

// ---- Philox ---------------------------------------------------------------------------------

// Random123's published known-answer vectors (kat_vectors, philox4x32 10 rounds).
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Words4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (Words4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (Words4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(PhiloxTest, IsConstexpr) {
  static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5);
  static_assert(philox_u64(0, 0, 0) == (0x6627e8d5ull | (0xe169c58dull << 32)));
  SUCCEED();
}

TEST(PhiloxTest, U64PacksCounterKeyAndWordsLittleEndian) {
  // key 0x299f31d0'a4093822, c0 = words 0|1, c1 = words 2|3 of the third known-answer vector.
  const auto w = philox_u64x2(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull, 0x0370734413198a2eull);
  EXPECT_EQ(w[0], 0x94fdcceb'd16cfe09ull);
  EXPECT_EQ(w[1], 0x24126ea1'5001e420ull);
  EXPECT_EQ(philox_u64(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull, 0x0370734413198a2eull),
            0x94fdcceb'd16cfe09ull);
}

TEST(PhiloxTest, Uniform01UsesTop53Bits) {
  EXPECT_EQ(uniform01(0), 0.0);
  EXPECT_EQ(uniform01(0x7ff), 0.0);  // the low 11 bits are dropped
  EXPECT_EQ(uniform01(1ull << 63), 0.5);
  EXPECT_EQ(uniform01(~0ull), 1.0 - 0x1.0p-53);
  EXPECT_LT(uniform01(~0ull), 1.0);
}

TEST(PhiloxTest, UniformBelowIsMultiplyHigh) {
  EXPECT_EQ(uniform_below(0, 10), 0u);
  EXPECT_EQ(uniform_below(~0ull, 10), 9u);
  EXPECT_EQ(uniform_below(1ull << 63, 10), 5u);
  EXPECT_EQ(uniform_below(~0ull, 1), 0u);
  EXPECT_EQ(uniform_below(0x8000000000000000ull, 3), 1u);
  EXPECT_EQ(uniform_below(~0ull, ~0ull), ~0ull - 1);
  EXPECT_NE(message_of<std::invalid_argument>([] { (void)uniform_below(5, 0); }).find("got 0"),
            std::string::npos);
}

TEST(PhiloxTest, UniformBelowIsRoughlyUniform) {
  constexpr int kBins = 7;
  constexpr int kDraws = 70000;
  std::array<int, kBins> counts{};
  for (int i = 0; i < kDraws; ++i) {
    ++counts[uniform_below(philox_u64(/*key=*/42, static_cast<std::uint64_t>(i), 0), kBins)];
  }
  double chi2 = 0;
  for (const int c : counts) chi2 += (c - 10000.0) * (c - 10000.0) / 10000.0;
  EXPECT_LT(chi2, 22.5);  // p = 0.001 for 6 degrees of freedom
}

}  // namespace
}  // namespace lockstep::ref
