// @thrive op: swiglu_act
// @thrive backend: cpu
// @thrive entry: thrive_swiglu_act_eager
//
// Eager baseline: what PyTorch eager runs for vLLM's SiluAndMul.forward_native,
//   d = x.shape[-1] // 2
//   out = F.silu(x[..., :d]) * x[..., d:]
// two full passes: silu of the gate half into a bf16 [T, I] temporary in the workspace,
// then the product with the up half. Each is an OpenMP loop over all granted threads
// (serial below PyTorch's grain of 32768 elements); silu computes in fp32 with an accurate
// vectorizable exp, as PyTorch's vectorized CPU kernel does.
#if defined(__GNUC__) && !defined(__clang__)
// Lets GCC if-convert the exp clamp (it sinks the multiply into the clamp's branches, which
// -ftrapping-math then forbids speculating), so the loops vectorize like PyTorch's do.
#pragma GCC optimize("no-trapping-math")
#endif

#include <stdint.h>
#include <string.h>

#include "thrive_cpu.h"

#define GRAIN 32768

// exp(x) to ~1 ulp in a form GCC auto-vectorizes: x = n ln2 + r (Cody-Waite), degree-6
// Taylor polynomial in r, 2^n in the exponent bits; x clamped to [-87.3, 88.3].
static inline float exp_acc(float x) {
  x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187e-06f;
  float p = r * (1.0f / 720) + (1.0f / 120);
  p = p * r + (1.0f / 24);
  p = p * r + (1.0f / 6);
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t e = ((int32_t)n + 127) << 23;
  float s;
  memcpy(&s, &e, 4);
  return p * s;
}

// float -> bf16 (round to nearest even, NaN kept), branch-free so loops vectorize
static inline uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : r);
}

THRIVE_EXPORT int thrive_swiglu_act_eager(const ThriveArgs* args) {
  if (args->num_tensors < 2 || args->num_dims < 2) return 1;
  const uint16_t* in = (const uint16_t*)args->tensors[0];
  uint16_t* out = (uint16_t*)args->tensors[1];
  const int64_t T = args->dims[0], I = args->dims[1], N = T * I;
  if (T < 0 || I < 0) return 1;
  if (N == 0) return 0;
  const int nt = args->num_threads > 0 ? args->num_threads : 1;
  if (args->workspace_bytes < N * 2) return 1;
  uint16_t* act = (uint16_t*)args->workspace;  // silu(gate), bf16 [T, I]

  // F.silu(x[..., :d])
#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < I; ++i) {
      const float a = thrive_bf16_to_f32(in[t * 2 * I + i]);
      act[t * I + i] = to_bf16(a / (1.0f + exp_acc(-a)));
    }
  // * x[..., d:]
#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < I; ++i)
      out[t * I + i] = to_bf16(thrive_bf16_to_f32(act[t * I + i]) *
                                          thrive_bf16_to_f32(in[t * 2 * I + I + i]));
  return 0;
}
