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

// Greedy sampling: out[r] = argmax_j logits[r, j], the lowest index on ties; NaN entries are
// skipped (a row of NaNs gives -1). tensors: logits f32 [R, V], out i32 [R]; dims: R, V.
extern "C" __global__ void engine_argmax(ThriveCudaArgs a) {
  const long long r = blockIdx.x, V = a.dims[1];
  const float* x = (const float*)a.tensors[0] + r * V;
  float best = -__int_as_float(0x7f800000);
  long long at = -1;
  for (long long j = threadIdx.x; j < V; j += blockDim.x) {
    const float v = x[j];
    if (v == v && (at < 0 || v > best)) best = v, at = j;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, o);
    const long long oa = __shfl_xor_sync(0xffffffffu, at, o);
    if (oa >= 0 && (at < 0 || ob > best || (ob == best && oa < at))) best = ob, at = oa;
  }
  __shared__ float bv[32];
  __shared__ long long ba[32];
  if ((threadIdx.x & 31) == 0) bv[threadIdx.x >> 5] = best, ba[threadIdx.x >> 5] = at;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w)
      if (ba[w] >= 0 && (at < 0 || bv[w] > best || (bv[w] == best && ba[w] < at))) best = bv[w], at = ba[w];
    ((int*)a.tensors[1])[r] = (int)at;
  }
}
