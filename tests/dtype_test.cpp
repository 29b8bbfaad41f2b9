// In-process tests of the communicator's dtypes: names and sizes, 16-bit float conversions and
// dtype conversion against hand-derived bit patterns. Every expected value is written out by
// hand from IEEE 754, never taken from the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/comm/dtype.h"
#include "harness/comm/types.h"
#include "harness/core/error.h"
#include "tests/test_util.h"

namespace lockstep::comm {
namespace {

float from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::uint32_t bits_of(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// ---------------------------------------------------------------------------------------------
// Names and sizes.

TEST(CommTypesTest, DTypeNamesAndSizes) {
  struct Want {
    DType dtype;
    const char* name;
    std::size_t size;
  };
  const Want wants[] = {{DType::kF32, "f32", 4}, {DType::kF64, "f64", 8}, {DType::kF16, "f16", 2},
                        {DType::kBF16, "bf16", 2}, {DType::kI8, "i8", 1},  {DType::kU8, "u8", 1},
                        {DType::kI32, "i32", 4}, {DType::kI64, "i64", 8}};
  for (const auto& w : wants) {
    EXPECT_EQ(to_string(w.dtype), w.name);
    EXPECT_EQ(element_size(w.dtype), w.size) << w.name;
    ASSERT_TRUE(dtype_from_string(w.name).has_value()) << w.name;
    EXPECT_EQ(*dtype_from_string(w.name), w.dtype) << w.name;
  }
  EXPECT_FALSE(dtype_from_string("float32").has_value());
  EXPECT_FALSE(dtype_from_string("").has_value());
  EXPECT_EQ(*reduce_op_from_string("avg"), ReduceOp::kAvg);
  EXPECT_FALSE(reduce_op_from_string("prod").has_value());
  EXPECT_EQ(*op_from_string("all_to_all"), Op::kAllToAll);
  EXPECT_EQ(*op_from_string("reduce_scatter"), Op::kReduceScatter);
  EXPECT_FALSE(op_from_string("reduce_scatter_tensor").has_value());
}

// Every op's name reads back to the op (codes are stable: traces and programs carry them), and
// each carries exactly the fields c10d gives it: the reduce op for the reducing ones, a root for the
// rooted ones, a peer and tag for point-to-point.
TEST(CommTypesTest, OpTableFields) {
  struct Want {
    Op op;
    const char* name;
    int code;
    bool reduces, rooted, p2p;
  };
  const Want wants[] = {
      {Op::kAllReduce, "all_reduce", 0, true, false, false},   {Op::kAllGather, "all_gather", 1, false, false, false},
      {Op::kAllToAll, "all_to_all", 2, false, false, false},   {Op::kBroadcast, "broadcast", 3, false, true, false},
      {Op::kBarrier, "barrier", 4, false, false, false},       {Op::kSend, "send", 5, false, false, true},
      {Op::kRecv, "recv", 6, false, false, true},              {Op::kReduceScatter, "reduce_scatter", 7, true, false, false},
      {Op::kReduce, "reduce", 8, true, true, false},           {Op::kGather, "gather", 9, false, true, false},
      {Op::kScatter, "scatter", 10, false, true, false},
  };
  ASSERT_EQ(std::size(wants), static_cast<std::size_t>(kOpCount));
  for (const auto& w : wants) {
    EXPECT_EQ(static_cast<int>(w.op), w.code) << w.name;
    EXPECT_EQ(to_string(w.op), w.name);
    EXPECT_EQ(*op_from_string(w.name), w.op);
    Call c;
    c.op = w.op;
    c.in.count = 8;
    c.reduce = ReduceOp::kMax;
    c.root = 1;
    c.peer = 1;
    c.tag = 3;
    const Fingerprint fp = fingerprint_of(c);
    EXPECT_EQ(fp.reduce, w.reduces ? ReduceOp::kMax : ReduceOp::kSum) << w.name;
    // The table's rows, in its order: root, peer, tag.
    EXPECT_EQ(fp.fields[0], w.rooted ? 1 : -1) << w.name;
    EXPECT_EQ(fp.fields[1], w.p2p ? 1 : -1) << w.name;
    EXPECT_EQ(fp.fields[2], w.p2p ? 3 : 0) << w.name;
    const std::string text = describe(c);
    EXPECT_EQ(text.find(" max") != std::string::npos, w.reduces) << text;
    EXPECT_EQ(text.find("root=1") != std::string::npos, w.rooted) << text;
    EXPECT_EQ(text.find("tag=3") != std::string::npos, w.p2p) << text;
  }
}

TEST(CommTypesTest, DescribeCall) {
  std::vector<BFloat16> data(1024);
  Call c;
  c.op = Op::kAllReduce;
  c.in = c.out = view_of(data);
  c.reduce = ReduceOp::kMax;
  EXPECT_EQ(describe(c), "all_reduce bf16[1024] max");
  Call b;
  b.op = Op::kBarrier;
  EXPECT_EQ(describe(b), "barrier");
}

// ---------------------------------------------------------------------------------------------
// bfloat16: the top 16 bits of an f32, rounded to nearest even.

struct Bf16Case {
  const char* label;
  float value;
  std::uint16_t bits;
};

class BFloat16FromFloatTest : public ::testing::TestWithParam<Bf16Case> {};

TEST_P(BFloat16FromFloatTest, RoundsToNearestEven) {
  const Bf16Case& c = GetParam();
  EXPECT_EQ(to_bfloat16(c.value).bits, c.bits)
      << c.label << ": got 0x" << std::hex << to_bfloat16(c.value).bits << ", want 0x" << c.bits;
}

INSTANTIATE_TEST_SUITE_P(
    HandDerived, BFloat16FromFloatTest,
    ::testing::Values(
        Bf16Case{"one", 1.0f, 0x3F80}, Bf16Case{"minus_two", -2.0f, 0xC000},
        Bf16Case{"zero", 0.0f, 0x0000}, Bf16Case{"minus_zero", -0.0f, 0x8000},
        // 1 + 2^-8 lies halfway between 1 (0x3F80, even) and 1 + 2^-7 (0x3F81): stays at 1.
        Bf16Case{"tie_to_even_down", 1.0f + 0x1p-8f, 0x3F80},
        // 1 + 3*2^-8 lies halfway between 0x3F81 and 0x3F82 (even): rounds up.
        Bf16Case{"tie_to_even_up", 1.0f + 3 * 0x1p-8f, 0x3F82},
        // Just above the first tie: rounds up to 0x3F81.
        Bf16Case{"above_tie", 1.0f + 0x1p-8f + 0x1p-20f, 0x3F81},
        // Just below the second tie: rounds down to 0x3F81.
        Bf16Case{"below_tie", 1.0f + 3 * 0x1p-8f - 0x1p-20f, 0x3F81},
        // pi = 0x40490FDB: the dropped half 0x0FDB is below 0x8000.
        Bf16Case{"pi", 3.14159265f, 0x4049},
        // 0x3FFF8000 lies halfway between 0x3FFF (odd) and 0x4000 = 2.0: the carry reaches the exponent.
        Bf16Case{"carry_into_exponent", from_bits(0x3FFF8000u), 0x4000},
        // The largest f32 is above the halfway point past the largest bf16: infinity.
        Bf16Case{"flt_max_overflows", std::numeric_limits<float>::max(), 0x7F80},
        Bf16Case{"largest_bf16", from_bits(0x7F7F0000u), 0x7F7F},
        Bf16Case{"inf", std::numeric_limits<float>::infinity(), 0x7F80},
        Bf16Case{"minus_inf", -std::numeric_limits<float>::infinity(), 0xFF80},
        // f32 subnormals keep their top bits: 2^-133 = f32 0x00010000.
        Bf16Case{"subnormal", 0x1p-133f, 0x0001},
        Bf16Case{"smallest_normal", 0x1p-126f, 0x0080}),
    [](const ::testing::TestParamInfo<Bf16Case>& info) { return std::string(info.param.label); });

TEST(BFloat16Test, NanStaysNan) {
  const std::uint16_t b = to_bfloat16(std::numeric_limits<float>::quiet_NaN()).bits;
  EXPECT_EQ(b & 0x7F80, 0x7F80) << std::hex << b;
  EXPECT_NE(b & 0x007F, 0) << std::hex << b;
  // A signalling NaN whose payload lives only in the low 16 bits must not become infinity.
  const std::uint16_t s = to_bfloat16(from_bits(0x7F800001u)).bits;
  EXPECT_EQ(s & 0x7F80, 0x7F80) << std::hex << s;
  EXPECT_NE(s & 0x007F, 0) << std::hex << s;
  EXPECT_TRUE(std::isnan(to_float(BFloat16{0x7FC0})));
}

TEST(BFloat16Test, ToFloatIsTheHighHalfOfAnF32) {
  EXPECT_EQ(to_float(BFloat16{0x3F80}), 1.0f);
  EXPECT_EQ(to_float(BFloat16{0xC000}), -2.0f);
  EXPECT_EQ(to_float(BFloat16{0x4049}), 3.140625f);
  EXPECT_EQ(to_float(BFloat16{0x3F82}), 1.0f + 0x1p-6f);
  EXPECT_EQ(to_float(BFloat16{0x0001}), 0x1p-133f);
  EXPECT_EQ(to_float(BFloat16{0x7F80}), std::numeric_limits<float>::infinity());
  EXPECT_EQ(to_float(BFloat16{0xFF80}), -std::numeric_limits<float>::infinity());
  const float minus_zero = to_float(BFloat16{0x8000});
  EXPECT_EQ(minus_zero, 0.0f);
  EXPECT_TRUE(std::signbit(minus_zero));
}

TEST(BFloat16Test, EveryNonNanPatternRoundTrips) {
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = to_float(BFloat16{bits});
    ASSERT_EQ(bits_of(f), b << 16) << std::hex << b;
    if (std::isnan(f)) continue;
    ASSERT_EQ(to_bfloat16(f).bits, bits) << std::hex << b;
  }
}

// ---------------------------------------------------------------------------------------------
// IEEE half: 1 sign, 5 exponent (bias 15), 10 mantissa bits.

struct HalfCase {
  const char* label;
  float value;
  std::uint16_t bits;
};

class HalfFromFloatTest : public ::testing::TestWithParam<HalfCase> {};

TEST_P(HalfFromFloatTest, RoundsToNearestEven) {
  const HalfCase& c = GetParam();
  EXPECT_EQ(to_half(c.value).bits, c.bits)
      << c.label << ": got 0x" << std::hex << to_half(c.value).bits << ", want 0x" << c.bits;
}

INSTANTIATE_TEST_SUITE_P(
    HandDerived, HalfFromFloatTest,
    ::testing::Values(
        HalfCase{"one", 1.0f, 0x3C00}, HalfCase{"minus_two", -2.0f, 0xC000},
        HalfCase{"zero", 0.0f, 0x0000}, HalfCase{"minus_zero", -0.0f, 0x8000},
        HalfCase{"point_one", 0.1f, 0x2E66},  // 0.0999755859375
        // 1 + 2^-11 lies halfway between 0x3C00 (even) and 0x3C01: stays at 1.
        HalfCase{"tie_to_even_down", 1.0f + 0x1p-11f, 0x3C00},
        // 1 + 3*2^-11 lies halfway between 0x3C01 and 0x3C02 (even).
        HalfCase{"tie_to_even_up", 1.0f + 3 * 0x1p-11f, 0x3C02},
        HalfCase{"above_tie", 1.0f + 0x1p-11f + 0x1p-20f, 0x3C01},
        HalfCase{"max", 65504.0f, 0x7BFF},
        // 65520 is halfway between 65504 (odd mantissa 0x3FF) and 65536, which is infinity.
        HalfCase{"just_below_overflow_tie", 65519.996f, 0x7BFF},
        HalfCase{"overflow_tie", 65520.0f, 0x7C00},
        HalfCase{"overflow", 1.0e6f, 0x7C00}, HalfCase{"minus_overflow", -1.0e6f, 0xFC00},
        HalfCase{"inf", std::numeric_limits<float>::infinity(), 0x7C00},
        HalfCase{"minus_inf", -std::numeric_limits<float>::infinity(), 0xFC00},
        HalfCase{"smallest_normal", 0x1p-14f, 0x0400},
        HalfCase{"largest_subnormal", 0x1p-14f - 0x1p-24f, 0x03FF},
        HalfCase{"smallest_subnormal", 0x1p-24f, 0x0001},
        HalfCase{"minus_smallest_subnormal", -0x1p-24f, 0x8001},
        // Half a subnormal unit: a tie between 0 (even) and 0x0001.
        HalfCase{"subnormal_tie_to_zero", 0x1p-25f, 0x0000},
        // 1.5 units: a tie between 0x0001 and 0x0002 (even).
        HalfCase{"subnormal_tie_up", 3 * 0x1p-25f, 0x0002},
        HalfCase{"subnormal_above_tie", 0x1p-25f + 0x1p-40f, 0x0001},
        // Rounding the largest subnormal's neighbour up carries into the smallest normal.
        HalfCase{"subnormal_carry_to_normal", 0x1p-14f - 0x1p-26f, 0x0400},
        HalfCase{"underflow", 0x1p-30f, 0x0000}),
    [](const ::testing::TestParamInfo<HalfCase>& info) { return std::string(info.param.label); });

TEST(HalfTest, NanStaysNan) {
  for (float nan : {std::numeric_limits<float>::quiet_NaN(), from_bits(0x7F800001u), from_bits(0xFFC00000u)}) {
    const std::uint16_t h = to_half(nan).bits;
    EXPECT_EQ(h & 0x7C00, 0x7C00) << std::hex << h;
    EXPECT_NE(h & 0x03FF, 0) << std::hex << h;
  }
  EXPECT_TRUE(std::isnan(to_float(Half{0x7E00})));
  EXPECT_TRUE(std::isnan(to_float(Half{0xFC01})));
}

TEST(HalfTest, ToFloatMatchesTheClosedForm) {
  // value = (-1)^s * (e == 0 ? m * 2^-24 : (1 + m / 1024) * 2^(e - 15)), infinities at e == 31.
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const int sign = (b >> 15) & 1;
    const int e = (b >> 10) & 0x1F;
    const int m = b & 0x3FF;
    const float got = to_float(Half{static_cast<std::uint16_t>(b)});
    if (e == 31) {
      if (m == 0) {
        ASSERT_TRUE(std::isinf(got)) << std::hex << b;
        ASSERT_EQ(std::signbit(got), sign == 1) << std::hex << b;
      } else {
        ASSERT_TRUE(std::isnan(got)) << std::hex << b;
      }
      continue;
    }
    const double magnitude = e == 0 ? std::ldexp(m, -24) : std::ldexp(1.0 + m / 1024.0, e - 15);
    const double want = sign ? -magnitude : magnitude;
    ASSERT_EQ(static_cast<double>(got), want) << std::hex << b;
    ASSERT_EQ(std::signbit(got), sign == 1) << std::hex << b;
  }
}

TEST(HalfTest, EveryNonNanPatternRoundTrips) {
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = to_float(Half{bits});
    if (std::isnan(f)) continue;
    ASSERT_EQ(to_half(f).bits, bits) << std::hex << b;
  }
}

// ---------------------------------------------------------------------------------------------
// Element access and conversion between dtypes.

TEST(DTypeConvertTest, StoreAndLoadEveryDtype) {
  struct Case {
    DType dtype;
    double stored;
    double loaded;  // after the dtype's own rounding
  };
  const Case cases[] = {
      {DType::kF32, 0.1, static_cast<double>(0.1f)},
      {DType::kF64, 0.1, 0.1},
      {DType::kF16, 0.1, 0.0999755859375},        // 0x2E66
      {DType::kBF16, 0.1, 0.10009765625},         // 0x3DCD
      {DType::kI8, -5, -5},
      {DType::kU8, 200, 200},
      {DType::kI32, -123456, -123456},
      {DType::kI64, 1099511627776.0, 1099511627776.0},  // 2^40
  };
  for (const auto& c : cases) {
    HostBuffer buf(c.dtype, 3);
    store_from_double(buf.view(), 1, c.stored);
    EXPECT_EQ(load_as_double(buf.view(), 1), c.loaded) << to_string(c.dtype);
  }
}

TEST(DTypeConvertTest, StoresTheBitPatternsOfTheDtype) {
  HostBuffer h(DType::kF16, 2);
  store_from_double(h.view(), 0, 65504.0);
  store_from_double(h.view(), 1, -2.0);
  std::uint16_t raw[2];
  std::memcpy(raw, h.view().data, sizeof raw);
  EXPECT_EQ(raw[0], 0x7BFF);
  EXPECT_EQ(raw[1], 0xC000);
  HostBuffer b(DType::kBF16, 1);
  store_from_double(b.view(), 0, 1.0 + 3 * 0x1p-8);
  std::memcpy(raw, b.view().data, 2);
  EXPECT_EQ(raw[0], 0x3F82);
}

TEST(DTypeConvertTest, F32ToBf16AndF16RoundsToNearestEven) {
  std::vector<float> src = {1.0f, -2.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 65504.0f};
  std::vector<BFloat16> bf(src.size());
  convert(view_of(src), view_of(bf));
  // 65504 = 0x477FE000 lies 32 below 65536 (0x4780) and 224 above 65280 (0x477F).
  const std::uint16_t want_bf[] = {0x3F80, 0xC000, 0x3F80, 0x3F82, 0x4780};
  for (std::size_t i = 0; i < src.size(); ++i) EXPECT_EQ(bf[i].bits, want_bf[i]) << i;

  std::vector<Half> h(src.size());
  convert(view_of(src), view_of(h));
  // With 10 mantissa bits, 1 + 2^-8 and 1 + 3*2^-8 are exact: mantissas 4 and 12.
  const std::uint16_t want_h[] = {0x3C00, 0xC000, 0x3C04, 0x3C0C, 0x7BFF};
  for (std::size_t i = 0; i < src.size(); ++i) EXPECT_EQ(h[i].bits, want_h[i]) << i;
}

// A double just above a 16-bit tie must round up: rounding to float first would land on the
// tie and round to even (double rounding).
TEST(DTypeConvertTest, DoubleTo16BitRoundsOnce) {
  HostBuffer h(DType::kF16, 1);
  store_from_double(h.view(), 0, 1.0 + 0x1p-11 + 0x1p-30);
  std::uint16_t bits;
  std::memcpy(&bits, h.view().data, 2);
  EXPECT_EQ(bits, 0x3C01);
  HostBuffer b(DType::kBF16, 1);
  store_from_double(b.view(), 0, 1.0 + 0x1p-8 + 0x1p-30);
  std::memcpy(&bits, b.view().data, 2);
  EXPECT_EQ(bits, 0x3F81);
  store_from_double(b.view(), 0, -(1.0 + 0x1p-8 + 0x1p-30));
  std::memcpy(&bits, b.view().data, 2);
  EXPECT_EQ(bits, 0xBF81);
  store_from_double(b.view(), 0, 1.0 + 0x1p-8);  // an exact tie still rounds to even
  std::memcpy(&bits, b.view().data, 2);
  EXPECT_EQ(bits, 0x3F80);
}

TEST(DTypeConvertTest, Bf16ToF16AndBack) {
  std::vector<BFloat16> bf = {{0x3F80}, {0xC000}, {0x4049}, {0x7F80}};  // 1, -2, 3.140625, inf
  std::vector<Half> h(bf.size());
  convert(view_of(bf), view_of(h));
  // 3.140625 = 1.5703125 * 2: exponent 16, mantissa 0.5703125 * 1024 = 584 = 0x248.
  const std::uint16_t want[] = {0x3C00, 0xC000, 0x4248, 0x7C00};
  for (std::size_t i = 0; i < bf.size(); ++i) EXPECT_EQ(h[i].bits, want[i]) << i;
  std::vector<BFloat16> back(h.size());
  convert(view_of(h), view_of(back));
  for (std::size_t i = 0; i < bf.size(); ++i) EXPECT_EQ(back[i].bits, bf[i].bits) << i;
}

TEST(DTypeConvertTest, IntegersAndFloats) {
  std::vector<float> f = {1.0f, -7.0f, 42.0f, 0.0f};
  std::vector<std::int32_t> i32(f.size());
  convert(view_of(f), view_of(i32));
  EXPECT_EQ(i32, (std::vector<std::int32_t>{1, -7, 42, 0}));

  std::vector<std::int64_t> i64 = {3, -1, std::int64_t{1} << 40};
  std::vector<double> d(i64.size());
  convert(view_of(i64), view_of(d));
  EXPECT_EQ(d, (std::vector<double>{3.0, -1.0, 1099511627776.0}));

  std::vector<std::uint8_t> u8 = {0, 7, 255};
  std::vector<Half> h(u8.size());
  convert(view_of(u8), view_of(h));
  EXPECT_EQ(h[0].bits, 0x0000);
  EXPECT_EQ(h[1].bits, 0x4700);  // 7 = 1.75 * 4: exponent 17, mantissa 0x300
  EXPECT_EQ(h[2].bits, 0x5BF8);  // 255 = 1.9921875 * 128: exponent 22, mantissa 0x3F8

  std::vector<Half> hv = {{0x3C00}, {0xC500}};  // 1, -5
  std::vector<std::int8_t> i8(hv.size());
  convert(view_of(hv), view_of(i8));
  EXPECT_EQ(i8, (std::vector<std::int8_t>{1, -5}));
}

TEST(DTypeConvertTest, SameDtypeCopiesBitsExactly) {
  std::vector<Half> src = {{0x7E01}, {0x0001}, {0x8000}};  // a NaN payload survives a copy
  std::vector<Half> dst(src.size());
  convert(view_of(src), view_of(dst));
  for (std::size_t i = 0; i < src.size(); ++i) EXPECT_EQ(dst[i].bits, src[i].bits) << i;
}

TEST(DTypeConvertTest, CountMismatchThrowsNamingBothCounts) {
  std::vector<float> a(3);
  std::vector<double> b(4);
  try {
    convert(view_of(a), view_of(b));
    ADD_FAILURE() << "expected lockstep::Error";
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "3");
    EXPECT_CONTAINS(e.what(), "4");
  }
}

}  // namespace
}  // namespace lockstep::comm
