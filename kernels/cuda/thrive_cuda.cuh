// The ABI between THRIVE and a CUDA candidate kernel. Kernel-side only: no THRIVE
// host header and no system header, so NVRTC compiles a kernel file with nothing but
// this file on its include path (it is passed to NVRTC as a named header, together with
// thrive_eager.cuh, the eager baselines' helpers).
//
// A CUDA kernel file declares one or more entry points and a launch plan:
//   // @thrive entry: name
//   // @thrive launch: entry=name block=<expr> grid=<expr>,<expr>,<expr> smem=<expr>
// Launches run in the order listed, on one stream. Every entry has the signature
//   extern "C" __global__ void name(ThriveCudaArgs args)
// Tensors arrive in the op's ABI order (`thrive ops --spec OP`), row-major and dense;
// dims[] and scalars[] in the op's declared order; bf16 is stored as unsigned short.
#pragma once

#define THRIVE_MAX_TENSORS 8
#define THRIVE_MAX_DIMS 8
#define THRIVE_MAX_SCALARS 4

struct ThriveCudaArgs {
  void* tensors[THRIVE_MAX_TENSORS];  // device pointers, ABI order
  long long dims[THRIVE_MAX_DIMS];    // shape symbols, op order
  double scalars[THRIVE_MAX_SCALARS]; // op scalars (eps, scale, ...)
  void* workspace;                    // device scratch, 256-byte aligned, undefined on entry
  long long workspace_bytes;
};

// bf16 <-> f32: round to nearest even; NaN stays NaN.
__device__ __forceinline__ float thrive_bf16_to_f32(unsigned short b) {
  return __uint_as_float(((unsigned int)b) << 16);
}
__device__ __forceinline__ unsigned short thrive_f32_to_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
