// The bandwidth ceiling: copy dims[0] bytes (a multiple of 16) from tensors[0] to
// tensors[1] with 16-byte loads and stores in a grid-stride loop.
// @thrive op: copy
// @thrive backend: cuda
// @thrive entry: thrive_copy
// @thrive launch: entry=thrive_copy block=512 grid=SMS*4,1,1 smem=0
#include "thrive_cuda.cuh"

extern "C" __global__ void thrive_copy(ThriveCudaArgs args) {
  const uint4* src = (const uint4*)args.tensors[0];
  uint4* dst = (uint4*)args.tensors[1];
  const long long n = args.dims[0] / 16;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride * 4) {
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i + u * stride < n) dst[i + u * stride] = src[i + u * stride];
  }
}
