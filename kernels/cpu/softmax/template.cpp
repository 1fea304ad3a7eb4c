// @thrive op: softmax
// @thrive backend: cpu
// @thrive entry: thrive_softmax
// @thrive param PASSES values=3,3store,2 default=3 doc=3: max pass, sum-of-exp pass, normalize pass recomputing exp (input read 3x); 3store: pass 2 stores exp into the output and pass 3 rescales it in place (no exp recompute, output written twice); 2: online max+sum in one pass (Milakov & Gimelshein 2018, blocked rescale) then normalize (input read 2x)
// @thrive param VEC values=1,8,16 default=1 doc=fp32 lanes per step (GCC vector extensions; 16 = one zmm with AVX-512, two ymm with AVX2); 1 = scalar code, auto-vectorization off
// @thrive param UNROLL values=1,2,4 default=1 doc=independent vector accumulators for the max/sum reductions (breaks dependency chains)
// @thrive param THREADS values=1,0 default=1 doc=1: single thread, no OpenMP region; 0: all threads granted (args->num_threads)
// @thrive param SPLIT_ROW values=0,1 default=0 doc=0: one row per thread (T=1 uses one core); 1: every row split across all threads, per-thread partial max/sum in the workspace combined after a barrier
// @thrive param EXP values=libm,poly,poly3,poly1 default=libm doc=libm: expf per lane; poly: exponent-bit construction + degree-6 polynomial (~1e-7 rel); poly3: RISKY degree 3 (~8e-4 rel) fails the f32 tolerance 1e-4; poly1: RISKY degree 1 (~8% error) fails
//
// probs[t, v] = exp(x[t, v] - max_v x[t, :]) / sum_v exp(x[t, v] - max); bf16 in, f32 out.
#ifndef PASSES
#define PASSES 3
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef THREADS
#define THREADS 1
#endif
#ifndef SPLIT_ROW
#define SPLIT_ROW 0
#endif
#ifndef EXP
#define EXP libm
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
#ifdef _OPENMP
#include <omp.h>
#endif

#define THRIVE_CAT_(a, b) a##b
#define THRIVE_CAT(a, b) THRIVE_CAT_(a, b)
#define THRIVE_EXP_libm 1
#define THRIVE_EXP_poly 2
#define THRIVE_EXP_poly3 3
#define THRIVE_EXP_poly1 4
#define EXP_ID THRIVE_CAT(THRIVE_EXP_, EXP)
#define THRIVE_PASSES_3 1
#define THRIVE_PASSES_3store 2
#define THRIVE_PASSES_2 3
#define PASSES_ID THRIVE_CAT(THRIVE_PASSES_, PASSES)
#if EXP_ID < 1 || EXP_ID > 4
#error "EXP must be libm, poly, poly3 or poly1"
#endif
#if PASSES_ID < 1 || PASSES_ID > 3
#error "PASSES must be 3, 3store or 2"
#endif
#if VEC != 1 && VEC != 4 && VEC != 8 && VEC != 16
#error "VEC must be 1, 4, 8 or 16"
#endif
#if UNROLL < 1
#error "UNROLL must be >= 1"
#endif

// ---- lanes. VEC lanes per step are NSUB/UNROLL native vectors of NW fp32 lanes each (GCC
// lowers wider generic vectors poorly), so VEC=16 is one zmm with AVX-512 and two ymm with AVX2.
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
#define NSUB (STEP / NW)     // native vectors per main-loop step

#if NW == 1
typedef float vf;
typedef int32_t vi;
static inline vf vsplat(float v) { return v; }
static inline vf vload_bf16(const uint16_t* p) { return thrive_bf16_to_f32(*p); }
static inline vf vload_f32(const float* p) { return *p; }
static inline void vstore_f32(float* p, const vf& v) { *p = v; }
static inline vi vcvt_i(const vf& v) { return (vi)v; }
static inline float vhmax(const vf& v) { return v; }
static inline float vlane(const vf& v, int) { return v; }
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
static inline float vhmax(const vf& v) {
  float m = v[0];
  for (int l = 1; l < NW; ++l) m = v[l] > m ? v[l] : m;
  return m;
}
static inline float vlane(const vf& v, int l) { return v[l]; }
#endif
static inline vf vmax(const vf& a, const vf& b) { return a > b ? a : b; }
static inline vf vmin(const vf& a, const vf& b) { return a < b ? a : b; }

// exp(x). libm: expf per lane. poly*: x = n ln2 + r, |r| <= ln2/2 (Cody-Waite split of
// ln2), exp(r) by a Taylor polynomial, 2^n built in the exponent bits. Inputs are clamped
// to [-87.3, 88.3] so 2^n stays a normal number (exp(-87.3) ~ 1e-38 stands in for 0).
static inline vf vexp(const vf& x0) {
#if EXP_ID == 1
#if NW == 1
  return expf(x0);
#else
  vf r;
  for (int l = 0; l < NW; ++l) r[l] = expf(x0[l]);
  return r;
#endif
#else
  const vf x = vmin(vmax(x0, vsplat(-87.3f)), vsplat(88.3f));
  const vf n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;  // round(x / ln2)
  vf r = x - n * 0.693145751953125f;
  r = r - n * 1.428606765330187e-06f;
#if EXP_ID == 2
  vf p = r * (1.0f / 720) + (1.0f / 120);
  p = p * r + (1.0f / 24);
  p = p * r + (1.0f / 6);
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
#elif EXP_ID == 3
  vf p = r * (1.0f / 6) + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
#else
  vf p = r + 1.0f;
#endif
  const vi e = (vcvt_i(n) + 127) << 23;
  return p * __builtin_bit_cast(vf, e);
#endif
}
static inline float sexp(float x) {  // the same exp on one value (tails)
#if NW == 1
  return vexp(x);
#else
  return vlane(vexp(vsplat(x)), 0);
#endif
}

// ---- row-range kernels over x[a, b) (one row, or one thread's slice of it)

static inline float range_max(const uint16_t* x, int64_t a, int64_t b) {
  vf m[NSUB];
  for (int u = 0; u < NSUB; ++u) m[u] = vsplat(-INFINITY);
  int64_t c = a;
  for (; c + STEP <= b; c += STEP)
    for (int u = 0; u < NSUB; ++u) m[u] = vmax(m[u], vload_bf16(x + c + u * NW));
  for (; c + NW <= b; c += NW) m[0] = vmax(m[0], vload_bf16(x + c));
  for (int u = 1; u < NSUB; ++u) m[0] = vmax(m[0], m[u]);
  float r = vhmax(m[0]);
  for (; c < b; ++c) {
    const float v = thrive_bf16_to_f32(x[c]);
    r = v > r ? v : r;
  }
  return r;
}

static inline float vsum_all(const vf* s, int n) {
  vf t = s[0];
  for (int u = 1; u < n; ++u) t += s[u];
  float r = 0.0f;
  for (int l = 0; l < NW; ++l) r += vlane(t, l);
  return r;
}

// sum of exp(x - m); with STORE, also y = exp(x - m). fp32 accumulation error grows with the
// terms per accumulator (one scalar accumulator over 151936 terms misses rtol 1e-4), hence
// the block sums.
#define SUMBLK (STEP * ((1024 + STEP - 1) / STEP))
template <bool STORE>
static inline float range_sumexp(const uint16_t* x, float* y, int64_t a, int64_t b, float m) {
  const vf vm = vsplat(m);
  vf s[NSUB];
  for (int u = 0; u < NSUB; ++u) s[u] = vsplat(0.0f);
  int64_t c = a;
  while (c + STEP <= b) {  // two-level sum: blocks of SUMBLK elements, then the block sums
    const int64_t lim = c + SUMBLK < b ? c + SUMBLK : b;
    vf bs[NSUB];
    for (int u = 0; u < NSUB; ++u) bs[u] = vsplat(0.0f);
    for (; c + STEP <= lim; c += STEP)
      for (int u = 0; u < NSUB; ++u) {
        const vf e = vexp(vload_bf16(x + c + u * NW) - vm);
        if (STORE) vstore_f32(y + c + u * NW, e);
        bs[u] += e;
      }
    for (int u = 0; u < NSUB; ++u) s[u] += bs[u];
  }
  for (; c + NW <= b; c += NW) {
    const vf e = vexp(vload_bf16(x + c) - vm);
    if (STORE) vstore_f32(y + c, e);
    s[0] += e;
  }
  float r = vsum_all(s, NSUB);
  for (; c < b; ++c) {
    const float e = sexp(thrive_bf16_to_f32(x[c]) - m);
    if (STORE) y[c] = e;
    r += e;
  }
  return r;
}

// y = exp(x - m) * inv
static inline void range_normalize(const uint16_t* x, float* y, int64_t a, int64_t b, float m, float inv) {
  const vf vm = vsplat(m), vinv = vsplat(inv);
  int64_t c = a;
  for (; c + STEP <= b; c += STEP)
    for (int u = 0; u < NSUB; ++u) vstore_f32(y + c + u * NW, vexp(vload_bf16(x + c + u * NW) - vm) * vinv);
  for (; c + NW <= b; c += NW) vstore_f32(y + c, vexp(vload_bf16(x + c) - vm) * vinv);
  for (; c < b; ++c) y[c] = sexp(thrive_bf16_to_f32(x[c]) - m) * inv;
}

// y *= inv
static inline void range_scale(float* y, int64_t a, int64_t b, float inv) {
  const vf vinv = vsplat(inv);
  int64_t c = a;
  for (; c + STEP <= b; c += STEP)
    for (int u = 0; u < NSUB; ++u) vstore_f32(y + c + u * NW, vload_f32(y + c + u * NW) * vinv);
  for (; c + NW <= b; c += NW) vstore_f32(y + c, vload_f32(y + c) * vinv);
  for (; c < b; ++c) y[c] *= inv;
}

// Online max and sum over x[a, b): per-lane running (m, s). Each block of BLK elements
// (L1-resident) is scanned for its max first, the running sum is rescaled once by
// exp(m_old - m_new), then the block's exps are added: one exp per element, one input read.
#define BLK (STEP * ((256 + STEP - 1) / STEP))
static inline void range_online(const uint16_t* x, int64_t a, int64_t b, float* mo, float* so) {
  vf m[NSUB], s[NSUB];
  for (int u = 0; u < NSUB; ++u) {
    m[u] = vsplat(-INFINITY);
    s[u] = vsplat(0.0f);
  }
  int64_t c = a;
  for (; c + BLK <= b; c += BLK) {
    vf bm[NSUB];
    for (int u = 0; u < NSUB; ++u) bm[u] = vsplat(-INFINITY);
    for (int64_t k = c; k < c + BLK; k += STEP)
      for (int u = 0; u < NSUB; ++u) bm[u] = vmax(bm[u], vload_bf16(x + k + u * NW));
    vf bs[NSUB];
    for (int u = 0; u < NSUB; ++u) {
      const vf mn = vmax(m[u], bm[u]);
      s[u] *= vexp(m[u] - mn);  // m = -inf at start: exp -> 0 (clamped poly: ~1e-38) times s = 0
      m[u] = mn;
      bs[u] = vsplat(0.0f);
    }
    for (int64_t k = c; k < c + BLK; k += STEP)
      for (int u = 0; u < NSUB; ++u) bs[u] += vexp(vload_bf16(x + k + u * NW) - m[u]);
    for (int u = 0; u < NSUB; ++u) s[u] += bs[u];  // block sum first: keeps fp32 error low
  }
  // rest: fewer than BLK elements, handled with scalar (m, s) for simplicity
  float M = -INFINITY;
  for (int u = 0; u < NSUB; ++u)
    for (int l = 0; l < NW; ++l) M = vlane(m[u], l) > M ? vlane(m[u], l) : M;
  const float tm = range_max(x, c, b);
  if (tm > M) M = tm;
  float S = 0.0f;
  if (M != -INFINITY) {
    for (int u = 0; u < NSUB; ++u)
      for (int l = 0; l < NW; ++l)
        if (vlane(m[u], l) != -INFINITY) S += vlane(s[u], l) * expf(vlane(m[u], l) - M);
    S += range_sumexp<false>(x, nullptr, c, b, M);
  }
  *mo = M;
  *so = S;
}

// Combines per-slice (max, sum) pairs: M = max m_i, S = sum s_i exp(m_i - M).
static inline void combine(const float* part, int n, int stride, float* M, float* S) {
  float m = -INFINITY;
  for (int i = 0; i < n; ++i) m = part[i * stride] > m ? part[i * stride] : m;
  float s = 0.0f;
  for (int i = 0; i < n; ++i)
    if (part[i * stride] != -INFINITY) s += part[i * stride + 1] * expf(part[i * stride] - m);
  *M = m;
  *S = s;
}

// Whole row [0, V) on one thread.
static inline void row_softmax(const uint16_t* x, float* y, int64_t V) {
#if PASSES_ID == 3
  float m, s;
  range_online(x, 0, V, &m, &s);
  range_normalize(x, y, 0, V, m, 1.0f / s);
#else
  const float m = range_max(x, 0, V);
  const float s = range_sumexp<PASSES_ID == 2>(x, y, 0, V, m);
#if PASSES_ID == 2
  range_scale(y, 0, V, 1.0f / s);
#else
  range_normalize(x, y, 0, V, m, 1.0f / s);
#endif
#endif
}

THRIVE_EXPORT int thrive_softmax(const ThriveArgs* args) {
  if (args->num_tensors < 2 || args->num_dims < 2) return 1;
  const uint16_t* x = (const uint16_t*)args->tensors[0];
  float* y = (float*)args->tensors[1];
  const int64_t T = args->dims[0], V = args->dims[1];
  if (T < 0 || V < 1) return 1;
  if (T == 0) return 0;
#if THREADS == 1
  for (int64_t r = 0; r < T; ++r) row_softmax(x + r * V, y + r * V, V);
#else
  int nt = args->num_threads > 0 ? args->num_threads : 1;
#if SPLIT_ROW == 0
  if (T < nt) nt = (int)T;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
  for (int64_t r = 0; r < T; ++r) row_softmax(x + r * V, y + r * V, V);
#else
  // Partials: [2 row parities][3 slots: max, (max, sum), sum][nt] at 64-byte stride.
  // Parity double-buffering lets a thread start row r+1 while others still read row r's.
  const int SL = 16;  // floats per partial (64 bytes)
  if (args->workspace_bytes < (int64_t)2 * 3 * nt * SL * 4) return 1;
  float* part = (float*)args->workspace;
#pragma omp parallel num_threads(nt)
  {
    const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
    const int64_t chunk = ((V + nth - 1) / nth + 15) / 16 * 16;  // 64-byte aligned slices
    const int64_t a = tid * chunk < V ? tid * chunk : V;
    const int64_t b = a + chunk < V ? a + chunk : V;
    for (int64_t r = 0; r < T; ++r) {
      const uint16_t* xr = x + r * V;
      float* yr = y + r * V;
      float* P = part + (r & 1) * 3 * nt * SL;
      float M, S;
#if PASSES_ID == 3
      range_online(xr, a, b, &P[tid * SL], &P[tid * SL + 1]);
#pragma omp barrier
      combine(P, nth, SL, &M, &S);
      range_normalize(xr, yr, a, b, M, 1.0f / S);
#else
      float* PM = P + nt * SL;
      float* PS = P + 2 * nt * SL;
      PM[tid * SL] = a < b ? range_max(xr, a, b) : -INFINITY;
#pragma omp barrier
      M = -INFINITY;
      for (int i = 0; i < nth; ++i) M = PM[i * SL] > M ? PM[i * SL] : M;
      PS[tid * SL] = range_sumexp<PASSES_ID == 2>(xr, yr, a, b, M);
#pragma omp barrier
      S = 0.0f;
      for (int i = 0; i < nth; ++i) S += PS[i * SL];
#if PASSES_ID == 2
      range_scale(yr, a, b, 1.0f / S);
#else
      range_normalize(xr, yr, a, b, M, 1.0f / S);
#endif
#endif
    }
  }
#endif
#endif
  return 0;
}
