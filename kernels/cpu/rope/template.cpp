// @thrive op: rope
// @thrive backend: cpu
// @thrive entry: thrive_rope
// @thrive param VEC values=1,8,16 default=1 doc=fp32 lanes per step (GCC vector extensions; 16 = one zmm with AVX-512, two ymm with AVX2); 1 = scalar code, auto-vectorization off
// @thrive param THREADS values=1,0 default=1 doc=1: single thread, no OpenMP region; 0: all threads granted (args->num_threads)
// @thrive param LOOP values=token,head default=token doc=token: tokens outer, heads inner, parallel over tokens (one cos/sin row serves all heads of a token); head: heads outer, tokens inner, parallel over (head, token) so T=1 still spreads over cores
// @thrive param FUSE_QK values=0,1 default=0 doc=0: a pass over q then a pass over k; 1: one loop over all NQ+NKV heads of q and k
// @thrive param COS_SIN values=load,hoist default=load doc=load: read cos/sin from the cache row at each head; hoist: copy the token's row once into a local buffer (LOOP=head: gather all tokens' rows into a contiguous table first, so heads stream it instead of gathering cache rows)
//
// neox RoPE in place: for i < D/2, c = cache[pos][i], s = cache[pos][D/2 + i]:
//   x[i] <- x[i] c - x[i + D/2] s;  x[i + D/2] <- x[i + D/2] c + x[i] s   (fp32 math, bf16 storage)
#ifndef VEC
#define VEC 1
#endif
#ifndef THREADS
#define THREADS 1
#endif
#ifndef LOOP
#define LOOP token
#endif
#ifndef FUSE_QK
#define FUSE_QK 0
#endif
#ifndef COS_SIN
#define COS_SIN load
#endif

#if VEC == 1 && defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-vectorize")  // VEC=1 means scalar code
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"  // wide vectors only cross static inline helpers
#endif

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
#define THRIVE_LOOP_token 1
#define THRIVE_LOOP_head 2
#define LOOP_ID THRIVE_CAT(THRIVE_LOOP_, LOOP)
#define THRIVE_COS_SIN_load 1
#define THRIVE_COS_SIN_hoist 2
#define COS_SIN_ID THRIVE_CAT(THRIVE_COS_SIN_, COS_SIN)
#if LOOP_ID < 1 || LOOP_ID > 2
#error "LOOP must be token or head"
#endif
#if COS_SIN_ID < 1 || COS_SIN_ID > 2
#error "COS_SIN must be load or hoist"
#endif
#if VEC != 1 && VEC != 4 && VEC != 8 && VEC != 16
#error "VEC must be 1, 4, 8 or 16"
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
#define STEP VEC
#define NSUB (STEP / NW)

#if NW == 1
typedef float vf;
typedef uint32_t vu;
static inline vf vload_bf16(const uint16_t* p) { return thrive_bf16_to_f32(*p); }
static inline vf vload_f32(const float* p) { return *p; }
static inline void vstore_bf16(uint16_t* p, const vf& v) { *p = thrive_f32_to_bf16(v); }
#else
typedef float vf __attribute__((vector_size(NW * 4)));
typedef uint32_t vu __attribute__((vector_size(NW * 4)));
typedef int32_t vi __attribute__((vector_size(NW * 4)));
typedef uint16_t vh __attribute__((vector_size(NW * 2)));
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
static inline void vstore_bf16(uint16_t* p, const vf& v) {  // round to nearest even, NaN stays NaN
  const vu u = __builtin_bit_cast(vu, v);
  const vu r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const vu nan = (vu)(__builtin_bit_cast(vi, u & 0x7fffffffu) > 0x7f800000);  // signed compare
  const vh h = __builtin_convertvector((r & ~nan) | (((u >> 16) | 0x40u) & nan), vh);
  memcpy(p, &h, sizeof h);
}
#endif

// Rotates one head vector x[0, 2*half) in place with cos = cs[0, half), sin = cs[half, 2*half).
static inline void rotate(uint16_t* x, const float* cs, int64_t half) {
  const float* sn = cs + half;
  int64_t i = 0;
  for (; i + STEP <= half; i += STEP)
    for (int u = 0; u < NSUB; ++u) {
      const int64_t k = i + u * NW;
      const vf x1 = vload_bf16(x + k), x2 = vload_bf16(x + half + k);
      const vf c = vload_f32(cs + k), s = vload_f32(sn + k);
      vstore_bf16(x + k, x1 * c - x2 * s);
      vstore_bf16(x + half + k, x2 * c + x1 * s);
    }
  for (; i + NW <= half; i += NW) {
    const vf x1 = vload_bf16(x + i), x2 = vload_bf16(x + half + i);
    const vf c = vload_f32(cs + i), s = vload_f32(sn + i);
    vstore_bf16(x + i, x1 * c - x2 * s);
    vstore_bf16(x + half + i, x2 * c + x1 * s);
  }
  for (; i < half; ++i) {
    const float x1 = thrive_bf16_to_f32(x[i]), x2 = thrive_bf16_to_f32(x[half + i]);
    x[i] = thrive_f32_to_bf16(x1 * cs[i] - x2 * sn[i]);
    x[half + i] = thrive_f32_to_bf16(x2 * cs[i] + x1 * sn[i]);
  }
}

#if THREADS == 1
#define OMP(x)
#else
#define OMP(x) _Pragma(#x)
#endif

THRIVE_EXPORT int thrive_rope(const ThriveArgs* args) {
  if (args->num_tensors < 4 || args->num_dims < 5) return 1;
  const int64_t* pos = (const int64_t*)args->tensors[0];
  uint16_t* q = (uint16_t*)args->tensors[1];
  uint16_t* k = (uint16_t*)args->tensors[2];
  const float* cache = (const float*)args->tensors[3];
  const int64_t T = args->dims[0], NQ = args->dims[1], NKV = args->dims[2], D = args->dims[3],
                P = args->dims[4];
  if (T < 0 || NQ < 0 || NKV < 0 || D < 0 || P < 1) return 1;
  const int64_t half = D / 2;
  if (T == 0 || half == 0 || NQ + NKV == 0) return 0;
  for (int64_t t = 0; t < T; ++t)
    if (pos[t] < 0 || pos[t] >= P) return 2;  // position outside the cache
  const int64_t NH = NQ + NKV;
  // head index hh < NH of token t: q head hh, or k head hh - NQ
#define HEAD_PTR(t, hh) ((hh) < NQ ? q + ((t) * NQ + (hh)) * D : k + ((t) * NKV + (hh) - NQ) * D)
#if THREADS == 1
  const int nt = 1;
#else
  const int nt = args->num_threads > 0 ? args->num_threads : 1;
#endif
  char* ws = (char*)args->workspace;
  (void)ws;
  (void)nt;

#if LOOP_ID == 1  // ---------------- token-major
#if COS_SIN_ID == 2
  const int64_t stride = (D * 4 + 63) / 64 * 64;
  if (args->workspace_bytes < stride * nt) return 1;
#endif
  const int ntt = (int)(T < nt ? T : nt);
  (void)ntt;
  OMP(omp parallel num_threads(ntt))
  {
#if COS_SIN_ID == 2
#if THREADS == 1
    float* buf = (float*)ws;
#else
    float* buf = (float*)(ws + stride * omp_get_thread_num());
#endif
#endif
#if FUSE_QK == 1
    const int64_t ranges[1][2] = {{0, NH}};
#else
    const int64_t ranges[2][2] = {{0, NQ}, {NQ, NH}};
#endif
    for (const auto& rg : ranges) {
      OMP(omp for schedule(static))
      for (int64_t t = 0; t < T; ++t) {
        const float* cs = cache + pos[t] * D;
#if COS_SIN_ID == 2
        memcpy(buf, cs, (size_t)(2 * half) * 4);
        cs = buf;
#endif
        for (int64_t hh = rg[0]; hh < rg[1]; ++hh) rotate(HEAD_PTR(t, hh), cs, half);
      }
    }
  }
#else  // ---------------- head-major
#if COS_SIN_ID == 2
  // contiguous table of the tokens' cos|sin rows
  if (args->workspace_bytes < T * 2 * half * 4) return 1;
  float* table = (float*)ws;
  const int64_t tstride = 2 * half;
#endif
  OMP(omp parallel num_threads(nt))
  {
#if COS_SIN_ID == 2
    OMP(omp for schedule(static))
    for (int64_t t = 0; t < T; ++t) memcpy(table + t * tstride, cache + pos[t] * D, (size_t)tstride * 4);
#endif
#if FUSE_QK == 1
    const int64_t ranges[1][2] = {{0, NH}};
#else
    const int64_t ranges[2][2] = {{0, NQ}, {NQ, NH}};
#endif
    for (const auto& rg : ranges) {
      const int64_t n = (rg[1] - rg[0]) * T;
      OMP(omp for schedule(static))
      for (int64_t it = 0; it < n; ++it) {
        const int64_t hh = rg[0] + it / T, t = it % T;
#if COS_SIN_ID == 2
        const float* cs = table + t * tstride;
#else
        const float* cs = cache + pos[t] * D;
#endif
        rotate(HEAD_PTR(t, hh), cs, half);
      }
    }
  }
#endif
#undef HEAD_PTR
  return 0;
}
