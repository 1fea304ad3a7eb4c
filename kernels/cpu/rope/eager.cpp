// @thrive op: rope
// @thrive backend: cpu
// @thrive entry: thrive_rope_eager
//
// Eager baseline: what PyTorch eager runs for vLLM's RotaryEmbedding.forward_native (neox):
//   cos_sin = cos_sin_cache.index_select(0, positions); cos, sin = cos_sin.chunk(2, -1)
//   for x in (query, key):   x viewed [T, H, D]; x1, x2 = x.chunk(2, -1)
//     o1 = x1 * cos - x2 * sin;  o2 = x2 * cos + x1 * sin
//     x = torch.cat((o1, o2), -1)  -> copied back into the bf16 tensor
// one full pass per elementary op (gather, 4 products, add, sub, cat, copy), each writing
// its intermediate to the workspace, each an OpenMP loop over all granted threads (serial
// below PyTorch's grain of 32768 elements). The products of a bf16 tensor with the f32
// cos/sin promote to f32, so the intermediates are f32. (vLLM casts cos/sin to the query
// dtype first; with bf16 intermediates x1*cos - x2*sin cancels and misses the tolerance.)
#include <stdint.h>
#include <string.h>

#include "thrive_cpu.h"

#define GRAIN 32768

// One of q or k: x [T, H, D] in place. cs: gathered cos|sin rows [T, D]. tmp: 4*T*H*D floats.
static void rope_eager_one(uint16_t* x, const float* cs, float* tmp, int64_t T, int64_t H,
                           int64_t D, int nt) {
  const int64_t half = D / 2, n = T * H * half, N = T * H * D;
  float* a = tmp;          // x1 * cos   [T, H, half]
  float* b = a + n;        // x2 * sin
  float* o1 = b + n;       // a - b
  float* c = o1 + n;       // x2 * cos
  float* d = c + n;        // x1 * sin
  float* o2 = d + n;       // c + d
  float* cat = o2 + n;     // cat(o1, o2)  [T, H, D]
#pragma omp parallel for num_threads(nt) if (n >= GRAIN)
  for (int64_t th = 0; th < T * H; ++th)
    for (int64_t i = 0; i < half; ++i)
      a[th * half + i] = thrive_bf16_to_f32(x[th * D + i]) * cs[(th / H) * D + i];
#pragma omp parallel for num_threads(nt) if (n >= GRAIN)
  for (int64_t th = 0; th < T * H; ++th)
    for (int64_t i = 0; i < half; ++i)
      b[th * half + i] = thrive_bf16_to_f32(x[th * D + half + i]) * cs[(th / H) * D + half + i];
#pragma omp parallel for num_threads(nt) if (n >= GRAIN)
  for (int64_t i = 0; i < n; ++i) o1[i] = a[i] - b[i];
#pragma omp parallel for num_threads(nt) if (n >= GRAIN)
  for (int64_t th = 0; th < T * H; ++th)
    for (int64_t i = 0; i < half; ++i)
      c[th * half + i] = thrive_bf16_to_f32(x[th * D + half + i]) * cs[(th / H) * D + i];
#pragma omp parallel for num_threads(nt) if (n >= GRAIN)
  for (int64_t th = 0; th < T * H; ++th)
    for (int64_t i = 0; i < half; ++i)
      d[th * half + i] = thrive_bf16_to_f32(x[th * D + i]) * cs[(th / H) * D + half + i];
#pragma omp parallel for num_threads(nt) if (n >= GRAIN)
  for (int64_t i = 0; i < n; ++i) o2[i] = c[i] + d[i];
#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t th = 0; th < T * H; ++th) {
    for (int64_t i = 0; i < half; ++i) cat[th * D + i] = o1[th * half + i];
    for (int64_t i = 0; i < half; ++i) cat[th * D + half + i] = o2[th * half + i];
    for (int64_t i = 2 * half; i < D; ++i) cat[th * D + i] = thrive_bf16_to_f32(x[th * D + i]);
  }
#pragma omp parallel for num_threads(nt) if (N >= GRAIN)
  for (int64_t i = 0; i < N; ++i) x[i] = thrive_f32_to_bf16(cat[i]);
}

THRIVE_EXPORT int thrive_rope_eager(const ThriveArgs* args) {
  if (args->num_tensors < 4 || args->num_dims < 5) return 1;
  const int64_t* pos = (const int64_t*)args->tensors[0];
  uint16_t* q = (uint16_t*)args->tensors[1];
  uint16_t* k = (uint16_t*)args->tensors[2];
  const float* cache = (const float*)args->tensors[3];
  const int64_t T = args->dims[0], NQ = args->dims[1], NKV = args->dims[2], D = args->dims[3],
                P = args->dims[4];
  if (T < 0 || NQ < 0 || NKV < 0 || D < 0 || P < 1) return 1;
  if (T == 0 || D / 2 == 0) return 0;
  for (int64_t t = 0; t < T; ++t)
    if (pos[t] < 0 || pos[t] >= P) return 2;  // index_select would raise
  const int nt = args->num_threads > 0 ? args->num_threads : 1;
  const int64_t HM = NQ > NKV ? NQ : NKV;
  // workspace: gathered rows [T, D] f32 | per-tensor temporaries 4*T*HM*D f32
  if (args->workspace_bytes < T * D * 4 + 16 * T * HM * D) return 1;
  float* cs = (float*)args->workspace;
  float* tmp = cs + T * D;
  // index_select(0, positions)
#pragma omp parallel for num_threads(nt) if (T * D >= GRAIN)
  for (int64_t t = 0; t < T; ++t) memcpy(cs + t * D, cache + pos[t] * D, (size_t)D * 4);
  if (NQ > 0) rope_eager_one(q, cs, tmp, T, NQ, D, nt);
  if (NKV > 0) rope_eager_one(k, cs, tmp, T, NKV, D, nt);
  return 0;
}
