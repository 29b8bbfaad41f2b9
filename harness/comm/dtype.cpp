#include "harness/comm/dtype.h"

#include <cmath>

#include "harness/core/error.h"

namespace lockstep::comm {

float to_float(BFloat16 v) {
  std::uint32_t bits = static_cast<std::uint32_t>(v.bits) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

BFloat16 to_bfloat16(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if (std::isnan(v)) return BFloat16{0x7fc0};
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
  return BFloat16{static_cast<std::uint16_t>(bits >> 16)};
}

float to_float(Half v) {
  const std::uint32_t sign = (v.bits & 0x8000u) << 16;
  std::uint32_t exp = (v.bits >> 10) & 0x1fu;
  std::uint32_t mant = v.bits & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

Half to_half(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return Half{static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u))};
  }
  if (abs >= 0x477ff000u) return Half{static_cast<std::uint16_t>(sign | 0x7c00u)};  // overflow
  if (abs < 0x38800000u) {  // subnormal or zero in half
    float f;
    std::memcpy(&f, &abs, sizeof f);
    // Scale so that the half subnormal unit (2^-24) becomes 1, round to nearest even.
    const float scaled = f * 16777216.0f;
    const auto m = static_cast<std::uint16_t>(std::nearbyint(scaled));
    return Half{static_cast<std::uint16_t>(sign | m)};
  }
  std::uint32_t h = ((abs >> 13) - ((127 - 15) << 10));
  const std::uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return Half{static_cast<std::uint16_t>(sign | h)};
}

double load_as_double(const View& v, std::int64_t i) {
  LOCKSTEP_CHECK(v.device == DeviceType::kCpu, "load_as_double needs a host buffer");
  const auto* p = static_cast<const unsigned char*>(v.data) + i * element_size(v.dtype);
  switch (v.dtype) {
    case DType::kF32: { float x; std::memcpy(&x, p, 4); return x; }
    case DType::kF64: { double x; std::memcpy(&x, p, 8); return x; }
    case DType::kF16: { Half x; std::memcpy(&x.bits, p, 2); return to_float(x); }
    case DType::kBF16: { BFloat16 x; std::memcpy(&x.bits, p, 2); return to_float(x); }
    case DType::kI8: { std::int8_t x; std::memcpy(&x, p, 1); return x; }
    case DType::kU8: { std::uint8_t x; std::memcpy(&x, p, 1); return x; }
    case DType::kI32: { std::int32_t x; std::memcpy(&x, p, 4); return x; }
    case DType::kI64: { std::int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
  }
  return 0;
}

namespace {

// double -> float rounding to odd: a later float -> 16-bit round-to-nearest-even then rounds
// exactly as a direct double -> 16-bit conversion would (float keeps >= 2 extra bits).
float to_float_round_to_odd(double d) {
  float f = static_cast<float>(d);
  if (std::isfinite(f) && static_cast<double>(f) != d) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --bits;  // truncate toward zero
    bits |= 1u;
    std::memcpy(&f, &bits, sizeof f);
  }
  return f;
}

}  // namespace

void store_from_double(const View& v, std::int64_t i, double value) {
  LOCKSTEP_CHECK(v.device == DeviceType::kCpu, "store_from_double needs a host buffer");
  auto* p = static_cast<unsigned char*>(v.data) + i * element_size(v.dtype);
  switch (v.dtype) {
    case DType::kF32: { float x = static_cast<float>(value); std::memcpy(p, &x, 4); break; }
    case DType::kF64: { std::memcpy(p, &value, 8); break; }
    case DType::kF16: { Half x = to_half(to_float_round_to_odd(value)); std::memcpy(p, &x.bits, 2); break; }
    case DType::kBF16: { BFloat16 x = to_bfloat16(to_float_round_to_odd(value)); std::memcpy(p, &x.bits, 2); break; }
    case DType::kI8: { auto x = static_cast<std::int8_t>(value); std::memcpy(p, &x, 1); break; }
    case DType::kU8: { auto x = static_cast<std::uint8_t>(value); std::memcpy(p, &x, 1); break; }
    case DType::kI32: { auto x = static_cast<std::int32_t>(value); std::memcpy(p, &x, 4); break; }
    case DType::kI64: { auto x = static_cast<std::int64_t>(value); std::memcpy(p, &x, 8); break; }
  }
}

void convert(const View& src, const View& dst) {
  LOCKSTEP_CHECK(src.count == dst.count, "convert: count ", src.count, " != ", dst.count);
  if (src.dtype == dst.dtype) {
    std::memcpy(dst.data, src.data, src.bytes());
    return;
  }
  for (std::int64_t i = 0; i < src.count; ++i) store_from_double(dst, i, load_as_double(src, i));
}

}  // namespace lockstep::comm
