// The bandwidth ceiling: copy dims[0] bytes (a multiple of 16) from tensors[0] to
// tensors[1] with 16-byte loads and stores in a grid-stride loop. Each thread issues
// its UNROLL loads before any store (restrict pointers let the compiler keep them in
// flight together), so enough bytes are outstanding to cover HBM latency (Little's law:
// about 4 TB/s x 1 us = 4 MB in flight on an H200).
// @thrive op: copy
// @thrive backend: cuda
// @thrive entry: thrive_copy
// @thrive launch: entry=thrive_copy block=512 grid=SMS*4,1,1 smem=0
#include "thrive_cuda.cuh"

#define UNROLL 4

extern "C" __global__ void __launch_bounds__(512) thrive_copy(ThriveCudaArgs args) {
  const uint4* __restrict__ src = (const uint4*)args.tensors[0];
  uint4* __restrict__ dst = (uint4*)args.tensors[1];
  const long long n = args.dims[0] / 16;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride * UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (i + u * stride < n) v[u] = __ldcs(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      if (i + u * stride < n) __stcs(dst + i + u * stride, v[u]);
  }
}
