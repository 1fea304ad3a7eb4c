// @thrive op: rmsnorm_residual
// @thrive backend: cpu
// @thrive entry: thrive_rmsnorm_residual_eager
//
// Eager baseline: what PyTorch eager runs for HF Qwen3's residual add + Qwen3RMSNorm,
//   hidden = x + residual                      (bf16, becomes the new residual)
//   h = hidden.to(float32)
//   variance = h.pow(2).mean(-1, keepdim=True)
//   h = h * torch.rsqrt(variance + eps)
//   out = weight * h.to(bfloat16)
// one full pass per elementary op, each writing its intermediate to the workspace, each an
// OpenMP loop over all granted threads (serial below PyTorch's grain of 32768 elements).
#include <math.h>
#include <stdint.h>

#include "thrive_cpu.h"

#define GRAIN 32768

THRIVE_EXPORT int thrive_rmsnorm_residual_eager(const ThriveArgs* args) {
  if (args->num_tensors < 4 || args->num_dims < 2 || args->num_scalars < 1) return 1;
  const uint16_t* x = (const uint16_t*)args->tensors[0];
  uint16_t* res = (uint16_t*)args->tensors[1];
  const uint16_t* w = (const uint16_t*)args->tensors[2];
  uint16_t* out = (uint16_t*)args->tensors[3];
  const int64_t T = args->dims[0], H = args->dims[1], N = T * H;
  const float eps = (float)args->scalars[0];
  if (T < 0 || H < 1) return 1;
  if (T == 0) return 0;
  const int nt = args->num_threads > 0 ? args->num_threads : 1;
  // workspace: h f32 [N] | sq f32 [N] | normed f32 [N] | normed bf16 [N] | mean, var, rs f32 [T]
  if (args->workspace_bytes < N * 14 + T * 12) return 1;
  float* h = (float*)args->workspace;
  float* sq = h + N;
  float* normed = sq + N;
  uint16_t* normed_bf = (uint16_t*)(normed + N);
  float* mean = (float*)(normed_bf + N);
  float* var = mean + T;
  float* rs = var + T;

  // hidden = x + residual (bf16 result, written as the new residual)
#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t i = 0; i < N; ++i)
    res[i] = thrive_f32_to_bf16(thrive_bf16_to_f32(x[i]) + thrive_bf16_to_f32(res[i]));
  // .to(float32)
#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t i = 0; i < N; ++i) h[i] = thrive_bf16_to_f32(res[i]);
  // .pow(2)
#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t i = 0; i < N; ++i) sq[i] = h[i] * h[i];
  // .mean(-1)
#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t r = 0; r < T; ++r) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < H; ++c) s += sq[r * H + c];
    mean[r] = s / (float)H;
  }
  // + eps
  for (int64_t r = 0; r < T; ++r) var[r] = mean[r] + eps;
  // rsqrt
  for (int64_t r = 0; r < T; ++r) rs[r] = 1.0f / sqrtf(var[r]);
  // h * rsqrt(...)  (broadcast over the row)
#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t r = 0; r < T; ++r)
    for (int64_t c = 0; c < H; ++c) normed[r * H + c] = h[r * H + c] * rs[r];
  // .to(bfloat16)
#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t i = 0; i < N; ++i) normed_bf[i] = thrive_f32_to_bf16(normed[i]);
  // weight * h
#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t r = 0; r < T; ++r)
    for (int64_t c = 0; c < H; ++c)
      out[r * H + c] = thrive_f32_to_bf16(thrive_bf16_to_f32(w[c]) * thrive_bf16_to_f32(normed_bf[r * H + c]));
  return 0;
}
