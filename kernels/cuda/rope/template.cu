// @thrive op: rope
// @thrive backend: cuda
// @thrive entry: thrive_rope
// @thrive launch: entry=thrive_rope block=THREADS grid=max(1,FLAT*cdiv(T*(NQ+NKV)*cdiv(D/2,VEC),THREADS)+(1-FLAT)*cdiv(T,TOKENS_PER_BLOCK)),1,1 smem=(1-FLAT)*CS_SMEM*TOKENS_PER_BLOCK*D*4
// @thrive param VEC values=1,2,4,8 default=8 doc=rotation pairs per thread step: VEC bf16 from each half of a head (VEC=8: 16-byte loads) and VEC cos + VEC sin floats; used when D % (2*VEC) == 0 and the tensors are aligned, else one pair per step (always correct)
// @thrive param THREADS values=64,128,256,512,1024 default=128 doc=threads per block
// @thrive param FLAT values=0,1 default=1 doc=0: one block per TOKENS_PER_BLOCK tokens covering all NQ+NKV heads of q and k (one cos/sin row serves every head of its token); 1: one thread per (token, head, VEC pairs) over a flat grid, q and k heads fused in one index space
// @thrive param TOKENS_PER_BLOCK values=1,2,4,8 default=4 doc=tokens per block with FLAT=0 (more work per block for small heads; fewer, fatter blocks); ignored with FLAT=1
// @thrive param CS_SMEM values=0,1 default=0 doc=FLAT=0 only: 1 stages the block's cos/sin rows (TOKENS_PER_BLOCK*D floats) in shared memory once, heads then read them from there; 0 reads them from global/L1 per head
//
// Neox RoPE in place. For i < D/2, c = cache[pos][i], s = cache[pos][D/2 + i]:
//   x[i] <- x[i] c - x[i + D/2] s;  x[i + D/2] <- x[i + D/2] c + x[i] s   (fp32 math)
// Work item: (token t, head h in [0, NQ + NKV): q heads then k heads, pair chunk p): pairs
// p*V .. p*V + V - 1. Each element is read once and written once by one thread.
#include "thrive_cuda.cuh"

#ifndef VEC
#define VEC 8
#endif
#ifndef THREADS
#define THREADS 128
#endif
#ifndef FLAT
#define FLAT 1
#endif
#ifndef TOKENS_PER_BLOCK
#define TOKENS_PER_BLOCK 4
#endif
#ifndef CS_SMEM
#define CS_SMEM 0
#endif

#if VEC != 1 && VEC != 2 && VEC != 4 && VEC != 8
#error "VEC must be 1, 2, 4 or 8"
#endif
#define USE_SMEM (CS_SMEM && !FLAT)

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
// q and k are in/out: plain loads
template <int V>
__device__ __forceinline__ Bf<V> bf_load(const bf16_t* p) {
  Bf<V> r;
  if constexpr (V == 8) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    r.w[0] = u.x; r.w[1] = u.y; r.w[2] = u.z; r.w[3] = u.w;
  } else if constexpr (V == 4) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    r.w[0] = u.x; r.w[1] = u.y;
  } else if constexpr (V == 2) {
    r.w[0] = *reinterpret_cast<const unsigned int*>(p);
  } else {
    r.w[0] = *p;
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
// V floats; GLOBAL: read-only cache through __ldg; else shared memory
template <int V, bool GLOBAL>
__device__ __forceinline__ void f32_load(const float* p, float (&f)[V]) {
  if constexpr (V >= 4) {
#pragma unroll
    for (int k = 0; k < V / 4; ++k) {
      float4 u;
      if constexpr (GLOBAL) u = __ldg(reinterpret_cast<const float4*>(p) + k);
      else u = reinterpret_cast<const float4*>(p)[k];
      f[4 * k] = u.x; f[4 * k + 1] = u.y; f[4 * k + 2] = u.z; f[4 * k + 3] = u.w;
    }
  } else if constexpr (V == 2) {
    float2 u;
    if constexpr (GLOBAL) u = __ldg(reinterpret_cast<const float2*>(p));
    else u = *reinterpret_cast<const float2*>(p);
    f[0] = u.x; f[1] = u.y;
  } else {
    if constexpr (GLOBAL) f[0] = __ldg(p);
    else f[0] = *p;
  }
}

// n / d for 32-bit n by a multiply (d >= 1 fixed per launch): m = floor(2^32 (2^s - d) / d) + 1.
struct FastDiv {
  unsigned int m, s;
  __device__ __forceinline__ explicit FastDiv(unsigned int d) : s(0) {
    while ((1ull << s) < d) ++s;
    m = (unsigned int)(((1ull << 32) * ((1ull << s) - d)) / d + 1);
  }
  __device__ __forceinline__ unsigned int div(unsigned int n) const {
    return (unsigned int)(((unsigned long long)__umulhi(n, m) + n) >> s);
  }
};

// Rotate V pairs of one head. x: head start; cs: cos row (sin row at cs + half).
template <int V, bool CS_GLOBAL>
__device__ __forceinline__ void rotate(bf16_t* __restrict__ x, const float* __restrict__ cs, int half, int i) {
  const Bf<V> a = bf_load<V>(x + i);
  const Bf<V> b = bf_load<V>(x + half + i);
  float c[V], s[V];
  f32_load<V, CS_GLOBAL>(cs + i, c);
  f32_load<V, CS_GLOBAL>(cs + half + i, s);
  float o1[V], o2[V];
#pragma unroll
  for (int e = 0; e < V; ++e) {
    const float x1 = bf_get(a, e), x2 = bf_get(b, e);
    o1[e] = x1 * c[e] - x2 * s[e];
    o2[e] = x2 * c[e] + x1 * s[e];
  }
  bf_store(x + i, bf_pack(o1));
  bf_store(x + half + i, bf_pack(o2));
}

template <int V>
__device__ __forceinline__ void run(const long long* __restrict__ pos, bf16_t* __restrict__ q,
                                    bf16_t* __restrict__ k, const float* __restrict__ cache,
                                    int T, int NQ, int NKV, int D, float* sm) {
  const int half = D / 2;
  const int npc = half / V;          // pair chunks per head
  const int NH = NQ + NKV;
  const FastDiv fd_npc((unsigned int)npc);
#if FLAT
  const FastDiv fd_nh((unsigned int)NH);
  const unsigned long long total = (unsigned long long)T * NH * npc;
  for (unsigned long long it = (unsigned long long)blockIdx.x * THREADS + threadIdx.x; it < total;
       it += (unsigned long long)gridDim.x * THREADS) {
    // total < 2^32 is checked by the caller
    const unsigned int th = fd_npc.div((unsigned int)it);
    const int p = (int)((unsigned int)it - th * npc);
    const unsigned int t = fd_nh.div(th);
    const int h = (int)(th - t * NH);
    bf16_t* x = h < NQ ? q + ((size_t)t * NQ + h) * D : k + ((size_t)t * NKV + (h - NQ)) * D;
    const float* cs = cache + (size_t)__ldg(pos + t) * D;
    rotate<V, true>(x, cs, half, p * V);
  }
#else
  const int t0 = blockIdx.x * TOKENS_PER_BLOCK;
  const int ntok = min(TOKENS_PER_BLOCK, T - t0);
  if (ntok <= 0) return;
#if USE_SMEM
  for (int e = threadIdx.x; e < ntok * D; e += THREADS) {
    const int tl = e / D, d = e - tl * D;
    sm[e] = __ldg(cache + (size_t)__ldg(pos + t0 + tl) * D + d);
  }
  __syncthreads();
#endif
  const int per_tok = NH * npc;
  const FastDiv fd_tok((unsigned int)per_tok);
  const int total = ntok * per_tok;
  for (int it = threadIdx.x; it < total; it += THREADS) {
    const int tl = (int)fd_tok.div((unsigned int)it);
    const int r = it - tl * per_tok;
    const int h = (int)fd_npc.div((unsigned int)r);
    const int p = r - h * npc;
    const int t = t0 + tl;
    bf16_t* x = h < NQ ? q + ((size_t)t * NQ + h) * D : k + ((size_t)t * NKV + (h - NQ)) * D;
#if USE_SMEM
    rotate<V, false>(x, sm + tl * D, half, p * V);
#else
    rotate<V, true>(x, cache + (size_t)__ldg(pos + t) * D, half, p * V);
#endif
  }
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS) thrive_rope(ThriveCudaArgs args) {
#if USE_SMEM
  extern __shared__ float sm[];  // TOKENS_PER_BLOCK * D floats
#else
  float* sm = nullptr;
#endif
  const long long* pos = (const long long*)args.tensors[0];
  bf16_t* q = (bf16_t*)args.tensors[1];
  bf16_t* k = (bf16_t*)args.tensors[2];
  const float* cache = (const float*)args.tensors[3];
  const int T = (int)args.dims[0], NQ = (int)args.dims[1], NKV = (int)args.dims[2];
  const int D = (int)args.dims[3];
  if (T < 1 || D < 2 || NQ + NKV < 1) return;
#if FLAT
  // the flat index space must fit 32 bits (it does for any real shape: T*(NQ+NKV)*D/2 < 2^32)
  if ((unsigned long long)T * (NQ + NKV) * (D / 2) >= 0xffffffffull) {
    __trap();
  }
#endif
#if VEC > 1
  const unsigned long long mis = ((unsigned long long)q | (unsigned long long)k) & (2 * VEC - 1);
  const unsigned long long misc = (unsigned long long)cache & (VEC >= 4 ? 15 : 4 * VEC - 1);
  if (D % (2 * VEC) == 0 && mis == 0 && misc == 0) {  // heads start VEC-aligned, halves too
    run<VEC>(pos, q, k, cache, T, NQ, NKV, D, sm);
    return;
  }
#endif
  run<1>(pos, q, k, cache, T, NQ, NKV, D, sm);
}
