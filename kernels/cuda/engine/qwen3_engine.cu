// The Qwen3 engine's own kernels (the stages that are not THRIVE ops): token embedding, plain
// RMSNorm (the first layer's input norm), q/k per-head RMSNorm with the split of the fused QKV
// projection, KV-cache write, causal softmax of prefill attention scores, row gather and greedy
// argmax. Each entry is launched by src/model/cuda_engine.cpp with its own launch plan; bf16 is
// stored as unsigned short and converted with thrive_cuda.cuh's round-to-nearest-even helpers.
// RMSNorm as in transformers' Qwen3RMSNorm: x * rsqrt(mean(x^2) + eps) * w, statistics in f32.
// @thrive op: engine
// @thrive backend: cuda
// @thrive entry: engine_embed
// @thrive launch: entry=engine_embed block=256 grid=T,1,1 smem=0
// (the engine builds each entry's own launch plan: src/model/cuda_engine.cpp, kEngineKernels)
#include "thrive_cuda.cuh"

typedef unsigned short bf16_t;

// Sum of `v` over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
__device__ __forceinline__ float engine_block_sum(float v) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  float t = 0.f;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += part[w];
  return t;
}

// Programmatic dependent launch (PTX ISA 7.8+, sm_90; CUDA Programming Guide, "Programmatic
// Dependent Launch and Synchronization"). An engine kernel launched with the driver's
// programmatic-stream-serialization attribute may start while the kernel before it is still
// running: it does only work that depends on no earlier kernel (the weight loads) before
// engine_pdl_wait(), which returns once the previous grid has completed and its memory is
// visible. engine_pdl_trigger() lets the next kernel's blocks be scheduled as this grid's blocks
// free their SM slots. Both are no-ops on a normal launch and below sm_90.
__device__ __forceinline__ void engine_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void engine_pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// out[t, :] = table[ids[t], :]. tensors: ids i32 [T], table bf16 [V, H], out bf16 [T, H];
// dims: T, H, V. An id outside [0, V) writes zeros (the host checks ids before upload).
extern "C" __global__ void engine_embed(ThriveCudaArgs a) {
  const long long t = blockIdx.x, H = a.dims[1], V = a.dims[2];
  const int id = ((const int*)a.tensors[0])[t];
  const bf16_t* src = (const bf16_t*)a.tensors[1] + (long long)id * H;
  bf16_t* dst = (bf16_t*)a.tensors[2] + t * H;
  const bool ok = id >= 0 && id < V;
  for (long long i = threadIdx.x; i < H; i += blockDim.x) dst[i] = ok ? src[i] : (bf16_t)0;
}

// out[r, :] = rmsnorm(x[r, :]) * w. tensors: x bf16 [R, N], w bf16 [N], out bf16 [R, N];
// dims: R, N; scalars: eps. One block per row.
extern "C" __global__ void engine_rmsnorm(ThriveCudaArgs a) {
  engine_pdl_trigger();
  engine_pdl_wait();
  const long long r = blockIdx.x, N = a.dims[1];
  const bf16_t* x = (const bf16_t*)a.tensors[0] + r * N;
  const bf16_t* w = (const bf16_t*)a.tensors[1];
  bf16_t* out = (bf16_t*)a.tensors[2] + r * N;
  float ss = 0.f;
  for (long long i = threadIdx.x; i < N; i += blockDim.x) {
    const float v = thrive_bf16_to_f32(x[i]);
    ss += v * v;
  }
  const float inv = rsqrtf(engine_block_sum(ss) / (float)N + (float)a.scalars[0]);
  for (long long i = threadIdx.x; i < N; i += blockDim.x)
    out[i] = thrive_f32_to_bf16(thrive_bf16_to_f32(x[i]) * inv * thrive_bf16_to_f32(w[i]));
}

// The fused QKV projection [T, (NQ + 2 NKV) * D] split into q [T, NQ, D] (RMSNorm with q_w per
// head), k [T, NKV, D] (RMSNorm with k_w) and v [T, NKV, D] (copied). One warp per (token, head);
// each lane moves 4 contiguous bf16 (8-byte accesses) when D % 4 == 0, else single elements.
// tensors: qkv, q_w [D], k_w [D], q, k, v; dims: T, NQ, NKV, D; scalars: eps.
extern "C" __global__ void engine_qk_norm_split(ThriveCudaArgs a) {
  const long long T = a.dims[0], NQ = a.dims[1], NKV = a.dims[2], D = a.dims[3];
  const long long heads = NQ + 2 * NKV;
  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= T * heads) return;
  const long long t = row / heads, h = row % heads;
  const bf16_t* src = (const bf16_t*)a.tensors[0] + t * heads * D + h * D;
  const bool vec = (D & 3) == 0;
  const int step = vec ? 4 : 1;
  if (h >= NQ + NKV) {
    bf16_t* v = (bf16_t*)a.tensors[5] + (t * NKV + (h - NQ - NKV)) * D;
    if (vec)
      for (long long i = lane * 4; i < D; i += 128) *(uint2*)(v + i) = *(const uint2*)(src + i);
    else
      for (long long i = lane; i < D; i += 32) v[i] = src[i];
    return;
  }
  const bool is_q = h < NQ;
  const bf16_t* w = (const bf16_t*)a.tensors[is_q ? 1 : 2];
  bf16_t* dst = is_q ? (bf16_t*)a.tensors[3] + (t * NQ + h) * D : (bf16_t*)a.tensors[4] + (t * NKV + h - NQ) * D;
  float ss = 0.f;
  for (long long i = lane * step; i < D; i += 32 * step)
    for (int j = 0; j < step; ++j) {
      const float v = thrive_bf16_to_f32(src[i + j]);
      ss += v * v;
    }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrtf(ss / (float)D + (float)a.scalars[0]);
  for (long long i = lane * step; i < D; i += 32 * step) {
    if (vec) {
      const uint2 x = *(const uint2*)(src + i), g = *(const uint2*)(w + i);
      const bf16_t* xs = (const bf16_t*)&x;
      const bf16_t* gs = (const bf16_t*)&g;
      uint2 out;
      bf16_t* os = (bf16_t*)&out;
      for (int j = 0; j < 4; ++j) os[j] = thrive_f32_to_bf16(thrive_bf16_to_f32(xs[j]) * inv * thrive_bf16_to_f32(gs[j]));
      *(uint2*)(dst + i) = out;
    } else {
      dst[i] = thrive_f32_to_bf16(thrive_bf16_to_f32(src[i]) * inv * thrive_bf16_to_f32(w[i]));
    }
  }
}

// k/v rows of T tokens into the contiguous per-sequence caches [B, L, NKV, D] at (seq[t], pos[t]).
// tensors: k [T, NKV, D], v [T, NKV, D], positions i64 [T], seq i32 [T], k_cache, v_cache;
// dims: T, NKV, D, L. Positions outside [0, L) are skipped (the host bounds them).
extern "C" __global__ void engine_kv_write(ThriveCudaArgs a) {
  const long long t = blockIdx.x, NKV = a.dims[1], D = a.dims[2], L = a.dims[3];
  const long long pos = ((const long long*)a.tensors[2])[t];
  const long long seq = ((const int*)a.tensors[3])[t];
  if (pos < 0 || pos >= L) return;
  const long long n = NKV * D;
  const bf16_t* k = (const bf16_t*)a.tensors[0] + t * n;
  const bf16_t* v = (const bf16_t*)a.tensors[1] + t * n;
  bf16_t* kc = (bf16_t*)a.tensors[4] + (seq * L + pos) * n;
  bf16_t* vc = (bf16_t*)a.tensors[5] + (seq * L + pos) * n;
  if ((n & 7) == 0) {  // rows of n bf16 start 16-byte aligned: 16-byte accesses
    for (long long i = threadIdx.x * 8; i < n; i += blockDim.x * 8) {
      *(uint4*)(kc + i) = *(const uint4*)(k + i);
      *(uint4*)(vc + i) = *(const uint4*)(v + i);
    }
    return;
  }
  for (long long i = threadIdx.x; i < n; i += blockDim.x) {
    kc[i] = k[i];
    vc[i] = v[i];
  }
}

// q/k per-head RMSNorm, neox RoPE and the KV-cache write in one pass over the fused QKV
// projection (the compilation specialist's fusion of qk_norm, rope and kv_cache_write): one warp
// per (token, q or k head); a k-head warp also copies the matching v head into the cache. The
// normalized values are rounded to bf16 before the rotation, as the unfused stages round them
// between kernels, so both paths give the same bits. Rotation as the `rope` op: for i < D/2,
// out[i] = x[i] c - x[i + D/2] s, out[i + D/2] = x[i + D/2] c + x[i] s, with c = cs[pos, i],
// s = cs[pos, D/2 + i] (Su et al. 2021, the GPT-NeoX half-split layout transformers uses).
// tensors: qkv bf16 [T, (NQ + 2 NKV) D], qk_w bf16 [2 D] (q_norm | k_norm), positions i64 [T],
// seq i32 [T], cos_sin f32 [L, D], q bf16 [T, NQ, D], k_cache, v_cache bf16 [B, L, NKV, D];
// dims: T, NQ, NKV, D, L; scalars: eps. Positions outside [0, L) write nothing.
extern "C" __global__ void engine_qk_norm_rope_kv(ThriveCudaArgs a) {
  engine_pdl_trigger();
  engine_pdl_wait();
  const long long T = a.dims[0], NQ = a.dims[1], NKV = a.dims[2], D = a.dims[3], L = a.dims[4];
  const long long heads = NQ + NKV;
  const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= T * heads) return;
  const long long t = row / heads, h = row % heads;
  const long long pos = ((const long long*)a.tensors[2])[t];
  if (pos < 0 || pos >= L) return;
  const bf16_t* src = (const bf16_t*)a.tensors[0] + t * (NQ + 2 * NKV) * D + h * D;
  const bool is_q = h < NQ;
  const bf16_t* w = (const bf16_t*)a.tensors[1] + (is_q ? 0 : D);
  float ss = 0.f;
  for (long long i = lane; i < D; i += 32) {
    const float v = thrive_bf16_to_f32(src[i]);
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrtf(ss / (float)D + (float)a.scalars[0]);
  const long long half = D / 2;
  const float* cs = (const float*)a.tensors[4] + pos * D;
  bf16_t* dst;
  if (is_q) {
    dst = (bf16_t*)a.tensors[5] + (t * NQ + h) * D;
  } else {
    const long long seq = ((const int*)a.tensors[3])[t];
    const long long off = ((seq * L + pos) * NKV + (h - NQ)) * D;
    dst = (bf16_t*)a.tensors[6] + off;
    const bf16_t* vs = src + NKV * D;  // v head h - NQ sits NKV heads after k head h - NQ
    bf16_t* vd = (bf16_t*)a.tensors[7] + off;
    for (long long i = lane; i < D; i += 32) vd[i] = vs[i];
  }
  for (long long i = lane; i < half; i += 32) {
    const float x1 = thrive_bf16_to_f32(thrive_f32_to_bf16(thrive_bf16_to_f32(src[i]) * inv * thrive_bf16_to_f32(w[i])));
    const float x2 = thrive_bf16_to_f32(
        thrive_f32_to_bf16(thrive_bf16_to_f32(src[i + half]) * inv * thrive_bf16_to_f32(w[i + half])));
    const float c = cs[i], s = cs[half + i];
    dst[i] = thrive_f32_to_bf16(x1 * c - x2 * s);
    dst[i + half] = thrive_f32_to_bf16(x2 * c + x1 * s);
  }
}

// ---- Tensor-core helpers (PTX ISA 8.x, sm_80+: mma.sync m16n8k16 bf16 with f32 accumulation,
// ldmatrix). Fragment layouts are the PTX ISA's "Matrix Fragments for mma.m16n8k16": with
// g = lane / 4 and c = lane % 4, A (16x16, row) holds rows g and g+8 at columns 2c, 2c+1 and
// 2c+8, 2c+9; B (16x8, col) holds column g at rows 2c, 2c+1 and 2c+8, 2c+9; C (16x8, f32) holds
// rows g and g+8 at columns 2c, 2c+1.
__device__ __forceinline__ unsigned engine_pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ void engine_mma_bf16(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ unsigned engine_smem_u32(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}
// Four 8x8 b16 matrices, transposed: lane i gives the row address of matrix i / 8, row i % 8.
__device__ __forceinline__ void engine_ldmatrix_x4_trans(unsigned r[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Causal prefill attention in one kernel (FlashAttention-2, Dao 2023: tiles of queries against
// tiles of keys with an online softmax, the scores never leave registers), GQA by reading the
// query head's KV group, bf16 tensor cores (mma.sync m16n8k16) with f32 accumulation. A block
// of 4 warps owns 64 query rows of one (sequence, query head); each warp 16 rows. Key/value
// tiles of 64 rows are staged in shared memory with rows padded to D + 8 elements, which makes
// the B-fragment reads and ldmatrix row reads bank-conflict free. Query tiles are scheduled
// longest first. Row i of sequence b attends to keys 0..i of the same sequence, so right padding
// is exact for the real rows (pad rows compute finite values that no real token reads).
// tensors: q bf16 [B*P, NQ, D], k_cache, v_cache bf16 [B, L, NKV, D] (prefill keys at positions
// 0..P-1), out bf16 [B*P, NQ, D]; dims: B, P, NQ, NKV, D, L; scalars: softmax scale.
// Launch: block 128, grid (cdiv(P, 64), NQ, B).
template <int D>
__device__ __forceinline__ void engine_flash_attention(const ThriveCudaArgs& a) {
  constexpr int BQ = 64, BK = 64, LD = D + 8, KC = D / 16, DT = D / 8;
  __shared__ __align__(16) bf16_t ks[BK * LD];
  __shared__ __align__(16) bf16_t vs[BK * LD];
  const long long P = a.dims[1], NQ = a.dims[2], NKV = a.dims[3], L = a.dims[5];
  const long long qt = (long long)gridDim.x - 1 - blockIdx.x;
  const long long hq = blockIdx.y, b = blockIdx.z, g = hq / (NQ / NKV);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;
  const long long r0 = qt * BQ + warp * 16 + gr, r1 = r0 + 8;
  const bf16_t* q = (const bf16_t*)a.tensors[0];
  unsigned qf[KC][4];
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    const int c = kc * 16 + 2 * tq;
    const bf16_t* q0 = q + ((b * P + r0) * NQ + hq) * D + c;
    const bf16_t* q1 = q + ((b * P + r1) * NQ + hq) * D + c;
    qf[kc][0] = r0 < P ? *(const unsigned*)q0 : 0u;
    qf[kc][1] = r1 < P ? *(const unsigned*)q1 : 0u;
    qf[kc][2] = r0 < P ? *(const unsigned*)(q0 + 8) : 0u;
    qf[kc][3] = r1 < P ? *(const unsigned*)(q1 + 8) : 0u;
  }
  float o[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;
  const float neg_inf = -__int_as_float(0x7f800000);
  float m0 = neg_inf, m1 = neg_inf, l0 = 0.f, l1 = 0.f;
  const float sl2 = (float)a.scalars[0] * 1.4426950408889634f;  // scale * log2(e): exp2 below
  const long long kend = P < (qt + 1) * BQ ? P : (qt + 1) * BQ;  // keys this tile's rows need
  const long long row_stride = NKV * D;
  const bf16_t* kb = (const bf16_t*)a.tensors[1] + (b * L * NKV + g) * D;
  const bf16_t* vb = (const bf16_t*)a.tensors[2] + (b * L * NKV + g) * D;
  const long long warp_first = qt * BQ + warp * 16;
  for (long long k0 = 0; k0 < kend; k0 += BK) {
    __syncthreads();
    for (int c = threadIdx.x; c < BK * (D / 8); c += blockDim.x) {
      const int r = c / (D / 8), col = (c % (D / 8)) * 8;
      const long long j = k0 + r;
      uint4 kv, vv;
      kv.x = kv.y = kv.z = kv.w = 0u;
      vv = kv;
      if (j < kend) {
        kv = *(const uint4*)(kb + j * row_stride + col);
        vv = *(const uint4*)(vb + j * row_stride + col);
      }
      *(uint4*)(ks + r * LD + col) = kv;
      *(uint4*)(vs + r * LD + col) = vv;
    }
    __syncthreads();
    if (k0 > warp_first + 15) continue;  // every key of this tile is after this warp's rows
    float s[BK / 8][4];
#pragma unroll
    for (int nt = 0; nt < BK / 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
      const bf16_t* kr = ks + (nt * 8 + gr) * LD + 2 * tq;
#pragma unroll
      for (int kc = 0; kc < KC; ++kc)
        engine_mma_bf16(s[nt], qf[kc], *(const unsigned*)(kr + kc * 16), *(const unsigned*)(kr + kc * 16 + 8));
    }
    if (k0 + BK - 1 > warp_first) {  // the causal diagonal crosses this tile
#pragma unroll
      for (int nt = 0; nt < BK / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const long long j = k0 + nt * 8 + 2 * tq + e;
          if (j > r0) s[nt][e] = neg_inf;
          if (j > r1) s[nt][2 + e] = neg_inf;
        }
    }
    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int nt = 0; nt < BK / 8; ++nt) {
      mx0 = fmaxf(mx0, fmaxf(s[nt][0], s[nt][1]));
      mx1 = fmaxf(mx1, fmaxf(s[nt][2], s[nt][3]));
    }
#pragma unroll
    for (int o2 = 1; o2 <= 2; o2 <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o2));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o2));
    }
    // Every row has key 0 in the first tile and its own position in the last one it visits, so
    // mx0/mx1 are finite here; exp2(-inf) = 0 rescales the empty start.
    const float al0 = exp2f((m0 - mx0) * sl2), al1 = exp2f((m1 - mx1) * sl2);
    m0 = mx0, m1 = mx1;
    float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < BK / 8; ++nt) {
      s[nt][0] = exp2f((s[nt][0] - m0) * sl2);
      s[nt][1] = exp2f((s[nt][1] - m0) * sl2);
      s[nt][2] = exp2f((s[nt][2] - m1) * sl2);
      s[nt][3] = exp2f((s[nt][3] - m1) * sl2);
      rs0 += s[nt][0] + s[nt][1];
      rs1 += s[nt][2] + s[nt][3];
    }
    l0 = l0 * al0 + rs0;
    l1 = l1 * al1 + rs1;
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      o[dt][0] *= al0, o[dt][1] *= al0;
      o[dt][2] *= al1, o[dt][3] *= al1;
    }
#pragma unroll
    for (int kc = 0; kc < BK / 16; ++kc) {
      const unsigned pa[4] = {engine_pack_bf16x2(s[2 * kc][0], s[2 * kc][1]),
                              engine_pack_bf16x2(s[2 * kc][2], s[2 * kc][3]),
                              engine_pack_bf16x2(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                              engine_pack_bf16x2(s[2 * kc + 1][2], s[2 * kc + 1][3])};
      const bf16_t* vrow = vs + (kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8;
#pragma unroll
      for (int d2 = 0; d2 < D / 16; ++d2) {
        unsigned bv[4];
        engine_ldmatrix_x4_trans(bv, engine_smem_u32(vrow + d2 * 16));
        engine_mma_bf16(o[2 * d2], pa, bv[0], bv[1]);
        engine_mma_bf16(o[2 * d2 + 1], pa, bv[2], bv[3]);
      }
    }
  }
#pragma unroll
  for (int o2 = 1; o2 <= 2; o2 <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, o2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, o2);
  }
  const float inv0 = 1.f / l0, inv1 = 1.f / l1;
  bf16_t* out = (bf16_t*)a.tensors[3];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) {
    const int col = dt * 8 + 2 * tq;
    if (r0 < P) *(unsigned*)(out + ((b * P + r0) * NQ + hq) * D + col) = engine_pack_bf16x2(o[dt][0] * inv0, o[dt][1] * inv0);
    if (r1 < P) *(unsigned*)(out + ((b * P + r1) * NQ + hq) * D + col) = engine_pack_bf16x2(o[dt][2] * inv1, o[dt][3] * inv1);
  }
}
// One entry per supported head dimension (the host compiles the one the model needs).
extern "C" __global__ void __launch_bounds__(128) engine_flash_attention_d16(ThriveCudaArgs a) { engine_flash_attention<16>(a); }
extern "C" __global__ void __launch_bounds__(128) engine_flash_attention_d32(ThriveCudaArgs a) { engine_flash_attention<32>(a); }
extern "C" __global__ void __launch_bounds__(128) engine_flash_attention_d64(ThriveCudaArgs a) { engine_flash_attention<64>(a); }
extern "C" __global__ void __launch_bounds__(128) engine_flash_attention_d128(ThriveCudaArgs a) { engine_flash_attention<128>(a); }

// ---- GEMV for decode at small batch: y[t, n] = sum_k x[t, k] W[n, k] for T <= 4 tokens, f32
// accumulation, bf16 out. One warp per output row; each lane streams 16-byte pieces of the
// weight row (L1 bypassed: every weight byte is read once per step) and the matching x pieces
// (tiny, cached). Decode at batch 1 reads each weight once per step, so this path is bound by
// HBM bandwidth; cuBLASLt's M=1 kernels reach 1-2.5 TB/s on the H200 at these shapes (stage
// timings of 2026-11-30), below the 4.2 TB/s copy ceiling. K % 8 == 0 and 16-byte aligned rows
// (the host checks; cuBLASLt runs otherwise).
__device__ __forceinline__ uint4 engine_ld_stream(const void* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
__device__ __forceinline__ float engine_dot2(unsigned w, unsigned x) {
  return __uint_as_float(w << 16) * __uint_as_float(x << 16) +
         __uint_as_float(w & 0xffff0000u) * __uint_as_float(x & 0xffff0000u);
}
__device__ __forceinline__ float engine_dot8(uint4 w, uint4 x) {
  return engine_dot2(w.x, x.x) + engine_dot2(w.y, x.y) + engine_dot2(w.z, x.z) + engine_dot2(w.w, x.w);
}
// The GEMV's input: x read from global memory, RMSNorm(h) * w computed by each block into shared
// memory (the norm that precedes qkv_gemm and mlp_gate_up_gemm, fused), or the SwiGLU of gate|up
// computed into shared memory (fused into mlp_down_gemm).
enum EngineGemvInput { kGemvX = 0, kGemvNorm = 1, kGemvSwiglu = 2 };
extern __shared__ __align__(16) bf16_t engine_gemv_xs[];

// xs[t, k] = bf16(h[t, k] * rsqrt(mean_k(h[t]^2) + eps) * w[k]), as engine_rmsnorm computes it.
// A thread's first kNormKeep pieces of h and w (all of them while K <= kNormKeep x 8 x blockDim:
// 4096 at 256 threads, 8192 at 512) are loaded once, together, and kept in registers for the
// second pass: one round trip to L2 instead of three dependent ones.
constexpr int kNormKeep = 2;
__device__ __forceinline__ uint4 engine_norm8(uint4 v, uint4 g, float inv) {
  const unsigned p[4] = {v.x, v.y, v.z, v.w}, q[4] = {g.x, g.y, g.z, g.w};
  unsigned o[4];
#pragma unroll
  for (int e = 0; e < 4; ++e)
    o[e] = (unsigned)thrive_f32_to_bf16(__uint_as_float(p[e] << 16) * inv * __uint_as_float(q[e] << 16)) |
           ((unsigned)thrive_f32_to_bf16(__uint_as_float(p[e] & 0xffff0000u) * inv *
                                         __uint_as_float(q[e] & 0xffff0000u)) << 16);
  return make_uint4(o[0], o[1], o[2], o[3]);
}
// The GEMV input x bf16 [T, K] in shared memory, in one of two layouts. Natural (FRAG = false):
// row t at t K, column k at k. Fragment order (FRAG = true; the persistent kernel's tensor-core
// GEMV, engine_dl_gemv): row t at t kp with kp = K rounded up to 64 (engine_dl_kp), and inside
// each 64-column block the 32-bit word of columns 8 j + 2 c and 8 j + 2 c + 1 (chunk j = 0..7,
// pair c = 0..3) at word 8 c + j. An mma.sync m16n8k16 lane with fragment column c needs pair c of
// every chunk of its warp's 64 columns for the tile's four k-steps: in fragment order those are
// eight adjacent words, two 16-byte loads instead of eight 4-byte ones (on the H200 the eight
// loads cost about 1 µs of the 15 µs gate/up stage, 2026-12-01, session6/README.md).
__host__ __device__ constexpr long long engine_dl_kp(long long K) { return (K + 63) / 64 * 64; }
// Stores the 8 columns [k, k + 8) of row `row` (k % 8 == 0; row: the row's start in either layout).
template <bool FRAG>
__device__ __forceinline__ void engine_xs_store8(bf16_t* row, long long k, uint4 v) {
  if (FRAG) {
    unsigned* w = (unsigned*)(row + (k & ~63LL)) + ((k & 63) >> 3);
    w[0] = v.x, w[8] = v.y, w[16] = v.z, w[24] = v.w;
  } else {
    *(uint4*)(row + k) = v;
  }
}
__device__ __forceinline__ float engine_sumsq8(uint4 v) {
  const unsigned p[4] = {v.x, v.y, v.z, v.w};
  float ss = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float lo = __uint_as_float(p[e] << 16), hi = __uint_as_float(p[e] & 0xffff0000u);
    ss += lo * lo + hi * hi;
  }
  return ss;
}
template <bool FRAG = false>
__device__ __forceinline__ void engine_gemv_norm_input(const bf16_t* h, const bf16_t* w, long long T, long long K,
                                                       float eps, bf16_t* xs) {
  const long long stride = FRAG ? engine_dl_kp(K) : K;
  const long long step = (long long)blockDim.x * 8, k0 = threadIdx.x * 8, tail = k0 + kNormKeep * step;
  for (long long t = 0; t < T; ++t) {
    const bf16_t* ht = h + t * K;
    uint4 hv[kNormKeep], wv[kNormKeep];
#pragma unroll
    for (int i = 0; i < kNormKeep; ++i)
      if (k0 + i * step < K) hv[i] = __ldcg((const uint4*)(ht + k0 + i * step)), wv[i] = *(const uint4*)(w + k0 + i * step);
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < kNormKeep; ++i)
      if (k0 + i * step < K) ss += engine_sumsq8(hv[i]);
    for (long long k = tail; k < K; k += step) ss += engine_sumsq8(__ldcg((const uint4*)(ht + k)));
    const float inv = rsqrtf(engine_block_sum(ss) / (float)K + eps);
#pragma unroll
    for (int i = 0; i < kNormKeep; ++i)
      if (k0 + i * step < K) engine_xs_store8<FRAG>(xs + t * stride, k0 + i * step, engine_norm8(hv[i], wv[i], inv));
    for (long long k = tail; k < K; k += step)
      engine_xs_store8<FRAG>(xs + t * stride, k, engine_norm8(__ldcg((const uint4*)(ht + k)), *(const uint4*)(w + k), inv));
  }
}

// xs[t, k] = bf16(silu(gate[t, k]) * up[t, k]) from gu [T, 2K] (gate | up); silu(a) = a / (1 +
// exp(-a)) in f32 with __expf and __fdividef (the `swiglu_act` template's EXP=fast, a few ulp).
template <bool FRAG = false>
__device__ __forceinline__ void engine_gemv_swiglu_input(const bf16_t* gu, long long T, long long K, bf16_t* xs) {
  for (long long i = threadIdx.x * 8; i < T * K; i += blockDim.x * 8) {
    const long long t = i / K, k = i % K;  // K % 8 == 0: a piece never crosses a row
    const uint4 g = __ldcg((const uint4*)(gu + t * 2 * K + k)), u = __ldcg((const uint4*)(gu + t * 2 * K + K + k));
    const unsigned gw[4] = {g.x, g.y, g.z, g.w}, uw[4] = {u.x, u.y, u.z, u.w};
    unsigned ow[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float g0 = __uint_as_float(gw[e] << 16), g1 = __uint_as_float(gw[e] & 0xffff0000u);
      const float u0 = __uint_as_float(uw[e] << 16), u1 = __uint_as_float(uw[e] & 0xffff0000u);
      ow[e] = (unsigned)thrive_f32_to_bf16(__fdividef(g0, 1.0f + __expf(-g0)) * u0) |
              ((unsigned)thrive_f32_to_bf16(__fdividef(g1, 1.0f + __expf(-g1)) * u1) << 16);
    }
    engine_xs_store8<FRAG>(xs + t * (FRAG ? engine_dl_kp(K) : K), k, make_uint4(ow[0], ow[1], ow[2], ow[3]));
  }
}

// y[t, n] = sum_k x[t, k] W[n, k] for T <= 4 tokens, R consecutive output rows per warp (R = 1
// or 2). Each lane streams 16-byte pieces of its rows, U = 8 pieces a row (128 bytes; 4 KiB of a
// row per warp) all issued before any is used, so a warp has R x 4 KiB in flight. The first
// pieces are issued before engine_pdl_wait(): the weights depend on no earlier kernel, so under
// programmatic dependent launch the next GEMV's weight stream starts while the previous kernel
// drains. With RESIDUAL, y is the residual stream h and is updated in place: h[t, n] = bf16(h[t, n]
// + bf16(acc)) (the residual add that `rmsnorm_residual` does otherwise, same roundings).
// tensors: in, W bf16 [N, K], y bf16 [T, N], norm weight bf16 [K] (kGemvNorm); dims: T, N, K;
// scalars: eps (kGemvNorm). The input is x bf16 [T, K] (kGemvX), h bf16 [T, K] (kGemvNorm) or gu
// bf16 [T, 2K] (kGemvSwiglu); the last two are staged in T*K*2 bytes of dynamic shared memory.
// Block 256, grid cdiv(N, 8 R).
template <int IN, bool RESIDUAL, int R>
__device__ __forceinline__ void engine_gemv_body(const ThriveCudaArgs& a) {
  constexpr int U = 8;
  const long long T = a.dims[0], N = a.dims[1], K = a.dims[2];
  const long long n0 = ((long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * R;
  const int lane = threadIdx.x & 31;
  const bf16_t* W = (const bf16_t*)a.tensors[1];
  uint4 wv[R][U];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long k = lane * 8 + u * 256;
      wv[r][u] = n0 + r < N && k < K ? engine_ld_stream(W + (n0 + r) * K + k) : make_uint4(0u, 0u, 0u, 0u);
    }
  engine_pdl_trigger();
  engine_pdl_wait();
  const bf16_t* xs = (const bf16_t*)a.tensors[0];
  if (IN == kGemvNorm) {
    engine_gemv_norm_input(xs, (const bf16_t*)a.tensors[3], T, K, (float)a.scalars[0], engine_gemv_xs);
    xs = engine_gemv_xs;
    __syncthreads();
  } else if (IN == kGemvSwiglu) {
    engine_gemv_swiglu_input(xs, T, K, engine_gemv_xs);
    xs = engine_gemv_xs;
    __syncthreads();
  }
  if (n0 >= N) return;
  float acc[R][4] = {};
  for (long long k0 = lane * 8; k0 < K; k0 += 256 * U) {
    if (k0 != lane * 8) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (n0 + r < N && k0 + u * 256 < K) wv[r][u] = engine_ld_stream(W + (n0 + r) * K + k0 + u * 256);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long k = k0 + u * 256;
      if (k >= K) break;
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        if (t >= T) break;
        const uint4 x = *(const uint4*)(xs + t * K + k);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r][t] += engine_dot8(wv[r][u], x);
      }
    }
  }
  bf16_t* y = (bf16_t*)a.tensors[2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      if (t >= T) break;
      float v = acc[r][t];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      const long long n = n0 + r;
      if (lane != 0 || n >= N) continue;
      const bf16_t q = thrive_f32_to_bf16(v);
      y[t * N + n] = RESIDUAL ? thrive_f32_to_bf16(thrive_bf16_to_f32(y[t * N + n]) + thrive_bf16_to_f32(q)) : q;
    }
}
// The entries, each with 1 and 2 rows per warp (suffix _r2): engine_gemv (y = x . W^T),
// engine_gemv_residual (h += x . W^T: o_proj with the residual add), engine_gemv_norm (y =
// RMSNorm(h) . W^T: input norm + qkv_proj, post-attention norm + gate|up proj; dynamic shared
// memory T*K*2), engine_gemv_swiglu (y = SwiGLU(gu) . W^T, the compilation specialist's fusion of
// swiglu and mlp_down_gemm; T*K*2 <= 48 KiB), engine_gemv_swiglu_residual (h += SwiGLU(gu) . W^T).
#define ENGINE_GEMV_ENTRY(name, in, residual)                                                         \
  extern "C" __global__ void __launch_bounds__(256) name(ThriveCudaArgs a) {                          \
    engine_gemv_body<in, residual, 1>(a);                                                             \
  }                                                                                                   \
  extern "C" __global__ void __launch_bounds__(256) name##_r2(ThriveCudaArgs a) {                     \
    engine_gemv_body<in, residual, 2>(a);                                                             \
  }
ENGINE_GEMV_ENTRY(engine_gemv, kGemvX, false)
ENGINE_GEMV_ENTRY(engine_gemv_residual, kGemvX, true)
ENGINE_GEMV_ENTRY(engine_gemv_norm, kGemvNorm, false)
ENGINE_GEMV_ENTRY(engine_gemv_swiglu, kGemvSwiglu, false)
ENGINE_GEMV_ENTRY(engine_gemv_swiglu_residual, kGemvSwiglu, true)

// ---- Decode attention at small batch: out[b, h] = softmax(scale q[b, h] . K[b, :n_b, g])
// V[b, :n_b, g] for the G = NQ / NKV query heads h of KV head g, n_b = ctx_lens[b] clamped to
// [0, L] (n_b = 0 gives zeros). Split-KV (FlashDecoding, Dao et al. 2023): grid (S, NKV, B),
// block 128; block (s, g, b) takes keys [s c, min(n_b, (s + 1) c)), c = cdiv(n_b, S), online
// softmax in f32 with scores in the log2 domain (q pre-scaled by scale log2 e, exp2f). A key row
// is read by LPK = D / 8 lanes (16-byte pieces; D / 8 a power of two <= 32), so a warp holds
// 32 / LPK keys at once, each lane group issuing the K and V loads of U keys before using them (4
// here, 2 in the persistent kernel, which has fewer registers a thread).
// The block's key slots merge through shared memory; with S > 1 the block writes (max, sum) and
// the unnormalized accumulator to the workspace, and the last block of (b, g) to finish (a
// per-(b, g) counter, reset by that block so a CUDA graph can replay the kernel) merges the S
// parts in chunk order and writes out: no second launch. Programmatic launch: everything here
// depends on the q/k kernel before it, so it waits first; it lets the next kernel (the o GEMV)
// start streaming its weights at once.
// QK = false: tensors q bf16 [B, NQ, D], k_cache, v_cache bf16 [B, L, NKV, D] (this layer's),
// ctx_lens i32 [B], out bf16 [B, NQ, D], part_ml f32 [B NKV S G][2], part_acc f32 [B NKV S G D],
// counter u32 [B NKV] (0 before the first launch); scalars: scale.
// QK = true (the q/k kernel fused in: decode's q/k RMSNorm, RoPE and KV-cache write happen here,
// as engine_qk_norm_rope_kv does them, same roundings): tensors qkv bf16 [B, (NQ + 2 NKV) D] (the
// step's one token per sequence, at position ctx_lens[b] - 1), qk_w bf16 [2 D] (q_norm | k_norm),
// cos_sin f32 [L, D], k_cache, v_cache, ctx_lens, out; workspace: counter u32 [B NKV] (padded to
// 256 bytes), then part_ml, then part_acc; scalars: scale, eps. Every lane group computes q and the
// new key and value for itself (a shuffle over the LPK lanes of a row); the block whose chunk holds
// the new position uses them for it and writes them to the cache. Needs D >= 16.
// dims: B, NQ, NKV, D, L. G in {1, 2, 4, 8}.
__device__ __forceinline__ float engine_bf16_round(float x) { return thrive_bf16_to_f32(thrive_f32_to_bf16(x)); }
// x[0..7]: this lane's 8 elements [part 8, part 8 + 8) of a D-vector held by LPK lanes; becomes
// bf16(RoPE(bf16(RMSNorm(x) w))) at the angles of cs (cos_sin row of the position): Qwen3's q/k
// head norm, then the GPT-NeoX half-split rotation (Su et al. 2021).
__device__ __forceinline__ void engine_norm_rope8(float x[8], const bf16_t* w, const float* cs, int part, int LPK,
                                                  long long D, float eps) {
  float ss = 0.f;
#pragma unroll
  for (int d = 0; d < 8; ++d) ss += x[d] * x[d];
  for (int o = LPK >> 1; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = rsqrtf(ss / (float)D + eps);
  const uint4 wv = *(const uint4*)(w + part * 8);
  const unsigned ww[4] = {wv.x, wv.y, wv.z, wv.w};
  float xn[8], pn[8];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    xn[2 * e] = engine_bf16_round(x[2 * e] * inv * __uint_as_float(ww[e] << 16));
    xn[2 * e + 1] = engine_bf16_round(x[2 * e + 1] * inv * __uint_as_float(ww[e] & 0xffff0000u));
  }
#pragma unroll
  for (int d = 0; d < 8; ++d) pn[d] = __shfl_xor_sync(0xffffffffu, xn[d], LPK >> 1);
  const bool first = part < (LPK >> 1);
  const long long i0 = (long long)(first ? part : part - (LPK >> 1)) * 8;
#pragma unroll
  for (int d = 0; d < 8; ++d) {
    const float c = cs[i0 + d], sn = cs[D / 2 + i0 + d];
    x[d] = engine_bf16_round(first ? xn[d] * c - pn[d] * sn : xn[d] * c + pn[d] * sn);
  }
}
__device__ __forceinline__ void engine_unpack8(uint4 v, float x[8]) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) x[2 * e] = __uint_as_float(w[e] << 16), x[2 * e + 1] = __uint_as_float(w[e] & 0xffff0000u);
}
// The operands of one layer's decode attention (the QK = false or true tensors above).
struct EngineAttention {
  const bf16_t* qkv;  // QK: the qkv rows [B, (NQ + 2 NKV) D]; otherwise q [B, NQ, D]
  const bf16_t* qk_w;  // QK: q_norm | k_norm [2 D]
  const float* cos_sin;  // QK: [L, D]
  // QK, or null: [B][D], the cos_sin row of each sequence's new position (the persistent kernel
  // keeps them in shared memory: the same rows at every layer of a step)
  const float* rope_rows;
  bf16_t *k_cache, *v_cache;  // [B, L, NKV, D] (this layer's)
  const int* lens;  // [B]
  bf16_t* out;  // [B, NQ, D]
  float *parts_ml, *parts_acc;
  unsigned* counters;
  long long B, NQ, NKV, D, L;
  float scale, eps;
  // Parallel merge (PM: the persistent kernel): everything another part or block reads is a tagged
  // word (engine_ll_store) carrying `tag`, this layer's: the qkv rows qkv_ll [B, (NQ + 2 NKV) D / 2]
  // (two bf16 a word, read instead of qkv), the parts' (max, sum) pairs and accumulators
  // parts_ml_ll [B NKV S G 2] and parts_acc_ll [B NKV S G D] (one f32 a word), and the output
  // out_ll [B, NQ D / 2] (two bf16 a word, written instead of out)
  const unsigned long long* qkv_ll;
  unsigned long long *parts_ml_ll, *parts_acc_ll, *out_ll;
  unsigned tag;
  // Unified max (UM: the persistent kernel's tensor-core parts, engine_dl_attention_part_tc<.., true>):
  // every part of a (sequence, KV head) weighs its keys by 2^(s - M) with one M a query head that
  // bounds every score, so the parts' results add: um_acc [B, NQ, D] f32 and um_l [B, NQ] f32
  // (the softmax numerators and denominators, f32 reductions at L2), um_count (one count a part
  // once its reductions are done) and um_kq, the bound's factor: M = |q~| um_kq (log2 units).
  float *um_acc, *um_l;
  unsigned* um_count;
};
__device__ __forceinline__ unsigned long long engine_globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// Traps after 10 s of polls that began at t0 (set at the first miss, checked every 1024th): a
// wait that never ends is a bug, and a trap reports it where a hang would not.
__device__ __forceinline__ void engine_poll_timeout(int spin, unsigned long long& t0) {
  if (spin == 0) t0 = engine_globaltimer_ns();
  else if ((spin & 1023) == 1023 && engine_globaltimer_ns() - t0 > 10000000000ull) __trap();
}
// Thread 0 of the caller's group spins until *counter >= target (relaxed polls: an acquire load
// also invalidates the SM's L1 each time, CCTL.IVALL in the SASS), then reads it once more with
// acquire semantics (the count only grows, so that load sees it too and orders the caller's later
// reads after the writes it counts). 10 s without it traps rather than hangs.
__device__ __forceinline__ void engine_spin_until(const unsigned* counter, unsigned target) {
  unsigned long long t0 = 0;
  unsigned v = 0;
  for (int spin = 0;; ++spin) {
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
    if (v >= target) break;
    engine_poll_timeout(spin, t0);
  }
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
}
// ---- Tagged words (the "LL" protocol of NCCL's low-latency transfers): a u64 holds 32 bits of
// data in its low half and, in its high half, the 32-bit tag of the write that produced it. It is
// written and read by single 64-bit relaxed gpu-scope accesses, which are single-copy atomic (PTX
// ISA, Memory Consistency Model: scalar accesses up to 64 bits; a vector access is one access per
// element), so a reader that sees the tag it expects sees that write's data: no fence before the
// write, no counter, and the reader's poll is its load (one L2 round trip where a fence, a count,
// a poll of the count and a load were four). A location's successive writes carry different tags
// and every reader of one write is done before the next (the kernel's stage order), so a reader
// waits for its tag exactly; zeroed memory matches no tag (tags start at 1).
__device__ __forceinline__ unsigned long long engine_ll_word(unsigned data, unsigned tag) {
  return ((unsigned long long)tag << 32) | data;
}
__device__ __forceinline__ void engine_ll_store(unsigned long long* p, unsigned data, unsigned tag) {
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(engine_ll_word(data, tag)) : "memory");
}
__device__ __forceinline__ unsigned long long engine_ll_load(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// The data of the word at p once it carries `tag`.
__device__ __forceinline__ unsigned engine_ll_wait(const unsigned long long* p, unsigned tag) {
  unsigned long long w = engine_ll_load(p), t0 = 0;
  for (int spin = 0; (unsigned)(w >> 32) != tag; ++spin) {
    engine_poll_timeout(spin, t0);
    w = engine_ll_load(p);
  }
  return (unsigned)w;
}
// Eight bf16 from the four tagged words at p (16-byte aligned), once all four carry `tag`: the four
// loads in flight together.
__device__ __forceinline__ uint4 engine_ll_wait8(const unsigned long long* p, unsigned tag) {
  unsigned long long w[4], t0 = 0;
  for (int spin = 0;; ++spin) {
    asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];" : "=l"(w[0]), "=l"(w[1]) : "l"(p) : "memory");
    asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];" : "=l"(w[2]), "=l"(w[3]) : "l"(p + 2) : "memory");
    if ((unsigned)(w[0] >> 32) == tag && (unsigned)(w[1] >> 32) == tag && (unsigned)(w[2] >> 32) == tag &&
        (unsigned)(w[3] >> 32) == tag)
      break;
    engine_poll_timeout(spin, t0);
  }
  return make_uint4((unsigned)w[0], (unsigned)w[1], (unsigned)w[2], (unsigned)w[3]);
}
// Shared memory of one attention group (128 threads for the CUDA-core parts, 256 for the
// tensor-core parts): the warps' (max, sum) pairs (ml[warp]; in the merges, the S parts' weights
// and sums: engine_attention_part_weights; the tensor-core parts also stage the new key and
// value rows in floats 128-255), the warps' accumulators [4 or 8][G][D] (in the merges, the
// loaded pairs and accumulator pieces), and the last-block flag; 16-byte aligned (the
// tensor-core parts' vector accesses), 5120 G + 16 bytes.
template <int G>
struct alignas(16) EngineAttentionSmem {
  float ml[128][G][2];
  float acc[1024 * G];
  bool last;
};
// Where thread tid of a 128-thread part (split s of S, KV head g, sequence b) works: LPK lanes hold
// one key row (8 elements each, lane `part`), a warp KPW rows, the part `slots` key slots; the
// part covers keys [lo, hi) of the sequence's n = clamp(lens[b], 0, L), and p = n - 1 is the new
// position (the step's token). Positions are 32-bit (L <= 2^30: the host's context limit); LPK is a
// power of two (D / 8, the host checks), so lane splits are shifts and masks.
struct EngineAttentionLane {
  int LPK, KPW, lane, warp, sub, part, slots, slot;
  int n, lo, hi, p;
  __device__ EngineAttentionLane(const EngineAttention& a, int s, int b, int S, int tid) {
    LPK = (int)(a.D >> 3), KPW = 32 / LPK;
    lane = tid & 31, warp = tid >> 5, sub = lane / LPK, part = lane & (LPK - 1);
    slots = 4 * KPW, slot = warp * KPW + sub;  // 4 warps
    const int L = (int)a.L;
    n = a.lens[b];
    n = n < 0 ? 0 : (n > L ? L : n);
    const int c = (n + S - 1) / S;
    lo = s * c, hi = lo + c < n ? lo + c : n, p = n - 1;
  }
};
// The merge weights of S partial results of G heads, by the kThreads threads of a part (tid 0 to
// kThreads - 1, all of them): warp tid / 32 takes heads h = warp, warp + kThreads / 32, ..., its lanes the parts i = lane,
// lane + 32, ... of the (max, sum) pairs [S][G][2], and writes w[i G + h] = 2^(m_i - M) (M the
// head's max over the parts, a warp reduction; 0 where every part is empty) and, after the S G
// weights, w[S G + h] = the total sum (the softmax denominator, a warp sum). The weights one
// thread at a time cost 1.9 us of the attention stage at S = 17 on the H200 (2026-12-01,
// session4/phase-trace.patch).
template <int G, int kThreads = 128>
__device__ __forceinline__ void engine_attention_part_weights(const float* pairs, int S, int tid, float* w) {
  const int warp = tid >> 5, lane = tid & 31;
  for (int h = warp; h < G; h += kThreads / 32) {
    float M = -__int_as_float(0x7f800000), Ls = 0.f;
    for (int i = lane; i < S; i += 32) M = fmaxf(M, pairs[(i * G + h) * 2]);
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    for (int i = lane; i < S; i += 32) {
      const float wi = M > -__int_as_float(0x7f800000) ? exp2f(pairs[(i * G + h) * 2] - M) : 0.f;
      w[i * G + h] = wi;
      Ls += pairs[(i * G + h) * 2 + 1] * wi;
    }
    for (int o = 16; o > 0; o >>= 1) Ls += __shfl_xor_sync(0xffffffffu, Ls, o);
    if (lane == 0) w[S * G + h] = Ls;
  }
}
// The parallel merge of part s of (b, g) (bg = b NKV + g) by its kThreads threads (128 or 256):
// every part has written its result as
// tagged words (the caller); a part whose slice [e0, e0 + n) of the G D outputs (per = cdiv(G D,
// S) rounded up to even, e0 = s per) is not empty loads the S parts' (max, sum) pairs and the
// slice's S accumulator pieces into shared memory (sm.acc: pairs [S][G][2], then pieces [S][n]),
// each load waiting for this layer's tag (512 in flight before any is stored: one round trip when
// 2 S G + S n <= 512), the G heads' weights 2^(m_i - M) and sums go to sm.ml, and each pair of
// outputs, a weighted sum over the parts, is one tagged word of out_ll.
template <int G, int kThreads, class Sync>
__device__ __forceinline__ bool engine_attention_merge_slice(const EngineAttention& a, int s, long long bg, int S, int tid,
                                                          EngineAttentionSmem<G>& sm, Sync sync) {
  constexpr int kBatch = 512 / kThreads;  // loads a thread issues before storing any (512 in flight)
  // 32-bit indices (G D <= 2048, S <= 64): 64-bit divisions are long instruction sequences on the
  // stage's critical path
  const int D = (int)a.D, GD = G * D, dlog = __ffs(D) - 1;  // D a power of two (8 LPK)
  const int per = ((GD + S - 1) / S + 1) / 2 * 2, e0 = s * per, n = e0 + per < GD ? per : GD - e0;
  sync();  // every thread has read the key-slot merge's sm.acc, which buf overwrites
  if (n <= 0) return true;
  const unsigned long long* all_ml = a.parts_ml_ll + bg * S * G * 2;
  const unsigned long long* all_acc = a.parts_acc_ll + bg * S * GD + e0;
  float* buf = sm.acc;  // [S G 2] pairs, then [S][n] pieces
  const int pairs = S * G * 2, total = pairs + S * n;
  for (int r0 = 0; r0 < total; r0 += kThreads * kBatch) {
    const unsigned long long* src[kBatch];
    unsigned long long v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const int i = r0 + k * kThreads + tid;
      const unsigned q = (unsigned)(i - pairs);
      src[k] = i >= total ? nullptr : i < pairs ? all_ml + i : all_acc + (q / (unsigned)n) * GD + q % (unsigned)n;
      v[k] = src[k] != nullptr ? engine_ll_load(src[k]) : 0ull;
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k)
      if (src[k] != nullptr)
        buf[r0 + k * kThreads + tid] =
            __uint_as_float((unsigned)(v[k] >> 32) == a.tag ? (unsigned)v[k] : engine_ll_wait(src[k], a.tag));
  }
  sync();
  float* w_sh = &sm.ml[0][0][0];
  engine_attention_part_weights<G, kThreads>(buf, S, tid, w_sh);
  sync();
  unsigned long long* out = a.out_ll + ((bg / a.NKV * a.NQ + bg % a.NKV * G) * D + e0) / 2;
  // R adjacent lanes per pair of outputs (R | 32, (n / 2) R <= kThreads), each summing every R-th part,
  // then a shuffle sum: the slice is short (about G D / S outputs) and S deep. A pair is one head's
  // (e0, D even).
  const int np = n / 2;
  int R = 1, rlog = 0;
  while (R < 32 && np * R * 2 <= kThreads) R *= 2, ++rlog;
  const int r = tid & (R - 1);
  for (int j0 = 0; j0 < np; j0 += kThreads >> rlog) {  // the same trip count on every thread
    const int j = j0 + (tid >> rlog);
    const int h = (e0 + 2 * (j < np ? j : 0)) >> dlog;
    float A0 = 0.f, A1 = 0.f;
    if (j < np)
      for (int i = r; i < S; i += R) {
        const float w = w_sh[i * G + h];
        A0 += buf[pairs + i * n + 2 * j] * w, A1 += buf[pairs + i * n + 2 * j + 1] * w;
      }
    for (int o = R >> 1; o > 0; o >>= 1)
      A0 += __shfl_xor_sync(0xffffffffu, A0, o), A1 += __shfl_xor_sync(0xffffffffu, A1, o);
    const float Ls = w_sh[S * G + h];
    if (j < np && r == 0)
      engine_ll_store(out + j,
                      (unsigned)thrive_f32_to_bf16(Ls > 0.f ? A0 / Ls : 0.f) |
                          ((unsigned)thrive_f32_to_bf16(Ls > 0.f ? A1 / Ls : 0.f) << 16),
                      a.tag);
  }
  return true;
}
// One (split s of S, KV head g, sequence b) part of decode attention by 128 threads (tid 0..127;
// `sync` is their barrier). Returns true when this part is done with out[b, heads of g] (PM: it
// merged its slice into out_ll, or has none, also at S == 1; S == 1 otherwise: it wrote them;
// otherwise: it was the last part of (b, g) to finish and merged the S parts): the same value on
// every thread.
// Everything written by another block of the same launch (qkv rows, parts) is read through L2.
// U: key slots a lane loads per round (all issued before any is used).
// PM (parallel merge; the persistent kernel, whose S parts of a (b, g) all run at once): the qkv
// rows come from qkv_ll (each load waits for this layer's tag), every part writes its partial
// result as tagged words (also at S = 1), and each part whose slice of the G D outputs is not
// empty merges that slice into out_ll (engine_attention_merge_slice): no count, fence or poll of
// a counter on the way. Returns true on every part then. Without PM, the last part to count
// merges all G D outputs (the standalone kernel: its blocks need not be resident at once).
template <int G, bool QK, int U, bool PM, class Sync>
__device__ __forceinline__ bool engine_decode_attention_part(const EngineAttention& a, int s, int g, int b, int S,
                                                             int tid, EngineAttentionSmem<G>& sm, Sync sync) {
  constexpr int kThreads = 128;
  auto& sh_ml = sm.ml;
  float* sh_acc = sm.acc;
  const long long NQ = a.NQ, NKV = a.NKV, D = a.D, L = a.L;
  const EngineAttentionLane w(a, s, b, S, tid);
  const int LPK = w.LPK, part = w.part, slots = w.slots, slot = w.slot;
  const int lo = w.lo, hi = w.hi, p = w.p;
  const float qs = a.scale * 1.4426950408889634f;
  float q[G][8], m[G], l[G], acc[G][8];
  uint4 k_new = make_uint4(0u, 0u, 0u, 0u), v_new = k_new;
  const long long stride = NKV * D;
  const bf16_t* kb = a.k_cache + ((long long)b * L * NKV + g) * D + part * 8;
  const bf16_t* vb = a.v_cache + ((long long)b * L * NKV + g) * D + part * 8;
  // U keys and values of this lane from j0 on (slots apart; zeros past hi, and at the new
  // position p, whose row the caller takes from the qkv rows). The first round is issued before
  // the qkv rows are used: it does not depend on them, and after the new position's store below
  // the compiler could not move it up (1 of the part's round trips).
  uint4 kv[U], vv[U];
  const auto load_keys = [&](int j0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = j0 + u * slots;
      if (j < hi && !(QK && j == p))
        kv[u] = *(const uint4*)(kb + (long long)j * stride), vv[u] = *(const uint4*)(vb + (long long)j * stride);
      else kv[u] = vv[u] = make_uint4(0u, 0u, 0u, 0u);
    }
  };
  load_keys(lo + slot);
  if (QK) {
    const long long row0 = (long long)b * (NQ + 2 * NKV) * D + part * 8;
    const bf16_t* row = a.qkv + row0;
    const float* cs = a.rope_rows != nullptr ? a.rope_rows + b * D : a.cos_sin + (p < 0 ? 0 : p) * D;
    // the G query rows, the key and the value first (without PM one round trip for all of them)
    uint4 q_raw[G], k_raw;
    if (PM) {
      // tagged words, two bf16 each: 8 elements are 4 words. The G + 2 pieces are waited for one
      // after another (G + 2 round trips, the first the wait for the data): with all of them in
      // flight at once the kernel spills 244 bytes a thread at G = 2 instead of 128 (ptxas, CUDA
      // 13.0), not yet measured on the H200 (session9/batched-ll-waits.patch)
      const unsigned long long* rw = a.qkv_ll + row0 / 2;
#pragma unroll
      for (int h = 0; h < G; ++h) q_raw[h] = engine_ll_wait8(rw + (g * G + h) * D / 2, a.tag);
      k_raw = engine_ll_wait8(rw + (NQ + g) * D / 2, a.tag);
      v_new = engine_ll_wait8(rw + (NQ + NKV + g) * D / 2, a.tag);
    } else {
#pragma unroll
      for (int h = 0; h < G; ++h) q_raw[h] = __ldcg((const uint4*)(row + (g * G + h) * D));
      k_raw = __ldcg((const uint4*)(row + (NQ + g) * D));
      v_new = __ldcg((const uint4*)(row + (NQ + NKV + g) * D));
    }
#pragma unroll
    for (int h = 0; h < G; ++h) {
      engine_unpack8(q_raw[h], q[h]);
      engine_norm_rope8(q[h], a.qk_w, cs, part, LPK, D, a.eps);
    }
    float kx[8];
    engine_unpack8(k_raw, kx);
    engine_norm_rope8(kx, a.qk_w + D, cs, part, LPK, D, a.eps);
    unsigned kw[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
      kw[e] = (unsigned)thrive_f32_to_bf16(kx[2 * e]) | ((unsigned)thrive_f32_to_bf16(kx[2 * e + 1]) << 16);
    k_new = make_uint4(kw[0], kw[1], kw[2], kw[3]);
    if (slot == 0 && lo <= p && p < hi) {  // the part that holds the new position stores it
      const long long off = (((long long)b * L + p) * NKV + g) * D + part * 8;
      *(uint4*)(a.k_cache + off) = k_new;
      *(uint4*)(a.v_cache + off) = v_new;
    }
  } else {
#pragma unroll
    for (int h = 0; h < G; ++h)
      engine_unpack8(__ldcg((const uint4*)(a.qkv + ((long long)b * NQ + g * G + h) * D + part * 8)), q[h]);
  }
#pragma unroll
  for (int h = 0; h < G; ++h) {
#pragma unroll
    for (int d = 0; d < 8; ++d) q[h][d] *= qs, acc[h][d] = 0.f;
    m[h] = -__int_as_float(0x7f800000);
    l[h] = 0.f;
  }
  for (int j0 = lo + slot; j0 - slot < hi; j0 += slots * U) {
    if (j0 != lo + slot) load_keys(j0);
    if (QK)
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (j0 + u * slots == p) kv[u] = k_new, vv[u] = v_new;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = j0 + u * slots;
      const unsigned kw[4] = {kv[u].x, kv[u].y, kv[u].z, kv[u].w};
      float vf[8];
      engine_unpack8(vv[u], vf);
#pragma unroll
      for (int h = 0; h < G; ++h) {
        float dot = 0.f;
#pragma unroll
        for (int e = 0; e < 4; ++e)
          dot += q[h][2 * e] * __uint_as_float(kw[e] << 16) + q[h][2 * e + 1] * __uint_as_float(kw[e] & 0xffff0000u);
        for (int o = LPK >> 1; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (j < hi) {
          const float mn = fmaxf(m[h], dot), corr = exp2f(m[h] - mn), p = exp2f(dot - mn);
          l[h] = l[h] * corr + p;
#pragma unroll
          for (int d = 0; d < 8; ++d) acc[h][d] = acc[h][d] * corr + p * vf[d];
          m[h] = mn;
        }
      }
    }
  }
  // Merge the part's key slots: first the warp's KPW slots in registers (lanes LPK apart hold the
  // same elements of different slots), then the 4 warps' in shared memory: (M, Lsum, A[d]) per head.
  for (int o = LPK; o < 32; o <<= 1)
#pragma unroll
    for (int h = 0; h < G; ++h) {
      const float mo = __shfl_xor_sync(0xffffffffu, m[h], o), lo_ = __shfl_xor_sync(0xffffffffu, l[h], o);
      const float mn = fmaxf(m[h], mo);
      const float c = mn > -__int_as_float(0x7f800000) ? exp2f(m[h] - mn) : 0.f,
                  co = mn > -__int_as_float(0x7f800000) ? exp2f(mo - mn) : 0.f;
      l[h] = l[h] * c + lo_ * co;
#pragma unroll
      for (int d = 0; d < 8; ++d) acc[h][d] = acc[h][d] * c + __shfl_xor_sync(0xffffffffu, acc[h][d], o) * co;
      m[h] = mn;
    }
  if (w.sub == 0)
#pragma unroll
    for (int h = 0; h < G; ++h) {
      if (part == 0) sh_ml[w.warp][h][0] = m[h], sh_ml[w.warp][h][1] = l[h];
#pragma unroll
      for (int d = 0; d < 8; ++d) sh_acc[(w.warp * G + h) * D + part * 8 + d] = acc[h][d];
    }
  sync();
  const long long bg = (long long)b * NKV + g;
  float* part_ml = a.parts_ml + (bg * S + s) * G * 2;
  float* part_acc = a.parts_acc + (bg * S + s) * G * D;
  bf16_t* out = a.out + ((long long)b * NQ + g * G) * D;
  unsigned long long* part_acc_ll = PM ? a.parts_acc_ll + (bg * S + s) * G * D : nullptr;
  unsigned long long* part_ml_ll = PM ? a.parts_ml_ll + (bg * S + s) * G * 2 : nullptr;
  const int dlog = __ffs((int)D) - 1;  // D is a power of two (8 LPK)
  for (int e = tid; e < G * (int)D; e += kThreads) {
    const int h = e >> dlog, d = e & ((int)D - 1);
    float M = -__int_as_float(0x7f800000);
#pragma unroll
    for (int i = 0; i < 4; ++i) M = fmaxf(M, sh_ml[i][h][0]);
    float Ls = 0.f, A = 0.f;
    if (M > -__int_as_float(0x7f800000))
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float w = exp2f(sh_ml[i][h][0] - M);
        Ls += sh_ml[i][h][1] * w;
        A += sh_acc[(i * G + h) * D + d] * w;
      }
    if (PM) {
      engine_ll_store(part_acc_ll + e, __float_as_uint(A), a.tag);
      if (d == 0) {
        engine_ll_store(part_ml_ll + 2 * h, __float_as_uint(M), a.tag);
        engine_ll_store(part_ml_ll + 2 * h + 1, __float_as_uint(Ls), a.tag);
      }
    } else if (S == 1) {
      out[e] = thrive_f32_to_bf16(Ls > 0.f ? A / Ls : 0.f);
    } else {
      part_acc[e] = A;
      if (d == 0) part_ml[2 * h] = M, part_ml[2 * h + 1] = Ls;
    }
  }
  if (PM) return engine_attention_merge_slice<G, kThreads>(a, s, bg, S, tid, sm, sync);
  if (S == 1) return true;
  // The parts are visible before the count says so; the last part's reads come after it (thread
  // 0 fences on both sides of its count, the part's barriers order the other threads: the pattern
  // of cooperative groups' grid sync).
  sync();
  unsigned* counter = a.counters + bg;
  if (tid == 0) {
    __threadfence();
    sm.last = atomicAdd(counter, 1u) == (unsigned)(S - 1);
    __threadfence();
  }
  sync();
  if (!sm.last) return false;
  // The S parts' (max, sum) of the G heads into shared memory (sh_acc, reused: S G 2 <= 1024 G
  // floats), then each head's weights 2^(m_i - M) and total sum into sh_ml (128 G pairs, S <= 64). The accumulators are read
  // through L2 (__ldcg: written by other blocks of this launch), two elements a thread and
  // kMergeRound parts at a time; the first round is issued before the (max, sum) pairs, so the
  // merge waits on one round trip for up to kMergeRound parts.
  constexpr int kMergeRound = 8;
  const float* all_ml = a.parts_ml + bg * S * G * 2;
  const float* all_acc = a.parts_acc + bg * S * G * D;
  float2 av[kMergeRound];
  const auto load_round = [&](long long e, int i0) {
#pragma unroll
    for (int k = 0; k < kMergeRound; ++k)
      av[k] = i0 + k < S ? __ldcg((const float2*)(all_acc + (long long)(i0 + k) * G * D + e)) : make_float2(0.f, 0.f);
  };
  if (2 * tid < G * D) load_round(2 * tid, 0);
  float* w_sh = &sh_ml[0][0][0];  // [S][G] weights, then [G] sums after them
  for (int i = tid; i < S * G * 2; i += kThreads) sh_acc[i] = __ldcg(all_ml + i);
  sync();
  engine_attention_part_weights<G>(sh_acc, S, tid, w_sh);
  sync();
  for (long long e = 2 * tid; e < G * D; e += 2 * kThreads) {  // D % 8 == 0: e, e + 1 are one head's
    const int h = (int)(e / D);
    if (e != 2 * tid) load_round(e, 0);
    float A0 = 0.f, A1 = 0.f;
    for (int i0 = 0;;) {
#pragma unroll
      for (int k = 0; k < kMergeRound; ++k)
        if (i0 + k < S) {
          const float wk = w_sh[(i0 + k) * G + h];
          A0 += av[k].x * wk, A1 += av[k].y * wk;
        }
      i0 += kMergeRound;
      if (i0 >= S) break;
      load_round(e, i0);
    }
    const float Ls = w_sh[S * G + h];
    out[e] = thrive_f32_to_bf16(Ls > 0.f ? A0 / Ls : 0.f);
    out[e + 1] = thrive_f32_to_bf16(Ls > 0.f ? A1 / Ls : 0.f);
  }
  if (tid == 0) *counter = 0u;
  return true;
}
// The standalone kernel: block (s, g, b) of grid (S, NKV, B), 128 threads.
template <int G, bool QK>
__device__ __forceinline__ void engine_decode_attention(const ThriveCudaArgs& a) {
  __shared__ EngineAttentionSmem<G> sm;
  engine_pdl_trigger();
  engine_pdl_wait();
  EngineAttention p;
  p.B = a.dims[0], p.NQ = a.dims[1], p.NKV = a.dims[2], p.D = a.dims[3], p.L = a.dims[4];
  p.scale = (float)a.scalars[0];
  p.rope_rows = nullptr;
  p.qkv_ll = nullptr, p.parts_ml_ll = p.parts_acc_ll = p.out_ll = nullptr, p.tag = 0u;
  p.qkv = (const bf16_t*)a.tensors[0];
  const int S = gridDim.x;
  if (QK) {
    p.qk_w = (const bf16_t*)a.tensors[1], p.cos_sin = (const float*)a.tensors[2];
    p.k_cache = (bf16_t*)a.tensors[3], p.v_cache = (bf16_t*)a.tensors[4];
    p.lens = (const int*)a.tensors[5], p.out = (bf16_t*)a.tensors[6];
    p.eps = (float)a.scalars[1];
    p.counters = (unsigned*)a.workspace;
    p.parts_ml = (float*)((char*)a.workspace + (p.B * p.NKV * 4 + 255) / 256 * 256);
    p.parts_acc = p.parts_ml + p.B * p.NKV * S * G * 2;
  } else {
    p.qk_w = nullptr, p.cos_sin = nullptr, p.eps = 0.f;
    p.k_cache = (bf16_t*)a.tensors[1], p.v_cache = (bf16_t*)a.tensors[2];
    p.lens = (const int*)a.tensors[3], p.out = (bf16_t*)a.tensors[4];
    p.parts_ml = (float*)a.tensors[5], p.parts_acc = (float*)a.tensors[6], p.counters = (unsigned*)a.tensors[7];
  }
  engine_decode_attention_part<G, QK, 4, false>(p, blockIdx.x, blockIdx.y, blockIdx.z, S, threadIdx.x, sm,
                                      [] { __syncthreads(); });
}
#define ENGINE_DECODE_ATTENTION_ENTRY(g)                                                              \
  extern "C" __global__ void __launch_bounds__(128) engine_decode_attention_g##g(ThriveCudaArgs a) {    \
    engine_decode_attention<g, false>(a);                                                             \
  }                                                                                                   \
  extern "C" __global__ void __launch_bounds__(128) engine_decode_attention_qk_g##g(ThriveCudaArgs a) { \
    engine_decode_attention<g, true>(a);                                                              \
  }
ENGINE_DECODE_ATTENTION_ENTRY(1)
ENGINE_DECODE_ATTENTION_ENTRY(2)
ENGINE_DECODE_ATTENTION_ENTRY(4)
ENGINE_DECODE_ATTENTION_ENTRY(8)

// ---- Persistent decode: every decoder layer of one decode step (T = batch <= 4 tokens) in one
// launch of one 512-thread block a SM, on up to every SM (`engine_decode_layers`). The layered
// path above launches five kernels a layer, and each boundary drains the weight stream for a few
// µs. Here the stream does not stop at a stage or layer boundary: every thread keeps the same cursor over
// the block's weight tiles (in consumption order, across stages and layers, since weights depend
// on no activation) and copies its 16-byte pieces of the next tile into a ring of NS 32 KiB
// shared-memory stages with cp.async (L2 evict-first: the 2.8 GB stream must not push the
// activations, KV cache and counters out of L2; that hint alone took the step from 3.0 to 2.3 ms
// on the H200), NS - 1 tiles in flight. The gate/up, down and next layer's qkv stages, which need
// the whole output of the previous stage, wait for it on a counter in global memory (one per stage
// and layer: the blocks that finished it); around attention the handoffs are tagged words
// (engine_ll_store: the qkv rows, the parts' partial results, the attention output), which the
// readers' loads wait for, with no fence, count or poll of a counter. While a block waits, its
// in-flight tiles land. This is the "megakernel" idea of Spector et al., "Look Ma, No Bubbles!"
// (Hazy Research, 2025), with counters and tagged words instead of their instruction scheduler.
// Measured on the H200 (2026-12-01, bench/results/h200-persistent-decode-2026-12-01/session4/):
// 1.58 ms per batch-1 step against 1.67 for the layered path with CUDA graphs and PDL, 1.99 at
// batch 4 (layered: 3.27, session2/). What limits it now: the attention stage (12.6 µs of the
// 48.5 a layer; with the attention parts skipped the step took 1.19 ms, session3/), half of it
// work inside the block (q/k norm and RoPE, key-slot merge, merge weights: session4/ run 5), the
// rest a chain of dependent global-memory round trips; not the grid-wide waits (session3/). Each
// GEMV runs at about one 32 KiB tile a µs per block whether its weights come from DRAM or L2, and
// blocks taken from the weight stream for attention slowed every GEMV (session4/ runs 1-2), though
// the same ring in a microbenchmark takes about 100 GB/s into one block and 93% of the DRAM rate
// into 99 (session5/ run 1); a leaner tile loop did not change it (session5/ runs 6-10). From an
// L2-resident slice that ring takes 7.5 TB/s over 132 blocks, 1.65 times the DRAM rate, and a
// stream prefetched into L2 beforehand is only 10% faster (session7/ run 1): L2 is no buffer that
// would let the weight stream run ahead while attention keeps the DRAM idle. At 1.54 ms a step
// (session7/) a layer is 48 µs against 22.4 of DRAM time; the rest is attention (about nine
// dependent round trips through L2) and four stage transitions of three or four each. The tagged
// handoffs around attention took the step from 1.509 to 1.485 ms (session9/ run 4), 32-bit indices
// on the attention parts' path from 1.481 to 1.454 (session10/ run 3). Without attention the step
// takes 1.053 ms, and a second, idempotent pass of the attention stage that waits for nothing
// still costs 13 µs a layer: the stage is the parts' serial instruction chain (session10/ runs 1-2).
//
// Per layer l (the stage order and roundings of the layered path with every fusion on; the sums
// differ in order: tensor-core tiles here, and attention's split count):
//   qkv    : x = RMSNorm(h) w_in (each block, in shared memory); qkv = x . Wqkv^T
//   attn   : S parts per (sequence, KV head) of split-KV decode attention (S from the host: at
//            most kDlAttnGroups x gridDim parts in all; CUDA-core parts: about 32 keys and 128
//            threads a part; tensor-core parts at head dims 64 and 128: about 64 keys, 256 threads), each
//            waiting only for its own qkv rows (tagged words: engine_ll_store), with the q/k
//            RMSNorm, RoPE and KV-cache write inside (engine_decode_attention_part); every part of
//            a (sequence, KV head) merges a slice of its heads from the S parts' tagged results
//            (the parallel merge, PM) into the tagged output
//   o      : the input's loads wait for the attention output's tags; h += attn . Wo^T (residual
//            add in the epilogue)
//   gate_up: waits for every block's h rows; x = RMSNorm(h) w_post; gu = x . Wgu^T
//   down   : waits for every block's gu rows; x = SwiGLU(gu); h += x . Wdown^T
// A GEMV's N rows are cut into groups of 16 and the groups split evenly over the blocks; a
// group's K columns come in tiles of 1024 (16 rows x 2 KiB = one stage), warp w owning columns
// [64 w, 64 w + 64) of each tile: it copies that slice and multiplies it on the tensor cores
// (engine_dl_gemv), so a stage needs only a warp barrier; the 16 warps' partial sums meet once
// per row group.
// tensors: h bf16 [T, H] (the residual stream, updated in place), layers u64 [layers][9] (the
// device pointers of each layer: Wqkv, Wo, Wgu, Wdown, input norm, post-attention norm, q_norm |
// k_norm, K cache, V cache), qkv and attn (not used: their place is the workspace's tagged
// words; the host passes the layered path's buffers), gu bf16 [T, 2 I], cos_sin f32 [L, D],
// ctx_lens i32 [T], stamps u64 [5 layers + 1] (or null: with it, block 0 records %globaltimer as
// each stage starts: the qkv stage after its wait, attention when block 0's own qkv rows are
// written, o once the attention output is complete, gate/up and down after their waits, and the
// last block at the end; the in-kernel stage breakdown); dims: T, H, NQ, NKV, D, L, I, layers;
// scalars: attention scale, eps, NS (2 to 8) + 16 x (1: prefetch each layer's KV cache into L2 as
// its qkv stage starts), S (attention
// splits, <= 64; with S > 1, B NKV S <= kDlAttnGroups gridDim: the parallel merge needs every part of a (b, g)
// running at once). workspace (all zero before the first launch): stage counters u32 [5 layers +
// 1] (the last block to finish zeroes them, so a CUDA graph can replay the kernel) and the launch
// epoch u32 (that block advances it), padded to 256 bytes, then the attention workspace
// (engine_dl_attention_ws: the tagged words parts_ml_ll u64 [T NKV S G 2], parts_acc_ll u64 [T
// NKV S G D], qkv_ll u64 [T, (NQ + 2 NKV) D / 2], attn_ll u64 [T, NQ D / 2]). Dynamic
// shared memory: a kDlHead-byte head (ctx_lens, T i32), the GEMV's cross-warp sums
// (kDlReduceBytes), the layer table (layers x 9 u64, rounded up to 128 bytes), the attention
// constants (engine_dl_rope_bytes + engine_dl_qknorm_bytes), then max(T kp 2,
// kDlAttnGroups x sizeof(EngineAttentionSmem<G>)) rounded up to 128 (kp: max(H, NQ D, I) rounded up to 64,
// the GEMV input's padded rows), then NS x 32 KiB. Block 512, grid <= one
// block per SM: every block must be resident at once (the host launches gridDim <= the SM count,
// persistent_decode_blocks or as asked for, which fits when the GPU runs nothing else; another
// process or stream holding SMs for the whole step would leave blocks unscheduled), and a wait
// that lasts 10 s traps rather than hangs.
enum EngineDecodeStage { kDlQkv = 0, kDlAttn = 1, kDlO = 2, kDlGateUp = 3, kDlDown = 4, kDlStages = 5 };
enum EngineDecodeTable { kDlWqkv = 0, kDlWo, kDlWgu, kDlWdown, kDlInNorm, kDlPostNorm, kDlQkNorm, kDlKCache,
                         kDlVCache, kDlTableCols };
// a tile: 16 rows (the m16n8k16 A fragment) x 1024 columns (a 64-column slice per warp of 16)
constexpr int kDlTileRows = 16, kDlTileCols = 1024, kDlTileBytes = kDlTileRows * kDlTileCols * 2;
// The same tile in EC12 (include/thrive/model/weight_coding.hpp: the layout, its kEc12* constants
// and the host's packer): 16 slices of 1568 bytes, one a warp: the low bytes of its lanes' A
// fragments (1024), their 4-bit codes (512), the slice's window h0 (4) and 7 patch words (28).
constexpr int kDlPkSliceBytes = 1568, kDlPkTileBytes = 16 * kDlPkSliceBytes, kDlPkPatches = 7;
// EC12's per-warp patch sums: [16 warps][16 rows][4 tokens] f32, after the ring
constexpr int kDlPkPatchBytes = 16 * 16 * 4 * 4;
// engine_dl_gemv's cross-warp sums: two buffers of [16 warps][16 rows][4 tokens] f32
constexpr int kDlReduceBytes = 2 * 16 * 16 * 4 * 4;
// The dynamic shared memory's head: ctx_lens (i32 [T]).
constexpr int kDlHead = 128;
// Attention groups a block (one part each at a time; 128 threads a group for the CUDA-core parts,
// the other warps idle; 256 for the tensor-core parts): the host's decode_layers_splits and
// decode_layers_region (src/model/cuda_engine.cpp) use the same count.
// Four groups with 16 keys a part (one round of key loads) decoded a batch-1 step in 1.493 ms
// against 1.454 with two and 32 keys on the H200 (2026-12-02, session10/ run 3), and at G = 8 their
// shared memory leaves no room for two ring stages (the engine then takes the layered path).
constexpr int kDlAttnGroups = 2;
struct EngineDecodeDims {
  long long T, H, NQ, NKV, D, L, I, layers;
};
// Shared-memory bytes of the attention stage's constants: the T sequences' cos_sin rows (f32 [T, D])
// and one layer's q_norm | k_norm (bf16 [2 D]), each rounded up to 128 (the host adds the same).
__device__ __forceinline__ long long engine_dl_rope_bytes(long long T, long long D) { return (T * D * 4 + 127) / 128 * 128; }
__device__ __forceinline__ long long engine_dl_qknorm_bytes(long long D) { return (2 * D * 2 + 127) / 128 * 128; }
// The weight of GEMV w (0 qkv, 1 o, 2 gate_up, 3 down): N rows of K, its column in the table.
__device__ __forceinline__ void engine_dl_matrix(const EngineDecodeDims& d, int w, long long& N, long long& K,
                                                 int& col) {
  if (w == 0) N = (d.NQ + 2 * d.NKV) * d.D, K = d.H, col = kDlWqkv;
  else if (w == 1) N = d.H, K = d.NQ * d.D, col = kDlWo;
  else if (w == 2) N = 2 * d.I, K = d.H, col = kDlWgu;
  else N = d.H, K = d.I, col = kDlWdown;
}
// This block's row groups [g0, g1) of a matrix of N rows: cdiv(N, 16) groups split evenly.
__device__ __forceinline__ void engine_dl_groups(long long N, long long& g0, long long& g1) {
  const long long groups = (N + kDlTileRows - 1) / kDlTileRows;
  g0 = groups * blockIdx.x / gridDim.x;
  g1 = groups * (blockIdx.x + 1) / gridDim.x;
}
__device__ __forceinline__ unsigned engine_dl_smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
// %tid.x by a volatile read: the front end (NVVM) can neither hoist it nor keep what derives from
// it live across loops, so those values are recomputed where used (an S2R and two integer
// instructions) instead of taking registers, or spill slots, for the whole kernel. ptxas may
// still merge the reads: nvcc 13.0 keeps one a tile in the tensor-core entries' GEMV loops (their
// spill loads there: 2-3 a tile -> 0 but for one in the o loop; tile-loop-spills.txt in
// bench/results/h200-tid-remat-2026-12-02/), and in the CUDA-core G = 2 entry merged them (spill
// loads 204 -> 224 bytes, outside its tile loops). The GEMV's ldmatrix offsets use it too (spill
// stores/loads at G = 2, D = 128: 160/272 -> 140/224 bytes; CUDA-core G = 2: 120/224 -> 80/156;
// 1.386-1.387 against 1.390-1.392 ms a batch-1 step on the H200 in one call, 2026-12-03, but 1.392-1.393
// in a later call: not established across calls; bench/results/h200-ldmatrix-2026-12-03/).
__device__ __forceinline__ unsigned engine_tid_volatile() {
  unsigned t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}
// The weight tiles of this block in consumption order. Every thread keeps the same cursor and
// copies, for each tile, its 16-byte pieces of its warp's slice (issue(); cp.async, L2
// evict-first: the stream is read once per step and must not push the activations, the KV cache
// and the counters out of L2), one commit group per tile.
template <bool PK>
struct EngineDlStream {
  static constexpr int kTile = PK ? kDlPkTileBytes : kDlTileBytes;
  const unsigned long long* table;
  const EngineDecodeDims* d;  // the kernel's (read at matrix changes only)
  unsigned ring;  // shared address of stage 0
  int stages;     // NS
  int l = 0, w = -1;
  int g = 0, g1 = 0, kc = 0, N = 0, K = 0;  // 32-bit: a live register each for the whole kernel
  unsigned next_stage = 0;  // byte offset of the stage the next tile goes to (no 64-bit modulo per tile)
  const bf16_t* W = nullptr;
  bool done = false;
  unsigned long long policy = 0;
  // Moves to the next (layer, GEMV) with rows for this block; false past the last layer.
  __device__ bool next_matrix() {
    for (;;) {
      if (++w == 4) {
        w = 0;
        if (++l == d->layers) return false;
      }
      int col;
      long long n, k, a, b;
      engine_dl_matrix(*d, w, n, k, col);
      W = (const bf16_t*)table[l * kDlTableCols + col];
      engine_dl_groups(n, a, b);
      N = (int)n, K = (int)k, g = (int)a, g1 = (int)b, kc = 0;
      if (g < g1) return true;
    }
  }
  __device__ void start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
    done = !next_matrix();
  }
  // Issues the next tile into its stage (or an empty group past the last one). Warp w copies
  // columns [64 w, 64 w + 64) of the tile's 16 rows into its own 2 KiB of the stage, the slice it
  // reads in engine_dl_gemv: row r at r x 128 bytes, its 16-byte chunk c at (c ^ (r % 8)) x 16
  // (the XOR swizzle makes the ldmatrix reads of 8 rows hit 8 different bank groups). Lane i
  // copies chunk i % 8 of rows i / 8, i / 8 + 4, + 8, + 12 (8 lanes a 128-byte row piece).
  // Pieces past the matrix (a ragged last tile, rows past N) are zero-filled (src-size 0): the
  // MMA multiplies them by zeros, and garbage there could be NaN.
  // EC12 (PK): the tile (g, kc / 1024) of the packed matrix (every tile full: the packer pads
  // with zeros); warp w copies its slice, 98 pieces of 16 bytes (3 a lane, a 4th for lanes 0-1),
  // to the same offset of the stage.
  __device__ void issue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (!done) {
      // the thread index read afresh (engine_tid_volatile): its lane constants are recomputed here
      // instead of living across the kernel, where the tensor-core entry spilled two of them and
      // reloaded them (LDL) every tile
      const unsigned tid = engine_tid_volatile();
      const int warp = (int)(tid >> 5), lane = (int)(tid & 31);
      if constexpr (PK) {
        const long long tiles = (K + kDlTileCols - 1) / kDlTileCols;
        const unsigned char* src = (const unsigned char*)W + ((long long)g * tiles + kc / kDlTileCols) * kDlPkTileBytes +
                                   warp * kDlPkSliceBytes + lane * 16;
        const unsigned dst = ring + next_stage + (unsigned)(warp * kDlPkSliceBytes + lane * 16);
#pragma unroll
        for (int u = 0; u < 4; ++u)  // pieces lane, lane + 32, lane + 64 and, for lanes 0-1, lane + 96
          if (u < 3 || lane < 2)
            asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst + 512u * u),
                         "l"(src + 512 * u), "l"(policy)
                         : "memory");
      } else {
        const int chunk = lane & 7;
        const int col = kc + warp * 64 + chunk * 8, row0 = g * kDlTileRows + (lane >> 3);
        const unsigned dst = ring + next_stage + (unsigned)(warp * 2048 + (lane >> 3) * 128);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int r = (lane >> 3) + 4 * u;
          const bool ok = col < K && row0 + 4 * u < N;
          const bf16_t* src = ok ? W + (long long)(row0 + 4 * u) * K + col : W;
          asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(
                           dst + (unsigned)(u * 512 + ((chunk ^ (r & 7)) << 4))),
                       "l"(src), "r"(ok ? 16 : 0), "l"(policy)
                       : "memory");
        }
      }
      kc += kDlTileCols;
      if (kc >= K) {
        kc = 0;
        if (++g >= g1) done = !next_matrix();
      }
    }
    next_stage = next_stage + kTile == (unsigned)(stages * kTile) ? 0u : next_stage + kTile;
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
  }
};
// Waits (every thread) until *counter >= target (thread 0 polls: engine_spin_until).
__device__ __forceinline__ void engine_dl_wait(const unsigned* counter, unsigned target) {
  if (threadIdx.x == 0) engine_spin_until(counter, target);
  __syncthreads();
}
// Layer l's KV cache of every sequence (keys [0, n_b) of [B, L, NKV, D] bf16, K and V) into L2, this
// block's 1 / gridDim share of each: attention's key loads then wait on L2, not on DRAM queues
// full of the weight stream.
__device__ __forceinline__ void engine_dl_prefetch_kv(const ThriveCudaArgs& a, const unsigned long long* tab,
                                                      const int* lens, long long l) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const long long B = a.dims[0], NKV = a.dims[3], D = a.dims[4], L = a.dims[5];
  for (long long b = 0; b < B; ++b) {
    long long n = lens[b];
    n = n < 0 ? 0 : (n > L ? L : n);
    const long long bytes = n * NKV * D * 2, share = (bytes / gridDim.x + 16) / 16 * 16,
                    start = blockIdx.x * share;
    if (start >= bytes) continue;
    const unsigned size = (unsigned)(bytes - start < share ? bytes - start : share);
    for (int c = kDlKCache; c <= kDlVCache; ++c)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(tab[l * kDlTableCols + c] + (unsigned long long)(b * L * NKV * D * 2 + start)),
                   "r"(size)
                   : "memory");
  }
#endif
}
// Every thread's writes of this stage are visible before the block counts itself done: the
// block barrier orders them before thread 0's fence and count (cooperative groups' grid sync
// pattern).
__device__ __forceinline__ void engine_dl_signal(unsigned* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1u);
  }
}
// cp.async.wait_group takes an immediate: at most NS - 2 of this thread's groups pending.
__device__ __forceinline__ void engine_dl_wait_stage(int stages) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  switch (stages) {
    case 2: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    case 7: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
  }
#endif
}
// Four 8x8 b16 matrices: lane i gives the row address of matrix i / 8, row i % 8.
__device__ __forceinline__ void engine_ldmatrix_x4(unsigned r[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// One GEMV over the block's row groups: y[t, n] (+)= sum_k xs[t, k] W[n, k], xs bf16 [T, K] in
// shared memory in fragment order (engine_xs_store8), the W tiles from the ring (`stage`: the
// one the next tile is in; NS - 1 tiles in flight ahead of it), on the tensor cores: per tile, warp w multiplies its 16 x 64 slice (A, by
// ldmatrix) with x's columns (B: token t in column t of the 16 x 8 fragment, T <= 4, the other
// columns zero) in four mma.sync m16n8k16 with f32 accumulation; across a row group's tiles a
// warp keeps its accumulators, and at the group's end the 16 warps' partial sums meet in `red`
// (two buffers of [16 warps][16 rows][4 tokens] f32, alternating by group: one block barrier a
// group). With RESIDUAL, y is the residual stream: y = bf16(y + bf16(acc)), the old y read
// before the group's tiles. The tensor cores take the unpack-and-FMA work that made the CUDA-core
// version latency-bound (1.1 µs a tile on the H200, 2026-12-01).
// With LL, y is not written: the output goes to yll [T, N / 2] as tagged words (engine_ll_store;
// rows 2 i and 2 i + 1 of a token in word i, carrying `tag`; N even), for readers that wait on
// the data itself instead of a stage counter.
// With PK, the tiles are EC12 (kDlPkTileBytes; include/thrive/model/weight_coding.hpp): each lane
// reads its 32 low bytes and 8 codes (three 16-byte loads) and builds its A fragments with byte
// permutes: a code's k selects the high byte from the slice's table (0, h0 .. h0 + 6), its sign bit
// is masked in, and the low bytes interleave with the high ones, so the MMA sees the same bf16
// values. A slice's patch words (weights outside its window, stored as +0) add v x[t, col] into the
// warp's `pbuf` row sums, which join the warp's accumulators at the group's end.
__device__ __forceinline__ uint4 engine_lds128(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ unsigned engine_lds32(unsigned addr) {
  unsigned v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
template <bool RESIDUAL, bool LL = false, bool PK = false>
__device__ __forceinline__ void engine_dl_gemv(long long T, long long N, long long K, const bf16_t* xs, bf16_t* y,
                                               unsigned ring, float* red, int& stage, EngineDlStream<PK>& st,
                                               unsigned long long* yll = nullptr, unsigned tag = 0u,
                                               float* pbuf = nullptr) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, fg = lane >> 2, fc = lane & 3;
  // ldmatrix: lanes 0-7 rows 0-7 / 8-15 rows 8-15 of the k-step's first 8 columns, 16-31 the next 8
  const int lr = (lane & 7) + ((lane >> 3) & 1) * 8;
  // the group's output owner: thread i < 64 holds row i / 4, token i % 4
  const int orow = threadIdx.x >> 2, otok = threadIdx.x & 3;
  const long long kp = engine_dl_kp(K);
  long long g0, g1;
  engine_dl_groups(N, g0, g1);
  int buf = 0;
  for (long long g = g0; g < g1; ++g, buf ^= 1) {
    const long long on = g * kDlTileRows + orow;
    const bool owner = threadIdx.x < 64 && otok < T && on < N;
    float old = 0.f;
    if (RESIDUAL && owner) old = thrive_bf16_to_f32(__ldcg(y + otok * N + on));
    float c[4] = {0.f, 0.f, 0.f, 0.f};
    for (long long kc = 0; kc < K; kc += kDlTileCols) {
      // this thread's pieces of the tile have landed (NS - 2 younger groups may be pending), and
      // after the warp barrier every lane's: the warp's slice is complete, and the stage it read
      // last round is free for the tile NS - 1 ahead
      engine_dl_wait_stage(st.stages);
      __syncwarp();
      st.issue();
      const unsigned base = PK ? ring + (unsigned)(stage * kDlPkTileBytes + warp * kDlPkSliceBytes)
                               : ring + (unsigned)(stage * kDlTileBytes + warp * 2048 + lr * 128);
      // B: pair fc of the warp's 8 chunks for token fg (fragment order: two 16-byte loads); the
      // chunks past K are zeros (a ragged last block: the words there are another chunk's or
      // never written, and a NaN there would survive the zero weights it meets)
      const long long blk = kc + warp * 64;
      unsigned bw[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
      if (fg < T && blk < K) {
        const uint4* src = (const uint4*)(xs + fg * kp + blk) + 2 * fc;
        const uint4 lo = src[0], hi = src[1];
        bw[0] = lo.x, bw[1] = lo.y, bw[2] = lo.z, bw[3] = lo.w, bw[4] = hi.x, bw[5] = hi.y, bw[6] = hi.z, bw[7] = hi.w;
        if (blk + 64 > K)
#pragma unroll
          for (int j = 0; j < 8; ++j)
            if (blk + 8 * j >= K) bw[j] = 0u;
      }
      if constexpr (PK) {
        const unsigned lb = base + (unsigned)lane * 16u;
        const uint4 l01 = engine_lds128(lb), l23 = engine_lds128(lb + 512u), cw = engine_lds128(lb + 1024u);
        const unsigned h0 = engine_lds32(base + 1536u);
        // the high-byte table: k = 0 -> 0, k = 1..7 -> h0 + k - 1 (h0 <= 121: no carries)
        const unsigned ta = h0 * 0x01010100u + 0x02010000u, tb = h0 * 0x01010101u + 0x06050403u;
        const unsigned lo[4] = {l01.x, l01.z, l23.x, l23.z}, hi[4] = {l01.y, l01.w, l23.y, l23.w},
                       code[4] = {cw.x, cw.y, cw.z, cw.w};
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          if (blk + ks * 16 >= K) break;  // warp-uniform
          const unsigned c0 = code[ks];
          const unsigned hb = __byte_perm(ta, tb, c0 & 0x7777u) | (c0 & 0x80808080u),
                         hb2 = __byte_perm(ta, tb, (c0 >> 16) & 0x7777u) | ((c0 << 4) & 0x80808080u);
          const unsigned af[4] = {__byte_perm(lo[ks], hb, 0x5140u), __byte_perm(lo[ks], hb, 0x7362u),
                                  __byte_perm(hi[ks], hb2, 0x5140u), __byte_perm(hi[ks], hb2, 0x7362u)};
          engine_mma_bf16(c, af, bw[2 * ks], bw[2 * ks + 1]);
        }
        if (lane < kDlPkPatches) {
          const unsigned pw = engine_lds32(base + 1540u + (unsigned)lane * 4u);
          if (pw != 0u) {  // row pw >> 28, column (pw >> 16) & 63 of the slice, bf16 bits pw & 0xffff
            const int pc = (int)((pw >> 16) & 63u);
            // the column's place in xs's fragment order (engine_xs_store8)
            const long long at = blk + 2 * (8 * ((pc & 7) >> 1) + (pc >> 3)) + (pc & 1);
            const float v = __uint_as_float(pw << 16);
            float* pr = pbuf + warp * 64 + (int)(pw >> 28) * 4;
            for (int t = 0; t < T; ++t) atomicAdd(pr + t, v * thrive_bf16_to_f32(xs[t * kp + at]));
          }
        }
      } else {
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          if (blk + ks * 16 >= K) break;  // warp-uniform
          unsigned af[4];
          {  // the lane's row and half from a volatile %tid.x: recomputed here, not spilled
            const unsigned tv = engine_tid_volatile() & 31u;
            engine_ldmatrix_x4(af, base + ((((unsigned)ks * 2u + (tv >> 4)) ^ (tv & 7u)) << 4));
          }
          engine_mma_bf16(c, af, bw[2 * ks], bw[2 * ks + 1]);
        }
      }
      stage = stage + 1 == st.stages ? 0 : stage + 1;
    }
    if constexpr (PK) {  // the warp's patch sums join its accumulators (and are zeroed for the next group)
      __syncwarp();
      float* pr = pbuf + warp * 64;
      if (2 * fc < T) c[0] += pr[fg * 4 + 2 * fc], c[2] += pr[(fg + 8) * 4 + 2 * fc], pr[fg * 4 + 2 * fc] = 0.f,
                      pr[(fg + 8) * 4 + 2 * fc] = 0.f;
      if (2 * fc + 1 < T) c[1] += pr[fg * 4 + 2 * fc + 1], c[3] += pr[(fg + 8) * 4 + 2 * fc + 1],
                          pr[fg * 4 + 2 * fc + 1] = 0.f, pr[(fg + 8) * 4 + 2 * fc + 1] = 0.f;
    }
    float* rb = red + buf * 1024 + warp * 64;  // [row][token]
    if (2 * fc < T) rb[fg * 4 + 2 * fc] = c[0], rb[(fg + 8) * 4 + 2 * fc] = c[2];
    if (2 * fc + 1 < T) rb[fg * 4 + 2 * fc + 1] = c[1], rb[(fg + 8) * 4 + 2 * fc + 1] = c[3];
    __syncthreads();
    if (LL) {  // thread i < 32: rows 2 (i / 4) and 2 (i / 4) + 1 of the group, token i % 4
      const int prow = (threadIdx.x >> 2) * 2;
      const long long pn = g * kDlTileRows + prow;
      if (threadIdx.x < 32 && otok < T && pn < N) {
        const float* rs = red + buf * 1024 + prow * 4 + otok;
        float v0 = 0.f, v1 = 0.f;
#pragma unroll
        for (int w = 0; w < 16; ++w) v0 += rs[w * 64], v1 += rs[w * 64 + 4];
        engine_ll_store(yll + (otok * N + pn) / 2,
                        (unsigned)thrive_f32_to_bf16(v0) | ((unsigned)thrive_f32_to_bf16(v1) << 16), tag);
      }
    } else if (owner) {
      const float* rs = red + buf * 1024 + orow * 4 + otok;
      float v = 0.f;
#pragma unroll
      for (int w = 0; w < 16; ++w) v += rs[w * 64];
      const bf16_t q = thrive_f32_to_bf16(v);
      y[otok * N + on] = RESIDUAL ? thrive_f32_to_bf16(old + thrive_bf16_to_f32(q)) : q;
    }
  }
}
// The attention workspace of engine_decode_layers, after its stage counters and launch epoch (u32
// [5 layers + 2], padded to 256 bytes): the tagged words parts_ml_ll, parts_acc_ll
// (EngineAttention), qkv_ll [T, QKV / 2], attn_ll [T, NQ D / 2].
__device__ __forceinline__ char* engine_dl_attention_ws(const ThriveCudaArgs& a) {
  return (char*)a.workspace + ((kDlStages * a.dims[7] + 2) * 4 + 255) / 256 * 256;
}
// The qkv rows' tagged words qkv_ll, after the parts' pairs and accumulators ([T NKV S G][2 + D]).
template <int G>
__device__ __forceinline__ unsigned long long* engine_dl_qkv_ll(const ThriveCudaArgs& a, int S) {
  return (unsigned long long*)engine_dl_attention_ws(a) + a.dims[0] * a.dims[3] * S * G * (2 + a.dims[4]);
}
// The unified-max sums after the tagged words (16-byte aligned): two buffers (layer parity) of
// um_acc [T, NQ, D] f32 then um_l [T, NQ] f32 (EngineAttention). Layer l adds into buffer l % 2
// and the last block zeroes it in layer l's gate/up stage (all its readers, the o stage's
// blocks, are past the o barrier then; its next writers are layer l + 2's parts).
template <int G>
__device__ __forceinline__ float* engine_dl_um(const ThriveCudaArgs& a, int S) {
  const unsigned long long* end =
      engine_dl_qkv_ll<G>(a, S) + a.dims[0] * (a.dims[2] + 2 * a.dims[3]) * a.dims[4] / 2 + a.dims[0] * a.dims[2] * a.dims[4] / 2;
  return (float*)(((unsigned long long)end + 15) / 16 * 16);
}
// Floats a buffer of the unified-max sums, rounded up to 4 (the second one 16-byte aligned too).
__device__ __forceinline__ long long engine_dl_um_floats(long long T, long long NQ, long long D) {
  return (T * NQ * (D + 1) + 3) / 4 * 4;
}
// This launch's tag for layer l: 1 + (epoch layers + l) mod (2^32 - 1), never 0 (zeroed words).
__device__ __forceinline__ unsigned engine_dl_tag(unsigned epoch, long long layers, long long l) {
  return (unsigned)(((unsigned long long)epoch * (unsigned long long)layers + (unsigned long long)l) % 0xffffffffull) + 1u;
}
// Layer l's attention operands, from the launch arguments and the layer table (built where they
// are used rather than kept for the whole kernel: fewer registers live across the layers); lens:
// the kernel's shared-memory copy of ctx_lens.
// rope: the sequences' cos_sin rows, qk_w: layer l's q_norm | k_norm, both in shared memory.
template <int G>
__device__ __forceinline__ EngineAttention engine_dl_attention(const ThriveCudaArgs& a, const unsigned long long* tab,
                                                               const int* lens, const float* rope, const bf16_t* qk_w,
                                                               long long l, int S, unsigned tag) {
  EngineAttention at;
  at.B = a.dims[0], at.NQ = a.dims[2], at.NKV = a.dims[3], at.D = a.dims[4], at.L = a.dims[5];
  at.scale = (float)a.scalars[0], at.eps = (float)a.scalars[1];
  at.qkv = (const bf16_t*)a.tensors[2], at.out = (bf16_t*)a.tensors[3];
  at.cos_sin = (const float*)a.tensors[5], at.rope_rows = rope, at.lens = lens;
  at.counters = nullptr;  // the PM path counts nothing
  at.parts_ml_ll = (unsigned long long*)engine_dl_attention_ws(a);
  at.parts_acc_ll = at.parts_ml_ll + at.B * at.NKV * S * G * 2;
  at.qkv_ll = engine_dl_qkv_ll<G>(a, S);
  at.out_ll = (unsigned long long*)at.qkv_ll + at.B * (at.NQ + 2 * at.NKV) * at.D / 2;
  at.parts_ml = at.parts_acc = nullptr;  // the PM path's are the tagged ones
  const unsigned long long* row = tab + l * kDlTableCols;
  at.tag = tag;
  at.qk_w = qk_w, at.k_cache = (bf16_t*)row[kDlKCache], at.v_cache = (bf16_t*)row[kDlVCache];
  at.um_acc = engine_dl_um<G>(a, S) + (l & 1) * engine_dl_um_floats(at.B, at.NQ, at.D);
  at.um_l = at.um_acc + at.B * at.NQ * at.D;
  at.um_count = (unsigned*)a.workspace + kDlStages * l + kDlAttn;
  return at;
}
// Part i of the attention stage: split s, KV head g, sequence b (32-bit: i < kDlAttnGroups gridDim).
__device__ __forceinline__ void engine_dl_part(int i, int S, int NKV, int& s, int& g, int& b) {
  const int bg = i / S;
  s = i - bg * S, b = bg / NKV, g = bg - b * NKV;
}
// The attention stage of one layer with the CUDA-core parts: parts i = (b, g, s), kDlAttnGroups
// 128-thread groups a block
// (the host's decode_layers_splits and decode_layers_region use the same count; the other warps go
// on to the next barrier), each part waiting for its qkv rows' tagged
// words and leaving its slice of the output in attn_ll (the parallel merge, PM), which the o
// stage's loads wait for. Two key slots a lane per round of loads (U = 2, the standalone kernel has 4):
// fewer registers in a kernel capped at 128 a thread, 1.87 against 1.92 ms a batch-1 step on the
// H200 (2026-12-01; as a __noinline__ call instead, 1.92).
template <int G>
__device__ __forceinline__ void engine_dl_attention_stage(const EngineAttention& at, int S, EngineAttentionSmem<G>* sm) {
  const int half = threadIdx.x >> 7, tid = threadIdx.x & 127;
  if (half >= kDlAttnGroups) return;
  const auto sync = [half] { asm volatile("bar.sync %0, 128;" ::"r"(1 + half) : "memory"); };
  const int parts = (int)(at.B * at.NKV) * S, NKV = (int)at.NKV;
  for (int i = blockIdx.x * kDlAttnGroups + half; i < parts; i += kDlAttnGroups * (int)gridDim.x) {
    int s, g, b;
    engine_dl_part(i, S, NKV, s, g, b);
    engine_decode_attention_part<G, true, 2, true>(at, s, g, b, S, tid, sm[half], sync);
    sync();  // the part's shared memory is free for the next one
  }
}
// ---- The persistent kernel's attention parts on tensor cores (head dims 64 and 128) ----
// mma.sync m16n8k8 bf16 with f32 accumulation (PTX ISA "Matrix Fragments for mma.m16n8k8"): A
// (16x8, row) holds rows g and g+8 at columns 2c, 2c+1; B (8x8, col) column g at rows 2c, 2c+1;
// C as m16n8k16's.
__device__ __forceinline__ void engine_mma_bf16_k8(float c[4], unsigned a0, unsigned a1, unsigned b0) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(b0));
}
// Two floats that are bf16 values (already rounded) as one bf16x2 word, lo in the low half.
__device__ __forceinline__ unsigned engine_bf16x2_of(float lo, float hi) {
  return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);
}
// acc[0..3] += v (f32, 16-byte aligned, global memory): one vector reduction at L2 (PTX ISA 8.1,
// red.add.v4.f32, sm_90).
__device__ __forceinline__ void engine_red_add_v4(float* acc, float4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(acc), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
#endif
}
// The first n of N pieces of eight bf16 (four tagged words each, the i-th at p + i stride, 16-byte
// aligned; zeros past n) once they all carry `tag`: engine_ll_issue8n puts every piece's loads in
// flight, engine_ll_finish8n checks them and polls only a piece that is not there yet
// (engine_ll_wait8).
template <int N>
__device__ __forceinline__ void engine_ll_issue8n(const unsigned long long* p, int stride, int n, unsigned long long w[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    w[i][0] = w[i][1] = w[i][2] = w[i][3] = 0ull;
    if (i >= n) continue;
    asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];" : "=l"(w[i][0]), "=l"(w[i][1]) : "l"(p + i * stride) : "memory");
    asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];" : "=l"(w[i][2]), "=l"(w[i][3]) : "l"(p + i * stride + 2) : "memory");
  }
}
template <int N>
__device__ __forceinline__ void engine_ll_finish8n(const unsigned long long* p, int stride, int n, unsigned tag,
                                                   const unsigned long long w[N][4], uint4 out[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (i >= n) {
      out[i] = make_uint4(0u, 0u, 0u, 0u);
      continue;
    }
    const bool ok = (unsigned)(w[i][0] >> 32) == tag && (unsigned)(w[i][1] >> 32) == tag &&
                    (unsigned)(w[i][2] >> 32) == tag && (unsigned)(w[i][3] >> 32) == tag;
    out[i] = ok ? make_uint4((unsigned)w[i][0], (unsigned)w[i][1], (unsigned)w[i][2], (unsigned)w[i][3])
                : engine_ll_wait8(p + i * stride, tag);
  }
}
// The lane layout of the tensor-core parts. A lane quad (lanes 4 r .. 4 r + 3, c = lane % 4)
// holds one D-vector (a query head, a key): lane c the D / 4 elements x[8 i + e] = element 32 i
// + 8 c + e (i < D / 32, e < 8), i.e. 16-byte pieces. In the QK^T product (m16n8k16, A = the G
// query heads as rows, padded to 16 with zeros; B = K^T, 8 keys as columns) k-step 2 i + h takes
// words 2 h and 2 h + 1 of piece i as the fragment's columns 2c, 2c+1 and 2c+8, 2c+9: the same
// permutation of the D elements for the query and the key, so the dot products are unchanged.
// RoPE's partner of element 32 i + 8 c + e is in piece i + D / 64 of the same lane (D >= 64).
// x becomes bf16(RoPE(bf16(RMSNorm(x) w))) at the angles of cs (the position's cos_sin row: cos
// [D / 2] | sin [D / 2]): Qwen3's q/k head norm, then the GPT-NeoX half-split rotation (Su et al.
// 2021), the same roundings as engine_norm_rope8. The sum of squares is a shuffle over the quad.
template <int D>
__device__ __forceinline__ void engine_tc_norm_rope(float x[D / 4], const bf16_t* w, const float* cs, int c, float eps) {
  constexpr int P = D / 32, HALF = D / 64;  // pieces a lane holds; RoPE partner piece offset
  float ss[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < D / 4; ++i) ss[i & 3] += x[i] * x[i];
  float t = (ss[0] + ss[1]) + (ss[2] + ss[3]);
  t += __shfl_xor_sync(0xffffffffu, t, 1);
  t += __shfl_xor_sync(0xffffffffu, t, 2);
  const float inv = rsqrtf(t / (float)D + eps);
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const uint4 wv = *(const uint4*)(w + 32 * i + 8 * c);
    const unsigned ww[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      x[8 * i + 2 * e] = engine_bf16_round(x[8 * i + 2 * e] * inv * __uint_as_float(ww[e] << 16));
      x[8 * i + 2 * e + 1] = engine_bf16_round(x[8 * i + 2 * e + 1] * inv * __uint_as_float(ww[e] & 0xffff0000u));
    }
  }
#pragma unroll
  for (int i = 0; i < HALF; ++i) {
    const float4 c0 = *(const float4*)(cs + 32 * i + 8 * c), c1 = *(const float4*)(cs + 32 * i + 8 * c + 4);
    const float4 s0 = *(const float4*)(cs + D / 2 + 32 * i + 8 * c), s1 = *(const float4*)(cs + D / 2 + 32 * i + 8 * c + 4);
    const float co[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
    const float si[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float a = x[8 * i + e], b = x[8 * (i + HALF) + e];
      x[8 * i + e] = engine_bf16_round(a * co[e] - b * si[e]);
      x[8 * (i + HALF) + e] = engine_bf16_round(b * co[e] + a * si[e]);
    }
  }
}
// The D / 4 elements of a lane's pieces from uint4 words (two bf16 each), and back (the values
// are bf16 already: no rounding).
template <int D>
__device__ __forceinline__ void engine_tc_unpack(const uint4 v[D / 32], float x[D / 4]) {
#pragma unroll
  for (int i = 0; i < D / 32; ++i) engine_unpack8(v[i], x + 8 * i);
}
template <int D>
__device__ __forceinline__ void engine_tc_pack(const float x[D / 4], uint4 v[D / 32]) {
#pragma unroll
  for (int i = 0; i < D / 32; ++i)
    v[i] = make_uint4(engine_bf16x2_of(x[8 * i], x[8 * i + 1]), engine_bf16x2_of(x[8 * i + 2], x[8 * i + 3]),
                      engine_bf16x2_of(x[8 * i + 4], x[8 * i + 5]), engine_bf16x2_of(x[8 * i + 6], x[8 * i + 7]));
}
// The warps of a tensor-core part (kDlTcWarps x 32 threads, one attention group of the block).
constexpr int kDlTcWarps = 8;
// One (split s of S, KV head g, sequence b) part of the persistent kernel's decode attention by
// kDlTcWarps warps on tensor cores (tid 0 .. 32 kDlTcWarps - 1; `sync` is their barrier), the
// operands and outputs of engine_decode_attention_part<G, true, U, true> (the qkv rows as tagged
// words, the new key's q/k norm, RoPE and KV-cache write, the parts' tagged results and the
// parallel merge into out_ll), the same roundings but for the softmax weights of the P.V product,
// each a sum of two bf16 (hi + lo: about 16 significant bits, where FlashAttention takes one).
// The part's keys [lo, hi) (as engine_decode_attention_part's) go in tiles of 8: warp w takes tiles
// w, w + kDlTcWarps, ... with an online softmax across its tiles. A tile is one m16n8k16 product a
// k-step (S = Q K^T: rows the G query heads, columns the 8 keys; D / 16 k-steps), the scores'
// max and sum in the C fragment (a shuffle over the lane quad: lane (r, c) holds head r's scores
// of keys 2c, 2c+1), then O^T += V^T P^T as D / 16 m16n8k8 products whose B fragment is that C
// fragment in bf16, twice (hi and lo; keys 2c, 2c+1 of head r) and whose A fragment is V^T: lane (r, c) loads keys
// 2c, 2c+1 at elements [r D / 8, (r + 1) D / 8) (a permutation of the D output rows: m-tile t's
// rows r and r + 8 are elements r D / 8 + 2 t and + 1, two bf16 of one word, paired across the
// two keys by byte permutes). Lane (r, c) ends holding the output of heads 2c and 2c+1 at those
// elements. The warps' (max, sum, accumulator) go to shared memory and are merged there into the
// part's result. Against the CUDA-core parts (16 lanes a key, a shuffle reduction and an online
// softmax update a key and head) the chain of dependent instructions a warp runs is a fraction.
// UM (unified max): instead of each warp's running max and the parts' merge, every weight is
// 2^(s - M_r) with M_r = |q~_r| |k~|max (log2 units), a bound on every score of query head r
// (Cauchy-Schwarz; |k~| <= sqrt(D) max|k_norm| (1 + 2^-9)^2 for RMSNorm's unit-RMS output times
// k_norm, RoPE a rotation, two bf16 roundings; a factor 1.02 covers them), the same
// for every part, so the parts' numerators and denominators add (FlashDecoding++, Hong et al.
// 2023, section 3: a unified max value for the partial softmaxes). Weights are <= 1 (no overflow);
// the host runs this only where M_r <= 40 for every possible query (the norm weights' bound,
// unified_max_bound in src/model/cuda_engine.cpp), so the largest weight is >= 2^-80, far from
// f32's underflow. The part adds its result into um_acc / um_l and counts itself in um_count;
// the o stage waits for the count and divides. The float reductions add in the order the parts
// finish, so the output varies in its last bits from run to run (the merge path's does not): the
// host runs this only when asked (CudaEngineOptions::persistent_unified_max).
template <int G, int D, bool UM, class Sync>
__device__ __forceinline__ void engine_dl_attention_part_tc(const EngineAttention& a, int s, int g, int b, int S,
                                                            int tid, EngineAttentionSmem<G>& sm, Sync sync) {
  static_assert(D == 64 || D == 128, "tensor-core parts: head dim 64 or 128");
  // sm.ml (256 G floats): the warps' pairs in floats [0, 2 kDlTcWarps G), the staging rows in
  // [128, 128 + D)
  static_assert(2 * kDlTcWarps * G <= 128 && 128 + D <= 256 * G, "sm.ml holds the pairs and the staging rows");
  constexpr int kThreads = 32 * kDlTcWarps, P = D / 32, KS = D / 16, VP = D / 64;  // pieces a key (QK, V)
  const int lane = tid & 31, warp = tid >> 5, r = lane >> 2, c = lane & 3;
  const int L = (int)a.L, NQ = (int)a.NQ, NKV = (int)a.NKV;
  int n = a.lens[b];
  n = n < 0 ? 0 : (n > L ? L : n);
  const int cl = (n + S - 1) / S, lo = s * cl, hi = lo + cl < n ? lo + cl : n, p = n - 1;
  const int tiles = hi > lo ? (hi - lo + 7) >> 3 : 0;
  const float qs = a.scale * 1.4426950408889634f;
  const long long stride = (long long)NKV * D;  // elements between positions of the cache
  bf16_t* kb = a.k_cache + ((long long)b * L * NKV + g) * D;
  bf16_t* vb = a.v_cache + ((long long)b * L * NKV + g) * D;
  const unsigned long long* rw = a.qkv_ll + (long long)b * (NQ + 2 * NKV) * (D / 2);
  const float* cs = a.rope_rows + b * D;
  // The warp whose tiles hold the new position p (pw, warp-uniform) also makes its key and value,
  // in the same pass as the query heads (below) where the query leaves lanes free (G < 8): the
  // key (q/k RMSNorm with k_norm, RoPE) by quad 7, the value's slices [j D / 8, (j + 1) D / 8) by
  // lanes 4 G + j (j < 8); at G = 8 in a second pass (the key by quad 0, the slices by lanes 8 +
  // j). They go to the KV cache and to staging rows in shared memory (sm.ml's floats 128-255,
  // unused until the warps' results: a key row then a value row), from which the tiles take row p.
  // (Made before this warp's tile loads and query, the key and value put a wait and a norm on its
  // path alone: its part ended 4 us after the others on the H200, 2026-12-02, run 3.)
  const int tp = lo <= p && p < hi ? (p - lo) >> 3 : -1;
  const bool pw = tp >= 0 && tp % kDlTcWarps == warp;
  bf16_t* stage_k = (bf16_t*)(&sm.ml[0][0][0] + 128);
  bf16_t* stage_v = stage_k + D;
  // a tile's operands: this lane's key of the QK^T product (base + r), its two keys of the P.V
  // product (base + 2c, + 1); zeros past hi, row p from the staging rows (staged: they are there)
  uint4 kr[P], va[VP], vbv[VP];
  const auto load_tile = [&](int t, bool staged) {
    const int base = lo + 8 * t, jk = base + r, ja = base + 2 * c;
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int i = 0; i < P; ++i)
      kr[i] = jk == p ? (staged ? *(const uint4*)(stage_k + 32 * i + 8 * c) : z)
              : jk < hi ? *(const uint4*)(kb + jk * stride + 32 * i + 8 * c) : z;
#pragma unroll
    for (int i = 0; i < VP; ++i) {
      va[i] = ja == p ? (staged ? *(const uint4*)(stage_v + r * (D / 8) + 8 * i) : z)
              : ja < hi ? *(const uint4*)(vb + ja * stride + r * (D / 8) + 8 * i) : z;
      vbv[i] = ja + 1 == p ? (staged ? *(const uint4*)(stage_v + r * (D / 8) + 8 * i) : z)
               : ja + 1 < hi ? *(const uint4*)(vb + (ja + 1) * stride + r * (D / 8) + 8 * i) : z;
    }
  };
  if (warp < tiles) load_tile(warp, false);  // before the qkv rows: it does not depend on them
  float m_fix = 0.f;  // UM: M_r of this lane's query head r
  // Query head r of the group (quads r < G) as the A fragments of the k-steps
  unsigned qa[KS][2];
  const int passes = G == 8 && pw ? 2 : 1;
  for (int pass = 0; pass < passes; ++pass) {  // warp-uniform
    const bool kv = pw && (G < 8 || pass == 1);  // this pass makes the new key and value
    const int kq = G < 8 ? 7 : 0, v0 = G < 8 ? 4 * G : 8, j = lane - v0;
    const bool isq = pass == 0 && r < G, isk = kv && r == kq, isv = kv && j >= 0 && j < 8;
    const unsigned long long* src = isv ? rw + (NQ + NKV + g) * (D / 2) + j * (D / 16)
                                        : rw + (isk ? NQ + g : g * G + r) * (D / 2) + 4 * c;
    const int step = isv ? 4 : 16, pieces = isv ? VP : isq || isk ? P : 0;
    unsigned long long w[P][4];
    uint4 raw[P];
    engine_ll_issue8n<P>(src, step, pieces, w);
    engine_ll_finish8n<P>(src, step, pieces, a.tag, w, raw);
    if (isv)
#pragma unroll
      for (int i = 0; i < VP; ++i)
        *(uint4*)(vb + p * stride + j * (D / 8) + 8 * i) = raw[i], *(uint4*)(stage_v + j * (D / 8) + 8 * i) = raw[i];
    float x[D / 4];
    engine_tc_unpack<D>(raw, x);
    if (!isq && !isk)
#pragma unroll
      for (int i = 0; i < D / 4; ++i) x[i] = 0.f;
    engine_tc_norm_rope<D>(x, isk ? a.qk_w + D : a.qk_w, cs, c, a.eps);  // zeros stay zeros
    if (UM && pass == 0) {
      // M_r = qs |q~_r| sqrt(D) max|k_norm| 1.02 for query head r (quads r < G; the other rows'
      // are never used); the quad's four lanes hold all D elements and all D k_norm weights
      float qn = 0.f, km = 0.f;
#pragma unroll
      for (int i = 0; i < D / 4; ++i) qn += x[i] * x[i];
#pragma unroll
      for (int i = 0; i < P; ++i) {
        const uint4 wv = *(const uint4*)(a.qk_w + D + 32 * i + 8 * c);
        const unsigned ww[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
          km = fmaxf(km, fmaxf(fabsf(__uint_as_float(ww[e] << 16)), fabsf(__uint_as_float(ww[e] & 0xffff0000u))));
      }
      qn += __shfl_xor_sync(0xffffffffu, qn, 1);
      km = fmaxf(km, __shfl_xor_sync(0xffffffffu, km, 1));
      qn += __shfl_xor_sync(0xffffffffu, qn, 2);
      km = fmaxf(km, __shfl_xor_sync(0xffffffffu, km, 2));
      m_fix = sqrtf(qn) * km * (qs * sqrtf((float)D) * 1.02f);
    }
    engine_tc_pack<D>(x, raw);
    // rows past G: zeros, but the new key in quad 7 of the p warp (their scores, weights and
    // output columns are never used, and the products keep rows and columns apart; zeroing them
    // made ptxas spill 244 bytes instead of 188 at G = 2, D = 128)
    if (pass == 0)
#pragma unroll
      for (int i = 0; i < P; ++i) qa[2 * i][0] = raw[i].x, qa[2 * i][1] = raw[i].y, qa[2 * i + 1][0] = raw[i].z, qa[2 * i + 1][1] = raw[i].w;
    if (isk)
#pragma unroll
      for (int i = 0; i < P; ++i)
        *(uint4*)(kb + p * stride + 32 * i + 8 * c) = raw[i], *(uint4*)(stage_k + 32 * i + 8 * c) = raw[i];
  }
  if (pw) {
    __syncwarp();
    if (tp == warp) {  // the first tile is tp's: its row p from the staging rows
      const int jk = lo + 8 * warp + r, ja = lo + 8 * warp + 2 * c;
#pragma unroll
      for (int i = 0; i < P; ++i)
        if (jk == p) kr[i] = *(const uint4*)(stage_k + 32 * i + 8 * c);
#pragma unroll
      for (int i = 0; i < VP; ++i) {
        if (ja == p) va[i] = *(const uint4*)(stage_v + r * (D / 8) + 8 * i);
        if (ja + 1 == p) vbv[i] = *(const uint4*)(stage_v + r * (D / 8) + 8 * i);
      }
    }
  }
  float o[KS][4];
#pragma unroll
  for (int t = 0; t < KS; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.f;
  float m_run = -__int_as_float(0x7f800000), l_run = 0.f;  // head r's max (log2 units) and this lane's share of its sum
  for (int t = warp; t < tiles; t += kDlTcWarps) {
    if (t != warp) load_tile(t, true);
    const int ja = lo + 8 * t + 2 * c;
    // S = Q K^T: two accumulator chains (even and odd k-steps)
    float sc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int k = 0; k < KS; ++k) {
      const unsigned af[4] = {qa[k][0], 0u, qa[k][1], 0u};
      engine_mma_bf16(sc[k & 1], af, (k & 1) ? kr[k >> 1].z : kr[k >> 1].x, (k & 1) ? kr[k >> 1].w : kr[k >> 1].y);
    }
    const float s0 = ja < hi ? (sc[0][0] + sc[1][0]) * qs : -__int_as_float(0x7f800000);
    const float s1 = ja + 1 < hi ? (sc[0][1] + sc[1][1]) * qs : -__int_as_float(0x7f800000);
    float corr = 1.f, p0, p1;
    if constexpr (UM) {
      p0 = exp2f(s0 - m_fix), p1 = exp2f(s1 - m_fix);  // <= 1: m_fix bounds every score
      l_run += p0 + p1;
    } else {
      float mt = fmaxf(s0, s1);
      mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
      mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
      const float mn = fmaxf(m_run, mt), mu = mn == -__int_as_float(0x7f800000) ? 0.f : mn;
      corr = exp2f(m_run - mu);  // 0 before the first key
      p0 = exp2f(s0 - mu), p1 = exp2f(s1 - mu);
      l_run = l_run * corr + (p0 + p1);
      m_run = mn;
    }
    // the weights as bf16 pairs hi + lo (lo = bf16 of the rest: about 16 significant bits together,
    // where hi alone moved the test model's logits by up to 1.4% against the CUDA-core parts)
    const unsigned pb = engine_pack_bf16x2(p0, p1);
    const unsigned pl = engine_pack_bf16x2(p0 - __uint_as_float(pb << 16), p1 - __uint_as_float(pb & 0xffff0000u));
    if (!UM && t != warp) {  // rescale the accumulators of heads 2c and 2c+1 (their corr from quads 2c, 2c+1)
      const float ca = __shfl_sync(0xffffffffu, corr, 8 * c), cb = __shfl_sync(0xffffffffu, corr, 8 * c + 4);
#pragma unroll
      for (int k = 0; k < KS; ++k) o[k][0] *= ca, o[k][2] *= ca, o[k][1] *= cb, o[k][3] *= cb;
    }
    // O^T += V^T P^T
#pragma unroll
    for (int k = 0; k < KS; ++k) {
      const uint4 x = va[k >> 2], y = vbv[k >> 2];
      const unsigned xa = (k & 3) == 0 ? x.x : (k & 3) == 1 ? x.y : (k & 3) == 2 ? x.z : x.w;
      const unsigned ya = (k & 3) == 0 ? y.x : (k & 3) == 1 ? y.y : (k & 3) == 2 ? y.z : y.w;
      const unsigned a0 = __byte_perm(xa, ya, 0x5410), a1 = __byte_perm(xa, ya, 0x7632);
      engine_mma_bf16_k8(o[k], a0, a1, pb);
      engine_mma_bf16_k8(o[k], a0, a1, pl);
    }
  }
  // The warp's (max, sum) of head r and accumulators of heads 2c, 2c+1 into shared memory (sm.ml
  // [warp][h], sm.acc [warp][h][D]; a warp without keys writes -inf, 0 and zeros)
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 1);
  l_run += __shfl_xor_sync(0xffffffffu, l_run, 2);
  if (c == 0 && r < G) sm.ml[warp][r][0] = m_run, sm.ml[warp][r][1] = l_run;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh)
    if (2 * c + hh < G) {
      float* dst = sm.acc + (warp * G + 2 * c + hh) * D + r * (D / 8);
#pragma unroll
      for (int k = 0; k < KS; k += 2)
        *(float4*)(dst + 2 * k) = make_float4(o[k][hh], o[k][2 + hh], o[k + 1][hh], o[k + 1][2 + hh]);
    }
  sync();
  if constexpr (UM) {
    // The part's result, the warps' sums (one scale: no weights), added into um_acc and um_l; then
    // counted (the group barrier orders every thread's reductions before thread 0's fence and
    // count, as engine_dl_signal). A part without keys adds nothing.
    float* acc_out = a.um_acc + ((long long)b * NQ + g * G) * D;
    for (int e = 4 * tid; e < G * D && tiles > 0; e += 4 * kThreads) {
      float4 A = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int i = 0; i < kDlTcWarps; ++i) {
        const float4 v = *(const float4*)(sm.acc + i * G * D + e);  // head e / D, element e % D of warp i
        A.x += v.x, A.y += v.y, A.z += v.z, A.w += v.w;
      }
      engine_red_add_v4(acc_out + e, A);
    }
    if (tid < G && tiles > 0) {
      float Ls = 0.f;
#pragma unroll
      for (int i = 0; i < kDlTcWarps; ++i) Ls += sm.ml[i][tid][1];
      atomicAdd(a.um_l + (long long)b * NQ + g * G + tid, Ls);
    }
    sync();
    if (tid == 0) {
      __threadfence();
      atomicAdd(a.um_count, 1u);
    }
    return;
  }
  // The part's result: per element of the G D outputs, the warps' accumulators weighted by
  // 2^(m_w - M), as tagged words
  const long long bg = (long long)b * NKV + g;
  unsigned long long* part_acc_ll = a.parts_acc_ll + (bg * S + s) * G * D;
  unsigned long long* part_ml_ll = a.parts_ml_ll + (bg * S + s) * G * 2;
  constexpr int dlog = D == 64 ? 6 : 7;
  for (int e = tid; e < G * D; e += kThreads) {
    const int h = e >> dlog, d = e & (D - 1);
    float M = -__int_as_float(0x7f800000);
#pragma unroll
    for (int i = 0; i < kDlTcWarps; ++i) M = fmaxf(M, sm.ml[i][h][0]);
    float Ls = 0.f, A = 0.f;
    if (M > -__int_as_float(0x7f800000))
#pragma unroll
      for (int i = 0; i < kDlTcWarps; ++i) {
        const float wi = exp2f(sm.ml[i][h][0] - M);
        Ls += sm.ml[i][h][1] * wi;
        A += sm.acc[(i * G + h) * D + d] * wi;
      }
    engine_ll_store(part_acc_ll + e, __float_as_uint(A), a.tag);
    if (d == 0) {
      engine_ll_store(part_ml_ll + 2 * h, __float_as_uint(M), a.tag);
      engine_ll_store(part_ml_ll + 2 * h + 1, __float_as_uint(Ls), a.tag);
    }
  }
  engine_attention_merge_slice<G, kThreads>(a, s, bg, S, tid, sm, sync);
}
// The attention stage with tensor-core parts: part i = (b, g, s) on block i % gridDim, group i /
// gridDim (two groups of kDlTcWarps warps a block: parts spread over the SMs first).
template <int G, int D, bool UM>
__device__ __forceinline__ void engine_dl_attention_stage_tc(const EngineAttention& at, int S, EngineAttentionSmem<G>* sm) {
  static_assert(kDlTcWarps * 32 * kDlAttnGroups == 512, "two groups of 256 threads fill the 512-thread block");
  const int half = threadIdx.x >> 8, tid = threadIdx.x & 255;
  const auto sync = [half] { asm volatile("bar.sync %0, 256;" ::"r"(1 + half) : "memory"); };
  const int parts = (int)(at.B * at.NKV) * S, NKV = (int)at.NKV;
  for (int i = blockIdx.x + half * (int)gridDim.x; i < parts; i += kDlAttnGroups * (int)gridDim.x) {
    int s, g, b;
    engine_dl_part(i, S, NKV, s, g, b);
    engine_dl_attention_part_tc<G, D, UM>(at, s, g, b, S, tid, sm[half], sync);
    sync();  // the part's shared memory is free for the next one
  }
}
extern __shared__ __align__(128) unsigned char engine_dl_smem[];
// TD: 0 = the CUDA-core attention parts (engine_dl_attention_stage), 64 or 128 = the tensor-core
// parts at that head dim (engine_dl_attention_stage_tc; dims[4] must be TD, the host checks).
// UM: the tensor-core parts with the unified max (engine_dl_attention_part_tc), the o stage's input
// from their sums.
template <int G, int TD, bool UM, bool PK>
__device__ __forceinline__ void engine_decode_layers(const ThriveCudaArgs& a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const EngineDecodeDims d{a.dims[0], a.dims[1], a.dims[2], a.dims[3], a.dims[4], a.dims[5], a.dims[6], a.dims[7]};
  // 32-bit copies (every dim fits): fewer registers live across the layers
  const int T = (int)d.T, H = (int)d.H, NQ = (int)d.NQ, NKV = (int)d.NKV, D = (int)d.D, I = (int)d.I,
            QKV = (NQ + 2 * NKV) * D;
  if (T < 1 || T > 4) __trap();  // the host checks: the GEMV's cross-warp sums hold 4 tokens
  if (TD > 0 && D != TD) __trap();  // the host picks the entry of the model's head dim
  const float eps = (float)a.scalars[1];
  // scalars[2] packs NS + 16 x (KV prefetch on): ThriveCudaArgs has four scalars
  const long long packed = (long long)a.scalars[2];
  const int stages = (int)(packed & 15), S = (int)a.scalars[3];
  // the parallel merge waits for all S parts of a (b, g): each needs its own 128-thread group
  if (S > 1 && T * NKV * S > kDlAttnGroups * (int)gridDim.x) __trap();  // the host's split count keeps to this
  bf16_t* h = (bf16_t*)a.tensors[0];
  const unsigned long long* table = (const unsigned long long*)a.tensors[1];
  // tensors[2] (qkv) and [3] (attn) are not used: the qkv rows and the attention output go through
  // the workspace's tagged words (qkv_ll, attn_ll)
  bf16_t *gu = (bf16_t*)a.tensors[4];
  unsigned long long* stamps = (unsigned long long*)a.tensors[7];
  const bool stamp = stamps != nullptr && blockIdx.x == 0 && threadIdx.x == 0;
  unsigned* counters = (unsigned*)a.workspace;
  const long long n_counters = kDlStages * d.layers + 1;
  unsigned* exit_counter = counters + kDlStages * d.layers;

  const long long kmax = H > NQ * D ? (H > I ? H : I) : (NQ * D > I ? NQ * D : I);
  const long long xs_bytes = T * engine_dl_kp(kmax) * 2,
                  attn_bytes = kDlAttnGroups * (long long)sizeof(EngineAttentionSmem<G>);
  const long long region = ((xs_bytes > attn_bytes ? xs_bytes : attn_bytes) + 127) / 128 * 128;
  float* red = (float*)(engine_dl_smem + kDlHead);
  unsigned long long* tab = (unsigned long long*)(engine_dl_smem + kDlHead + kDlReduceBytes);
  const long long tab_bytes = (d.layers * kDlTableCols * 8 + 127) / 128 * 128;
  float* rope = (float*)(engine_dl_smem + kDlHead + kDlReduceBytes + tab_bytes);
  bf16_t* qk_w = (bf16_t*)((unsigned char*)rope + engine_dl_rope_bytes(T, D));
  unsigned char* rest = (unsigned char*)qk_w + engine_dl_qknorm_bytes(D);
  bf16_t* xs = (bf16_t*)rest;
  EngineAttentionSmem<G>* attn_sm = (EngineAttentionSmem<G>*)rest;
  const unsigned ring = engine_dl_smem_addr(rest + region);
  // EC12's patch sums after the ring (the host adds kDlPkPatchBytes to the shared memory)
  float* pbuf = PK ? (float*)(rest + region + (long long)(packed & 15) * kDlPkTileBytes) : nullptr;
  if (PK)
    for (int i = threadIdx.x; i < kDlPkPatchBytes / 4; i += blockDim.x) pbuf[i] = 0.f;
  // The pointer table into shared memory: it is read at every stage and matrix change, and in L2
  // it would be a normal line the KV cache's traffic can push out (a DRAM trip a layer).
  for (long long i = threadIdx.x; i < d.layers * kDlTableCols; i += blockDim.x) tab[i] = table[i];
  __syncthreads();

  // Weights first (they depend on no earlier kernel): NS - 1 tiles in flight before the wait.
  const bool kv_prefetch = (packed >> 4) & 1;
  EngineDlStream<PK> st;
  st.table = tab, st.d = &d, st.ring = ring, st.stages = stages;
  st.start();
  for (int i = 0; i + 1 < stages; ++i) st.issue();
  int stage = 0;
  __syncthreads();
  engine_pdl_trigger();
  engine_pdl_wait();
  // ctx_lens into the head (T <= 4): read by every attention part and KV prefetch; from
  // global memory it was a round trip on their paths each layer (the stage waits' acquire loads
  // invalidate L1), before the RoPE row's address was known.
  int* lens = (int*)engine_dl_smem;
  if (threadIdx.x < T) lens[threadIdx.x] = ((const int*)a.tensors[6])[threadIdx.x];
  // this launch's epoch (the last launch's last block advanced it; the tagged words' tags derive
  // from it: engine_dl_tag)
  const unsigned epoch = ((volatile unsigned*)counters)[kDlStages * d.layers + 1];
  __syncthreads();
  // The cos_sin row of each sequence's new position (p = clamp(len, 0, L) - 1, row 0 when
  // negative, as engine_decode_attention_part takes it), read once a step instead of once a layer
  // after the qkv wait (1 of the attention stage's round trips).
  for (int i = threadIdx.x; i < T * D; i += blockDim.x) {
    const long long n = lens[i / D] < 0 ? 0 : (lens[i / D] > d.L ? d.L : lens[i / D]);
    rope[i] = ((const float*)a.tensors[5])[(n > 0 ? n - 1 : 0) * D + i % D];
  }
  for (long long l = 0; l < d.layers; ++l) {
    const bf16_t* const* W = (const bf16_t* const*)(tab + l * kDlTableCols);
    unsigned* c = counters + kDlStages * l;
    // qkv = RMSNorm(h) . Wqkv^T
    if (l > 0) engine_dl_wait(c - kDlStages + kDlDown, gridDim.x);
    if (stamp) stamps[kDlStages * l + kDlQkv] = engine_globaltimer_ns();
    if (kv_prefetch && threadIdx.x == 32) engine_dl_prefetch_kv(a, tab, lens, l);
    // this layer's q_norm | k_norm (2 D bf16) for the attention stage, read before the qkv wait
    for (int i = threadIdx.x; i < D / 2; i += blockDim.x) ((uint2*)qk_w)[i] = ((const uint2*)W[kDlQkNorm])[i];
    engine_gemv_norm_input<true>(h, W[kDlInNorm], T, H, eps, xs);
    __syncthreads();
    // the qkv rows as tagged words: each attention part waits for its own rows, not for a stage
    // count (no fence, count or poll between the GEMV and attention)
    // (the attention operands are built after the GEMV: live across it, they were spilled and their
    // reloads were L2 round trips at the stage's start)
    const unsigned tag = engine_dl_tag(epoch, d.layers, l);
    engine_dl_gemv<false, true, PK>(T, QKV, H, xs, nullptr, ring, red, stage, st,
                                    (unsigned long long*)engine_dl_qkv_ll<G>(a, S), tag, pbuf);
    __syncthreads();  // xs, which the attention groups' shared memory overlaps, is read
    const EngineAttention at = engine_dl_attention<G>(a, tab, lens, rope, qk_w, l, S, tag);
    // attention
    if (stamp) stamps[kDlStages * l + kDlAttn] = engine_globaltimer_ns();
    if constexpr (TD > 0) engine_dl_attention_stage_tc<G, TD, UM>(at, S, attn_sm);
    else engine_dl_attention_stage<G>(at, S, attn_sm);
    // h += attn . Wo^T: the input's loads wait for the attention output's tagged words (a block
    // with no o rows skips them, which only saves time; block 0 waits anyway when it records the
    // stage stamps, so that its o stamp marks the end of attention)
    __syncthreads();  // the attention groups' shared memory (over xs) is free
    {
      long long o0, o1;
      engine_dl_groups(H, o0, o1);
      if (UM && (o0 < o1 || stamps != nullptr && blockIdx.x == 0)) {
        // every part has added its sums (the count), then out = um_acc / um_l in bf16 (0 for a
        // sequence without keys), read through L2 (the reductions happen there)
        engine_dl_wait(at.um_count, (unsigned)(T * NKV * S));
        for (int i = (int)threadIdx.x * 8; i < T * NQ * D; i += (int)blockDim.x * 8) {
          const float ls = __ldcg(at.um_l + i / D);
          const float4 x0 = __ldcg((const float4*)(at.um_acc + i)), x1 = __ldcg((const float4*)(at.um_acc + i + 4));
          const float inv = ls > 0.f ? 1.f / ls : 0.f;
          const uint4 v = make_uint4(engine_pack_bf16x2(x0.x * inv, x0.y * inv), engine_pack_bf16x2(x0.z * inv, x0.w * inv),
                                     engine_pack_bf16x2(x1.x * inv, x1.y * inv), engine_pack_bf16x2(x1.z * inv, x1.w * inv));
          engine_xs_store8<true>(xs + i / (NQ * D) * engine_dl_kp(NQ * D), i % (NQ * D), v);
        }
      } else if (!UM && (o0 < o1 || stamps != nullptr && blockIdx.x == 0))
        for (long long i = threadIdx.x * 8; i < T * NQ * D; i += blockDim.x * 8)
          engine_xs_store8<true>(xs + i / (NQ * D) * engine_dl_kp(NQ * D), i % (NQ * D), engine_ll_wait8(at.out_ll + i / 2, tag));
    }
    __syncthreads();
    if (stamp) stamps[kDlStages * l + kDlO] = engine_globaltimer_ns();
    engine_dl_gemv<true, false, PK>(T, H, NQ * D, xs, h, ring, red, stage, st, nullptr, 0u, pbuf);
    engine_dl_signal(c + kDlO);
    // gu = RMSNorm(h) . Wgu^T
    engine_dl_wait(c + kDlO, gridDim.x);
    if (stamp) stamps[kDlStages * l + kDlGateUp] = engine_globaltimer_ns();
    if (UM && blockIdx.x == gridDim.x - 1) {  // this layer's sums are read (every block is past the o barrier): zero them for layer l + 2
      float4* um = (float4*)(engine_dl_um<G>(a, S) + (l & 1) * engine_dl_um_floats(T, NQ, D));
      for (int i = (int)threadIdx.x; i < (int)(engine_dl_um_floats(T, NQ, D) / 4); i += (int)blockDim.x)
        um[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    engine_gemv_norm_input<true>(h, W[kDlPostNorm], T, H, eps, xs);
    __syncthreads();
    engine_dl_gemv<false, false, PK>(T, 2 * I, H, xs, gu, ring, red, stage, st, nullptr, 0u, pbuf);
    engine_dl_signal(c + kDlGateUp);
    // h += SwiGLU(gu) . Wdown^T
    engine_dl_wait(c + kDlGateUp, gridDim.x);
    if (stamp) stamps[kDlStages * l + kDlDown] = engine_globaltimer_ns();
    engine_gemv_swiglu_input<true>(gu, T, I, xs);
    __syncthreads();
    engine_dl_gemv<true, false, PK>(T, H, I, xs, h, ring, red, stage, st, nullptr, 0u, pbuf);
    engine_dl_signal(c + kDlDown);
  }
  // The last block out zeroes the stage counters for the next launch (every other block is past
  // its last wait; the fence orders this block's last signal before its exit count, so no count
  // can land after the zeroing).
  __threadfence();
  if (threadIdx.x == 0 && atomicAdd(exit_counter, 1u) == gridDim.x - 1) {
    if (stamps != nullptr) stamps[kDlStages * d.layers] = engine_globaltimer_ns();
    for (long long i = 0; i < n_counters; ++i) counters[i] = 0u;
    // every block read this launch's epoch at its start; epochs run mod 2^32 - 1, as the tags do,
    // so the last epoch's tags and the next one's never meet at the wrap
    counters[n_counters] = (epoch + 1u) % 0xffffffffu;
    __threadfence();
  }
#else
  __trap();  // needs sm_90 (griddepcontrol; tested there); the host checks
#endif
}
// The entries: CUDA-core attention parts (engine_decode_layers_g<G>), tensor-core parts with the
// merge (_tc_) or the unified max (_tc_um_), each also with EC12 weight tiles (_ec12 after
// "layers": engine_decode_layers_ec12_tc_g2_d128, ...).
#define ENGINE_DECODE_LAYERS_ENTRY_PK(g, pk, ec)                                                            \
  extern "C" __global__ void __launch_bounds__(512, 1) engine_decode_layers##ec##_g##g(ThriveCudaArgs a) { \
    engine_decode_layers<g, 0, false, pk>(a);                                                              \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(512, 1) engine_decode_layers##ec##_tc_g##g##_d64(ThriveCudaArgs a) { \
    engine_decode_layers<g, 64, false, pk>(a);                                                             \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(512, 1) engine_decode_layers##ec##_tc_g##g##_d128(ThriveCudaArgs a) { \
    engine_decode_layers<g, 128, false, pk>(a);                                                            \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(512, 1) engine_decode_layers##ec##_tc_um_g##g##_d64(ThriveCudaArgs a) { \
    engine_decode_layers<g, 64, true, pk>(a);                                                              \
  }                                                                                                        \
  extern "C" __global__ void __launch_bounds__(512, 1) engine_decode_layers##ec##_tc_um_g##g##_d128(ThriveCudaArgs a) { \
    engine_decode_layers<g, 128, true, pk>(a);                                                             \
  }
#define ENGINE_DECODE_LAYERS_ENTRY(g) ENGINE_DECODE_LAYERS_ENTRY_PK(g, false, ) ENGINE_DECODE_LAYERS_ENTRY_PK(g, true, _ec12)
ENGINE_DECODE_LAYERS_ENTRY(1)
ENGINE_DECODE_LAYERS_ENTRY(2)
ENGINE_DECODE_LAYERS_ENTRY(4)
ENGINE_DECODE_LAYERS_ENTRY(8)

// Causal softmax of prefill scores: for row i of sequence b, probs[b, i, j] = softmax_j<=i
// (scale * S[b, i, j]), 0 for j > i. tensors: S f32 [B, P, P], probs bf16 [B, P, P]; dims: B, P;
// scalars: scale. One block per row.
extern "C" __global__ void engine_causal_softmax(ThriveCudaArgs a) {
  const long long P = a.dims[1], row = blockIdx.x, i = row % P;
  const float* s = (const float*)a.tensors[0] + row * P;
  bf16_t* p = (bf16_t*)a.tensors[1] + row * P;
  const float scale = (float)a.scalars[0];
  __shared__ float red[32];
  float m = -__int_as_float(0x7f800000);
  for (long long j = threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, s[j] * scale);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  m = -__int_as_float(0x7f800000);
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) m = fmaxf(m, red[w]);
  float sum = 0.f;
  for (long long j = threadIdx.x; j <= i; j += blockDim.x) sum += __expf(s[j] * scale - m);
  const float inv = 1.f / engine_block_sum(sum);
  for (long long j = threadIdx.x; j < P; j += blockDim.x)
    p[j] = j <= i ? thrive_f32_to_bf16(__expf(s[j] * scale - m) * inv) : (bf16_t)0;
}

// out[r, :] = x[idx[r], :]. tensors: x bf16 [T, H], idx i32 [R], out bf16 [R, H]; dims: R, H.
extern "C" __global__ void engine_gather_rows(ThriveCudaArgs a) {
  const long long r = blockIdx.x, H = a.dims[1];
  const long long src_row = ((const int*)a.tensors[1])[r];
  const bf16_t* x = (const bf16_t*)a.tensors[0] + src_row * H;
  bf16_t* out = (bf16_t*)a.tensors[2] + r * H;
  for (long long i = threadIdx.x; i < H; i += blockDim.x) out[i] = x[i];
}

// Greedy sampling: out[r] = argmax_j logits[r, j] over the finite logits, the lowest index on
// ties; NaN and infinite entries are skipped and counted (a row with no finite one gives -1). A vocabulary row is 600 KB at Qwen3's 151936, too much for
// one block to walk at one load latency per step, so gridDim.x blocks share a row: block c takes
// columns [c*chunk, (c+1)*chunk), chunk = cdiv(V, gridDim.x), each thread keeping 4 loads in
// flight, and writes its (max, index) to part[r, c]; the last block of the row to finish (a
// per-row counter, reset to 0 by that block, so the kernel can be replayed in a CUDA graph)
// reduces the parts. tensors: logits f32 [R, V], out i32 [R], part f32+i32 pairs [R, gridDim.x]
// (8 bytes each), counters: u64 (the skipped logits, summed over rows and launches: the host
// reads and keeps it), then u32 [R] per-row arrival counts at byte 8 (all 0 before the first
// launch); dims: R, V. Block 1024 at most,
// grid (G, R) with G <= 1024.
// Decode's advance (tensors 4-7 given, dims[2] = cap): the token becomes the next step's input on
// the device, so decode steps can follow each other with no host round trip: ids i32 [R] = out,
// pos i64 [R] += 1, ctx_lens i32 [R] += 1, and history (u32 counts [R], then i32 tokens [cap, R])
// gets it at row counts[r] of column r while that is < cap (the count grows regardless: the host
// resets it and reads back min(count, cap) rows).
// Only finite logits are taken (as CpuQwen3Engine::greedy: NaN compares false, and +inf is an
// overflow, not a preference); the others are counted in `skipped`.
__device__ __forceinline__ void engine_argmax_take(float v, long long j, float& best, long long& at, unsigned& skipped) {
  if (!(fabsf(v) <= 3.402823466e38f)) ++skipped;
  else if (at < 0 || v > best || (v == best && j < at)) best = v, at = j;
}
// The block's (best, at) in thread 0, from every thread's.
__device__ __forceinline__ void engine_argmax_block(float& best, long long& at) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const long long oa = __shfl_xor_sync(0xffffffffu, at, o);
    if (oa >= 0 && (at < 0 || ob > best || (ob == best && oa < at))) best = ob, at = oa;
  }
  __shared__ float bv[32];
  __shared__ long long ba[32];
  __syncthreads();
  if ((threadIdx.x & 31) == 0) bv[threadIdx.x >> 5] = best, ba[threadIdx.x >> 5] = at;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w)
      if (ba[w] >= 0 && (at < 0 || bv[w] > best || (bv[w] == best && ba[w] < at))) best = bv[w], at = ba[w];
}
// The end of a greedy argmax block (engine_argmax, engine_argmax_screened): its skipped count,
// its (best, at) to part[r, blockIdx.x], and in the row's last block the reduction of the parts,
// the token, the counter's reset and decode's advance (engine_argmax's tensors 1-7 and dims 0,
// 2). `reset` (when given): a word the row's last block sets to 0 for the next launch.
__device__ __forceinline__ void engine_argmax_finish(const ThriveCudaArgs& a, long long r, long long G, float best,
                                                     long long at, unsigned skipped, unsigned* reset) {
  if (skipped > 0u) atomicAdd((unsigned long long*)a.tensors[3], (unsigned long long)skipped);
  engine_argmax_block(best, at);
  float* part_v = (float*)a.tensors[2] + 2 * r * G;
  int* part_i = (int*)part_v;
  unsigned* counter = (unsigned*)((char*)a.tensors[3] + 8) + r;
  __shared__ bool last;
  if (threadIdx.x == 0) {
    part_v[2 * blockIdx.x] = best;
    part_i[2 * blockIdx.x + 1] = (int)at;
    __threadfence();  // the part is visible before the count says so
    last = atomicAdd(counter, 1u) == (unsigned)(G - 1);
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  best = -__int_as_float(0x7f800000);
  at = -1;
  for (long long c = threadIdx.x; c < G; c += blockDim.x) {
    const float v = ((volatile float*)part_v)[2 * c];
    const int i = ((volatile int*)part_i)[2 * c + 1];
    if (i >= 0 && (at < 0 || v > best || (v == best && i < at))) best = v, at = i;
  }
  engine_argmax_block(best, at);
  if (threadIdx.x == 0) {
    ((int*)a.tensors[1])[r] = (int)at;
    *counter = 0u;
    if (reset != nullptr) *reset = 0u;
    if (a.tensors[4] != nullptr) {
      ((int*)a.tensors[4])[r] = (int)at;
      ((long long*)a.tensors[5])[r] += 1;
      ((int*)a.tensors[6])[r] += 1;
      unsigned* count = (unsigned*)a.tensors[7] + r;
      const unsigned s = *count;
      if ((long long)s < a.dims[2]) ((int*)a.tensors[7])[a.dims[0] + (long long)s * a.dims[0] + r] = (int)at;
      *count = s + 1u;
    }
  }
}
extern "C" __global__ void engine_argmax(ThriveCudaArgs a) {
  engine_pdl_wait();
  const long long r = blockIdx.y, V = a.dims[1], G = gridDim.x;
  const long long chunk = (V + G - 1) / G, lo = blockIdx.x * chunk, hi = lo + chunk < V ? lo + chunk : V;
  const float* x = (const float*)a.tensors[0] + r * V;
  float best = -__int_as_float(0x7f800000);
  long long at = -1;
  unsigned skipped = 0;
  const long long step = blockDim.x;
  long long j = lo + threadIdx.x;
  for (; j + 3 * step < hi; j += 4 * step) {
    const float v0 = x[j], v1 = x[j + step], v2 = x[j + 2 * step], v3 = x[j + 3 * step];
    engine_argmax_take(v0, j, best, at, skipped);
    engine_argmax_take(v1, j + step, best, at, skipped);
    engine_argmax_take(v2, j + 2 * step, best, at, skipped);
    engine_argmax_take(v3, j + 3 * step, best, at, skipped);
  }
  for (; j < hi; j += step) engine_argmax_take(x[j], j, best, at, skipped);
  engine_argmax_finish(a, r, G, best, at, skipped, nullptr);
}

// ---- The screened greedy lm_head (include/thrive/model/lm_head_screen.hpp) ----
// A float's order as an unsigned (larger float, larger word; atomicMax then takes the larger
// float); 0 is below every float and decodes to -inf. NaN is never stored.
__device__ __forceinline__ unsigned engine_float_order(float f) {
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float engine_float_unorder(unsigned u) {
  if (u == 0u) return -__int_as_float(0x7f800000);
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}
// f16 of a float (round to nearest even), and the f16 back as a float (exact).
__device__ __forceinline__ unsigned short engine_f16_of(float x) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
__device__ __forceinline__ float engine_f32_of_f16(unsigned short h) {
  float x;
  asm("cvt.f32.f16 %0, %1;" : "=f"(x) : "h"(h));
  return x;
}
// Two int8 weights stored as q + 128 (bytes `sel` picks from w, 0x64 above each) as the f16 pair
// 1024 + q + 128 - 1152 = q: exact (f16 holds every integer below 2048).
__device__ __forceinline__ unsigned engine_q8x2_to_f16x2(unsigned w, unsigned sel) {
  const unsigned biased = __byte_perm(w, 0x64646464u, sel);
  unsigned q;
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(q) : "r"(biased), "r"(0x64806480u));
  return q;
}
// mma.sync m16n8k16, f16 A (row) and B (col), f32 accumulation.
__device__ __forceinline__ void engine_mma_f16(float c[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                               unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// One k-step of the screening: A from two words of the packed int8 copy (lo: a0, a1; hi: a2, a3,
// ScreenedLmHead's byte order), B the k-step's fragment of h.
__device__ __forceinline__ void engine_mma_q8(float c[4], unsigned lo, unsigned hi, uint2 b) {
  engine_mma_f16(c, engine_q8x2_to_f16x2(lo, 0x4140u), engine_q8x2_to_f16x2(lo, 0x4342u),
                 engine_q8x2_to_f16x2(hi, 0x4140u), engine_q8x2_to_f16x2(hi, 0x4342u), b.x, b.y);
}
// The screening pass: for each token t < T <= 8 and row j < V, a_j = s_j (q_j . h16_t) 2^-e_t into
// approx[t, j] (f32), where h16_t = f16(h_t 2^e_t), 2^e_t the power of two that puts max |h_t| in
// [2^13, 2^14) (1 for a zero row or one with a NaN or infinity); and per token the largest lower
// end max_j (a_j - m_j), m_j = nh_t coef_h[j] + dh_t coef_d[j], nh_t >= ||h_t||, dh_t >= ||h_t -
// h16_t 2^-e_t|| (lm_head_screen.hpp), by atomicMax of engine_float_order into lbmax[t] (0 on
// entry: engine_argmax_screened's last block of the row resets it). Block 0 writes nh_t, dh_t
// (+inf for a row with a NaN or infinity).
// tensors: h bf16 [T, H], packed u8 (ScreenedLmHead::packed), scale f32 [V], coef f32 [V][2],
// approx f32 [T, V], stats (f32 nh [8], f32 dh [8], u32 lbmax [8], u64 candidates); dims T, V, H,
// Hp (H rounded up to 32; H a multiple of 8), NS (ring stages, 2 to 8), SC (a slab's chunks: 16,
// 32 or 64). Block 512 threads (16 warps), one a SM; the block takes 16-row groups gridDim.x apart.
// The int8 rows stream through a ring of NS stages in shared memory (cp.async, L2 evict-first, NS -
// 1 stages in flight, across groups), each stage a slab: one group's chunks [SC s, SC s + SC) (16
// KiB at SC = 32), and in a group's last slab its 16 rows' scales and coefficients. Warp w copies
// and multiplies the slab's chunks w, w + 16, ..., lane l the 16 bytes at 16 l of each: the bytes a
// lane copies are the A fragments it reads, so a slab needs no barrier; the 16 warps' sums of a
// group meet in shared memory once its last slab is done. (The host takes SC = 64 where two such
// stages fit, else 32 or 16: a large hidden size at batch 8.) (The kernel before this one loaded
// each group into registers, one group in flight a block at four blocks a SM: 87-89 µs, about 3.5
// TB/s, for Qwen3-1.7B's 311 MB on the H200, bench/results/lm-head-screen-2026-12-06/ run 2.)
// Dynamic shared memory (screen_smem_bytes in src/model/cuda_engine.cpp): h's B fragments (Hp x
// 16 bytes), h as loaded (T x H x 2, rounded up to 16), then NS stages of engine_screen_stage_bytes.
constexpr int kScreenWarps = 16, kScreenMetaBytes = 256;
__device__ __forceinline__ int engine_screen_stage_bytes(int nchunk, int sc) {
  return (nchunk < sc ? nchunk : sc) * 512 + kScreenMetaBytes;
}
extern "C" __global__ void __launch_bounds__(512, 1) engine_lm_head_screen(ThriveCudaArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int T = (int)a.dims[0], H = (int)a.dims[2], Hp = (int)a.dims[3], NS = (int)a.dims[4], SC = (int)a.dims[5];
  const long long V = a.dims[1], groups = (V + 15) / 16;
  const int nchunk = Hp / 32, nslab = (nchunk + SC - 1) / SC, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // the host's screen_layout keeps to these (16 warps: red, part_n and the chunks warp + 16 u)
  if (NS < 2 || NS > 8 || (SC != 16 && SC != 32 && SC != 64) || blockDim.x != 32 * kScreenWarps || T < 1 || T > 8)
    __trap();
  const uint4* packed = (const uint4*)a.tensors[1];
  const float* scale = (const float*)a.tensors[2];
  const float2* coef = (const float2*)a.tensors[3];
  float* approx = (float*)a.tensors[4];
  float* stats = (float*)a.tensors[5];
  extern __shared__ __align__(16) unsigned char engine_screen_smem[];
  uint2* hb = (uint2*)engine_screen_smem;  // [Hp / 16][32 lanes]: (b0, b1) of k-step i
  bf16_t* hraw = (bf16_t*)(engine_screen_smem + Hp * 16);  // h [T, H] as loaded
  unsigned char* ring = engine_screen_smem + Hp * 16 + (T * H * 2 + 15) / 16 * 16;
  const int stage_bytes = engine_screen_stage_bytes(nchunk, SC), meta_at = stage_bytes - kScreenMetaBytes;
  __shared__ __align__(16) float red[kScreenWarps][32][4];  // the warps' C fragments of a group (float4 stores)
  __shared__ float tok_scale[8], tok_nh[8], tok_dh[8], part_n[kScreenWarps][8], part_d[kScreenWarps][8];
  __shared__ unsigned tok_bad[8];
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  // The copy cursor: group igrp's slab is (this block's groups in order, each group's slabs in
  // order), into stage istage. Each thread copies its pieces and commits one group of copies a
  // slab (an empty one past the block's last slab), so cp.async.wait_group NS - 2 means "the
  // slab NS - 2 behind the newest is here".
  long long igrp = blockIdx.x;
  int islab = 0, istage = 0;
  const auto issue = [&]() {
    if (igrp < groups) {
      const unsigned st = engine_dl_smem_addr(ring + istage * stage_bytes);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int c = warp + kScreenWarps * u, kk = SC * islab + c;
        if (c < SC && kk < nchunk)
          asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(st + (unsigned)(c * 512 + lane * 16)),
                       "l"(packed + (igrp * nchunk + kk) * 32 + lane), "l"(policy)
                       : "memory");
      }
      if (islab == nslab - 1 && threadIdx.x < 32) {  // the group's scales (4 bytes a row) and coefficients (8)
        const long long j = igrp * 16 + (threadIdx.x & 15);
        const bool ok = j < V;
        if (threadIdx.x < 16)
          asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(st + (unsigned)(meta_at + 4 * threadIdx.x)),
                       "l"(scale + (ok ? j : 0)), "r"(ok ? 4 : 0)
                       : "memory");
        else
          asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(st + (unsigned)(meta_at + 64 + 8 * (threadIdx.x - 16))),
                       "l"(coef + (ok ? j : 0)), "r"(ok ? 8 : 0)
                       : "memory");
      }
      if (++islab == nslab) islab = 0, igrp += gridDim.x;
    }
    istage = istage + 1 == NS ? 0 : istage + 1;
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  // the first NS - 1 slabs before the wait: the int8 copy depends on no earlier kernel
  for (int i = 0; i + 1 < NS; ++i) issue();
  engine_pdl_wait();
  {
    const bf16_t* h = (const bf16_t*)a.tensors[0];
    for (int i = threadIdx.x; i < T * H / 8; i += blockDim.x) ((uint4*)hraw)[i] = ((const uint4*)h)[i];
  }
  __syncthreads();
  // per token: the power of two, and whether h holds a NaN or infinity
  if (warp < T) {
    float m = 0.f;
    unsigned bad = 0u;
    for (int k = lane; k < H; k += 32) {
      const float x = fabsf(thrive_bf16_to_f32(hraw[warp * H + k]));
      bad |= !(x <= 3.402823466e38f);
      m = fmaxf(m, x);
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o)), bad |= __shfl_xor_sync(0xffffffffu, bad, o);
    if (lane == 0) {
      int ex = 0;
      frexpf(m, &ex);  // m < 2^ex
      // (at most 2^127: an h whose largest value is below 2^-113 keeps fewer bits in f16, and dh
      // says how many it lost)
      tok_scale[warp] = bad || m == 0.f ? 1.f : ldexpf(1.f, 14 - ex < 127 ? 14 - ex : 127);
      tok_bad[warp] = bad;
    }
  }
  __syncthreads();
  // h's B fragments (token r of lane (r, c) in column r: k-step i, rows 2c, 2c+1 and 2c+8, 2c+9),
  // and per token the sums of squares of h 2^e and of its f16 rounding error (both exact before
  // the sums: the scaled values keep the squares of a tiny h from underflowing; slot i's token is
  // (threadIdx.x % 32) / 4 for every i: blockDim.x is a multiple of 32)
  const int my_t = lane >> 2;
  float nsq = 0.f, dsq = 0.f;
  for (int i = threadIdx.x; i < (Hp / 16) * 32; i += blockDim.x) {
    const int ks = i >> 5, c = i & 3;
    unsigned b[2] = {0u, 0u};
    if (my_t < T) {
      const float sc = tok_scale[my_t];
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int k = 16 * ks + 2 * c + 8 * half + e;
          const float x = k < H ? thrive_bf16_to_f32(hraw[my_t * H + k]) : 0.f;
          const unsigned short q = engine_f16_of(x * sc);
          const float xs = x * sc, d = xs - engine_f32_of_f16(q);  // exact: sc a power of two
          nsq += xs * xs, dsq += d * d;
          b[half] |= (unsigned)q << (16 * e);
        }
    }
    hb[i] = make_uint2(b[0], b[1]);
  }
  for (int o = 1; o < 4; o <<= 1) nsq += __shfl_xor_sync(0xffffffffu, nsq, o), dsq += __shfl_xor_sync(0xffffffffu, dsq, o);
  if ((lane & 3) == 0) part_n[warp][my_t] = nsq, part_d[warp][my_t] = dsq;
  __syncthreads();
  if (threadIdx.x < 8) {
    const int t = threadIdx.x;
    float n = 0.f, d = 0.f;
    for (int i = 0; i < kScreenWarps; ++i) n += part_n[i][t], d += part_d[i][t];
    // upward by far more than the f32 sums' rounding (H 2^-24 relative, H < 2^20), plus H of
    // the smallest subnormal (what a square below it lost), then back to h's scale
    const float inf = __int_as_float(0x7f800000), floor_sq = (float)H * 1.4013e-45f;
    const float inv = t < T ? 1.f / tok_scale[t] : 1.f;
    tok_nh[t] = t < T && tok_bad[t] ? inf : sqrtf(n * 1.0625f + floor_sq) * 1.0001f * inv;
    tok_dh[t] = t < T && tok_bad[t] ? inf : sqrtf(d * 1.0625f + floor_sq) * 1.0001f * inv;
    if (blockIdx.x == 0 && t < T) stats[t] = tok_nh[t], stats[8 + t] = tok_dh[t];
  }
  __syncthreads();
  // thread i < 128 owns row i / 8 (of the group), token i % 8: its largest lower end
  float lb = -__int_as_float(0x7f800000);
  const int orow = threadIdx.x >> 3, otok = threadIdx.x & 7;
  int stage = 0;
  for (long long grp = blockIdx.x; grp < groups; grp += gridDim.x) {
    float c[4] = {0.f, 0.f, 0.f, 0.f};
    const unsigned char* st = nullptr;  // the group's current slab (the last one at its sums)
    for (int s = 0; s < nslab; ++s) {
      engine_dl_wait_stage(NS);  // this thread's pieces of slab (grp, s) are here
      st = ring + stage * stage_bytes;
      issue();  // into the stage the slab before this one used: its reads and its group's sums are done
      stage = stage + 1 == NS ? 0 : stage + 1;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int cc = warp + kScreenWarps * u, kk = SC * s + cc;
        if (cc >= SC || kk >= nchunk) break;  // warp-uniform
        const uint4 w = *(const uint4*)(st + cc * 512 + lane * 16);
        engine_mma_q8(c, w.x, w.y, hb[(2 * kk) * 32 + lane]);
        engine_mma_q8(c, w.z, w.w, hb[(2 * kk + 1) * 32 + lane]);
      }
    }
    *(float4*)red[warp][lane] = make_float4(c[0], c[1], c[2], c[3]);
    __syncthreads();  // (the last slab's scales and coefficients, copied by warp 0, are visible too)
    if (threadIdx.x < 128) {
      // row orow, token otok: lane 4 (orow % 8) + otok / 2, element 2 (orow / 8) + otok % 2
      const long long j = grp * 16 + orow;
      const int l = 4 * (orow & 7) + (otok >> 1), e = 2 * (orow >> 3) + (otok & 1);
      float acc = 0.f;
#pragma unroll
      for (int i = 0; i < kScreenWarps; ++i) acc += red[i][l][e];
      if (otok < T && j < V) {
        const float sj = ((const float*)(st + meta_at))[orow];
        const float2 cf = ((const float2*)(st + meta_at + 64))[orow];
        const float x = acc * (1.f / tok_scale[otok]) * sj;  // h's scale first: no overflow of acc s_j
        approx[(long long)otok * V + j] = x;
        const float nh = tok_nh[otok], lo = x - (nh * cf.x + tok_dh[otok] * cf.y);
        // a lower end only from a row whose exact sums cannot overflow: every partial sum is at
        // most ||w_j|| ||h|| <= nh (coef_h + coef_d) (triangle inequality); a row that might
        // overflow would be skipped as non-finite by the exact pass, and its bound would screen
        // out the finite argmax (engine_argmax_screened takes it as a candidate by this test)
        if (lo == lo && nh * (cf.x + cf.y) < 1e37f) lb = fmaxf(lb, lo);
      }
    }
    __syncthreads();  // red and the stage's scales are free
  }
  asm volatile("cp.async.wait_all;" ::: "memory");  // (only empty groups are left: nothing lands after exit)
  // the block's largest lower end per token: threads i and i + 8, + 16, + 24 of a warp share a token
  lb = fmaxf(lb, __shfl_xor_sync(0xffffffffu, lb, 8));
  lb = fmaxf(lb, __shfl_xor_sync(0xffffffffu, lb, 16));
  if (threadIdx.x < 128 && lane < 8 && otok < T && lb > -__int_as_float(0x7f800000))
    atomicMax((unsigned*)(stats + 16) + otok, engine_float_order(lb));
#else
  __trap();  // cp.async: sm_80+ (the engine's CUDA path targets sm_90)
#endif
}
// The exact pass of the screened lm_head: engine_argmax's work and tensors (decode's advance
// included; tensors 4-7 may be null as there) over the candidates of engine_lm_head_screen's
// approx logits (tensors[0]): rows j with a_j + m_j >= lbmax (NaN included) or whose sums might
// overflow (nh (coef_h + coef_d) >= 1e37, as engine_lm_head_screen tests it), whose exact logit
// w_j . h (bf16 lm_head row, f32 sums in a fixed order: a warp a row, lane l the columns [8 l +
// 256 i, + 8)) competes as engine_argmax's logits do (NaN and infinities skipped and counted).
// workspace: a table of four device pointers: lm_head bf16 [V, H], h bf16 [R, H], coef f32 [V][2],
// stats (engine_lm_head_screen's; the row's last block resets lbmax[r] and adds the row's
// candidate count into the u64 after it). dims R, V, cap (as engine_argmax), H (a multiple of 8).
// Grid (G, R), block 256 threads; dynamic shared memory H x 4 bytes (h_r in f32).
extern "C" __global__ void __launch_bounds__(256) engine_argmax_screened(ThriveCudaArgs a) {
  engine_pdl_wait();
  const long long r = blockIdx.y, V = a.dims[1], G = gridDim.x;
  const int H = (int)a.dims[3], warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned long long* tab = (const unsigned long long*)a.workspace;
  const bf16_t* W = (const bf16_t*)tab[0];
  const bf16_t* h = (const bf16_t*)tab[1] + r * H;
  const float2* coef = (const float2*)tab[2];
  float* stats = (float*)tab[3];
  extern __shared__ __align__(16) unsigned char engine_screen_smem[];
  float* hs = (float*)engine_screen_smem;
  __shared__ int cand[1024];
  __shared__ int ncand;
  for (int k = 8 * threadIdx.x; k < H; k += 2048) {  // 16-byte loads, one a thread for H <= 2048
    const uint4 v = *(const uint4*)(h + k);
    float x[8];
    engine_unpack8(v, x);
#pragma unroll
    for (int e = 0; e < 8; ++e) hs[k + e] = x[e];
  }
  const float nh = stats[r], dh = stats[8 + r];
  unsigned* lbmax = (unsigned*)(stats + 16) + r;
  const float lb = engine_float_unorder(*(volatile unsigned*)lbmax);
  const long long chunk = (V + G - 1) / G, lo = blockIdx.x * chunk, hi = lo + chunk < V ? lo + chunk : V;
  const float* x = (const float*)a.tensors[0] + r * V;
  float best = -__int_as_float(0x7f800000);
  long long at = -1;
  unsigned skipped = 0, found = 0;
  for (long long base = lo; base < hi; base += 1024) {
    if (threadIdx.x == 0) ncand = 0;
    __syncthreads();  // (the first time: hs is complete too)
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const long long j = base + threadIdx.x + 256 * u;
      if (j < hi) {
        const float2 cf = coef[j];
        // a candidate too where its sums might overflow (the bound engine_lm_head_screen keeps out
        // of the lower ends): its logit is then counted as non-finite as the exact path counts it
        if (!(nh * (cf.x + cf.y) < 1e37f) || !(x[j] + (nh * cf.x + dh * cf.y) < lb)) cand[atomicAdd(&ncand, 1)] = (int)j;
      }
    }
    __syncthreads();
    const int n = ncand;
    found += (unsigned)n;
    for (int i = warp; i < n; i += 8) {
      const long long j = cand[i];
      const bf16_t* row = W + j * H;
      float s = 0.f;
      for (int k0 = 0; k0 < H; k0 += 2048) {  // the row's 16-byte pieces, 8 a lane in flight at once
        uint4 wv[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int k = k0 + 8 * lane + 256 * u;
          wv[u] = k < H ? *(const uint4*)(row + k) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int k = k0 + 8 * lane + 256 * u;
          if (k >= H) break;
          float wx[8];
          engine_unpack8(wv[u], wx);
#pragma unroll
          for (int e = 0; e < 4; ++e) s += wx[2 * e] * hs[k + 2 * e] + wx[2 * e + 1] * hs[k + 2 * e + 1];
        }
      }
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) engine_argmax_take(s, j, best, at, skipped);
    }
    __syncthreads();  // cand and ncand are free
  }
  if (threadIdx.x == 0 && found > 0u) atomicAdd((unsigned long long*)(stats + 24), (unsigned long long)found);
  engine_argmax_finish(a, r, G, best, at, skipped, lbmax);
}
