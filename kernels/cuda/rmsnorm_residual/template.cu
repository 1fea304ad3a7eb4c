// @thrive op: rmsnorm_residual
// @thrive backend: cuda
// @thrive entry: thrive_rmsnorm_residual
// @thrive launch: entry=thrive_rmsnorm_residual block=THREADS grid=cdiv(T,1+WARP_PER_ROW*(THREADS/32-1)),1,1 smem=0
// @thrive param VEC values=1,2,4,8 default=8 doc=bf16 elements per load/store (8 = 16-byte accesses); used when H % VEC == 0 and the tensors are aligned, else the kernel falls back to scalar accesses (always correct)
// @thrive param THREADS values=128,256,512,1024 default=256 doc=threads per block; WARP_PER_ROW=0: threads that share one row; WARP_PER_ROW=1: THREADS/32 rows per block
// @thrive param WARP_PER_ROW values=0,1 default=0 doc=0: one block per row, block-wide reduction; 1: one warp per row (THREADS/32 rows per block), warp-only reduction without __syncthreads (small H or many rows)
// @thrive param REG_ROW values=0,1,2,4,8 default=1 doc=0: the normalize pass re-reads the stored residual from global memory; k>0: up to k VEC-chunks per thread of the rounded row (and their weights, loaded before the reduction) stay in registers so each byte crosses memory once. The row fits when H <= k*VEC*(THREADS, or 32 with WARP_PER_ROW=1): H=2048 needs k=1 with THREADS=256,VEC=8 and k=8 for a warp per row with VEC=8. Larger k costs registers (occupancy); at most 3 chunks of 8 with THREADS=1024. Rows that do not fit fall back to re-reading (always correct)
// @thrive param REDUCE values=0,1 default=1 doc=sum of squares across threads: 0: shared-memory tree; 1: warp shuffles (xor butterfly) then one shared-memory step across warps. Both fixed-order, deterministic
//
// residual <- bf16(x + residual); out <- bf16(residual * rsqrt(mean(residual^2) + eps) * weight).
// The norm reads the residual as stored (rounded to bf16). fp32 math. A thread handles the
// VEC-chunks c = lane, lane + NT, ... of its row (NT = threads per row), in both passes, so the
// normalize pass of REG_ROW=0 re-reads exactly what the same thread stored.
#include "thrive_cuda.cuh"

#ifndef VEC
#define VEC 8
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef WARP_PER_ROW
#define WARP_PER_ROW 0
#endif
#ifndef REG_ROW
#define REG_ROW 1
#endif
#ifndef REDUCE
#define REDUCE 1
#endif

#if VEC != 1 && VEC != 2 && VEC != 4 && VEC != 8
#error "VEC must be 1, 2, 4 or 8"
#endif
#if THREADS < 32 || THREADS > 1024 || (THREADS % 32) != 0
#error "THREADS must be a multiple of 32 in [32, 1024]"
#endif

#define ROW_THREADS (WARP_PER_ROW ? 32 : THREADS)    // threads sharing one row
#define ROWS_PER_BLOCK (WARP_PER_ROW ? THREADS / 32 : 1)

typedef unsigned short bf16_t;

// ---- V packed bf16 values: element 2k in the low half of word k ------------------------
template <int V>
struct Bf {
  unsigned int w[(V + 1) / 2];
};
template <int V>
__device__ __forceinline__ float bf_get(const Bf<V>& v, int i) {
  const unsigned int w = v.w[i >> 1];
  return __uint_as_float((i & 1) ? (w & 0xffff0000u) : (w << 16));
}
template <int V>
__device__ __forceinline__ Bf<V> bf_pack(const float (&f)[V]) {
  Bf<V> r;
#pragma unroll
  for (int k = 0; k < (V + 1) / 2; ++k) {
    const unsigned int lo = thrive_f32_to_bf16(f[2 * k]);
    const unsigned int hi = (2 * k + 1 < V) ? (unsigned int)thrive_f32_to_bf16(f[(2 * k + 1) % V]) : 0u;
    r.w[k] = lo | (hi << 16);
  }
  return r;
}
template <int V, bool RO>
__device__ __forceinline__ Bf<V> bf_load(const bf16_t* p) {
  Bf<V> r;
  if constexpr (V == 8) {
    uint4 u;
    if constexpr (RO) u = __ldg(reinterpret_cast<const uint4*>(p));
    else u = *reinterpret_cast<const uint4*>(p);
    r.w[0] = u.x; r.w[1] = u.y; r.w[2] = u.z; r.w[3] = u.w;
  } else if constexpr (V == 4) {
    uint2 u;
    if constexpr (RO) u = __ldg(reinterpret_cast<const uint2*>(p));
    else u = *reinterpret_cast<const uint2*>(p);
    r.w[0] = u.x; r.w[1] = u.y;
  } else if constexpr (V == 2) {
    if constexpr (RO) r.w[0] = __ldg(reinterpret_cast<const unsigned int*>(p));
    else r.w[0] = *reinterpret_cast<const unsigned int*>(p);
  } else {
    if constexpr (RO) r.w[0] = __ldg(p);
    else r.w[0] = *p;
  }
  return r;
}
template <int V>
__device__ __forceinline__ void bf_store(bf16_t* p, const Bf<V>& v) {
  if constexpr (V == 8) *reinterpret_cast<uint4*>(p) = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
  else if constexpr (V == 4) *reinterpret_cast<uint2*>(p) = make_uint2(v.w[0], v.w[1]);
  else if constexpr (V == 2) *reinterpret_cast<unsigned int*>(p) = v.w[0];
  else *p = (bf16_t)v.w[0];
}

// ---- sum across the threads of one row (fixed order: deterministic) ---------------------
__device__ __forceinline__ float row_sum(float v, float* sh) {
#if WARP_PER_ROW
#if REDUCE == 1
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
#else
  float* s = sh + (threadIdx.x & ~31u);  // this warp's 32 slots
  const int lane = threadIdx.x & 31;
  s[lane] = v;
  __syncwarp();
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    if (lane < off) s[lane] += s[lane + off];
    __syncwarp();
  }
  const float r = s[0];
  __syncwarp();
  return r;
#endif
#else  // block-wide
  const int tid = threadIdx.x;
#if REDUCE == 1
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((tid & 31) == 0) sh[tid >> 5] = v;
  __syncthreads();
  float r = 0.0f;
#pragma unroll
  for (int w = 0; w < THREADS / 32; ++w) r += sh[w];  // same order in every thread
  return r;
#else
  sh[tid] = v;
  __syncthreads();
#pragma unroll
  for (int off = THREADS / 2; off > 0; off >>= 1) {
    if (tid < off) sh[tid] += sh[tid + off];
    __syncthreads();
  }
  return sh[0];
#endif
#endif
}

// One row. lane in [0, ROW_THREADS). V divides H and the row pointers are V-aligned.
template <int V>
__device__ __forceinline__ void do_row(const bf16_t* __restrict__ x, bf16_t* __restrict__ res,
                                       const bf16_t* __restrict__ w, bf16_t* __restrict__ out,
                                       int H, float eps, int lane, float* sh) {
  const int nchunk = H / V;
  float ss = 0.0f;
#if REG_ROW
  // REG_ROW = VEC-chunks per thread kept in registers (with their weights), capped by the
  // register file at 64 / 40 / 12 32-bit words per array for THREADS <= 256 / 512 / 1024.
  constexpr int WPC = (V + 1) / 2;  // 32-bit words per chunk
  constexpr int WORDS = THREADS >= 1024 ? 12 : (THREADS >= 512 ? 40 : 64);
  constexpr int CAP0 = REG_ROW < WORDS / WPC ? REG_ROW : WORDS / WPC;
  constexpr int CAP = CAP0 < 1 ? 1 : CAP0;  // chunks per thread
  if (nchunk <= CAP * ROW_THREADS) {
    Bf<V> keep[CAP], wk[CAP];
#pragma unroll
    for (int k = 0; k < CAP; ++k) {
      const int c = k * ROW_THREADS + lane;
      if (c < nchunk) {
        const Bf<V> xv = bf_load<V, true>(x + (size_t)c * V);
        const Bf<V> rv = bf_load<V, false>(res + (size_t)c * V);
        wk[k] = bf_load<V, true>(w + (size_t)c * V);  // issued before the reduction
        float s[V];
#pragma unroll
        for (int e = 0; e < V; ++e) s[e] = bf_get(xv, e) + bf_get(rv, e);
        keep[k] = bf_pack(s);
        bf_store(res + (size_t)c * V, keep[k]);
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const float r = bf_get(keep[k], e);
          ss = fmaf(r, r, ss);
        }
      }
    }
    const float inv = rsqrtf(row_sum(ss, sh) / (float)H + eps);
#pragma unroll
    for (int k = 0; k < CAP; ++k) {
      const int c = k * ROW_THREADS + lane;
      if (c < nchunk) {
        float o[V];
#pragma unroll
        for (int e = 0; e < V; ++e) o[e] = bf_get(keep[k], e) * inv * bf_get(wk[k], e);
        bf_store(out + (size_t)c * V, bf_pack(o));
      }
    }
    return;
  }
#endif
#pragma unroll 4
  for (int c = lane; c < nchunk; c += ROW_THREADS) {
    const Bf<V> xv = bf_load<V, true>(x + (size_t)c * V);
    const Bf<V> rv = bf_load<V, false>(res + (size_t)c * V);
    float s[V];
#pragma unroll
    for (int e = 0; e < V; ++e) s[e] = bf_get(xv, e) + bf_get(rv, e);
    const Bf<V> sv = bf_pack(s);
    bf_store(res + (size_t)c * V, sv);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float r = bf_get(sv, e);
      ss = fmaf(r, r, ss);
    }
  }
  const float inv = rsqrtf(row_sum(ss, sh) / (float)H + eps);
#pragma unroll 4
  for (int c = lane; c < nchunk; c += ROW_THREADS) {
    const Bf<V> rv = bf_load<V, false>(res + (size_t)c * V);  // what this thread stored
    const Bf<V> wv = bf_load<V, true>(w + (size_t)c * V);
    float o[V];
#pragma unroll
    for (int e = 0; e < V; ++e) o[e] = bf_get(rv, e) * inv * bf_get(wv, e);
    bf_store(out + (size_t)c * V, bf_pack(o));
  }
}

extern "C" __global__ void __launch_bounds__(THREADS) thrive_rmsnorm_residual(ThriveCudaArgs args) {
#if REDUCE == 1 && !WARP_PER_ROW
  __shared__ float sh[32];
#else
  __shared__ float sh[THREADS];
#endif
  const bf16_t* x = (const bf16_t*)args.tensors[0];
  bf16_t* res = (bf16_t*)args.tensors[1];
  const bf16_t* w = (const bf16_t*)args.tensors[2];
  bf16_t* out = (bf16_t*)args.tensors[3];
  const long long T = args.dims[0];
  const int H = (int)args.dims[1];
  const float eps = (float)args.scalars[0];
  if (H < 1) return;
#if WARP_PER_ROW
  const long long row = (long long)blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= T) return;  // whole warp; no block-wide barrier in this mode
#else
  const long long row = blockIdx.x;
  const int lane = threadIdx.x;
  if (row >= T) return;  // whole block
#endif
  const size_t off = (size_t)row * (size_t)H;
#if VEC > 1
  const unsigned long long mis = ((unsigned long long)x | (unsigned long long)res |
                                  (unsigned long long)w | (unsigned long long)out) & (2 * VEC - 1);
  if (H % VEC == 0 && mis == 0) {
    do_row<VEC>(x + off, res + off, w, out + off, H, eps, lane, sh);
    return;
  }
#endif
  do_row<1>(x + off, res + off, w, out + off, H, eps, lane, sh);
}
