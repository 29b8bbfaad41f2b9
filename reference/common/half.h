#pragma once
// 16-bit float storage formats for the reference (bfloat16 and IEEE binary16), converted from
// float by round to nearest, ties to even, as ATen's c10::BFloat16 and c10::Half do. NaN stays
// NaN (quiet); overflow rounds to infinity. Header-only, no intrinsics; LOCKSTEP_HD, so the
// CUDA kernels store and load 16-bit rows with the very functions the CPU uses.
#include <cstdint>
#include <cstring>

#include "reference/common/hd.h"

namespace lockstep::ref {

LOCKSTEP_HD inline std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
LOCKSTEP_HD inline float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// Returns the bfloat16 bits nearest to f (ties to even).
LOCKSTEP_HD inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
// Returns the float value of bfloat16 bits (exact).
LOCKSTEP_HD inline float bf16_to_float(std::uint16_t h) { return bits_float(std::uint32_t{h} << 16); }

// Returns the binary16 bits nearest to f (ties to even; subnormals and overflow handled).
LOCKSTEP_HD inline std::uint16_t float_to_f16(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (a < 0x38800000u) {  // below 2^-14: subnormal or zero in binary16
    // Scale into the subnormal grid (units of 2^-24) with one float addition, which rounds
    // to nearest even exactly as the conversion must.
    const float r = bits_float(a) + 0.5f;  // 0.5 = 2^-1: ulp of [0.5, 1) is 2^-24
    return static_cast<std::uint16_t>(sign | (float_bits(r) - float_bits(0.5f)));
  }
  const std::uint32_t mant_odd = (a >> 13) & 1u;
  const std::uint32_t rounded = a + 0xc8000fffu + mant_odd;  // rebias exponent 127 -> 15, round
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

// Returns the float value of binary16 bits (exact).
LOCKSTEP_HD inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 0x1.0p-24f;  // exact: mant < 2^10
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

}  // namespace lockstep::ref
