// @thrive op: swiglu_act
// @thrive backend: cpu
// @thrive entry: thrive_swiglu_act
// @thrive param VEC values=1,8,16 default=1 doc=fp32 lanes per step (GCC vector extensions; 16 = one zmm with AVX-512, two ymm with AVX2); 1 = scalar code, auto-vectorization off
// @thrive param UNROLL values=1,2,4 default=1 doc=independent vectors per loop step (more work in flight to hide exp/divide latency)
// @thrive param THREADS values=1,0 default=1 doc=1: single thread, no OpenMP region; 0: all threads granted (args->num_threads)
// @thrive param CHUNK values=0,256,1024,4096 default=0 doc=elements of a row per parallel work item; 0 = one whole row per item (no parallelism when T=1)
// @thrive param EXP values=libm,poly,poly3,poly1 default=libm doc=libm: expf per lane; poly: exponent-bit construction + degree-6 polynomial (~1e-7 rel); poly3: degree 3 (~8e-4 rel, passes bf16 output); poly1: RISKY degree 1 (~8% error) fails the bf16 tolerance
//
// out[t, i] = bf16(silu(in[t, i]) * in[t, I + i]), silu(a) = a / (1 + exp(-a)); fp32 math.
#ifndef VEC
#define VEC 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef THREADS
#define THREADS 1
#endif
#ifndef CHUNK
#define CHUNK 0
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

#define THRIVE_CAT_(a, b) a##b
#define THRIVE_CAT(a, b) THRIVE_CAT_(a, b)
#define THRIVE_EXP_libm 1
#define THRIVE_EXP_poly 2
#define THRIVE_EXP_poly3 3
#define THRIVE_EXP_poly1 4
#define EXP_ID THRIVE_CAT(THRIVE_EXP_, EXP)
#if EXP_ID < 1 || EXP_ID > 4
#error "EXP must be libm, poly, poly3 or poly1"
#endif
#if VEC != 1 && VEC != 4 && VEC != 8 && VEC != 16
#error "VEC must be 1, 4, 8 or 16"
#endif
#if UNROLL < 1 || CHUNK < 0
#error "UNROLL must be >= 1 and CHUNK >= 0"
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
typedef int32_t vi;
static inline vf vsplat(float v) { return v; }
static inline vf vload_bf16(const uint16_t* p) { return thrive_bf16_to_f32(*p); }
static inline vu vbf16_bits(const vf& v) { return thrive_f32_to_bf16(v); }
static inline void vstore_bits(uint16_t* p, const vu& b) { *p = (uint16_t)b; }
static inline vi vcvt_i(const vf& v) { return (vi)v; }
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
static inline vi vcvt_i(const vf& v) { return __builtin_convertvector(v, vi); }
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

static inline vu swiglu(const vf& a, const vf& b) {
  return vbf16_bits(a / (vexp(-a) + 1.0f) * b);
}

// out[c] for c in [c0, c1) of one row; gate = row, up = row + I.
static inline void act_range(const uint16_t* gate, const uint16_t* up, uint16_t* out, int64_t c0,
                             int64_t c1) {
  int64_t c = c0;
  for (; c + STEP <= c1; c += STEP) {
    vu o[NSUB];
    for (int u = 0; u < NSUB; ++u) o[u] = swiglu(vload_bf16(gate + c + u * NW), vload_bf16(up + c + u * NW));
    for (int u = 0; u < NSUB; ++u) vstore_bits(out + c + u * NW, o[u]);
  }
  for (; c + NW <= c1; c += NW) vstore_bits(out + c, swiglu(vload_bf16(gate + c), vload_bf16(up + c)));
#if NW > 1
  if (c < c1) {  // tail: pad into a full vector so the tail uses the same exp
    uint16_t g[NW] = {}, v[NW] = {}, o[NW];
    for (int64_t i = c; i < c1; ++i) {
      g[i - c] = gate[i];
      v[i - c] = up[i];
    }
    vstore_bits(o, swiglu(vload_bf16(g), vload_bf16(v)));
    for (int64_t i = c; i < c1; ++i) out[i] = o[i - c];
  }
#endif
}

THRIVE_EXPORT int thrive_swiglu_act(const ThriveArgs* args) {
  if (args->num_tensors < 2 || args->num_dims < 2) return 1;
  const uint16_t* in = (const uint16_t*)args->tensors[0];
  uint16_t* out = (uint16_t*)args->tensors[1];
  const int64_t T = args->dims[0], I = args->dims[1];
  if (T < 0 || I < 0) return 1;
  if (T == 0 || I == 0) return 0;
#if CHUNK == 0
  const int64_t per_row = 1, chunk = I;
#else
  const int64_t per_row = (I + CHUNK - 1) / CHUNK, chunk = CHUNK;
#endif
  const int64_t items = T * per_row;
#if THREADS == 1
  for (int64_t it = 0; it < items; ++it) {
#else
  int nt = args->num_threads > 0 ? args->num_threads : 1;
  if (items < nt) nt = (int)items;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t it = 0; it < items; ++it) {
#endif
    const int64_t t = it / per_row, c0 = (it % per_row) * chunk;
    const int64_t c1 = c0 + chunk < I ? c0 + chunk : I;
    act_range(in + t * 2 * I, in + t * 2 * I + I, out + t * I, c0, c1);
  }
  return 0;
}
