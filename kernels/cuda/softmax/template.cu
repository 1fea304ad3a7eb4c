// @thrive op: softmax
// @thrive backend: cuda
// @thrive entry: thrive_softmax_pre
// @thrive entry: thrive_softmax
// @thrive launch: entry=thrive_softmax_pre block=THREADS grid=(1-min(CLUSTER,1))*min(SPLIT-1,1)*(SPIN*cdiv(T,THREADS)+(1-SPIN)*T*SPLIT),1,1 smem=0
// @thrive launch: entry=thrive_softmax block=THREADS grid=T*(CLUSTER+(1-min(CLUSTER,1))*SPLIT),1,1 smem=max(min(CLUSTER,1),max(1-min(SPLIT-1,1),SPIN)*REG_CACHE)*min(1,200704/(2*cdiv(cdiv(V,min((CLUSTER+(1-min(CLUSTER,1))*SPLIT),cdiv(V,8))),8)*8))*2*cdiv(cdiv(V,min((CLUSTER+(1-min(CLUSTER,1))*SPLIT),cdiv(V,8))),8)*8
// @thrive param THREADS values=128,256,512,1024 default=256 doc=threads per block (each block owns one chunk of one row)
// @thrive param VEC values=1,2,4,8 default=8 doc=bf16 logits per load (8 = 16-byte loads) and f32 probs per store (8 = two 16-byte stores); used when V % VEC == 0 and the tensors are aligned, else scalar (always correct)
// @thrive param ONLINE values=0,1 default=1 doc=chunk statistics: 0: a max pass then a sum-of-exp pass (input read twice, plus once to write); 1: one online pass keeping a running max and rescaled sum (Milakov & Gimelshein 2018)
// @thrive param SPLIT values=1,2,4,8,16,32,64,128 default=16 doc=blocks per row. 1: one launch, one block per row does stats and write. >1: each block owns a chunk of about V/SPLIT logits (a multiple of 8) and the chunks' (max, sum) are combined in a fixed order, as SPIN says. Needed when T is small so that the whole GPU works (T=1: 32-128 at V=151936)
// @thrive param SPIN values=0,1 default=0 doc=SPLIT>1 only. 0: launch 1 writes each chunk's (max, sum) to the workspace, launch 2 combines them and writes the probs (re-reading its chunk, from L2 when still there); 1: launch 1 resets per-row counters, launch 2 computes the stats, exchanges them with the row's other blocks through the workspace (atomic arrival counter + spin-wait) and writes, so REG_CACHE can keep the chunk on chip. RISKY in principle: relies on the blocks of a row being co-resident, which holds with in-order block dispatch (at most 128 blocks per row, at least 132 resident)
// @thrive param REG_CACHE values=0,1 default=0 doc=SPLIT=1 or SPIN=1: the block's chunk of logits is kept in shared memory (2*V/SPLIT bytes, used when at most 196 KiB: V=151936 needs SPLIT>=2) between the stats and the write passes, so it is read from memory once; chunks that do not fit are re-read (always correct)
// @thrive param REDUCE values=0,1 default=1 doc=block reductions: 0: shared-memory tree; 1: warp shuffles then one shared-memory step across warps. Both fixed-order, deterministic
// @thrive param EXP values=accurate,fast default=fast doc=accurate: expf; fast: __expf (ex2.approx, ~1e-6 relative for the arguments that matter, inside the f32 tolerance 1e-4)
// @thrive param STREAM values=0,1 default=0 doc=1: probs stored with st.global.cs (evict-first), keeping L2 for the logits
// @thrive param CLUSTER values=0,2,4,8 default=0 doc=0: off. 2/4/8: the blocks of one row form a thread block cluster of that size (sm_90 __cluster_dims__; SPLIT, SPIN and REG_CACHE are then ignored): each block keeps its chunk of about V/CLUSTER logits in shared memory (read from HBM once), the chunks' (max, sum) are exchanged through distributed shared memory behind two cluster barriers, and every block writes its probs. One launch, no workspace, no co-residency assumption beyond what the hardware guarantees for a cluster
// @thrive param REVERSE values=0,1 default=0 doc=SPLIT>1 with SPIN=0 only: the finishing launch visits (row, chunk) in reverse order, so it re-reads first the logits the stats launch read last (most likely still in L2)
//
// probs[t, v] = exp(x[t, v] - max) / sum(exp(x[t, :] - max)); bf16 in, f32 out, fp32 math.
// Row t is cut into S = min(SPLIT, ceil(V/8)) chunks of CH = roundup8(ceil(V/S)) logits (trailing
// chunks may be empty); block (t, c) owns chunk c. Chunk stats (m, s = sum exp(x - m)) are combined
// as M = max m_c, S = sum_c s_c exp(m_c - M), in chunk order, identically by every block of a row.
// Workspace: float2 stats[T][S] at 0; SPIN=1: uint32 counters[T] at roundup256(8*T*S).
#include "thrive_cuda.cuh"

#define NEG_INF __int_as_float(0xff800000u)  // -inf (NVRTC has no INFINITY macro)

#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef ONLINE
#define ONLINE 1
#endif
#ifndef SPLIT
#define SPLIT 16
#endif
#ifndef SPIN
#define SPIN 0
#endif
#ifndef REG_CACHE
#define REG_CACHE 0
#endif
#ifndef REDUCE
#define REDUCE 1
#endif
#ifndef EXP
#define EXP fast
#endif
#ifndef STREAM
#define STREAM 0
#endif
#ifndef REVERSE
#define REVERSE 0
#endif
#ifndef CLUSTER
#define CLUSTER 0
#endif
#if CLUSTER != 0 && CLUSTER != 2 && CLUSTER != 4 && CLUSTER != 8
#error "CLUSTER must be 0, 2, 4 or 8"
#endif
#if CLUSTER
#undef SPLIT
#define SPLIT CLUSTER  // blocks per row = the cluster
#undef SPIN
#define SPIN 0
#undef REG_CACHE
#define REG_CACHE 1
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
#if THREADS < 32 || THREADS > 1024 || (THREADS & (THREADS - 1)) != 0
#error "THREADS must be a power of two in [32, 1024]"
#endif
#define NWARP (THREADS / 32)
#define FUSED_MAIN (SPLIT == 1 || SPIN || CLUSTER)  // launch 2 does stats + write
#define CACHE_CAP 200704  // bytes of logits a block may keep in shared memory (196 KiB)

typedef unsigned short bf16_t;

__device__ __forceinline__ float ex(float x) {
#if EXP_ID == 1
  return __expf(x);
#else
  return expf(x);
#endif
}

// V logits as floats: GLOBAL: read-only path (__ldg); else plain (generic) loads
template <int V, bool GLOBAL>
__device__ __forceinline__ void load_x(const bf16_t* p, float (&f)[V]) {
  unsigned int w[(V + 1) / 2];
  if constexpr (V == 8) {
    uint4 u;
    if constexpr (GLOBAL) u = __ldg(reinterpret_cast<const uint4*>(p));
    else u = *reinterpret_cast<const uint4*>(p);
    w[0] = u.x; w[1] = u.y; w[2] = u.z; w[3] = u.w;
  } else if constexpr (V == 4) {
    uint2 u;
    if constexpr (GLOBAL) u = __ldg(reinterpret_cast<const uint2*>(p));
    else u = *reinterpret_cast<const uint2*>(p);
    w[0] = u.x; w[1] = u.y;
  } else if constexpr (V == 2) {
    if constexpr (GLOBAL) w[0] = __ldg(reinterpret_cast<const unsigned int*>(p));
    else w[0] = *reinterpret_cast<const unsigned int*>(p);
  } else {
    if constexpr (GLOBAL) w[0] = __ldg(p);
    else w[0] = *p;
  }
#pragma unroll
  for (int e = 0; e < V; ++e)
    f[e] = __uint_as_float((e & 1) ? (w[e >> 1] & 0xffff0000u) : (w[e >> 1] << 16));
}

__device__ __forceinline__ void st4(float* p, float a, float b, float c, float d) {
#if STREAM
  asm volatile("st.global.cs.v4.f32 [%0], {%1,%2,%3,%4};" :: "l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
#else
  *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
#endif
}
template <int V>
__device__ __forceinline__ void store_p(float* p, const float (&f)[V]) {
  if constexpr (V >= 4) {
#pragma unroll
    for (int k = 0; k < V / 4; ++k) st4(p + 4 * k, f[4 * k], f[4 * k + 1], f[4 * k + 2], f[4 * k + 3]);
  } else if constexpr (V == 2) {
#if STREAM
    asm volatile("st.global.cs.v2.f32 [%0], {%1,%2};" :: "l"(p), "f"(f[0]), "f"(f[1]) : "memory");
#else
    *reinterpret_cast<float2*>(p) = make_float2(f[0], f[1]);
#endif
  } else {
#if STREAM
    asm volatile("st.global.cs.f32 [%0], %1;" :: "l"(p), "f"(f[0]) : "memory");
#else
    *p = f[0];
#endif
  }
}

// (m, s) merge; (-inf, 0) is the identity (an empty chunk / thread).
__device__ __forceinline__ void ms_merge(float& m, float& s, float m2, float s2) {
  const float M = fmaxf(m, m2);
  if (M == NEG_INF) return;  // both empty
  s = s * ex(m - M) + s2 * ex(m2 - M);
  m = M;
}

// ---- block reductions: fixed order, result in every thread, smem reusable on return ----
struct Red {
#if REDUCE == 1
  float a[NWARP], b[NWARP];
#else
  float a[THREADS], b[THREADS];
#endif
  float2 out;
};

__device__ __forceinline__ float block_max(float v, Red& r) {
#if REDUCE == 1
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  if ((threadIdx.x & 31) == 0) r.a[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = r.a[0];
#pragma unroll
  for (int w = 1; w < NWARP; ++w) m = fmaxf(m, r.a[w]);
  __syncthreads();
  return m;
#else
  r.a[threadIdx.x] = v;
  __syncthreads();
#pragma unroll
  for (int off = THREADS / 2; off > 0; off >>= 1) {
    if (threadIdx.x < off) r.a[threadIdx.x] = fmaxf(r.a[threadIdx.x], r.a[threadIdx.x + off]);
    __syncthreads();
  }
  const float m = r.a[0];
  __syncthreads();
  return m;
#endif
}

__device__ __forceinline__ float block_sum(float v, Red& r) {
#if REDUCE == 1
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) r.a[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < NWARP; ++w) s += r.a[w];
  __syncthreads();
  return s;
#else
  r.a[threadIdx.x] = v;
  __syncthreads();
#pragma unroll
  for (int off = THREADS / 2; off > 0; off >>= 1) {
    if (threadIdx.x < off) r.a[threadIdx.x] += r.a[threadIdx.x + off];
    __syncthreads();
  }
  const float s = r.a[0];
  __syncthreads();
  return s;
#endif
}

__device__ __forceinline__ void block_ms(float& m, float& s, Red& r) {
#if REDUCE == 1
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
    ms_merge(m, s, m2, s2);
  }
  if ((threadIdx.x & 31) == 0) {
    r.a[threadIdx.x >> 5] = m;
    r.b[threadIdx.x >> 5] = s;
  }
  __syncthreads();
  float M = r.a[0], S = r.b[0];
#pragma unroll
  for (int w = 1; w < NWARP; ++w) ms_merge(M, S, r.a[w], r.b[w]);
  __syncthreads();
  m = M;
  s = S;
#else
  r.a[threadIdx.x] = m;
  r.b[threadIdx.x] = s;
  __syncthreads();
#pragma unroll
  for (int off = THREADS / 2; off > 0; off >>= 1) {
    if (threadIdx.x < off) {
      float M = r.a[threadIdx.x], S = r.b[threadIdx.x];
      ms_merge(M, S, r.a[threadIdx.x + off], r.b[threadIdx.x + off]);
      r.a[threadIdx.x] = M;
      r.b[threadIdx.x] = S;
    }
    __syncthreads();
  }
  m = r.a[0];
  s = r.b[0];
  __syncthreads();
#endif
}

// Chunk statistics over n logits at src (n % V == 0). GLOBAL: src in global memory, else smem.
template <int V, bool GLOBAL>
__device__ __forceinline__ void chunk_stats(const bf16_t* src, int n, float& m_out, float& s_out, Red& red) {
  const int nv = n / V;
#if ONLINE
  float m = NEG_INF, s = 0.0f;
#pragma unroll 2
  for (int j = threadIdx.x; j < nv; j += THREADS) {
    float f[V];
    load_x<V, GLOBAL>(src + (size_t)j * V, f);
    float vm = f[0];
#pragma unroll
    for (int e = 1; e < V; ++e) vm = fmaxf(vm, f[e]);
    if (vm > m) {
      s *= ex(m - vm);
      m = vm;
    }
#pragma unroll
    for (int e = 0; e < V; ++e) s += ex(f[e] - m);
  }
  block_ms(m, s, red);
  m_out = m;
  s_out = s;
#else
  float m = NEG_INF;
#pragma unroll 4
  for (int j = threadIdx.x; j < nv; j += THREADS) {
    float f[V];
    load_x<V, GLOBAL>(src + (size_t)j * V, f);
#pragma unroll
    for (int e = 0; e < V; ++e) m = fmaxf(m, f[e]);
  }
  m = block_max(m, red);
  float s = 0.0f;
  if (m != NEG_INF) {
#pragma unroll 4
    for (int j = threadIdx.x; j < nv; j += THREADS) {
      float f[V];
      load_x<V, GLOBAL>(src + (size_t)j * V, f);
#pragma unroll
      for (int e = 0; e < V; ++e) s += ex(f[e] - m);
    }
  }
  s = block_sum(s, red);
  m_out = m;
  s_out = s;
#endif
}

// Combine the S chunk stats of a row (fixed order), result (M, 1/sum) in every thread.
// Warp 0: lane l folds chunks l, l+32, ... in order, then a fixed xor butterfly.
// Volatile loads: with SPIN=1 the stats come from other blocks of this launch.
__device__ __forceinline__ float2 row_combine(const float2* stats, int S, Red& red) {
  if (threadIdx.x < 32) {
    float m = NEG_INF, s = 0.0f;
    const volatile float* vs = reinterpret_cast<const volatile float*>(stats);
    for (int i = threadIdx.x; i < S; i += 32) ms_merge(m, s, vs[2 * i], vs[2 * i + 1]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
      const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
      ms_merge(m, s, m2, s2);
    }
    if (threadIdx.x == 0) red.out = make_float2(m, 1.0f / s);
  }
  __syncthreads();
  const float2 r = red.out;
  __syncthreads();
  return r;
}

// probs of n logits at src into dst. A batch of WB vectors per thread is loaded before any of
// its stores: src and dst could alias as far as the compiler knows, so it would not hoist loads
// above stores itself, and one load in flight per thread cannot cover HBM latency.
#define WB 4
template <int V, bool GLOBAL>
__device__ __forceinline__ void write_probs(const bf16_t* src, float* dst, int n, float M, float inv) {
  const int nv = n / V;
  for (int j0 = threadIdx.x; j0 < nv; j0 += WB * THREADS) {
    float f[WB][V];
#pragma unroll
    for (int u = 0; u < WB; ++u)
      if (j0 + u * THREADS < nv) load_x<V, GLOBAL>(src + (size_t)(j0 + u * THREADS) * V, f[u]);
#pragma unroll
    for (int u = 0; u < WB; ++u) {
      if (j0 + u * THREADS >= nv) break;
#pragma unroll
      for (int e = 0; e < V; ++e) f[u][e] = ex(f[u][e] - M) * inv;
      store_p<V>(dst + (size_t)(j0 + u * THREADS) * V, f[u]);
    }
  }
}

struct Geo {
  long long T, Vt;
  int S, CH;
};
__device__ __forceinline__ Geo geometry(const ThriveCudaArgs& a) {
  Geo g;
  g.T = a.dims[0];
  g.Vt = a.dims[1];
  const long long v8 = (g.Vt + 7) / 8;
  g.S = (int)(v8 < SPLIT ? v8 : SPLIT);
  if (g.S < 1) g.S = 1;
  g.CH = (int)(((g.Vt + g.S - 1) / g.S + 7) / 8 * 8);
  return g;
}
__device__ __forceinline__ bool vec_ok(const ThriveCudaArgs& a, long long Vt) {
#if VEC > 1
  const unsigned long long mis = (((unsigned long long)a.tensors[0]) & (2 * VEC - 1)) |
                                 (((unsigned long long)a.tensors[1]) & (VEC >= 4 ? 15 : 4 * VEC - 1));
  return Vt % VEC == 0 && mis == 0;
#else
  (void)a;
  (void)Vt;
  return false;
#endif
}
__device__ __forceinline__ unsigned int* counters(const ThriveCudaArgs& a, const Geo& g) {
  const unsigned long long off = ((unsigned long long)g.T * g.S * 8 + 255) / 256 * 256;
  return reinterpret_cast<unsigned int*>((char*)a.workspace + off);
}

#if !FUSED_MAIN
// ---- SPLIT>1, SPIN=0: launch 1 = chunk stats, launch 2 = combine + write ------------------------
template <int V>
__device__ __forceinline__ void stats_block(const ThriveCudaArgs& a, const Geo& g, long long row, int c, Red& red) {
  const bf16_t* x = (const bf16_t*)a.tensors[0] + row * g.Vt;
  const long long lo = (long long)c * g.CH;
  const int n = lo >= g.Vt ? 0 : (int)((g.Vt - lo) < g.CH ? (g.Vt - lo) : g.CH);
  float m, s;
  chunk_stats<V, true>(x + (n > 0 ? lo : 0), n, m, s, red);
  if (threadIdx.x == 0) reinterpret_cast<float2*>(a.workspace)[row * g.S + c] = make_float2(m, s);
}
template <int V>
__device__ __forceinline__ void finish_block(const ThriveCudaArgs& a, const Geo& g, long long row, int c, Red& red) {
  const float2 Mi = row_combine(reinterpret_cast<const float2*>(a.workspace) + row * g.S, g.S, red);
  const long long lo = (long long)c * g.CH;
  if (lo >= g.Vt) return;
  const int n = (int)((g.Vt - lo) < g.CH ? (g.Vt - lo) : g.CH);
  write_probs<V, true>((const bf16_t*)a.tensors[0] + row * g.Vt + lo, (float*)a.tensors[1] + row * g.Vt + lo,
                       n, Mi.x, Mi.y);
}

extern "C" __global__ void __launch_bounds__(THREADS) thrive_softmax_pre(ThriveCudaArgs args) {
  __shared__ Red red;
  const Geo g = geometry(args);
  const long long row = blockIdx.x / SPLIT;
  const int c = blockIdx.x % SPLIT;
  if (row >= g.T || c >= g.S || g.Vt < 1) return;
  if (vec_ok(args, g.Vt)) stats_block<VEC>(args, g, row, c, red);
  else stats_block<1>(args, g, row, c, red);
}

extern "C" __global__ void __launch_bounds__(THREADS) thrive_softmax(ThriveCudaArgs args) {
  __shared__ Red red;
  const Geo g = geometry(args);
#if REVERSE
  const long long b = (long long)gridDim.x - 1 - blockIdx.x;
#else
  const long long b = blockIdx.x;
#endif
  const long long row = b / SPLIT;
  const int c = (int)(b % SPLIT);
  if (row >= g.T || c >= g.S || g.Vt < 1) return;
  if (vec_ok(args, g.Vt)) finish_block<VEC>(args, g, row, c, red);
  else finish_block<1>(args, g, row, c, red);
}

#else
// ---- SPLIT=1 (launch 1 skipped: grid 0) or SPIN=1 (launch 1 = counter reset): launch 2 = stats,
// exchange through the workspace when S > 1, write ------------------------------------------------
extern "C" __global__ void __launch_bounds__(THREADS) thrive_softmax_pre(ThriveCudaArgs args) {
  const Geo g = geometry(args);
  const long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
  if (g.S > 1 && i < g.T) counters(args, g)[i] = 0u;
}

#if REG_CACHE
// The load word of V bf16 logits (16, 8, 4 or 2 bytes).
template <int V> struct Word { typedef unsigned short T; };
template <> struct Word<2> { typedef unsigned int T; };
template <> struct Word<4> { typedef uint2 T; };
template <> struct Word<8> { typedef uint4 T; };
#endif

#if CLUSTER
// Thread block cluster primitives (PTX ISA 7.8+, sm_90): barrier.cluster with release/acquire
// ordering, and a load from a peer block's shared memory through mapa (distributed shared memory).
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ __forceinline__ float2 ld_peer(const float2* local, unsigned int rank) {
  unsigned int a, ra;
  float x, y;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(local));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(x), "=f"(y) : "r"(ra) : "memory");
  return make_float2(x, y);
}
#endif

template <int V>
__device__ __forceinline__ void fused_block(const ThriveCudaArgs& a, const Geo& g, long long row, int c,
                                            Red& red, bf16_t* cache, float2* xchg) {
  const bf16_t* x = (const bf16_t*)a.tensors[0] + row * g.Vt;
  const long long lo = (long long)c * g.CH;
  const int n = lo >= g.Vt ? 0 : (int)((g.Vt - lo) < g.CH ? (g.Vt - lo) : g.CH);
  const bf16_t* src = x + (n > 0 ? lo : 0);
  bool cached = false;
#if REG_CACHE
  unsigned int dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  cached = n > 0 && 2LL * g.CH <= CACHE_CAP && (unsigned long long)2 * g.CH <= dyn;
  if (cached) {
    // batches of 8 loads per thread issued before their shared-memory stores
    const int nv = n / V;
    using W = typename Word<V>::T;
    const W* gs = reinterpret_cast<const W*>(src);
    W* cs = reinterpret_cast<W*>(cache);
    for (int j0 = threadIdx.x; j0 < nv; j0 += 8 * THREADS) {
      W t[8];
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (j0 + u * THREADS < nv) t[u] = __ldg(gs + j0 + u * THREADS);
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (j0 + u * THREADS < nv) cs[j0 + u * THREADS] = t[u];
    }
    __syncthreads();
  }
#else
  (void)cache;
#endif
  // one code path for both sources: generic loads from shared memory or global memory
  const bf16_t* p = cached ? cache : src;
  float m, s;
  chunk_stats<V, false>(p, n, m, s, red);

  float M = m, inv = 1.0f / s;
#if CLUSTER
  // Every block of the cluster (= the row) publishes its chunk stats in its own shared memory;
  // after the barrier thread 0 folds ranks 0..CLUSTER-1 in order (empty chunks are the identity),
  // identically in every block. The closing wait keeps this block's xchg alive until all peers
  // have read it. No early return between the two barriers: every block must arrive.
  if (threadIdx.x == 0) *xchg = make_float2(m, s);
  cluster_arrive();
  cluster_wait();
  if (threadIdx.x == 0) {
    float mm = NEG_INF, ss = 0.0f;
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) {
      const float2 o = ld_peer(xchg, (unsigned int)r);
      ms_merge(mm, ss, o.x, o.y);
    }
    red.out = make_float2(mm, 1.0f / ss);
  }
  cluster_arrive();  // this block is done reading its peers
  __syncthreads();
  M = red.out.x;
  inv = red.out.y;
  if (n > 0) write_probs<V, false>(p, (float*)a.tensors[1] + row * g.Vt + lo, n, M, inv);
  cluster_wait();
  return;
#else
  (void)xchg;
#endif
  if (g.S > 1) {
    float2* stats = reinterpret_cast<float2*>(a.workspace) + row * g.S;
    if (threadIdx.x == 0) {
      stats[c] = make_float2(m, s);
      __threadfence();  // publish the stats before arriving
      unsigned int* cnt = counters(a, g) + row;
      atomicAdd(cnt, 1u);
      unsigned int seen;
      for (;;) {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(cnt) : "memory");
        if (seen >= (unsigned int)g.S) break;
        asm volatile("nanosleep.u32 %0;" :: "r"(100u));
      }
      __threadfence();
    }
    __syncthreads();
    const float2 Mi = row_combine(stats, g.S, red);
    M = Mi.x;
    inv = Mi.y;
  }
  if (n == 0) return;
  float* dst = (float*)a.tensors[1] + row * g.Vt + lo;
  write_probs<V, false>(p, dst, n, M, inv);
}

#if CLUSTER
#define CLUSTER_ATTR __cluster_dims__(CLUSTER, 1, 1)
#else
#define CLUSTER_ATTR
#endif
extern "C" __global__ void CLUSTER_ATTR __launch_bounds__(THREADS) thrive_softmax(ThriveCudaArgs args) {
  __shared__ Red red;
  __shared__ float2 xchg;  // CLUSTER: this block's chunk stats, read by its peers
  extern __shared__ __align__(16) bf16_t cache[];
  const Geo g = geometry(args);
  const long long row = blockIdx.x / SPLIT;
  const int c = blockIdx.x % SPLIT;
  // a cluster's blocks share row, T and V, so they return together; with CLUSTER, blocks past
  // the last chunk (c >= S when V < 8 * CLUSTER) stay: they have n = 0 and must reach the barriers
  if (row >= g.T || g.Vt < 1 || (!CLUSTER && c >= g.S)) return;
  if (vec_ok(args, g.Vt)) fused_block<VEC>(args, g, row, c, red, cache, &xchg);
  else fused_block<1>(args, g, row, c, red, cache, &xchg);
}
#endif
