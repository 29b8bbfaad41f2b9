// In-process tests of the communicator's torch-free parts: 16-bit float conversions and dtype
// conversion against hand-derived bit patterns, and the verifier's cross-rank fingerprint and
// point-to-point checks on synthetic calls. Every expected value is written out by hand from
// IEEE 754 (or from the split sizes the test itself chose), never taken from the code under test.
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
#include "harness/comm/verifier.h"
#include "harness/core/diagnosis.h"
#include "harness/core/error.h"

namespace lockstep::comm {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

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
  EXPECT_FALSE(op_from_string("reduce_scatter").has_value());
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

// ---------------------------------------------------------------------------------------------
// check_fingerprints: one collective slot, world_size records in rank order.

// A call at `phase` step `step`, call index `index`, sequence `seq`. Buffers are never read:
// only their dtype and count enter the fingerprint.
Call make_call(Op op, DType dtype, std::int64_t count, const std::string& phase = "mix",
               std::int64_t step = 2, std::int64_t index = 0, std::int64_t seq = 8) {
  Call c;
  c.op = op;
  c.in = View{nullptr, dtype, count, DeviceType::kCpu, 0};
  c.out = c.in;
  if (op == Op::kAllGather) c.out.count = count * 3;
  c.site = CallSite{phase, step, index};
  c.seq = seq;
  return c;
}

std::vector<std::int64_t> gather(const std::vector<Call>& calls) {
  const int ws = static_cast<int>(calls.size());
  std::vector<std::int64_t> out;
  for (const auto& c : calls) {
    const auto rec = encode_fingerprint(c, ws);
    EXPECT_EQ(rec.size(), fingerprint_words(ws));
    out.insert(out.end(), rec.begin(), rec.end());
  }
  return out;
}

std::optional<Diagnosis> check(const std::vector<Call>& calls) {
  return check_fingerprints(gather(calls), static_cast<int>(calls.size()));
}

TEST(CheckFingerprintsTest, IdenticalCallsAgree) {
  for (int ws : {1, 2, 3, 5}) {
    std::vector<Call> calls(static_cast<std::size_t>(ws), make_call(Op::kAllReduce, DType::kF32, 256));
    EXPECT_FALSE(check(calls).has_value()) << "world_size " << ws;
  }
  std::vector<Call> barriers(3, make_call(Op::kBarrier, DType::kF32, 0, "finalize", -1, 0));
  EXPECT_FALSE(check(barriers).has_value());
  std::vector<Call> bcast(4, make_call(Op::kBroadcast, DType::kI64, 16));
  for (auto& c : bcast) c.root = 3;
  EXPECT_FALSE(check(bcast).has_value());
}

TEST(CheckFingerprintsTest, LongPhaseNamesAreComparedByTheirFirst24Characters) {
  std::vector<Call> calls(2, make_call(Op::kAllReduce, DType::kF32, 4, std::string(40, 'p')));
  EXPECT_FALSE(check(calls).has_value());
}

// One rank of three issues the all_reduce in bf16 while the others use f32.
class DtypeMismatchRankTest : public ::testing::TestWithParam<int> {};

TEST_P(DtypeMismatchRankTest, BlamesTheOddRankAndNamesBothDtypes) {
  const int odd = GetParam();
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 256));
  calls[static_cast<std::size_t>(odd)].in.dtype = DType::kBF16;
  calls[static_cast<std::size_t>(odd)].out.dtype = DType::kBF16;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, odd);
  EXPECT_EQ(d->seq, 8);
  EXPECT_CONTAINS(d->message, "dtype differs");
  EXPECT_CONTAINS(d->message, "bf16[256]");
  EXPECT_CONTAINS(d->message, "f32[256]");
  EXPECT_CONTAINS(d->message, "step 2");
  EXPECT_CONTAINS(d->message, "collective #8");
  EXPECT_CONTAINS(d->message, "rank " + std::to_string(odd) + " all_reduce bf16[256] sum");
}

INSTANTIATE_TEST_SUITE_P(EachRank, DtypeMismatchRankTest, ::testing::Values(0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "rank" + std::to_string(info.param);
                         });

TEST(CheckFingerprintsTest, MessageMatchesTheDocumentedExample) {
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 256, "mix", 2, 0, 8));
  calls[1].in.dtype = DType::kBF16;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->message,
            "collective #8 (mix step 2 call 0): ranks 0,2 all_reduce f32[256] sum, rank 1 "
            "all_reduce bf16[256] sum: dtype differs");
}

TEST(CheckFingerprintsTest, TwoRanksBlameTheGroupWithoutRankZero) {
  std::vector<Call> calls(2, make_call(Op::kAllReduce, DType::kF32, 64));
  calls[1].in.dtype = DType::kF64;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "f64");
  EXPECT_CONTAINS(d->message, "f32");
}

TEST(CheckFingerprintsTest, CountDiffers) {
  std::vector<Call> calls(3, make_call(Op::kAllGather, DType::kF32, 256));
  calls[2].in.count = 255;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 2);
  EXPECT_CONTAINS(d->message, "count differs");
  EXPECT_CONTAINS(d->message, "f32[255]");
  EXPECT_CONTAINS(d->message, "f32[256]");
}

TEST(CheckFingerprintsTest, RootDiffers) {
  std::vector<Call> calls(3, make_call(Op::kBroadcast, DType::kF32, 32));
  for (auto& c : calls) c.root = 1;
  calls[0].root = 2;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 0);
  EXPECT_CONTAINS(d->message, "root differs");
  EXPECT_CONTAINS(d->message, "root=2");
  EXPECT_CONTAINS(d->message, "root=1");
}

TEST(CheckFingerprintsTest, ReduceOpDiffers) {
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kI32, 8));
  calls[1].reduce = ReduceOp::kMax;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "reduce op differs");
  EXPECT_CONTAINS(d->message, "max");
  EXPECT_CONTAINS(d->message, "sum");
}

TEST(CheckFingerprintsTest, OpDiffersAtTheSameCallSite) {
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 8));
  calls[2] = make_call(Op::kBroadcast, DType::kF32, 8);
  calls[2].root = 0;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 2);
  EXPECT_CONTAINS(d->message, "op");
  EXPECT_CONTAINS(d->message, "broadcast");
}

TEST(CheckFingerprintsTest, SeveralFieldsDifferAreAllNamed) {
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 8));
  calls[1].in.dtype = DType::kF16;
  calls[1].in.count = 7;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "dtype, count differ");
}

TEST(CheckFingerprintsTest, BarrierIgnoresTheBufferItWasNotGiven) {
  std::vector<Call> calls(2, make_call(Op::kBarrier, DType::kF32, 0));
  calls[1].in.dtype = DType::kI64;  // a barrier carries no data
  calls[1].in.count = 5;
  EXPECT_FALSE(check(calls).has_value());
}

// Two ranks at different call sites of the same phase and step: the one at index + 1 skipped
// a collective (or the other added one); with two ranks the one further along is blamed.
class CallSiteAheadTest : public ::testing::TestWithParam<int> {};

TEST_P(CallSiteAheadTest, TwoRanksBlameTheOneAhead) {
  const int ahead = GetParam();
  std::vector<Call> calls = {make_call(Op::kAllGather, DType::kF32, 64, "mix", 2, 1),
                             make_call(Op::kAllGather, DType::kF32, 64, "mix", 2, 1)};
  calls[static_cast<std::size_t>(ahead)] = make_call(Op::kBroadcast, DType::kF32, 64, "mix", 2, 2);
  calls[static_cast<std::size_t>(ahead)].root = 0;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, ahead);
  EXPECT_EQ(d->seq, 8);
  EXPECT_CONTAINS(d->message, "mix step 2 call 1");
  EXPECT_CONTAINS(d->message, "mix step 2 call 2");
  EXPECT_CONTAINS(d->message, "rank " + std::to_string(ahead) + " skipped or added a collective");
}

INSTANTIATE_TEST_SUITE_P(EachRank, CallSiteAheadTest, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "rank" + std::to_string(info.param) + "_ahead";
                         });

TEST(CheckFingerprintsTest, CallSiteAheadByAStepIsBlamed) {
  // Rank 0 skipped the last call of step 2 and is already at step 3's first.
  std::vector<Call> calls = {make_call(Op::kAllReduce, DType::kF32, 64, "mix", 3, 0),
                             make_call(Op::kBarrier, DType::kF32, 0, "mix", 2, 5)};
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 0);
}

TEST(CheckFingerprintsTest, CallSiteMinorityIsBlamedAmongThree) {
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 64, "mix", 1, 0));
  calls[1] = make_call(Op::kAllReduce, DType::kF32, 64, "mix", 1, 1);
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "ranks 0,2 issued it from mix step 1 call 0");
  EXPECT_CONTAINS(d->message, "rank 1 issued it from mix step 1 call 1");
}

TEST(CheckFingerprintsTest, CallSiteDiffersBeforeArgumentsAreCompared) {
  // Different sites and different dtypes: the site decides (missing, not mismatch).
  std::vector<Call> calls(3, make_call(Op::kAllReduce, DType::kF32, 64, "mix", 1, 0));
  calls[2] = make_call(Op::kAllReduce, DType::kBF16, 64, "mix", 1, 1);
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 2);
}

// A rank already in its final barrier while the others still issue workload collectives.
class FinalizeRankTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(FinalizeRankTest, BlamesTheRankThatReachedTheEnd) {
  const auto [ws, done] = GetParam();
  std::vector<Call> calls(static_cast<std::size_t>(ws), make_call(Op::kAllReduce, DType::kF32, 64, "mix", 3, 0));
  calls[static_cast<std::size_t>(done)] = make_call(Op::kBarrier, DType::kF32, 0, "finalize", -1, 0);
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, done);
  EXPECT_CONTAINS(d->message, "rank " + std::to_string(done) + " reached the end of the workload");
  EXPECT_CONTAINS(d->message, "finalize call 0");
}

INSTANTIATE_TEST_SUITE_P(WorldSizeAndRank, FinalizeRankTest,
                         ::testing::Values(std::pair{2, 0}, std::pair{2, 1}, std::pair{3, 0},
                                           std::pair{3, 2}),
                         [](const ::testing::TestParamInfo<std::pair<int, int>>& info) {
                           return "ws" + std::to_string(info.param.first) + "_rank" +
                                  std::to_string(info.param.second);
                         });

TEST(CheckFingerprintsTest, RankStillIssuingAfterTheOthersFinishedIsBlamed) {
  std::vector<Call> calls(3, make_call(Op::kBarrier, DType::kF32, 0, "finalize", -1, 0));
  calls[1] = make_call(Op::kAllReduce, DType::kF32, 64, "mix", 4, 0);
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "rank 1 issued a collective after the others reached the end");
}

// all_to_all with split sizes split(from, to) = (from + to) % 3 + 1 on every rank.
std::int64_t split(int from, int to) { return (from + to) % 3 + 1; }

std::vector<Call> consistent_all_to_all(int ws) {
  std::vector<Call> calls;
  for (int r = 0; r < ws; ++r) {
    Call c = make_call(Op::kAllToAll, DType::kF32, 0);
    for (int j = 0; j < ws; ++j) {
      c.send_counts.push_back(split(r, j));
      c.recv_counts.push_back(split(j, r));
    }
    calls.push_back(c);
  }
  return calls;
}

TEST(CheckFingerprintsTest, AllToAllConsistentSplitsAgree) {
  for (int ws : {2, 3, 4}) EXPECT_FALSE(check(consistent_all_to_all(ws)).has_value()) << ws;
}

TEST(CheckFingerprintsTest, AllToAllSendDisagreesWithPeerRecv) {
  auto calls = consistent_all_to_all(3);
  calls[0].send_counts[2] = 7;  // rank 2 still expects split(0, 2) = 3 from rank 0
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 0);
  EXPECT_CONTAINS(d->message, "rank 0 sends 7 elements to rank 2, which expects 3 from rank 0");
}

TEST(CheckFingerprintsTest, AllToAllRecvDisagreesWithPeerSend) {
  auto calls = consistent_all_to_all(3);
  calls[1].recv_counts[2] = 9;  // rank 2 sends split(2, 1) = 1 to rank 1
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_TRUE(d->rank == 1 || d->rank == 2) << d->rank;
  EXPECT_CONTAINS(d->message, "rank 2 sends 1 elements to rank 1, which expects 9 from rank 2");
}

TEST(CheckFingerprintsTest, AllToAllDtypeStillCompared) {
  auto calls = consistent_all_to_all(3);
  calls[1].in.dtype = DType::kI64;
  const auto d = check(calls);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 1);
  EXPECT_CONTAINS(d->message, "dtype differs");
}

// ---------------------------------------------------------------------------------------------
// check_p2p: the sender's record against the receiver's own call.

Call p2p(Op op, int peer, DType dtype, std::int64_t count, int tag, std::int64_t seq = 4) {
  Call c = make_call(op, dtype, count, "mix", 1, 3, seq);
  c.root = peer;
  c.tag = tag;
  return c;
}

TEST(CheckP2pTest, MatchingSendAndRecvAgree) {
  // rank 0 sends to rank 1; rank 1 receives from rank 0.
  const auto sender = encode_fingerprint(p2p(Op::kSend, 1, DType::kF32, 16, 3), 2);
  EXPECT_FALSE(check_p2p(sender, p2p(Op::kRecv, 0, DType::kF32, 16, 3), 1).has_value());
}

TEST(CheckP2pTest, SendToAnotherRankIsMissingParticipant) {
  // rank 2 of 3 sends to rank 0, but rank 1 waits for it.
  const auto sender = encode_fingerprint(p2p(Op::kSend, 0, DType::kF32, 16, 3), 3);
  const auto d = check_p2p(sender, p2p(Op::kRecv, 2, DType::kF32, 16, 3, 6), 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 2);
  EXPECT_EQ(d->seq, 6);
  EXPECT_CONTAINS(d->message, "rank 1 receives from rank 2 but rank 2 issued send to rank 0");
}

TEST(CheckP2pTest, PeerAlsoReceivingIsMissingParticipant) {
  const auto sender = encode_fingerprint(p2p(Op::kRecv, 1, DType::kF32, 16, 3), 2);
  const auto d = check_p2p(sender, p2p(Op::kRecv, 0, DType::kF32, 16, 3), 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kMissingParticipant);
  EXPECT_EQ(d->rank, 0);
  EXPECT_CONTAINS(d->message, "issued recv");
}

struct P2pMismatchCase {
  const char* label;
  DType dtype;
  std::int64_t count;
  int tag;
  const char* recv_text;  // how the receiver's side is described
};

class CheckP2pMismatchTest : public ::testing::TestWithParam<P2pMismatchCase> {};

TEST_P(CheckP2pMismatchTest, BlamesTheSenderAndNamesBothSides) {
  const auto& c = GetParam();
  const auto sender = encode_fingerprint(p2p(Op::kSend, 1, DType::kF32, 16, 3), 2);
  const auto d = check_p2p(sender, p2p(Op::kRecv, 0, c.dtype, c.count, c.tag), 1);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, DiagnosisKind::kCollectiveMismatch);
  EXPECT_EQ(d->rank, 0);
  EXPECT_EQ(d->seq, 4);
  EXPECT_CONTAINS(d->message, "rank 0 send f32[16] tag=3");
  EXPECT_CONTAINS(d->message, std::string("rank 1 recv ") + c.recv_text);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, CheckP2pMismatchTest,
    ::testing::Values(P2pMismatchCase{"dtype", DType::kBF16, 16, 3, "bf16[16] tag=3"},
                      P2pMismatchCase{"count", DType::kF32, 15, 3, "f32[15] tag=3"},
                      P2pMismatchCase{"tag", DType::kF32, 16, 4, "f32[16] tag=4"}),
    [](const ::testing::TestParamInfo<P2pMismatchCase>& info) { return std::string(info.param.label); });

// ---------------------------------------------------------------------------------------------
// The engine failure handler: outside a verification an uncaught engine exception aborts the
// process with the exception's message.

TEST(EngineFailureHandlerDeathTest, UncaughtExceptionAbortsWithItsMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        install_engine_failure_handler();
        try {
          throw std::runtime_error("gloo says: bytes exceed buffer");
        } catch (...) {
          std::terminate();
        }
      },
      "terminate called after an uncaught exception: gloo says: bytes exceed buffer");
}

}  // namespace
}  // namespace lockstep::comm
