#pragma once
// Host-side 16-bit float types and conversions (round to nearest even), used for closed-form
// test data, fault injection (casting a buffer) and the documented bf16 upcast.
#include <cstdint>
#include <cstring>
#include <vector>

#include "harness/comm/types.h"

namespace lockstep::comm {

struct BFloat16 {
  std::uint16_t bits = 0;
};
struct Half {
  std::uint16_t bits = 0;
};

float to_float(BFloat16 v);
BFloat16 to_bfloat16(float v);
float to_float(Half v);
Half to_half(float v);

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kF32; }
template <> constexpr DType dtype_of<double>() { return DType::kF64; }
template <> constexpr DType dtype_of<Half>() { return DType::kF16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::kBF16; }
template <> constexpr DType dtype_of<std::int8_t>() { return DType::kI8; }
template <> constexpr DType dtype_of<std::uint8_t>() { return DType::kU8; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::kI32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::kI64; }

// Reads element i of a host buffer as double / writes a double into it (rounding as the
// dtype does). Host buffers only.
double load_as_double(const View& v, std::int64_t i);
void store_from_double(const View& v, std::int64_t i, double value);
// Copies src into dst element by element, converting dtypes. Counts must match.
void convert(const View& src, const View& dst);

// Owns a host buffer of any dtype.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(DType dtype, std::int64_t count)
      : dtype_(dtype), count_(count), bytes_(static_cast<std::size_t>(count) * element_size(dtype)) {}
  View view() { return View{bytes_.data(), dtype_, count_, DeviceType::kCpu, 0}; }
  DType dtype() const { return dtype_; }
  std::int64_t count() const { return count_; }

 private:
  DType dtype_ = DType::kF32;
  std::int64_t count_ = 0;
  std::vector<unsigned char> bytes_;
};

template <typename T>
View view_of(std::vector<T>& v) {
  return View{v.data(), dtype_of<T>(), static_cast<std::int64_t>(v.size()), DeviceType::kCpu, 0};
}

}  // namespace lockstep::comm
