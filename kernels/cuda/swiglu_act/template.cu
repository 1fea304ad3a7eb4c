// @thrive op: swiglu_act
// @thrive backend: cuda
// @thrive entry: thrive_swiglu_act
// @thrive launch: entry=thrive_swiglu_act block=THREADS grid=(1-min(PERSIST,1))*cdiv(I,THREADS*VEC*ITEMS)+min(PERSIST,1)*min(SMS*PERSIST,cdiv(T*I,THREADS*VEC*ITEMS)),(1-min(PERSIST,1))*min(T,65535)+min(PERSIST,1),1 smem=0
// @thrive param VEC values=1,2,4,8 default=8 doc=bf16 elements per load/store (8 = 16-byte accesses); used when I % VEC == 0 and the tensors are aligned, else scalar accesses (always correct, the grid-stride loop covers the extra work)
// @thrive param THREADS values=128,256,512,1024 default=256 doc=threads per block
// @thrive param ITEMS values=1,2,4 default=2 doc=VEC-chunks per thread per loop step, all loads issued before any math (memory-level parallelism)
// @thrive param PERSIST values=0,1,2,4,8 default=0 doc=0: 2-D grid (x: column blocks of THREADS*ITEMS*VEC elements, y: rows), one thread per ITEMS*VEC elements and no index division; k>0: persistent 1-D grid-stride loop over min(SMS*k, needed) blocks, row/column by a multiply-shift division
// @thrive param EXP values=accurate,fast default=fast doc=accurate: expf and IEEE division; fast: __expf and __fdividef (a few ulp in fp32, far inside the bf16 tolerance)
// @thrive param STREAM values=0,1 default=0 doc=1: cache-streaming hints (ld.global.cs / st.global.cs, evict-first) for the read-once input and write-once output
//
// out[t, i] = bf16(silu(in[t, i]) * in[t, I + i]), silu(a) = a / (1 + exp(-a)); fp32 math.
// Work unit: a chunk of V elements of one row (V = VEC on the vector path, else 1). PERSIST=0:
// blockIdx.y walks rows, blockIdx.x/threadIdx.x walk chunks (strided loops cover any grid);
// PERSIST>0: flat chunk index c, row t = c / (I / V), column (c % (I / V)) * V.
#include "thrive_cuda.cuh"

#ifndef VEC
#define VEC 8
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef ITEMS
#define ITEMS 2
#endif
#ifndef PERSIST
#define PERSIST 0
#endif
#ifndef EXP
#define EXP fast
#endif
#ifndef STREAM
#define STREAM 0
#endif

#define THRIVE_CAT_(a, b) a##b
#define THRIVE_CAT(a, b) THRIVE_CAT_(a, b)
#define THRIVE_EXP_accurate 0
#define THRIVE_EXP_fast 1
#define EXP_ID THRIVE_CAT(THRIVE_EXP_, EXP)
#if EXP_ID != 0 && EXP_ID != 1
#error "EXP must be accurate or fast"
#endif
#if VEC != 1 && VEC != 2 && VEC != 4 && VEC != 8
#error "VEC must be 1, 2, 4 or 8"
#endif

typedef unsigned short bf16_t;

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
// read-only loads: __ldg, or ld.global.cs with STREAM=1
template <int V>
__device__ __forceinline__ Bf<V> bf_load(const bf16_t* p) {
  Bf<V> r;
#if STREAM
  if constexpr (V == 8) {
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]) : "l"(p));
  } else if constexpr (V == 4) {
    asm volatile("ld.global.cs.v2.u32 {%0,%1}, [%2];" : "=r"(r.w[0]), "=r"(r.w[1]) : "l"(p));
  } else if constexpr (V == 2) {
    asm volatile("ld.global.cs.u32 %0, [%1];" : "=r"(r.w[0]) : "l"(p));
  } else {
    unsigned short h;
    asm volatile("ld.global.cs.u16 %0, [%1];" : "=h"(h) : "l"(p));
    r.w[0] = h;
  }
#else
  if constexpr (V == 8) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    r.w[0] = u.x; r.w[1] = u.y; r.w[2] = u.z; r.w[3] = u.w;
  } else if constexpr (V == 4) {
    const uint2 u = __ldg(reinterpret_cast<const uint2*>(p));
    r.w[0] = u.x; r.w[1] = u.y;
  } else if constexpr (V == 2) {
    r.w[0] = __ldg(reinterpret_cast<const unsigned int*>(p));
  } else {
    r.w[0] = __ldg(p);
  }
#endif
  return r;
}
template <int V>
__device__ __forceinline__ void bf_store(bf16_t* p, const Bf<V>& v) {
#if STREAM
  if constexpr (V == 8) {
    asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};"
                 :: "l"(p), "r"(v.w[0]), "r"(v.w[1]), "r"(v.w[2]), "r"(v.w[3]) : "memory");
  } else if constexpr (V == 4) {
    asm volatile("st.global.cs.v2.u32 [%0], {%1,%2};" :: "l"(p), "r"(v.w[0]), "r"(v.w[1]) : "memory");
  } else if constexpr (V == 2) {
    asm volatile("st.global.cs.u32 [%0], %1;" :: "l"(p), "r"(v.w[0]) : "memory");
  } else {
    const unsigned short h = (unsigned short)v.w[0];
    asm volatile("st.global.cs.u16 [%0], %1;" :: "l"(p), "h"(h) : "memory");
  }
#else
  if constexpr (V == 8) *reinterpret_cast<uint4*>(p) = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
  else if constexpr (V == 4) *reinterpret_cast<uint2*>(p) = make_uint2(v.w[0], v.w[1]);
  else if constexpr (V == 2) *reinterpret_cast<unsigned int*>(p) = v.w[0];
  else *p = (bf16_t)v.w[0];
#endif
}

// n / d for 32-bit n by a multiply (d >= 1 fixed per launch): m = floor(2^32 (2^s - d) / d) + 1.
struct FastDiv {
  unsigned int d, m, s;
  __device__ __forceinline__ explicit FastDiv(unsigned int dv) : d(dv), s(0) {
    while ((1ull << s) < dv) ++s;
    m = (unsigned int)(((1ull << 32) * ((1ull << s) - dv)) / dv + 1);
  }
  __device__ __forceinline__ unsigned int div(unsigned int n) const {
    return (unsigned int)(((unsigned long long)__umulhi(n, m) + n) >> s);
  }
};

__device__ __forceinline__ float silu_mul(float a, float b) {
#if EXP_ID == 1
  return __fdividef(a, 1.0f + __expf(-a)) * b;
#else
  return a / (1.0f + expf(-a)) * b;
#endif
}

template <int V>
__device__ __forceinline__ void compute_store(bf16_t* __restrict__ o, const Bf<V>& g, const Bf<V>& u) {
  float r[V];
#pragma unroll
  for (int e = 0; e < V; ++e) r[e] = silu_mul(bf_get(g, e), bf_get(u, e));
  bf_store(o, bf_pack(r));
}

#if PERSIST == 0
// 2-D: rows by blockIdx.y, chunks of a row by blockIdx.x / threadIdx.x.
template <int V>
__device__ __forceinline__ void run(const bf16_t* __restrict__ in, bf16_t* __restrict__ out,
                                    long long T, long long I) {
  const long long cpr = I / V;
  const long long cstep = (long long)gridDim.x * (THREADS * ITEMS);
  for (long long t = blockIdx.y; t < T; t += gridDim.y) {
    const bf16_t* row = in + t * 2 * I;
    bf16_t* orow = out + t * I;
    for (long long base = (long long)blockIdx.x * (THREADS * ITEMS) + threadIdx.x; base < cpr; base += cstep) {
      Bf<V> g[ITEMS], u[ITEMS];
#pragma unroll
      for (int it = 0; it < ITEMS; ++it) {
        const long long c = base + (long long)it * THREADS;
        if (c < cpr) {
          g[it] = bf_load<V>(row + c * V);
          u[it] = bf_load<V>(row + I + c * V);
        }
      }
#pragma unroll
      for (int it = 0; it < ITEMS; ++it) {
        const long long c = base + (long long)it * THREADS;
        if (c < cpr) compute_store<V>(orow + c * V, g[it], u[it]);
      }
    }
  }
}
#else
// 1-D persistent: flat chunk index over n = T * cpr chunks.
template <int V, bool WIDE>
__device__ __forceinline__ void run_flat(const bf16_t* __restrict__ in, bf16_t* __restrict__ out,
                                         long long T, long long I) {
  const long long cpr = I / V;
  const long long n = T * cpr;
  const long long step = (long long)gridDim.x * (THREADS * ITEMS);
  const FastDiv fd((unsigned int)(WIDE ? 1 : cpr));
  for (long long base = (long long)blockIdx.x * (THREADS * ITEMS) + threadIdx.x; base < n; base += step) {
    Bf<V> g[ITEMS], u[ITEMS];
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
      const long long c = base + (long long)it * THREADS;
      if (c < n) {
        long long t;
        if constexpr (WIDE) t = c / cpr;
        else t = fd.div((unsigned int)c);
        const bf16_t* row = in + t * 2 * I + (c - t * cpr) * V;
        g[it] = bf_load<V>(row);
        u[it] = bf_load<V>(row + I);
      }
    }
#pragma unroll
    for (int it = 0; it < ITEMS; ++it) {
      const long long c = base + (long long)it * THREADS;
      if (c < n) compute_store<V>(out + c * V, g[it], u[it]);  // out is dense: t * I + col == c * V
    }
  }
}
template <int V>
__device__ __forceinline__ void run(const bf16_t* __restrict__ in, bf16_t* __restrict__ out,
                                    long long T, long long I) {
  if (T * (I / V) < 0x7fffffffLL) run_flat<V, false>(in, out, T, I);
  else run_flat<V, true>(in, out, T, I);
}
#endif

extern "C" __global__ void __launch_bounds__(THREADS) thrive_swiglu_act(ThriveCudaArgs args) {
  const bf16_t* in = (const bf16_t*)args.tensors[0];
  bf16_t* out = (bf16_t*)args.tensors[1];
  const long long T = args.dims[0], I = args.dims[1];
  if (T < 1 || I < 1) return;
#if VEC > 1
  const unsigned long long mis = ((unsigned long long)in | (unsigned long long)out) & (2 * VEC - 1);
  if (I % VEC == 0 && mis == 0) {
    run<VEC>(in, out, T, I);
    return;
  }
#endif
  run<1>(in, out, T, I);
}
