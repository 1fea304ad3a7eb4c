// @thrive op: rmsnorm_residual
// @thrive backend: cpu
// @thrive entry: thrive_rmsnorm_residual
// @thrive param FUSED values=0,1 default=0 doc=0: three passes over memory (write residual; re-read it for the sum of squares; re-read it to normalize); 1: one pass per row, the rounded row kept in an fp32 L1 buffer so each byte crosses memory once
// @thrive param VEC values=1,8,16 default=1 doc=fp32 lanes per step (GCC vector extensions; 16 = one zmm with AVX-512, two ymm with AVX2); 1 = scalar code, auto-vectorization off
// @thrive param UNROLL values=1,2,4 default=1 doc=independent vector accumulators / vectors per loop step (breaks the add dependency chain of the sum of squares)
// @thrive param THREADS values=1,0 default=1 doc=1: single thread, no OpenMP region; 0: all threads granted (args->num_threads), rows split across them
// @thrive param ROWS_PER_CHUNK values=1,4,16 default=1 doc=rows per OpenMP dynamic-schedule chunk (only with THREADS=0); larger chunks cut scheduling overhead on short rows
// @thrive param RSQRT values=exact,approx default=exact doc=exact: 1/sqrtf; approx: RISKY bit-trick reciprocal square root with no Newton step (up to 3.4% error on the row scale) that fails the bf16 tolerance on most rows
//
// residual <- bf16(x + residual); out <- bf16(residual * rsqrt(mean(residual^2) + eps) * weight).
// The norm reads the residual as stored (rounded to bf16). Math is fp32.
#ifndef FUSED
#define FUSED 0
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
#ifndef ROWS_PER_CHUNK
#define ROWS_PER_CHUNK 1
#endif
#ifndef RSQRT
#define RSQRT exact
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
#define THRIVE_RSQRT_exact 1
#define THRIVE_RSQRT_approx 2
#define RSQRT_ID THRIVE_CAT(THRIVE_RSQRT_, RSQRT)
#if RSQRT_ID != 1 && RSQRT_ID != 2
#error "RSQRT must be exact or approx"
#endif
#if VEC != 1 && VEC != 4 && VEC != 8 && VEC != 16
#error "VEC must be 1, 4, 8 or 16"
#endif
#if UNROLL < 1
#error "UNROLL must be >= 1"
#endif

#if THREADS == 1
#define OMP(x)
#else
#define OMP(x) _Pragma(#x)
#endif

// ---- lanes. VEC lanes per step are NSUB/UNROLL native vectors of NW fp32 lanes each (GCC
// lowers wider generic vectors poorly), so VEC=16 is one zmm with AVX-512 and two ymm with
// AVX2. vu holds rounded bf16 bits in the low 16 bits of each lane.
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
typedef uint32_t vu;
static inline vf vsplat(float v) { return v; }
static inline vf vload_bf16(const uint16_t* p) { return thrive_bf16_to_f32(*p); }
static inline vf vload_f32(const float* p) { return *p; }
static inline void vstore_f32(float* p, const vf& v) { *p = v; }
static inline vu vbf16_bits(const vf& v) { return thrive_f32_to_bf16(v); }
static inline void vstore_bits(uint16_t* p, const vu& b) { *p = (uint16_t)b; }
static inline vf vbits_to_f32(const vu& b) { return thrive_bf16_to_f32((uint16_t)b); }
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
static inline vu vbf16_bits(const vf& v) {  // round to nearest even, NaN stays NaN
  vu u = __builtin_bit_cast(vu, v);
  vu r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const vu nan = (vu)(__builtin_bit_cast(vi, u & 0x7fffffffu) > 0x7f800000);  // signed compare
  return (r & ~nan) | (((u >> 16) | 0x40u) & nan);
}
static inline void vstore_bits(uint16_t* p, const vu& b) {
  vh h = __builtin_convertvector(b, vh);
  memcpy(p, &h, sizeof h);
}
static inline vf vbits_to_f32(const vu& b) { return __builtin_bit_cast(vf, b << 16); }
static inline float vhsum(const vf& v) {
  float s[NW];
  memcpy(s, &v, sizeof s);
  for (int w = NW / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) s[l] += s[l + w];
  return s[0];
}
#endif

static inline float row_scale(float sumsq, int64_t H, float eps) {
  const float ms = sumsq / (float)H + eps;
#if RSQRT_ID == 2
  uint32_t i;  // magic-constant estimate, no Newton refinement: deliberately inaccurate
  memcpy(&i, &ms, 4);
  i = 0x5f3759dfu - (i >> 1);
  float y;
  memcpy(&y, &i, 4);
  return y;
#else
  return 1.0f / sqrtf(ms);
#endif
}

// residual[c] <- bf16(x[c] + residual[c])
static inline void add_row(const uint16_t* x, uint16_t* r, int64_t H) {
  int64_t c = 0;
  for (; c + STEP <= H; c += STEP)
    for (int u = 0; u < NSUB; ++u) {
      const int64_t i = c + u * NW;
      vstore_bits(r + i, vbf16_bits(vload_bf16(x + i) + vload_bf16(r + i)));
    }
  for (; c + NW <= H; c += NW) vstore_bits(r + c, vbf16_bits(vload_bf16(x + c) + vload_bf16(r + c)));
  for (; c < H; ++c) r[c] = thrive_f32_to_bf16(thrive_bf16_to_f32(x[c]) + thrive_bf16_to_f32(r[c]));
}

static inline float sumsq_row(const uint16_t* r, int64_t H) {
  vf acc[NSUB];
  for (int u = 0; u < NSUB; ++u) acc[u] = vsplat(0.0f);
  int64_t c = 0;
  for (; c + STEP <= H; c += STEP)
    for (int u = 0; u < NSUB; ++u) {
      const vf v = vload_bf16(r + c + u * NW);
      acc[u] += v * v;
    }
  for (; c + NW <= H; c += NW) {
    const vf v = vload_bf16(r + c);
    acc[0] += v * v;
  }
  for (int u = 1; u < NSUB; ++u) acc[0] += acc[u];
  float s = vhsum(acc[0]);
  for (; c < H; ++c) {
    const float v = thrive_bf16_to_f32(r[c]);
    s += v * v;
  }
  return s;
}

// out[c] <- bf16(residual[c] * inv * w[c])
static inline void norm_row(const uint16_t* r, const uint16_t* w, uint16_t* o, float inv, int64_t H) {
  const vf vinv = vsplat(inv);
  int64_t c = 0;
  for (; c + STEP <= H; c += STEP)
    for (int u = 0; u < NSUB; ++u) {
      const int64_t i = c + u * NW;
      vstore_bits(o + i, vbf16_bits(vload_bf16(r + i) * vinv * vload_bf16(w + i)));
    }
  for (; c + NW <= H; c += NW) vstore_bits(o + c, vbf16_bits(vload_bf16(r + c) * vinv * vload_bf16(w + c)));
  for (; c < H; ++c)
    o[c] = thrive_f32_to_bf16(thrive_bf16_to_f32(r[c]) * inv * thrive_bf16_to_f32(w[c]));
}

// One pass over memory: add, round, store the residual, keep the rounded row in buf
// (fp32, L1-resident) and accumulate its sum of squares; then normalize from buf.
static inline void fused_row(const uint16_t* x, uint16_t* r, const uint16_t* w, uint16_t* o,
                             float* buf, int64_t H, float eps) {
  vf acc[NSUB];
  for (int u = 0; u < NSUB; ++u) acc[u] = vsplat(0.0f);
  int64_t c = 0;
  for (; c + STEP <= H; c += STEP)
    for (int u = 0; u < NSUB; ++u) {
      const int64_t i = c + u * NW;
      const vu b = vbf16_bits(vload_bf16(x + i) + vload_bf16(r + i));
      vstore_bits(r + i, b);
      const vf v = vbits_to_f32(b);
      vstore_f32(buf + i, v);
      acc[u] += v * v;
    }
  for (; c + NW <= H; c += NW) {
    const vu b = vbf16_bits(vload_bf16(x + c) + vload_bf16(r + c));
    vstore_bits(r + c, b);
    const vf v = vbits_to_f32(b);
    vstore_f32(buf + c, v);
    acc[0] += v * v;
  }
  for (int u = 1; u < NSUB; ++u) acc[0] += acc[u];
  float s = vhsum(acc[0]);
  for (; c < H; ++c) {
    const uint16_t b = thrive_f32_to_bf16(thrive_bf16_to_f32(x[c]) + thrive_bf16_to_f32(r[c]));
    r[c] = b;
    const float v = thrive_bf16_to_f32(b);
    buf[c] = v;
    s += v * v;
  }
  const float inv = row_scale(s, H, eps);
  const vf vinv = vsplat(inv);
  c = 0;
  for (; c + STEP <= H; c += STEP)
    for (int u = 0; u < NSUB; ++u) {
      const int64_t i = c + u * NW;
      vstore_bits(o + i, vbf16_bits(vload_f32(buf + i) * vinv * vload_bf16(w + i)));
    }
  for (; c + NW <= H; c += NW) vstore_bits(o + c, vbf16_bits(vload_f32(buf + c) * vinv * vload_bf16(w + c)));
  for (; c < H; ++c) o[c] = thrive_f32_to_bf16(buf[c] * inv * thrive_bf16_to_f32(w[c]));
}

THRIVE_EXPORT int thrive_rmsnorm_residual(const ThriveArgs* args) {
  if (args->num_tensors < 4 || args->num_dims < 2 || args->num_scalars < 1) return 1;
  const uint16_t* x = (const uint16_t*)args->tensors[0];
  uint16_t* res = (uint16_t*)args->tensors[1];
  const uint16_t* w = (const uint16_t*)args->tensors[2];
  uint16_t* out = (uint16_t*)args->tensors[3];
  const int64_t T = args->dims[0], H = args->dims[1];
  const float eps = (float)args->scalars[0];
  if (T < 0 || H < 1) return 1;
  if (T == 0) return 0;
  char* ws = (char*)args->workspace;
#if THREADS == 1
  const int nt = 1;
  (void)nt;
#else
  int nt = args->num_threads > 0 ? args->num_threads : 1;
  const int64_t chunks = (T + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK;
  if (chunks < nt) nt = (int)chunks;
#endif

#if FUSED == 0
  float* inv = (float*)ws;  // one scale per row
  if (args->workspace_bytes < T * 4) return 1;
  OMP(omp parallel num_threads(nt))
  {
    OMP(omp for schedule(dynamic, ROWS_PER_CHUNK))
    for (int64_t r = 0; r < T; ++r) add_row(x + r * H, res + r * H, H);
    OMP(omp for schedule(dynamic, ROWS_PER_CHUNK))
    for (int64_t r = 0; r < T; ++r) inv[r] = row_scale(sumsq_row(res + r * H, H), H, eps);
    OMP(omp for schedule(dynamic, ROWS_PER_CHUNK))
    for (int64_t r = 0; r < T; ++r) norm_row(res + r * H, w, out + r * H, inv[r], H);
  }
#else
  const int64_t stride = (H * 4 + 63) / 64 * 64;  // one fp32 row buffer per thread
  if (args->workspace_bytes < stride * nt) return 1;
  OMP(omp parallel num_threads(nt))
  {
#if THREADS == 1
    float* buf = (float*)ws;
#else
    float* buf = (float*)(ws + stride * omp_get_thread_num());
#endif
    OMP(omp for schedule(dynamic, ROWS_PER_CHUNK))
    for (int64_t r = 0; r < T; ++r) fused_row(x + r * H, res + r * H, w, out + r * H, buf, H, eps);
  }
#endif
  return 0;
}
