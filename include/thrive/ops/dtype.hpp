// Element types of op tensors and the bfloat16 conversions every module shares.
//
// bf16 is the upper 16 bits of an IEEE-754 binary32 (Google Brain float); the
// conversion rounds to nearest, ties to even, and keeps NaN a (quiet) NaN.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace thrive::ops {

/// Storage type of a tensor element.
enum class DType { kBF16, kF32, kI32, kI64 };

/// Bytes per element: 2, 4, 4, 8.
size_t dtype_bytes(DType dtype);
/// "bf16", "f32", "i32", "i64".
const char* dtype_name(DType dtype);
/// Inverse of dtype_name; throws Error(kInput) naming the value otherwise.
DType dtype_from_name(const std::string& name);

inline float bf16_to_float(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

/// f[0..n) converted to bf16 bits into out[0..n) (float_to_bf16: round to nearest even). A finite
/// value past bf16's range (|f| >= about 3.3961e38, which rounds to infinity) throws
/// Error(kInput) naming `what` (a tensor), the element's index and value; infinities and NaN in
/// f also throw (the checkpoint loader refuses them before this).
void floats_to_bf16_checked(const float* f, size_t n, uint16_t* out, const std::string& what);

/// Rounds a double through bf16 (double -> float -> bf16 -> double).
inline double round_bf16(double v) {
  return bf16_to_float(float_to_bf16(static_cast<float>(v)));
}

}  // namespace thrive::ops
