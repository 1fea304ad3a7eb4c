// @thrive op: rmsnorm_residual
// @thrive backend: cuda
// @thrive entry: thrive_rmsnorm_residual_eager_add
// @thrive entry: thrive_rmsnorm_residual_eager_to_float
// @thrive entry: thrive_rmsnorm_residual_eager_pow
// @thrive entry: thrive_rmsnorm_residual_eager_mean
// @thrive entry: thrive_rmsnorm_residual_eager_add_eps
// @thrive entry: thrive_rmsnorm_residual_eager_rsqrt
// @thrive entry: thrive_rmsnorm_residual_eager_mul
// @thrive entry: thrive_rmsnorm_residual_eager_to_bf16
// @thrive entry: thrive_rmsnorm_residual_eager_weight
// @thrive launch: entry=thrive_rmsnorm_residual_eager_add block=128 grid=cdiv(T*H,512),1,1 smem=0
// @thrive launch: entry=thrive_rmsnorm_residual_eager_to_float block=128 grid=cdiv(T*H,512),1,1 smem=0
// @thrive launch: entry=thrive_rmsnorm_residual_eager_pow block=128 grid=cdiv(T*H,512),1,1 smem=0
// @thrive launch: entry=thrive_rmsnorm_residual_eager_mean block=256 grid=T,1,1 smem=0
// @thrive launch: entry=thrive_rmsnorm_residual_eager_add_eps block=128 grid=cdiv(T,512),1,1 smem=0
// @thrive launch: entry=thrive_rmsnorm_residual_eager_rsqrt block=128 grid=cdiv(T,512),1,1 smem=0
// @thrive launch: entry=thrive_rmsnorm_residual_eager_mul block=128 grid=cdiv(T*H,512),1,1 smem=0
// @thrive launch: entry=thrive_rmsnorm_residual_eager_to_bf16 block=128 grid=cdiv(T*H,512),1,1 smem=0
// @thrive launch: entry=thrive_rmsnorm_residual_eager_weight block=128 grid=cdiv(T*H,512),1,1 smem=0
//
// Eager baseline: what PyTorch eager runs on the GPU for HF Qwen3's residual add + Qwen3RMSNorm,
//   hidden = x + residual                      (bf16, becomes the new residual)
//   h = hidden.to(float32)
//   variance = h.pow(2).mean(-1, keepdim=True)
//   h = h * torch.rsqrt(variance + eps)
//   out = weight * h.to(bfloat16)
// one kernel per elementary op, each writing its intermediate to the workspace. Elementwise
// kernels follow PyTorch's unrolled elementwise kernel: 128 threads, 4 elements per thread
// (strided by 128, loads first, then stores); the mean is a one-block-per-row reduction.
// Workspace (each region 256-byte aligned): h f32 [T*H] | sq f32 [T*H] | normed f32 [T*H] |
// normed_bf bf16 [T*H] | mean f32 [T] | var f32 [T] | rs f32 [T].
#include "thrive_eager.cuh"

struct Ws {
  float *h, *sq, *normed;
  bf16_t* normed_bf;
  float *mean, *var, *rs;
};
__device__ __forceinline__ Ws ws_of(const ThriveCudaArgs& a) {
  const long long N = a.dims[0] * a.dims[1], T = a.dims[0];
  char* p = (char*)a.workspace;
  Ws w;
  w.h = (float*)p;              p += al256(N * 4);
  w.sq = (float*)p;             p += al256(N * 4);
  w.normed = (float*)p;         p += al256(N * 4);
  w.normed_bf = (bf16_t*)p;     p += al256(N * 2);
  w.mean = (float*)p;           p += al256(T * 4);
  w.var = (float*)p;            p += al256(T * 4);
  w.rs = (float*)p;
  return w;
}

#define ARGS_N const long long T = args.dims[0], H = args.dims[1], N = T * H; (void)T; (void)H; (void)N

extern "C" __global__ void __launch_bounds__(128) thrive_rmsnorm_residual_eager_add(ThriveCudaArgs args) {
  ARGS_N;
  const bf16_t* x = (const bf16_t*)args.tensors[0];
  bf16_t* res = (bf16_t*)args.tensors[1];
  elementwise(
      N, [&](long long i) { return thrive_bf16_to_f32(x[i]) + thrive_bf16_to_f32(res[i]); },
      [&](long long i, float v) { res[i] = thrive_f32_to_bf16(v); });
}

extern "C" __global__ void __launch_bounds__(128) thrive_rmsnorm_residual_eager_to_float(ThriveCudaArgs args) {
  ARGS_N;
  const bf16_t* res = (const bf16_t*)args.tensors[1];
  const Ws w = ws_of(args);
  elementwise(
      N, [&](long long i) { return thrive_bf16_to_f32(res[i]); }, [&](long long i, float v) { w.h[i] = v; });
}

extern "C" __global__ void __launch_bounds__(128) thrive_rmsnorm_residual_eager_pow(ThriveCudaArgs args) {
  ARGS_N;
  const Ws w = ws_of(args);
  elementwise(
      N, [&](long long i) { const float v = w.h[i]; return v * v; }, [&](long long i, float v) { w.sq[i] = v; });
}

// mean over the last dim: one block per row, per-thread partial sums, then warp shuffles and
// one shared-memory step (fixed order)
extern "C" __global__ void __launch_bounds__(256) thrive_rmsnorm_residual_eager_mean(ThriveCudaArgs args) {
  __shared__ float part[8];
  ARGS_N;
  const Ws w = ws_of(args);
  const long long r = blockIdx.x;
  if (r >= T) return;
  const float* row = w.sq + r * H;
  float s = 0.0f;
  for (long long c = threadIdx.x; c < H; c += 256) s += row[c];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int i = 0; i < 8; ++i) t += part[i];
    w.mean[r] = t / (float)H;
  }
}

extern "C" __global__ void __launch_bounds__(128) thrive_rmsnorm_residual_eager_add_eps(ThriveCudaArgs args) {
  ARGS_N;
  const Ws w = ws_of(args);
  const float eps = (float)args.scalars[0];
  elementwise(
      T, [&](long long i) { return w.mean[i] + eps; }, [&](long long i, float v) { w.var[i] = v; });
}

extern "C" __global__ void __launch_bounds__(128) thrive_rmsnorm_residual_eager_rsqrt(ThriveCudaArgs args) {
  ARGS_N;
  const Ws w = ws_of(args);
  elementwise(
      T, [&](long long i) { return rsqrtf(w.var[i]); }, [&](long long i, float v) { w.rs[i] = v; });
}

extern "C" __global__ void __launch_bounds__(128) thrive_rmsnorm_residual_eager_mul(ThriveCudaArgs args) {
  __shared__ FastDiv fd;
  ARGS_N;
  const Ws w = ws_of(args);
  if (threadIdx.x == 0) fd = fd_make((unsigned int)H);
  __syncthreads();
  const bool narrow = N < 0xffffffffLL;
  elementwise(
      N, [&](long long i) { return w.h[i] * w.rs[fd_div(fd, i, H, narrow)]; },
      [&](long long i, float v) { w.normed[i] = v; });
}

extern "C" __global__ void __launch_bounds__(128) thrive_rmsnorm_residual_eager_to_bf16(ThriveCudaArgs args) {
  ARGS_N;
  const Ws w = ws_of(args);
  elementwise(
      N, [&](long long i) { return w.normed[i]; },
      [&](long long i, float v) { w.normed_bf[i] = thrive_f32_to_bf16(v); });
}

extern "C" __global__ void __launch_bounds__(128) thrive_rmsnorm_residual_eager_weight(ThriveCudaArgs args) {
  ARGS_N;
  const Ws w = ws_of(args);
  const bf16_t* wt = (const bf16_t*)args.tensors[2];
  bf16_t* out = (bf16_t*)args.tensors[3];
  __shared__ FastDiv fd;
  if (threadIdx.x == 0) fd = fd_make((unsigned int)H);
  __syncthreads();
  const bool narrow = N < 0xffffffffLL;
  elementwise(
      N,
      [&](long long i) {
        const long long c = i - fd_div(fd, i, H, narrow) * H;
        return thrive_bf16_to_f32(wt[c]) * thrive_bf16_to_f32(w.normed_bf[i]);
      },
      [&](long long i, float v) { out[i] = thrive_f32_to_bf16(v); });
}
