// @thrive op: softmax
// @thrive backend: cpu
// @thrive entry: thrive_softmax_eager
//
// Eager baseline: what PyTorch eager runs for torch.softmax(logits.float(), dim=-1):
//   1. logits.float(): a full pass writing an f32 [T, V] copy to the workspace;
//   2. softmax over the last dim, PyTorch's CPU kernel: rows split over the threads, and per
//      row a vectorized max pass, an exp(x - max) pass that stores into the output and
//      sums, then a pass multiplying the output by 1/sum.
// OpenMP loops over all granted threads (serial below PyTorch's grain of 32768 elements);
// exp is an accurate vectorizable polynomial, as PyTorch's vectorized exp is.
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

THRIVE_EXPORT int thrive_softmax_eager(const ThriveArgs* args) {
  if (args->num_tensors < 2 || args->num_dims < 2) return 1;
  const uint16_t* x = (const uint16_t*)args->tensors[0];
  float* y = (float*)args->tensors[1];
  const int64_t T = args->dims[0], V = args->dims[1], N = T * V;
  if (T < 0 || V < 1) return 1;
  if (T == 0) return 0;
  const int nt = args->num_threads > 0 ? args->num_threads : 1;
  if (args->workspace_bytes < N * 4) return 1;
  float* xf = (float*)args->workspace;  // logits.float()

#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t i = 0; i < N; ++i) xf[i] = thrive_bf16_to_f32(x[i]);

#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = xf + t * V;
    float* yr = y + t * V;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t v = 0; v < V; ++v) m = xr[v] > m ? xr[v] : m;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t v = 0; v < V; ++v) {
      const float e = exp_acc(xr[v] - m);
      yr[v] = e;
      s += e;
    }
    const float inv = 1.0f / s;
    for (int64_t v = 0; v < V; ++v) yr[v] *= inv;
  }
  return 0;
}
