// @thrive op: gqa_decode_attention
// @thrive backend: cpu
// @thrive entry: thrive_gqa_decode_attention_eager
//
// Eager baseline: what PyTorch eager runs for HF-style decode attention with repeat_kv and a
// padding mask, on PyTorch's math path (which upcasts bf16 q/k/v to f32):
//   K = repeat_kv(k_cache), V = repeat_kv(v_cache)     materialized [B, NQ, L, D] bf16 copies
//   s = q.float() @ K^T;  s = s * scale;  s = s + mask (-inf where j >= context_lens[b])
//   p = softmax(s, -1);   o = p @ V;  out = o.to(bfloat16)
// one full pass per elementary op, each writing its intermediate to the workspace, each an
// OpenMP loop over all granted threads (serial below PyTorch's grain of 32768 elements).
// Scores and probabilities stay f32: HF's eager path rounds them to bf16, and those roundings
// (relative errors uncorrelated across keys) miss the output tolerance near zero.
#if defined(__GNUC__) && !defined(__clang__)
// Lets GCC if-convert the exp clamp (it sinks the multiply into the clamp's branches, which
// -ftrapping-math then forbids speculating), so the loops vectorize like PyTorch's do.
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
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

THRIVE_EXPORT int thrive_gqa_decode_attention_eager(const ThriveArgs* args) {
  if (args->num_tensors < 5 || args->num_dims < 5 || args->num_scalars < 1) return 1;
  const uint16_t* q = (const uint16_t*)args->tensors[0];
  const uint16_t* k = (const uint16_t*)args->tensors[1];
  const uint16_t* v = (const uint16_t*)args->tensors[2];
  const int32_t* lens = (const int32_t*)args->tensors[3];
  uint16_t* out = (uint16_t*)args->tensors[4];
  const int64_t B = args->dims[0], L = args->dims[1], NQ = args->dims[2], NKV = args->dims[3],
                D = args->dims[4];
  const float scale = (float)args->scalars[0];
  if (B < 0 || L < 0 || NQ < 1 || NKV < 1 || D < 1 || NQ % NKV) return 1;
  if (B == 0) return 0;
  const int64_t G = NQ / NKV, BH = B * NQ, NS = BH * L, NO = BH * D;
  const int nt = args->num_threads > 0 ? args->num_threads : 1;
  // workspace: Kx, Vx bf16 [B,NQ,L,D] | s, s_scaled, s_masked, p f32 [B,NQ,L] | qf, o f32 [B,NQ,D]
  if (args->workspace_bytes < 4 * NS * D + 16 * NS + 8 * NO) return 1;
  uint16_t* Kx = (uint16_t*)args->workspace;
  uint16_t* Vx = Kx + NS * D;
  float* s = (float*)(Vx + NS * D);
  float* ss = s + NS;
  float* sm = ss + NS;
  float* p = sm + NS;
  float* qf = p + NS;
  float* o = qf + NO;

  // repeat_kv: [B, L, NKV, D] -> [B, NQ, L, D] (one copy per tensor)
#pragma omp parallel for collapse(2) num_threads(nt) if (NS * D >= GRAIN)
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t j = 0; j < L; ++j)
      memcpy(Kx + (bh * L + j) * D, k + (((bh / NQ) * L + j) * NKV + (bh % NQ) / G) * D, (size_t)D * 2);
#pragma omp parallel for collapse(2) num_threads(nt) if (NS * D >= GRAIN)
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t j = 0; j < L; ++j)
      memcpy(Vx + (bh * L + j) * D, v + (((bh / NQ) * L + j) * NKV + (bh % NQ) / G) * D, (size_t)D * 2);
  // q.float()
#pragma omp parallel for num_threads(nt) if (NO >= GRAIN)
  for (int64_t i = 0; i < NO; ++i) qf[i] = thrive_bf16_to_f32(q[i]);
  // s = q @ K^T
#pragma omp parallel for collapse(2) num_threads(nt) if (NS * D >= GRAIN)
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t j = 0; j < L; ++j) {
      const float* qr = qf + bh * D;
      const uint16_t* kr = Kx + (bh * L + j) * D;
      float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
      for (int64_t d = 0; d < D; ++d) acc += qr[d] * thrive_bf16_to_f32(kr[d]);
      s[bh * L + j] = acc;
    }
  // s * scale
#pragma omp parallel for num_threads(nt) if (NS >= GRAIN)
  for (int64_t i = 0; i < NS; ++i) ss[i] = s[i] * scale;
  // + mask
#pragma omp parallel for num_threads(nt) if (NS >= GRAIN)
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t n = lens[bh / NQ];
    for (int64_t j = 0; j < L; ++j) sm[bh * L + j] = ss[bh * L + j] + (j < n ? 0.0f : -INFINITY);
  }
  // softmax over the last dim (max, exp + sum, * 1/sum); an all-masked row gives zeros
#pragma omp parallel for num_threads(nt) if (NS >= GRAIN)
  for (int64_t bh = 0; bh < BH; ++bh) {
    const float* x = sm + bh * L;
    float* y = p + bh * L;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < L; ++j) m = x[j] > m ? x[j] : m;
    if (m == -INFINITY) {
      for (int64_t j = 0; j < L; ++j) y[j] = 0.0f;
      continue;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < L; ++j) {
      const float e = x[j] == -INFINITY ? 0.0f : exp_acc(x[j] - m);
      y[j] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < L; ++j) y[j] *= inv;
  }
  // o = p @ V
#pragma omp parallel for num_threads(nt) if (NS * D >= GRAIN)
  for (int64_t bh = 0; bh < BH; ++bh) {
    float* orow = o + bh * D;
    for (int64_t d = 0; d < D; ++d) orow[d] = 0.0f;
    for (int64_t j = 0; j < L; ++j) {
      const float pj = p[bh * L + j];
      const uint16_t* vr = Vx + (bh * L + j) * D;
      for (int64_t d = 0; d < D; ++d) orow[d] += pj * thrive_bf16_to_f32(vr[d]);
    }
  }
  // .to(bfloat16)
#pragma omp parallel for num_threads(nt) if (NO >= GRAIN)
  for (int64_t i = 0; i < NO; ++i) out[i] = thrive_f32_to_bf16(o[i]);
  return 0;
}
