// @thrive op: gqa_decode_attention
// @thrive backend: cuda
// @thrive entry: thrive_gqa_decode_attention
// @thrive entry: thrive_gqa_decode_attention_combine
// @thrive launch: entry=thrive_gqa_decode_attention block=THREADS grid=B*(NKV+(NQ-NKV)*(1-GROUP_PACK)),(SPLIT_KV+(1-min(SPLIT_KV,1))*max(1,min(min(64,cdiv(L,64)),cdiv(16*SMS,B*(NKV+(NQ-NKV)*(1-GROUP_PACK)))))),1 smem=(THREADS/64)*(GROUP_PACK*min(PACK_MAX,NQ/NKV)+1-GROUP_PACK)*(min(D,256)+2)*4
// @thrive launch: entry=thrive_gqa_decode_attention_combine block=128 grid=B*NQ*min((SPLIT_KV+(1-min(SPLIT_KV,1))*max(1,min(min(64,cdiv(L,64)),cdiv(16*SMS,B*(NKV+(NQ-NKV)*(1-GROUP_PACK))))))-1,1),1,1 smem=0
// @thrive param GROUP_PACK values=0,1 default=1 doc=0: one block per query head (grid B*NQ), heads of a group read the same K/V rows separately (L2 absorbs part); 1: one block per KV head with its NQ/NKV query heads (grid B*NKV), each K/V row is read once per group when NQ/NKV <= PACK_MAX
// @thrive param PACK_MAX values=2,4,8 default=2 doc=GROUP_PACK=1 only: most query heads kept in registers per pass (the kernel is compiled for the largest, so keep it at NQ/NKV: 2 for Qwen3); a group is done in passes of the largest of PACK_MAX,4,2,1 dividing NQ/NKV, later passes re-read K/V (mostly from L1/L2). PACK_MAX=8 holds 128 floats of q and acc per lane: spills heavily with THREADS=512 or MIN_BLOCKS>1
// @thrive param SPLIT_KV values=0,1,2,4,8,16,32,64 default=0 doc=blocks per (sequence, head or group) along the context: each takes 1/S of the sequence's own length and writes (max, sum, unnormalized acc) to the workspace; a combine launch merges them in chunk order. 0 (auto): S chosen from batch x heads x context so the grid has about 16 blocks per SM (several waves, so the last one's tail is short): S = clamp(cdiv(16*SMS, B*units), 1, min(64, cdiv(L, 64))) (units = NKV packed, NQ not), e.g. 64 at B=1,L=4096 and 2 at B=256 on the H200. S=1 writes the output directly (the combine launch has grid 0). Effective S = min(S, L), lowered if the workspace is too small
// @thrive param THREADS values=64,128,256,512 default=128 doc=threads per block; warps take interleaved key slots with independent online-softmax states merged at the end (tree through shared memory)
// @thrive param VEC values=1,2,4,8 default=8 doc=bf16 elements of a K/V row per lane load (8 = 16-byte loads; a 128-wide row is then read by 16 lanes, 2 keys per warp step); used when D % VEC == 0 and the tensors are aligned, else 1 (always correct)
// @thrive param MIN_BLOCKS values=1,2,4 default=4 doc=second __launch_bounds__ argument: blocks per SM the compiler must fit, capping registers at 65536/(THREADS*MIN_BLOCKS) for more warps in flight (clamped to THREADS*MIN_BLOCKS <= 768, i.e. >= 85 registers; 1 with THREADS=512); may spill with KEYS_PER_ITER=8 or PACK_MAX>2
// @thrive param PREFETCH values=0,1 default=1 doc=1: the next step's K/V rows are loaded into a second register buffer before the current step's math (software pipelining: loads stay in flight while the warp computes), at the cost of U*2*16 bytes more registers per lane
// @thrive param KEYS_PER_ITER values=1,2,4,8 default=2 doc=keys per lane group per loop step: their K and V loads are all issued before the math (memory-level parallelism) and share one softmax rescale. 8 with THREADS=512 or large groups may spill registers
//
// out[b, h] = softmax(scale * q[b, h] . K[b, :n_b, g]) V[b, :n_b, g], g = h / (NQ / NKV),
// n_b = context_lens[b] clamped to [0, L] (n_b = 0 gives zeros). fp32 math; scores in the log2
// domain (q pre-scaled by scale * log2 e, exp2f). Assumes NQ % NKV == 0.
// Register path (D <= 256): a K/V row is split over LPK = pow2ceil(ceil(D / V)) <= 32 lanes,
// each holding up to 8 elements (8 / V chunks of V); a warp handles 32 / LPK keys per step.
// D > 256: a slower general path (scores through the workspace, one pass per head).
// Workspace: int S at 0 (written by block (0,0) of the first launch, read by the combine);
// float2 ml[B*NQ][S] at 256; float acc[B*NQ][S][D] at 256 + roundup256(8*B*NQ*S); float
// scores[B*NQ][L] after it (general path only). S = min(gridDim.y of the first launch, L, 64),
// lowered if the workspace is too small. Chunk s of sequence b: [s*ceil(n_b/S), min(n_b, (s+1)*ceil(n_b/S))),
// possibly empty (then (max, sum, acc) = (-inf, 0, 0), which the combine weighs by 0).
#include "thrive_cuda.cuh"

#define NEG_INF __int_as_float(0xff800000u)  // -inf (NVRTC has no INFINITY macro)

#ifndef GROUP_PACK
#define GROUP_PACK 1
#endif
#ifndef PACK_MAX
#define PACK_MAX 2
#endif
#ifndef SPLIT_KV
#define SPLIT_KV 0
#endif
#ifndef THREADS
#define THREADS 128
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 4
#endif
#ifndef KEYS_PER_ITER
#define KEYS_PER_ITER 2
#endif
#ifndef PREFETCH
#define PREFETCH 1
#endif

#if VEC != 1 && VEC != 2 && VEC != 4 && VEC != 8
#error "VEC must be 1, 2, 4 or 8"
#endif
#if PACK_MAX != 2 && PACK_MAX != 4 && PACK_MAX != 8
#error "PACK_MAX must be 2, 4 or 8"
#endif
#if THREADS < 32 || THREADS > 1024 || (THREADS & (THREADS - 1)) != 0
#error "THREADS must be a power of two in [32, 1024]"
#endif
#define NW (THREADS / 32)
// blocks per SM promised to the compiler, clamped so that at least ~85 registers per thread remain
#define MINB_EFF (MIN_BLOCKS * THREADS > 768 ? (768 / THREADS > 1 ? 768 / THREADS : 1) : MIN_BLOCKS)
#define LOG2E 1.4426950408889634f
#define FULL 0xffffffffu

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
__device__ __forceinline__ void bf_zero(Bf<V>& v) {
#pragma unroll
  for (int k = 0; k < (V + 1) / 2; ++k) v.w[k] = 0u;
}
template <int V>
__device__ __forceinline__ Bf<V> bf_ldg(const bf16_t* p) {
  Bf<V> r;
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
  return r;
}
template <int V>
__device__ __forceinline__ void bf_store(bf16_t* p, const float (&f)[V]) {
  unsigned int w[(V + 1) / 2];
#pragma unroll
  for (int k = 0; k < (V + 1) / 2; ++k) {
    const unsigned int lo = thrive_f32_to_bf16(f[2 * k]);
    const unsigned int hi = (2 * k + 1 < V) ? (unsigned int)thrive_f32_to_bf16(f[(2 * k + 1) % V]) : 0u;
    w[k] = lo | (hi << 16);
  }
  if constexpr (V == 8) *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  else if constexpr (V == 4) *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  else if constexpr (V == 2) *reinterpret_cast<unsigned int*>(p) = w[0];
  else *p = (bf16_t)w[0];
}
template <int V>
__device__ __forceinline__ void f32_store(float* p, const float (&f)[V]) {
  if constexpr (V >= 4) {
#pragma unroll
    for (int k = 0; k < V / 4; ++k)
      reinterpret_cast<float4*>(p)[k] = make_float4(f[4 * k], f[4 * k + 1], f[4 * k + 2], f[4 * k + 3]);
  } else if constexpr (V == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(f[0], f[1]);
  } else {
    *p = f[0];
  }
}

__device__ __forceinline__ long long align256(long long x) { return (x + 255) / 256 * 256; }

#define SPLIT_CAP 64  // most chunks per (sequence, head): the auto rule's bound; the combine holds 2 per lane
#define WS_HEADER 256  // bytes before ml[]: the effective S for the combine launch

// Problem geometry and workspace layout; the first launch derives S from its grid (s_req =
// gridDim.y), the combine reads it back from the workspace header, so both agree.
struct Geo {
  int B, L, NQ, NKV, D, G, S;
  float2* ml;
  float* acc;
  float* scores;
};
__device__ __forceinline__ Geo geometry(const ThriveCudaArgs& a, int s_req) {
  Geo g;
  g.B = (int)a.dims[0];
  g.L = (int)a.dims[1];
  g.NQ = (int)a.dims[2];
  g.NKV = (int)a.dims[3];
  g.D = (int)a.dims[4];
  g.G = g.NKV > 0 ? g.NQ / g.NKV : 0;
  const long long bh = (long long)g.B * g.NQ;
  int S = s_req < g.L ? s_req : g.L;
  if (S > SPLIT_CAP) S = SPLIT_CAP;
  if (S < 1) S = 1;
  while (S > 1 && WS_HEADER + align256(bh * S * 8) + align256(bh * S * g.D * 4) + bh * g.L * 4 > a.workspace_bytes)
    --S;
  g.S = S;
  char* ws = (char*)a.workspace + WS_HEADER;
  g.ml = reinterpret_cast<float2*>(ws);
  g.acc = reinterpret_cast<float*>(ws + align256(bh * S * 8));
  g.scores = reinterpret_cast<float*>(ws + align256(bh * S * 8) + align256(bh * S * g.D * 4));
  return g;
}

// One (sequence b, KV head kvh, chunk s) work unit: keys [j0, j1).
struct Unit {
  int b, kvh, s, j0, j1;
  bool direct;  // S == 1: write out directly
  float qscale;
};

// ---- register path: HB query heads h0 .. h0+HB-1 of KV head u.kvh, D <= 256 ---------------------
template <int HB, int V, int U>
__device__ __forceinline__ void attend(const ThriveCudaArgs& a, const Geo& g, const Unit& u, int h0, float* sm) {
  constexpr int NC = 8 / V;  // V-chunks per lane (8 elements per lane: D <= 32 * 8)
  const int D = g.D;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const int need = (D + V - 1) / V;
  int LPK = 1;  // lanes per key
  while (LPK < need && LPK < 32) LPK <<= 1;
  const int KPW = 32 / LPK;  // keys per warp step
  const int sub = lane & (LPK - 1), kk = lane / LPK;
  const int nslots = NW * KPW;

  const bf16_t* q = (const bf16_t*)a.tensors[0];
  const size_t rs = (size_t)g.NKV * D;  // elements from key j to key j+1
  const bf16_t* kb0 = (const bf16_t*)a.tensors[1] + ((size_t)u.b * g.L * g.NKV + u.kvh) * D;
  const bf16_t* vb0 = (const bf16_t*)a.tensors[2] + ((size_t)u.b * g.L * g.NKV + u.kvh) * D;

  float qf[HB][NC][V], acc[HB][NC][V], m[HB], l[HB];
#pragma unroll
  for (int h = 0; h < HB; ++h) {
    m[h] = NEG_INF;
    l[h] = 0.0f;
    const bf16_t* qh = q + ((size_t)u.b * g.NQ + h0 + h) * D;
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int d0 = (c * LPK + sub) * V;
      Bf<V> t;
      if (d0 < D) t = bf_ldg<V>(qh + d0);
      else bf_zero(t);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        qf[h][c][e] = bf_get(t, e) * u.qscale;
        acc[h][c][e] = 0.0f;
      }
    }
  }

  // K/V rows of the keys jw + kk + i * nslots, i < U (zeros where past u.j1 or d0 >= D)
  auto load_keys = [&](int jw, Bf<V> (&kx)[U][NC], Bf<V> (&vx)[U][NC], bool (&ok)[U]) {
#pragma unroll
    for (int i = 0; i < U; ++i) {
      const int j = jw + kk + i * nslots;
      ok[i] = j < u.j1;
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const int d0 = (c * LPK + sub) * V;
        if (ok[i] && d0 < D) {
          kx[i][c] = bf_ldg<V>(kb0 + (size_t)j * rs + d0);
          vx[i][c] = bf_ldg<V>(vb0 + (size_t)j * rs + d0);
        } else {
          bf_zero(kx[i][c]);
          bf_zero(vx[i][c]);
        }
      }
    }
  };

  // warp-uniform loop; the warp's keys this step: jw + kk + i * nslots, i < U
  Bf<V> kb[U][NC], vb[U][NC];
  bool valid[U];
#if PREFETCH
  if (u.j0 + w * KPW < u.j1) load_keys(u.j0 + w * KPW, kb, vb, valid);
#endif
  for (int jw = u.j0 + w * KPW; jw < u.j1; jw += U * nslots) {
#if PREFETCH
    // the next step's rows are requested before this step's math (register double buffer)
    Bf<V> kn[U][NC], vn[U][NC];
    bool valid_n[U];
    load_keys(jw + U * nslots, kn, vn, valid_n);
#else
    load_keys(jw, kb, vb, valid);
#endif
    float sc[U][HB];
#pragma unroll
    for (int i = 0; i < U; ++i) {
#pragma unroll
      for (int h = 0; h < HB; ++h) {
        float dot = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; ++c)
#pragma unroll
          for (int e = 0; e < V; ++e) dot = fmaf(qf[h][c][e], bf_get(kb[i][c], e), dot);
        for (int off = LPK >> 1; off > 0; off >>= 1) dot += __shfl_xor_sync(FULL, dot, off);
        sc[i][h] = valid[i] ? dot : NEG_INF;
      }
    }
#pragma unroll
    for (int h = 0; h < HB; ++h) {
      float mx = m[h];
#pragma unroll
      for (int i = 0; i < U; ++i) mx = fmaxf(mx, sc[i][h]);
      if (mx == NEG_INF) continue;  // nothing valid yet for this lane group
      const float corr = exp2f(m[h] - mx);
      float p[U];
      float ps = 0.0f;
#pragma unroll
      for (int i = 0; i < U; ++i) {
        p[i] = exp2f(sc[i][h] - mx);
        ps += p[i];
      }
      l[h] = l[h] * corr + ps;
      m[h] = mx;
#pragma unroll
      for (int c = 0; c < NC; ++c)
#pragma unroll
        for (int e = 0; e < V; ++e) {
          float t = acc[h][c][e] * corr;
#pragma unroll
          for (int i = 0; i < U; ++i) t = fmaf(p[i], bf_get(vb[i][c], e), t);
          acc[h][c][e] = t;
        }
    }
#if PREFETCH
#pragma unroll
    for (int i = 0; i < U; ++i) {
      valid[i] = valid_n[i];
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        kb[i][c] = kn[i][c];
        vb[i][c] = vn[i][c];
      }
    }
#endif
  }

  // merge the key slots of a warp (lanes differing in kk), fixed xor order
  for (int off = LPK; off < 32; off <<= 1) {
#pragma unroll
    for (int h = 0; h < HB; ++h) {
      const float m2 = __shfl_xor_sync(FULL, m[h], off);
      const float l2 = __shfl_xor_sync(FULL, l[h], off);
      const float M = fmaxf(m[h], m2);
      const float a1 = M == NEG_INF ? 0.0f : exp2f(m[h] - M);
      const float a2 = M == NEG_INF ? 0.0f : exp2f(m2 - M);
      l[h] = l[h] * a1 + l2 * a2;
#pragma unroll
      for (int c = 0; c < NC; ++c)
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const float o = __shfl_xor_sync(FULL, acc[h][c][e], off);
          acc[h][c][e] = acc[h][c][e] * a1 + o * a2;
        }
      m[h] = M;
    }
  }

  // merge across warps: tree through shared memory, slot stride HB * (D + 2) floats
  const int hs = D + 2;
  for (int half = NW / 2; half >= 1; half >>= 1) {
    if (w >= half && w < 2 * half && kk == 0) {
      float* base = sm + (size_t)(w - half) * HB * hs;
#pragma unroll
      for (int h = 0; h < HB; ++h) {
        float* sh = base + h * hs;
        if (sub == 0) {
          sh[0] = m[h];
          sh[1] = l[h];
        }
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          const int d0 = (c * LPK + sub) * V;
          if (d0 < D)
#pragma unroll
            for (int e = 0; e < V; ++e) sh[2 + d0 + e] = acc[h][c][e];
        }
      }
    }
    __syncthreads();
    if (w < half) {
      const float* base = sm + (size_t)w * HB * hs;
#pragma unroll
      for (int h = 0; h < HB; ++h) {
        const float* sh = base + h * hs;
        const float m2 = sh[0], l2 = sh[1];
        const float M = fmaxf(m[h], m2);
        const float a1 = M == NEG_INF ? 0.0f : exp2f(m[h] - M);
        const float a2 = M == NEG_INF ? 0.0f : exp2f(m2 - M);
        l[h] = l[h] * a1 + l2 * a2;
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          const int d0 = (c * LPK + sub) * V;
          if (d0 < D)
#pragma unroll
            for (int e = 0; e < V; ++e) acc[h][c][e] = acc[h][c][e] * a1 + sh[2 + d0 + e] * a2;
        }
        m[h] = M;
      }
    }
    __syncthreads();
  }

  if (w != 0 || kk != 0) return;
#pragma unroll
  for (int h = 0; h < HB; ++h) {
    const size_t bh = (size_t)u.b * g.NQ + h0 + h;
    const float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int d0 = (c * LPK + sub) * V;
      if (d0 >= D) continue;
      float o[V];
      if (u.direct) {
#pragma unroll
        for (int e = 0; e < V; ++e) o[e] = acc[h][c][e] * inv;
        bf_store<V>((bf16_t*)a.tensors[4] + bh * D + d0, o);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) o[e] = acc[h][c][e];
        f32_store<V>(g.acc + (bh * g.S + u.s) * D + d0, o);
      }
    }
    if (!u.direct && sub == 0) g.ml[bh * g.S + u.s] = make_float2(m[h], l[h]);
  }
}

// ---- general path (D > 256): one head, scores through the workspace ------------------------------
__device__ __forceinline__ float blk_max(float v, float* red) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, off));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = red[0];
  for (int i = 1; i < NW; ++i) r = fmaxf(r, red[i]);
  __syncthreads();
  return r;
}
__device__ __forceinline__ float blk_sum(float v, float* red) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(FULL, v, off);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = 0.0f;
  for (int i = 0; i < NW; ++i) r += red[i];
  __syncthreads();
  return r;
}
__device__ __forceinline__ void attend_general(const ThriveCudaArgs& a, const Geo& g, const Unit& u, int h, float* red) {
  const int D = g.D;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const size_t bh = (size_t)u.b * g.NQ + h;
  const size_t rs = (size_t)g.NKV * D;
  const bf16_t* qh = (const bf16_t*)a.tensors[0] + bh * D;
  const bf16_t* kb0 = (const bf16_t*)a.tensors[1] + ((size_t)u.b * g.L * g.NKV + u.kvh) * D;
  const bf16_t* vb0 = (const bf16_t*)a.tensors[2] + ((size_t)u.b * g.L * g.NKV + u.kvh) * D;
  float* sc = g.scores + bh * g.L;
  for (int j = u.j0 + w; j < u.j1; j += NW) {  // warp-uniform
    float dot = 0.0f;
    for (int d = lane; d < D; d += 32)
      dot = fmaf(thrive_bf16_to_f32(__ldg(qh + d)), thrive_bf16_to_f32(__ldg(kb0 + j * rs + d)), dot);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(FULL, dot, off);
    if (lane == 0) sc[j] = dot * u.qscale;
  }
  __syncthreads();
  float mx = NEG_INF;
  for (int j = u.j0 + threadIdx.x; j < u.j1; j += THREADS) mx = fmaxf(mx, sc[j]);
  mx = blk_max(mx, red);
  float sum = 0.0f;
  if (mx != NEG_INF)
    for (int j = u.j0 + threadIdx.x; j < u.j1; j += THREADS) {
      const float p = exp2f(sc[j] - mx);
      sc[j] = p;
      sum += p;
    }
  sum = blk_sum(sum, red);  // its barriers also publish the p values
  for (int d = threadIdx.x; d < D; d += THREADS) {
    float acc = 0.0f;
    const bf16_t* vp = vb0 + (size_t)u.j0 * rs + d;
    for (int j = u.j0; j < u.j1; ++j, vp += rs) acc = fmaf(sc[j], thrive_bf16_to_f32(__ldg(vp)), acc);
    if (u.direct)
      ((bf16_t*)a.tensors[4])[bh * D + d] = thrive_f32_to_bf16(sum > 0.0f ? acc / sum : 0.0f);
    else
      g.acc[(bh * g.S + u.s) * D + d] = acc;
  }
  if (!u.direct && threadIdx.x == 0) g.ml[bh * g.S + u.s] = make_float2(mx, sum);
  __syncthreads();
}

template <int HB>
__device__ __forceinline__ void attend_heads(const ThriveCudaArgs& a, const Geo& g, const Unit& u, int h0, bool vec,
                                             float* sm) {
#if VEC > 1
  if (vec) {
    attend<HB, VEC, KEYS_PER_ITER>(a, g, u, h0, sm);
    return;
  }
#else
  (void)vec;
#endif
  attend<HB, 1, 1>(a, g, u, h0, sm);  // one key per step: the kernel's register count is the largest path's
}

// The work unit of this block: (sequence, KV head, chunk) and its first query head / head count.
__device__ __forceinline__ bool make_unit(const ThriveCudaArgs& args, const Geo& g, Unit& u, int& h_first, int& nh) {
  if (g.B < 1 || g.NQ < 1 || g.NKV < 1 || g.D < 1 || g.G < 1) return false;
  const int units = GROUP_PACK ? g.NKV : g.NQ;
  const int b = blockIdx.x / units, un = blockIdx.x % units;
  if (b >= g.B || (int)blockIdx.y >= g.S) return false;
  u.b = b;
  u.s = blockIdx.y;
  int n = ((const int*)args.tensors[3])[b];
  n = n < 0 ? 0 : (n > g.L ? g.L : n);
  const int cl = (n + g.S - 1) / g.S;
  u.j0 = min(n, u.s * cl);
  u.j1 = min(n, u.j0 + cl);
  u.direct = g.S == 1;
  u.qscale = (float)args.scalars[0] * LOG2E;
#if GROUP_PACK
  u.kvh = un;
  h_first = un * g.G;
  nh = g.G;
#else
  u.kvh = un / g.G;
  h_first = un;
  nh = 1;
#endif
  return true;
}

__device__ __forceinline__ void general_block(const ThriveCudaArgs& args, const Geo& g) {
  __shared__ float red[NW];
  Unit u;
  int h_first, nh;
  if (!make_unit(args, g, u, h_first, nh)) return;
  for (int h = h_first; h < h_first + nh; ++h) attend_general(args, g, u, h, red);
}

extern "C" __global__ void __launch_bounds__(THREADS, MINB_EFF) thrive_gqa_decode_attention(ThriveCudaArgs args) {
  extern __shared__ __align__(16) float sm[];  // (NW/2) * HB * (D + 2) floats
  const Geo g = geometry(args, (int)gridDim.y);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *(int*)args.workspace = g.S;
  if (args.dims[4] > 256) {  // general path
    general_block(args, g);
    return;
  }
  Unit u;
  int h_first, nh;
  if (!make_unit(args, g, u, h_first, nh)) return;
  const unsigned long long mis = ((unsigned long long)args.tensors[0] | (unsigned long long)args.tensors[1] |
                                  (unsigned long long)args.tensors[2] | (unsigned long long)args.tensors[4]) &
                                 (2 * VEC - 1);
  const bool vec = VEC > 1 && g.D % VEC == 0 && mis == 0;
#if GROUP_PACK
  const int hb = (g.G % PACK_MAX == 0) ? PACK_MAX : (g.G % 4 == 0 && PACK_MAX > 4) ? 4 : (g.G % 2 == 0) ? 2 : 1;
  for (int hp = 0; hp < nh; hp += hb) {
#if PACK_MAX >= 8
    if (hb == 8) { attend_heads<8>(args, g, u, h_first + hp, vec, sm); continue; }
#endif
#if PACK_MAX >= 4
    if (hb == 4) { attend_heads<4>(args, g, u, h_first + hp, vec, sm); continue; }
#endif
    if (hb == 2) attend_heads<2>(args, g, u, h_first + hp, vec, sm);
    else attend_heads<1>(args, g, u, h_first + hp, vec, sm);
  }
#else
  (void)nh;
  attend_heads<1>(args, g, u, h_first, vec, sm);
#endif
}

// Merge the S chunk partials of one (b, h) in chunk order: out = sum_s w_s acc_s / sum_s w_s l_s,
// w_s = 2^(m_s - M). Not launched when the plan's split is 1 (grid 0); a no-op when the effective
// S is 1 (L = 1: the first launch wrote the output).
extern "C" __global__ void __launch_bounds__(128) thrive_gqa_decode_attention_combine(ThriveCudaArgs args) {
  __shared__ float wt[SPLIT_CAP];
  __shared__ float inv_l;
  const Geo g = geometry(args, *(const int*)args.workspace);
  if (g.S <= 1) return;
  const size_t bh = blockIdx.x;
  if (bh >= (size_t)g.B * g.NQ) return;
  const float2* ml = g.ml + bh * g.S;
  if (threadIdx.x < 32) {
    // warp 0: lane i holds chunks i and i + 32 (S <= 64), all loads in flight at once; max and
    // normalizer by xor butterflies (a fixed order: deterministic)
    const int i0 = threadIdx.x, i1 = threadIdx.x + 32;
    const float2 p0 = i0 < g.S ? ml[i0] : make_float2(NEG_INF, 0.0f);
    const float2 p1 = i1 < g.S ? ml[i1] : make_float2(NEG_INF, 0.0f);
    float M = fmaxf(p0.x, p1.x);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) M = fmaxf(M, __shfl_xor_sync(FULL, M, off));
    const float w0 = (p0.x == NEG_INF || M == NEG_INF) ? 0.0f : exp2f(p0.x - M);
    const float w1 = (p1.x == NEG_INF || M == NEG_INF) ? 0.0f : exp2f(p1.x - M);
    if (i0 < g.S) wt[i0] = w0;
    if (i1 < g.S) wt[i1] = w1;
    float lsum = p0.y * w0 + p1.y * w1;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) lsum += __shfl_xor_sync(FULL, lsum, off);
    if (threadIdx.x == 0) inv_l = lsum > 0.0f ? 1.0f / lsum : 0.0f;
  }
  __syncthreads();
  const float* acc = g.acc + bh * g.S * g.D;
  bf16_t* out = (bf16_t*)args.tensors[4] + bh * g.D;
  // every chunk wrote its acc (0 when empty), so no branch: 16 independent loads in flight
  for (int d = threadIdx.x; d < g.D; d += 128) {
    float o = 0.0f;
#pragma unroll 16
    for (int i = 0; i < g.S; ++i) o = fmaf(wt[i], acc[(size_t)i * g.D + d], o);
    out[d] = thrive_f32_to_bf16(o * inv_l);
  }
}
