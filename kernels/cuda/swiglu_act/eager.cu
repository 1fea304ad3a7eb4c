// @thrive op: swiglu_act
// @thrive backend: cuda
// @thrive entry: thrive_swiglu_act_eager_silu
// @thrive entry: thrive_swiglu_act_eager_mul
// @thrive launch: entry=thrive_swiglu_act_eager_silu block=128 grid=cdiv(T*I,512),1,1 smem=0
// @thrive launch: entry=thrive_swiglu_act_eager_mul block=128 grid=cdiv(T*I,512),1,1 smem=0
//
// Eager baseline: what PyTorch eager runs on the GPU for vLLM's SiluAndMul.forward_native,
//   d = x.shape[-1] // 2
//   out = F.silu(x[..., :d]) * x[..., d:]
// two kernels over the strided halves of x: silu of the gate half into a bf16 [T, I] temporary
// in the workspace (fp32 math, accurate expf, as PyTorch's silu kernel), then the product with
// the up half. PyTorch's unrolled elementwise kernel shape: 128 threads, 4 elements per thread
// (strided by 128, loads first, then stores); the row/column split of the strided halves by a
// multiply-shift divider (PyTorch's IntDivider).
#include "thrive_eager.cuh"

// element i of [T, I] -> offset of its gate value in x [T, 2I]
__device__ __forceinline__ long long gate_offset(const FastDiv& fd, long long i, long long I, bool narrow) {
  const long long t = fd_div(fd, i, I, narrow);
  return i + t * I;  // t * 2I + (i - t * I)
}

extern "C" __global__ void __launch_bounds__(128) thrive_swiglu_act_eager_silu(ThriveCudaArgs args) {
  __shared__ FastDiv fd;
  const bf16_t* x = (const bf16_t*)args.tensors[0];
  const long long T = args.dims[0], I = args.dims[1], N = T * I;
  bf16_t* act = (bf16_t*)args.workspace;  // silu(gate), bf16 [T, I]
  if (threadIdx.x == 0) fd = fd_make((unsigned int)I);
  __syncthreads();
  const bool narrow = N < 0xffffffffLL;
  elementwise(
      N,
      [&](long long i) {
        const float a = thrive_bf16_to_f32(x[gate_offset(fd, i, I, narrow)]);
        return a / (1.0f + expf(-a));
      },
      [&](long long i, float v) { act[i] = thrive_f32_to_bf16(v); });
}

extern "C" __global__ void __launch_bounds__(128) thrive_swiglu_act_eager_mul(ThriveCudaArgs args) {
  __shared__ FastDiv fd;
  const bf16_t* x = (const bf16_t*)args.tensors[0];
  bf16_t* out = (bf16_t*)args.tensors[1];
  const long long T = args.dims[0], I = args.dims[1], N = T * I;
  const bf16_t* act = (const bf16_t*)args.workspace;
  if (threadIdx.x == 0) fd = fd_make((unsigned int)I);
  __syncthreads();
  const bool narrow = N < 0xffffffffLL;
  elementwise(
      N,
      [&](long long i) {
        return thrive_bf16_to_f32(act[i]) * thrive_bf16_to_f32(x[gate_offset(fd, i, I, narrow) + I]);
      },
      [&](long long i, float v) { out[i] = thrive_f32_to_bf16(v); });
}
