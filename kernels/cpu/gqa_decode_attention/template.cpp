// @thrive op: gqa_decode_attention
// @thrive backend: cpu
// @thrive entry: thrive_gqa_decode_attention
// @thrive param GROUP_PACK values=0,1,2 default=0 doc=query heads per work item: 0: one head, which streams its K/V rows itself; 1: the NQ/NKV heads sharing a KV head, so each K/V row is read from memory once per group; 2: all NQ heads of a sequence, so the K/V cache of a sequence is read as one contiguous stream (fewer, larger work items)
// @thrive param ONLINE values=0,1 default=0 doc=0: scores for the whole context materialized in the workspace, then softmax, then a PV pass; 1: online softmax (running max/sum, rescale per tile), one pass over K and V
// @thrive param VEC values=1,8,16 default=1 doc=fp32 lanes per step of the dot products, PV accumulation and score exps (16 = one zmm with AVX-512, two ymm with AVX2); 1 = scalar code with libm expf, auto-vectorization off; >1 = exps by a vectorized degree-6 polynomial (~1e-7 rel)
// @thrive param THREADS values=1,0 default=1 doc=1: single thread, no OpenMP region; 0: all threads granted (args->num_threads), work items (sequence, head group, KV split) scheduled dynamically
// @thrive param SPLIT_KV values=1,2,4,8 default=1 doc=context chunks per (sequence, head) processed as separate work items, partial (max, sum, acc) in the workspace merged by a combine pass; gives parallelism when B*NKV is below the thread count
// @thrive param BLOCK_L values=1,16,64 default=1 doc=keys per tile: scores of a tile are computed together and the PV accumulator stays in registers across the tile's V rows (ONLINE=1: one rescale per tile)
// @thrive param UNROLL values=1,2,4 default=1 doc=independent accumulator chains: partial dot products over D for QK, and D-chunks of the PV accumulator advanced together over a tile's V rows (hides FMA latency)
//
// out[b, h] = softmax(scale * q[b, h] . K[b, :n_b, g]) V[b, :n_b, g], g = h / (NQ / NKV),
// n_b = context_lens[b] (clamped to [0, L]; n_b = 0 gives zeros). fp32 math, bf16 in/out.
#ifndef GROUP_PACK
#define GROUP_PACK 0
#endif
#ifndef ONLINE
#define ONLINE 0
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef THREADS
#define THREADS 1
#endif
#ifndef SPLIT_KV
#define SPLIT_KV 1
#endif
#ifndef BLOCK_L
#define BLOCK_L 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

#if VEC == 1 && defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")  // VEC=1 means scalar code
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"  // wide vectors only cross static inline helpers
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "thrive_cpu.h"
#if VEC > 1 && (defined(__SSE4_1__) || defined(__AVX2__) || defined(__AVX512F__))
#include <immintrin.h>
#endif

#if UNROLL < 1
#error "UNROLL must be >= 1"
#endif
#if VEC != 1 && VEC != 4 && VEC != 8 && VEC != 16
#error "VEC must be 1, 4, 8 or 16"
#endif
#if SPLIT_KV < 1 || SPLIT_KV > 64 || BLOCK_L < 1 || BLOCK_L > 256
#error "SPLIT_KV must be in [1, 64] and BLOCK_L in [1, 256]"
#endif

// ---- lanes. VEC lanes per step are NSUB native vectors of NW fp32 lanes each (GCC lowers
// wider generic vectors poorly), so VEC=16 is one zmm with AVX-512 and two ymm with AVX2.
#if VEC == 1
#define NW 1
#elif defined(__AVX512F__)
#define NW (VEC < 16 ? VEC : 16)
#elif defined(__AVX__)
#define NW (VEC < 8 ? VEC : 8)
#else
#define NW (VEC < 4 ? VEC : 4)
#endif
#define STEP (VEC * UNROLL)  // elements per main-loop step
#define NSUB (STEP / NW)     // native vectors (independent chains) per main-loop step

#if NW == 1
typedef float vf;
typedef int32_t vi;
static inline vf vsplat(float v) { return v; }
static inline vf vload_bf16(const uint16_t* p) { return thrive_bf16_to_f32(*p); }
static inline vf vload_f32(const float* p) { return *p; }
static inline void vstore_f32(float* p, const vf& v) { *p = v; }
static inline vi vcvt_i(const vf& v) { return (vi)v; }
static inline float vhsum(const vf& v) { return v; }
#else
typedef float vf __attribute__((vector_size(NW * 4)));
typedef uint32_t vu __attribute__((vector_size(NW * 4)));
typedef int32_t vi __attribute__((vector_size(NW * 4)));
typedef uint16_t vh __attribute__((vector_size(NW * 2)));
static inline vf vsplat(float v) { return v - (vf){}; }  // folds to a broadcast
static inline vf vload_bf16(const uint16_t* p) {  // bf16 -> fp32 is a 16-bit shift
#if NW == 16 && defined(__AVX512F__)
  return (vf)_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p)), 16);
#elif NW == 8 && defined(__AVX2__)
  return (vf)_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16);
#elif NW == 4 && defined(__SSE4_1__)
  return (vf)_mm_slli_epi32(_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i*)p)), 16);
#else  // GCC 12 splits this into several shuffles; the intrinsics above fold the load
  vh h;
  memcpy(&h, p, sizeof h);
  return __builtin_bit_cast(vf, __builtin_convertvector(h, vu) << 16);
#endif
}
static inline vf vload_f32(const float* p) {
  vf v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void vstore_f32(float* p, const vf& v) { memcpy(p, &v, sizeof v); }
static inline vi vcvt_i(const vf& v) { return __builtin_convertvector(v, vi); }
static inline float vhsum(const vf& v) {
  float s[NW];
  memcpy(s, &v, sizeof s);
  for (int w = NW / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) s[l] += s[l + w];
  return s[0];
}
#endif
static inline vf vmax(const vf& a, const vf& b) { return a > b ? a : b; }
static inline vf vmin(const vf& a, const vf& b) { return a < b ? a : b; }

// exp(x). Scalar code: libm expf. Vector code: x = n ln2 + r, |r| <= ln2/2 (Cody-Waite split
// of ln2), degree-6 Taylor polynomial for exp(r), 2^n built in the exponent bits; inputs
// clamped to [-87.3, 88.3] so 2^n stays normal (exp(-87.3) ~ 1e-38 stands in for 0).
static inline vf vexp(const vf& x0) {
#if NW == 1
  return expf(x0);
#else
  const vf x = vmin(vmax(x0, vsplat(-87.3f)), vsplat(88.3f));
  const vf n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round(x / ln2)
  vf r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187e-06f;
  vf p = r * (1.0f / 720) + (1.0f / 120);
  p = p * r + (1.0f / 24);
  p = p * r + (1.0f / 6);
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const vi e = (vcvt_i(n) + 127) << 23;
  return p * __builtin_bit_cast(vf, e);
#endif
}
static inline float sexp(float x) {
#if NW == 1
  return vexp(x);
#else
  return vexp(vsplat(x))[0];
#endif
}

// <qf, k> over D (qf fp32, already scaled; k bf16)
static inline float dot(const float* qf, const uint16_t* k, int64_t D) {
  vf a[NSUB];
  for (int u = 0; u < NSUB; ++u) a[u] = vsplat(0.0f);
  int64_t d = 0;
  for (; d + STEP <= D; d += STEP)
    for (int u = 0; u < NSUB; ++u) a[u] += vload_f32(qf + d + u * NW) * vload_bf16(k + d + u * NW);
  for (; d + NW <= D; d += NW) a[0] += vload_f32(qf + d) * vload_bf16(k + d);
  for (int u = 1; u < NSUB; ++u) a[0] += a[u];
  float s = vhsum(a[0]);
  for (; d < D; ++d) s += qf[d] * thrive_bf16_to_f32(k[d]);
  return s;
}

static inline float max_of(const float* s, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = s[i] > m ? s[i] : m;
  return m;
}

// s[i] <- exp(s[i] - m); returns the sum
static inline float exp_sum(float* s, int64_t n, float m) {
  const vf vm = vsplat(m);
  vf acc = vsplat(0.0f);
  int64_t i = 0;
  for (; i + NW <= n; i += NW) {
    const vf e = vexp(vload_f32(s + i) - vm);
    vstore_f32(s + i, e);
    acc += e;
  }
  float r = vhsum(acc);
  for (; i < n; ++i) r += (s[i] = sexp(s[i] - m));
  return r;
}

// acc[0, D) += sum_jj p[jj] * v[jj * vstride + (0, D)]: the accumulator chunk stays in
// registers across the tile's rows.
static inline void pv_tile(float* acc, const float* p, const uint16_t* v, int64_t vstride, int n,
                           int64_t D) {
  int64_t d = 0;
  for (; d + STEP <= D; d += STEP) {
    vf a[NSUB];
    for (int u = 0; u < NSUB; ++u) a[u] = vload_f32(acc + d + u * NW);
    for (int jj = 0; jj < n; ++jj) {
      const vf pj = vsplat(p[jj]);
      for (int u = 0; u < NSUB; ++u) a[u] += pj * vload_bf16(v + jj * vstride + d + u * NW);
    }
    for (int u = 0; u < NSUB; ++u) vstore_f32(acc + d + u * NW, a[u]);
  }
  for (; d + NW <= D; d += NW) {
    vf a = vload_f32(acc + d);
    for (int jj = 0; jj < n; ++jj) a += vsplat(p[jj]) * vload_bf16(v + jj * vstride + d);
    vstore_f32(acc + d, a);
  }
  for (; d < D; ++d) {
    float a = acc[d];
    for (int jj = 0; jj < n; ++jj) a += p[jj] * thrive_bf16_to_f32(v[jj * vstride + d]);
    acc[d] = a;
  }
}

static inline void store_out(uint16_t* o, const float* acc, float inv, int64_t D) {
  for (int64_t d = 0; d < D; ++d) o[d] = thrive_f32_to_bf16(acc[d] * inv);
}

#define CAP 4096  // floats per stack buffer: heads-per-unit x D, and heads-per-unit x BLOCK_L

struct Shape {
  int64_t B, L, NQ, NKV, D, G, GP, U, S;  // GP heads per unit, U units per sequence
  float scale;
};

// One work item: sequence b, head unit u (query heads h0..h0+ng-1), key chunk s.
static void work_item(const Shape& sh, int64_t item, const uint16_t* q, const uint16_t* k,
                      const uint16_t* v, const int32_t* lens, uint16_t* out, float* scores,
                      float* part) {
  const int64_t D = sh.D, L = sh.L, NQ = sh.NQ, NKV = sh.NKV, S = sh.S;
  const int64_t s = item % S, u = (item / S) % sh.U, b = item / S / sh.U;
  const int64_t h0 = u * sh.GP;
  const int ng = (int)(NQ - h0 < sh.GP ? NQ - h0 : sh.GP);
  int64_t n = lens[b];
  n = n < 0 ? 0 : (n > L ? L : n);
  const int64_t cs = (n + S - 1) / S;
  const int64_t j0 = s * cs < n ? s * cs : n, j1 = j0 + cs < n ? j0 + cs : n;
  const int64_t kvs = NKV * D;  // stride between consecutive keys
  const uint16_t* kb = k + b * L * NKV * D;
  const uint16_t* vb = v + b * L * NKV * D;
  int64_t kvo[64];  // offset of head i's KV head within a key row
  for (int i = 0; i < ng; ++i) kvo[i] = (h0 + i) / sh.G * D;

  float qf[CAP], acc[CAP], m[64], l[64];  // GP <= 64 heads per unit
  for (int i = 0; i < ng; ++i) {
    const uint16_t* qh = q + (b * NQ + h0 + i) * D;
    for (int64_t d = 0; d < D; ++d) qf[i * D + d] = thrive_bf16_to_f32(qh[d]) * sh.scale;
    for (int64_t d = 0; d < D; ++d) acc[i * D + d] = 0.0f;
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }

#if ONLINE == 1
  (void)scores;
  float sc[CAP];  // [ng][BLOCK_L]
  for (int64_t jt = j0; jt < j1; jt += BLOCK_L) {
    const int nb = (int)(j1 - jt < BLOCK_L ? j1 - jt : BLOCK_L);
    for (int jj = 0; jj < nb; ++jj)
      for (int i = 0; i < ng; ++i) sc[i * BLOCK_L + jj] = dot(qf + i * D, kb + (jt + jj) * kvs + kvo[i], D);
    for (int i = 0; i < ng; ++i) {
      float* p = sc + i * BLOCK_L;
      const float mn = fmaxf(m[i], max_of(p, nb));
      const float alpha = m[i] == -INFINITY ? 0.0f : expf(m[i] - mn);
      if (alpha != 1.0f) {
        l[i] *= alpha;
        for (int64_t d = 0; d < D; ++d) acc[i * D + d] *= alpha;
      }
      m[i] = mn;
      l[i] += exp_sum(p, nb, mn);
      pv_tile(acc + i * D, p, vb + jt * kvs + kvo[i], kvs, nb, D);
    }
  }
#else
  // 1) scores for the chunk into the workspace, 2) softmax numerators in place, 3) PV
  for (int64_t jt = j0; jt < j1; jt += BLOCK_L) {
    const int nb = (int)(j1 - jt < BLOCK_L ? j1 - jt : BLOCK_L);
    for (int jj = 0; jj < nb; ++jj)
      for (int i = 0; i < ng; ++i)
        scores[(b * NQ + h0 + i) * L + jt + jj] = dot(qf + i * D, kb + (jt + jj) * kvs + kvo[i], D);
  }
  for (int i = 0; i < ng; ++i) {
    float* p = scores + (b * NQ + h0 + i) * L;
    m[i] = max_of(p + j0, j1 - j0);
    if (j1 > j0) l[i] = exp_sum(p + j0, j1 - j0, m[i]);
  }
  for (int64_t jt = j0; jt < j1; jt += BLOCK_L) {
    const int nb = (int)(j1 - jt < BLOCK_L ? j1 - jt : BLOCK_L);
    for (int i = 0; i < ng; ++i)
      pv_tile(acc + i * D, scores + (b * NQ + h0 + i) * L + jt, vb + jt * kvs + kvo[i], kvs, nb, D);
  }
#endif

  for (int i = 0; i < ng; ++i) {
    const int64_t h = h0 + i;
    if (S == 1) {
      store_out(out + (b * NQ + h) * D, acc + i * D, l[i] > 0.0f ? 1.0f / l[i] : 0.0f, D);
    } else {
      float* pp = part + ((b * NQ + h) * S + s) * (D + 2);
      pp[0] = j1 > j0 ? m[i] : -INFINITY;
      pp[1] = l[i];
      memcpy(pp + 2, acc + i * D, (size_t)D * 4);
    }
  }
}

// Merges the S partial (max, sum, acc) of head (b, h).
static void combine(const Shape& sh, int64_t bh, const float* part, uint16_t* out) {
  const int64_t D = sh.D, S = sh.S;
  const float* pp = part + bh * S * (D + 2);
  float M = -INFINITY;
  for (int64_t s = 0; s < S; ++s) M = pp[s * (D + 2)] > M ? pp[s * (D + 2)] : M;
  uint16_t* o = out + bh * D;
  if (M == -INFINITY) {  // empty context
    memset(o, 0, (size_t)D * 2);
    return;
  }
  float w[64], Ls = 0.0f;
  for (int64_t s = 0; s < S; ++s) {
    const float ms = pp[s * (D + 2)];
    w[s] = ms == -INFINITY ? 0.0f : expf(ms - M);
    Ls += w[s] * pp[s * (D + 2) + 1];
  }
  const float inv = 1.0f / Ls;
  for (int64_t d = 0; d < D; ++d) {
    float a = 0.0f;
    for (int64_t s = 0; s < S; ++s) a += w[s] * pp[s * (D + 2) + 2 + d];
    o[d] = thrive_f32_to_bf16(a * inv);
  }
}

THRIVE_EXPORT int thrive_gqa_decode_attention(const ThriveArgs* args) {
  if (args->num_tensors < 5 || args->num_dims < 5 || args->num_scalars < 1) return 1;
  const uint16_t* q = (const uint16_t*)args->tensors[0];
  const uint16_t* k = (const uint16_t*)args->tensors[1];
  const uint16_t* v = (const uint16_t*)args->tensors[2];
  const int32_t* lens = (const int32_t*)args->tensors[3];
  uint16_t* out = (uint16_t*)args->tensors[4];
  Shape sh;
  sh.B = args->dims[0];
  sh.L = args->dims[1];
  sh.NQ = args->dims[2];
  sh.NKV = args->dims[3];
  sh.D = args->dims[4];
  sh.scale = (float)args->scalars[0];
  if (sh.B < 0 || sh.L < 0 || sh.NQ < 1 || sh.NKV < 1 || sh.D < 1 || sh.NQ % sh.NKV) return 1;
  if (sh.D > CAP) return 1;
  if (sh.B == 0) return 0;
  sh.G = sh.NQ / sh.NKV;
  // heads per unit, bounded by the stack buffers (CAP floats, 64 heads)
  int64_t lim = CAP / (sh.D > BLOCK_L ? sh.D : BLOCK_L);
  lim = lim < 64 ? lim : 64;
#if GROUP_PACK == 0
  sh.GP = 1;
#elif GROUP_PACK == 1
  sh.GP = sh.G < lim ? sh.G : lim;
#else
  sh.GP = sh.NQ < lim ? sh.NQ : lim;
#endif
  sh.U = (sh.NQ + sh.GP - 1) / sh.GP;
  sh.S = SPLIT_KV < sh.L ? SPLIT_KV : (sh.L > 0 ? sh.L : 1);

  // workspace: [scores B*NQ*L f32 (ONLINE=0)] [partials B*NQ*S*(D+2) f32 (S>1)]
  int64_t off = 0;
  float* scores = nullptr;
  float* part = nullptr;
#if ONLINE == 0
  scores = (float*)args->workspace;
  off = (sh.B * sh.NQ * sh.L * 4 + 63) / 64 * 64;
#endif
  if (sh.S > 1) part = (float*)((char*)args->workspace + off);
  const int64_t need = off + (sh.S > 1 ? sh.B * sh.NQ * sh.S * (sh.D + 2) * 4 : 0);
  if (need > args->workspace_bytes) return 1;

  const int64_t items = sh.B * sh.U * sh.S;
#if THREADS == 1
  for (int64_t it = 0; it < items; ++it) work_item(sh, it, q, k, v, lens, out, scores, part);
  if (sh.S > 1)
    for (int64_t bh = 0; bh < sh.B * sh.NQ; ++bh) combine(sh, bh, part, out);
#else
  int nt = args->num_threads > 0 ? args->num_threads : 1;
  if (items < nt) nt = (int)items;
#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) work_item(sh, it, q, k, v, lens, out, scores, part);
    if (sh.S > 1) {
#pragma omp for schedule(static)
      for (int64_t bh = 0; bh < sh.B * sh.NQ; ++bh) combine(sh, bh, part, out);
    }
  }
#endif
  return 0;
}
