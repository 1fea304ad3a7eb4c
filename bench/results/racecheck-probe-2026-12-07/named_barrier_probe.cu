// Does compute-sanitizer racecheck keep barrier 0 (__syncthreads) apart from a named barrier that
// only half of the block uses? The persistent decode kernel's pattern, reduced: in some blocks
// the first 256 threads of a 512-thread block synchronize on `bar.sync 1, 256` a few times (the
// attention parts' group barrier) while the second half does nothing; then the whole block runs
// a block sum through shared memory behind __syncthreads() (engine_block_sum's code).
// Every block sum is checked against the exact value, so a real barrier slip would also show as
// a wrong sum. Mode 0: no named barrier anywhere (the control); mode 1: blocks 0-3, first half.
// block_sum is engine_block_sum's text on purpose (the probe must run the same code; including
// qwen3_engine.cu instead would compile every engine kernel, minutes on the device).
//   nvcc -arch=sm_90 -o probe named_barrier_probe.cu && compute-sanitizer --tool racecheck ./probe 1
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ float block_sum(float v) {
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

__global__ void probe(int mode, int rounds, int* bad) {
  const int half = threadIdx.x >> 8;
  for (int r = 0; r < rounds; ++r) {
    if (mode == 1 && blockIdx.x < 4 && half == 0)
      for (int i = 0; i < 3; ++i) asm volatile("bar.sync 1, 256;" ::: "memory");
    __syncthreads();
    const float s = block_sum((float)(r + 1));  // every thread adds r + 1: the sum is 512 (r + 1)
    if (s != 512.f * (float)(r + 1)) atomicAdd(bad, 1);
  }
}

int main(int argc, char** argv) {
  const int mode = argc > 1 ? atoi(argv[1]) : 1;
  int* bad = nullptr;
  cudaMalloc(&bad, sizeof(int));
  cudaMemset(bad, 0, sizeof(int));
  probe<<<8, 512>>>(mode, 4, bad);
  int h = -1;
  const cudaError_t e = cudaMemcpy(&h, bad, sizeof(int), cudaMemcpyDeviceToHost);
  printf("mode %d: %s, wrong block sums: %d\n", mode, cudaGetErrorString(e), h);
  return e == cudaSuccess && h == 0 ? 0 : 1;
}
