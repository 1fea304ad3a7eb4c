// @thrive op: softmax
// @thrive backend: cuda
// @thrive entry: thrive_softmax_eager_to_float
// @thrive entry: thrive_softmax_eager_softmax
// @thrive launch: entry=thrive_softmax_eager_to_float block=128 grid=cdiv(T*V,512),1,1 smem=0
// @thrive launch: entry=thrive_softmax_eager_softmax block=1024 grid=T,1,1 smem=0
//
// Eager baseline: what PyTorch eager runs on the GPU for torch.softmax(logits, -1, dtype=float32)
// with bf16 logits: ATen converts first (input.toType(float): only Half has the fused
// half-to-float softmax path), then its regular row softmax (cunn_SoftMaxForward): one block of up
// to 1024 threads per row, 16-byte loads, three passes over the fp32 row: max, sum of
// exp(x - max), write exp(x - max) / sum.
// Workspace: x f32 [T, V] at 0.
#include "thrive_eager.cuh"

extern "C" __global__ void __launch_bounds__(128) thrive_softmax_eager_to_float(ThriveCudaArgs args) {
  const bf16_t* x = (const bf16_t*)args.tensors[0];
  float* xf = (float*)args.workspace;
  const long long n = args.dims[0] * args.dims[1];
  const long long base = (long long)blockIdx.x * 512 + threadIdx.x;
  float v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const long long i = base + k * 128;
    if (i < n) v[k] = thrive_bf16_to_f32(x[i]);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const long long i = base + k * 128;
    if (i < n) xf[i] = v[k];
  }
}

// block-wide reductions (warp shuffles, then warp 0 over the warp partials), fixed order
__device__ __forceinline__ float block_reduce(float v, bool is_max, float* sh) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float r = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : (is_max ? NEG_INF : 0.0f);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float o = __shfl_xor_sync(0xffffffffu, r, off);
      r = is_max ? fmaxf(r, o) : r + o;
    }
    if (threadIdx.x == 0) sh[32] = r;
  }
  __syncthreads();
  const float r = sh[32];
  __syncthreads();
  return r;
}

extern "C" __global__ void __launch_bounds__(1024) thrive_softmax_eager_softmax(ThriveCudaArgs args) {
  __shared__ float sh[33];
  const long long T = args.dims[0], V = args.dims[1];
  const long long r = blockIdx.x;
  if (r >= T) return;
  const float* x = (const float*)args.workspace + r * V;
  float* y = (float*)args.tensors[1] + r * V;
  const bool vec = (V % 4 == 0) && (((unsigned long long)args.tensors[1] & 15) == 0);
  const int tid = threadIdx.x, nt = blockDim.x;

  float m = NEG_INF;
  if (vec) {
    for (long long j = tid; j < V / 4; j += nt) {
      const float4 f = reinterpret_cast<const float4*>(x)[j];
      m = fmaxf(m, fmaxf(fmaxf(f.x, f.y), fmaxf(f.z, f.w)));
    }
  } else {
    for (long long j = tid; j < V; j += nt) m = fmaxf(m, x[j]);
  }
  m = block_reduce(m, true, sh);

  float s = 0.0f;
  if (vec) {
    for (long long j = tid; j < V / 4; j += nt) {
      const float4 f = reinterpret_cast<const float4*>(x)[j];
      s += expf(f.x - m) + expf(f.y - m) + expf(f.z - m) + expf(f.w - m);
    }
  } else {
    for (long long j = tid; j < V; j += nt) s += expf(x[j] - m);
  }
  s = block_reduce(s, false, sh);

  if (vec) {
    for (long long j = tid; j < V / 4; j += nt) {
      const float4 f = reinterpret_cast<const float4*>(x)[j];
      reinterpret_cast<float4*>(y)[j] =
          make_float4(expf(f.x - m) / s, expf(f.y - m) / s, expf(f.z - m) / s, expf(f.w - m) / s);
    }
  } else {
    for (long long j = tid; j < V; j += nt) y[j] = expf(x[j] - m) / s;
  }
}
