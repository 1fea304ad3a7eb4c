// @thrive op: gqa_decode_attention
// @thrive backend: cuda
// @thrive entry: thrive_gqa_eager_repeat_k
// @thrive entry: thrive_gqa_eager_repeat_v
// @thrive entry: thrive_gqa_eager_scores
// @thrive entry: thrive_gqa_eager_scale
// @thrive entry: thrive_gqa_eager_mask
// @thrive entry: thrive_gqa_eager_softmax
// @thrive entry: thrive_gqa_eager_pv
// @thrive entry: thrive_gqa_eager_to_bf16
// @thrive launch: entry=thrive_gqa_eager_repeat_k block=128 grid=cdiv(B*NQ*L*D,512),1,1 smem=0
// @thrive launch: entry=thrive_gqa_eager_repeat_v block=128 grid=cdiv(B*NQ*L*D,512),1,1 smem=0
// @thrive launch: entry=thrive_gqa_eager_scores block=256 grid=cdiv(B*NQ*L,8),1,1 smem=0
// @thrive launch: entry=thrive_gqa_eager_scale block=128 grid=cdiv(B*NQ*L,512),1,1 smem=0
// @thrive launch: entry=thrive_gqa_eager_mask block=128 grid=cdiv(B*NQ*L,512),1,1 smem=0
// @thrive launch: entry=thrive_gqa_eager_softmax block=256 grid=B*NQ,1,1 smem=0
// @thrive launch: entry=thrive_gqa_eager_pv block=128 grid=B*NQ,1,1 smem=0
// @thrive launch: entry=thrive_gqa_eager_to_bf16 block=128 grid=cdiv(B*NQ*D,512),1,1 smem=0
//
// Eager baseline: what PyTorch eager runs on the GPU for HF's eager_attention_forward at decode
// (one query token), with the cache in vLLM's [B, L, NKV, D] layout:
//   k = repeat_kv(k_cache.transpose(1, 2), NQ/NKV)     -> materialized bf16 [B, NQ, L, D]
//   v = repeat_kv(v_cache.transpose(1, 2), NQ/NKV)     -> materialized bf16 [B, NQ, L, D]
//   scores = q @ k.transpose(-1, -2)                     [B, NQ, 1, L]
//   scores = scores * scale
//   scores = scores + mask                               (-inf at positions >= context_lens[b])
//   probs = softmax(scores, -1, dtype=float32)
//   out = (probs @ v).to(bf16)
// one kernel per op. Precision: the scores and probs stay fp32 and the PV product accumulates
// and is stored in fp32 before the final cast. (HF keeps scores and probs in bf16; simulated
// against THRIVE's verifier that fails badly: ~0.2% of rms error on near-zero outputs against a
// 1%-of-rms floor of 0.008 relative tolerance. The traffic of the bf16 K/V copies, which
// dominates, is the same.)
// Kernels: copies and elementwise ops in PyTorch's unrolled shape (128 threads x 4 elements,
// multiply-shift index dividers); scores one warp per (b, h, j) dot product (a bmm with M = 1);
// softmax one block per row, three passes; PV one block per (b, h), one thread per d.
// Workspace (regions 256-byte aligned): k_rep bf16 [B,NQ,L,D] | v_rep bf16 [B,NQ,L,D] |
// scores, scaled, masked, probs f32 [B,NQ,L] each | attn f32 [B,NQ,D].
#include "thrive_eager.cuh"

struct Geo {
  long long B, L, NQ, NKV, D, G;
  bf16_t *krep, *vrep;
  float *scores, *scaled, *masked, *probs, *attn;
};
__device__ __forceinline__ Geo geo_of(const ThriveCudaArgs& a) {
  Geo g;
  g.B = a.dims[0];
  g.L = a.dims[1];
  g.NQ = a.dims[2];
  g.NKV = a.dims[3];
  g.D = a.dims[4];
  g.G = g.NKV > 0 ? g.NQ / g.NKV : 1;
  const long long rows = g.B * g.NQ * g.L;
  char* p = (char*)a.workspace;
  g.krep = (bf16_t*)p;   p += al256(rows * g.D * 2);
  g.vrep = (bf16_t*)p;   p += al256(rows * g.D * 2);
  g.scores = (float*)p;  p += al256(rows * 4);
  g.scaled = (float*)p;  p += al256(rows * 4);
  g.masked = (float*)p;  p += al256(rows * 4);
  g.probs = (float*)p;   p += al256(rows * 4);
  g.attn = (float*)p;
  return g;
}

// rep[b, h, j, d] = cache[b, j, h / G, d]
__device__ __forceinline__ void repeat_kv(const ThriveCudaArgs& args, const bf16_t* cache, bf16_t* rep) {
  __shared__ FastDiv fd[3];
  const Geo g = geo_of(args);
  const long long n = g.B * g.NQ * g.L * g.D;
  if (threadIdx.x == 0) {
    fd[0] = fd_make((unsigned int)g.D);
    fd[1] = fd_make((unsigned int)g.L);
    fd[2] = fd_make((unsigned int)g.NQ);
  }
  __syncthreads();
  const bool narrow = n < 0xffffffffLL;
  elementwise(
      n,
      [&](long long i) {
        const long long r = fd_div(fd[0], i, g.D, narrow);  // (b, h, j)
        const long long d = i - r * g.D;
        const long long bh = fd_div(fd[1], r, g.L, narrow);
        const long long j = r - bh * g.L;
        const long long b = fd_div(fd[2], bh, g.NQ, narrow);
        const long long h = bh - b * g.NQ;
        return thrive_bf16_to_f32(cache[((b * g.L + j) * g.NKV + h / g.G) * g.D + d]);
      },
      [&](long long i, float v) { rep[i] = thrive_f32_to_bf16(v); });  // exact: v is a bf16 value
}

extern "C" __global__ void __launch_bounds__(128) thrive_gqa_eager_repeat_k(ThriveCudaArgs args) {
  repeat_kv(args, (const bf16_t*)args.tensors[1], geo_of(args).krep);
}
extern "C" __global__ void __launch_bounds__(128) thrive_gqa_eager_repeat_v(ThriveCudaArgs args) {
  repeat_kv(args, (const bf16_t*)args.tensors[2], geo_of(args).vrep);
}

// scores[b, h, j] = sum_d q[b, h, d] * k_rep[b, h, j, d]: one warp per (b, h, j), fp32 accumulate
extern "C" __global__ void __launch_bounds__(256) thrive_gqa_eager_scores(ThriveCudaArgs args) {
  const Geo g = geo_of(args);
  const bf16_t* q = (const bf16_t*)args.tensors[0];
  const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= g.B * g.NQ * g.L) return;
  const long long bh = row / g.L;
  const bf16_t* qr = q + bh * g.D;
  const bf16_t* kr = g.krep + row * g.D;
  float s = 0.0f;
  for (long long d = lane; d < g.D; d += 32) s = fmaf(thrive_bf16_to_f32(qr[d]), thrive_bf16_to_f32(kr[d]), s);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) g.scores[row] = s;
}

extern "C" __global__ void __launch_bounds__(128) thrive_gqa_eager_scale(ThriveCudaArgs args) {
  const Geo g = geo_of(args);
  const float scale = (float)args.scalars[0];
  elementwise(
      g.B * g.NQ * g.L, [&](long long i) { return g.scores[i] * scale; },
      [&](long long i, float v) { g.scaled[i] = v; });
}

extern "C" __global__ void __launch_bounds__(128) thrive_gqa_eager_mask(ThriveCudaArgs args) {
  __shared__ FastDiv fd[2];
  const Geo g = geo_of(args);
  const int* lens = (const int*)args.tensors[3];
  const long long n = g.B * g.NQ * g.L;
  if (threadIdx.x == 0) {
    fd[0] = fd_make((unsigned int)g.L);
    fd[1] = fd_make((unsigned int)g.NQ);
  }
  __syncthreads();
  const bool narrow = n < 0xffffffffLL;
  elementwise(
      n,
      [&](long long i) {
        const long long bh = fd_div(fd[0], i, g.L, narrow);
        const long long j = i - bh * g.L;
        const long long b = fd_div(fd[1], bh, g.NQ, narrow);
        return g.scaled[i] + (j < (long long)lens[b] ? 0.0f : NEG_INF);
      },
      [&](long long i, float v) { g.masked[i] = v; });
}

__device__ __forceinline__ float block_reduce(float v, bool is_max, float* sh) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = sh[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w) r = is_max ? fmaxf(r, sh[w]) : r + sh[w];
  __syncthreads();
  return r;
}

// probs[b, h, :] = softmax(masked[b, h, :]) in fp32: one block per row, three passes
extern "C" __global__ void __launch_bounds__(256) thrive_gqa_eager_softmax(ThriveCudaArgs args) {
  __shared__ float sh[8];
  const Geo g = geo_of(args);
  const long long r = blockIdx.x;
  if (r >= g.B * g.NQ) return;
  const float* x = g.masked + r * g.L;
  float* y = g.probs + r * g.L;
  float m = NEG_INF;
  for (long long j = threadIdx.x; j < g.L; j += 256) m = fmaxf(m, x[j]);
  m = block_reduce(m, true, sh);
  float s = 0.0f;
  for (long long j = threadIdx.x; j < g.L; j += 256) s += expf(x[j] - m);
  s = block_reduce(s, false, sh);
  for (long long j = threadIdx.x; j < g.L; j += 256) y[j] = expf(x[j] - m) / s;
}

// attn[b, h, d] = sum_j probs[b, h, j] * v_rep[b, h, j, d]: one block per (b, h), fixed j order
extern "C" __global__ void __launch_bounds__(128) thrive_gqa_eager_pv(ThriveCudaArgs args) {
  const Geo g = geo_of(args);
  const long long bh = blockIdx.x;
  if (bh >= g.B * g.NQ) return;
  const float* p = g.probs + bh * g.L;
  const bf16_t* v = g.vrep + bh * g.L * g.D;
  for (long long d = threadIdx.x; d < g.D; d += 128) {
    float a = 0.0f;
#pragma unroll 4
    for (long long j = 0; j < g.L; ++j) a = fmaf(p[j], thrive_bf16_to_f32(v[j * g.D + d]), a);
    g.attn[bh * g.D + d] = a;
  }
}

extern "C" __global__ void __launch_bounds__(128) thrive_gqa_eager_to_bf16(ThriveCudaArgs args) {
  const Geo g = geo_of(args);
  bf16_t* out = (bf16_t*)args.tensors[4];
  elementwise(
      g.B * g.NQ * g.D, [&](long long i) { return g.attn[i]; },
      [&](long long i, float v) { out[i] = thrive_f32_to_bf16(v); });
}
