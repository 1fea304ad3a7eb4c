// Device helpers of the eager baselines (kernels/cuda/<op>/eager.cu), which run each op the
// way PyTorch eager does on the GPU. NVRTC gets this file as a named header next to
// thrive_cuda.cuh, so any kernel may include it. Source of the shapes: PyTorch's unrolled
// elementwise kernel (128 threads, 4 elements per thread) and its IntDivider.
#pragma once

#include "thrive_cuda.cuh"

typedef unsigned short bf16_t;

#define NEG_INF __int_as_float(0xff800000u)  // -inf (NVRTC has no INFINITY macro)

// x rounded up to a multiple of 256 bytes (workspace sub-buffers stay 256-byte aligned).
__device__ __forceinline__ long long al256(long long x) { return (x + 255) / 256 * 256; }

// i / d for 32-bit i by multiply-shift (PyTorch's IntDivider does the same):
// m = floor(2^32 (2^s - d) / d) + 1. The magic is computed once per block (thread 0) and read
// from shared memory; `narrow` says i fits 32 bits, else it falls back to a division.
struct FastDiv {
  unsigned int m, s;
};
__device__ __forceinline__ FastDiv fd_make(unsigned int d) {
  FastDiv f;
  f.s = 0;
  while ((1ull << f.s) < d) ++f.s;
  f.m = (unsigned int)(((1ull << 32) * ((1ull << f.s) - d)) / d + 1);
  return f;
}
__device__ __forceinline__ long long fd_div(const FastDiv& f, long long i, long long d, bool narrow) {
  if (!narrow) return i / d;
  const unsigned int n = (unsigned int)i;
  return (long long)(((unsigned long long)__umulhi(n, f.m) + n) >> f.s);
}

// PyTorch-style unrolled elementwise loop: element i = block*512 + k*128 + tid, k < 4, all
// loads before any store. Launch with 128 threads and cdiv(n, 512) blocks.
template <class Load, class Store>
__device__ __forceinline__ void elementwise(long long n, Load load, Store store) {
  const long long base = (long long)blockIdx.x * 512 + threadIdx.x;
  float v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const long long i = base + k * 128;
    if (i < n) v[k] = load(i);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const long long i = base + k * 128;
    if (i < n) store(i, v[k]);
  }
}
