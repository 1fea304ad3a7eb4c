// The ABI between THRIVE and a CPU candidate kernel. Kernel-side only: it includes
// no THRIVE host header, so a kernel file compiles on its own with
//   c++ -std=c++20 -O3 -march=native -fopenmp -fPIC -shared -I<dir of this file> k.cpp
//
// A CPU kernel exports one entry point:
//   THRIVE_EXPORT int <entry>(const ThriveArgs* args);
// returning 0 on success, non-zero for "shape not supported" (recorded as a failed
// candidate, never a crash). Tensors arrive in the op's ABI order (`thrive ops --spec`),
// row-major, densely packed; dims[] and scalars[] in the op's declared order.
#pragma once
#include <stdint.h>
#include <string.h>

#define THRIVE_EXPORT extern "C" __attribute__((visibility("default")))

typedef struct ThriveArgs {
  void* const* tensors;    // one pointer per tensor, ABI order
  int32_t num_tensors;
  const int64_t* dims;     // shape symbols, op order (e.g. T, H)
  int32_t num_dims;
  const double* scalars;   // op scalars (e.g. eps, scale)
  int32_t num_scalars;
  void* workspace;         // scratch, 64-byte aligned, contents undefined on entry
  int64_t workspace_bytes;
  int32_t num_threads;     // threads THRIVE grants this call (THRIVE_THREADS)
} ThriveArgs;

// bf16 <-> f32, round to nearest even, NaN kept NaN.
static inline float thrive_bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t thrive_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
