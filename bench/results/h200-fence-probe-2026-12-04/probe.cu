// Probe (H200, 2026-12-04): what does a block's own cp.async weight stream cost the handoff
// operations of the persistent decode kernel, and does it matter which warp does them?
// One 512-thread block per SM, each warp streaming 2 KiB a tile into a 5-stage ring of 32 KiB
// (NS - 1 = 4 tiles in flight, cp.async.cg with an L2 evict-first policy, as EngineDlStream).
// At tile `at`, lane 0 of the measuring warp times:
//   fence : the release variant (V) alone, clock64 cycles
//   load  : one ld.relaxed.gpu of an L2-resident word, cycles
//   rtt   : 8 ping-pong rounds with the partner block (blockIdx ^ 1): write the flag (variant V), the
//           partner sees it (ld.acquire.gpu poll) and answers the same way; cycles a round
// mode 0: no block streams; 1: all 16 warps stream, warp 0 measures (its own copies in flight);
// 2: warps 0-14 stream, warp 15 copies nothing and measures (others' copies in flight).
// V 0: st.relaxed; 1: fence.sc.gpu (__threadfence) + st.relaxed; 2: fence.acq_rel.gpu + st.relaxed;
//   3: st.release.gpu.
// Build: nvcc -O3 -arch=sm_90 -o probe probe.cu
// (2026-12-05: the ring and the measuring lane's frame moved to bench/micro/ring_probe.cuh, shared
// with ../h200-tma-store-probe-2026-12-05/probe2.cu. In the version run on 2026-12-05 mode 2 hung:
// its warp 15 waited at a named barrier that only warp 15 itself would have arrived at; warp 0
// arrives in the shared frame.)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../micro/ring_probe.cuh"

constexpr int kRounds = 8;
__device__ __forceinline__ void release_then_store(unsigned* p, unsigned v, int V) {
  if (V == 1) asm volatile("fence.sc.gpu;" ::: "memory");
  if (V == 2) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  if (V == 3) asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ void measure(unsigned* flags, const unsigned* warm, long long* out, int V) {
  const int b = blockIdx.x, partner = b ^ 1;
  long long* o = out + (long long)b * (2 + kRounds);
  // fence alone
  long long c0 = probe_clk();
  if (V == 1) asm volatile("fence.sc.gpu;" ::: "memory");
  else if (V == 2 || V == 3) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  long long c1 = probe_clk();
  o[0] = c1 - c0;
  // one L2 load
  unsigned v;
  c0 = probe_clk();
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(warm + 32 * b) : "memory");
  asm volatile("add.u32 %0, %0, 1;" : "+r"(v));
  c1 = probe_clk();
  o[1] = c1 - c0 + (v == 0xffffffffu);
  if (partner >= (int)gridDim.x) return;
  for (int r = 1; r <= kRounds; ++r) {
    c0 = probe_clk();
    if ((b & 1) == 0) {
      release_then_store(flags + 32 * partner, r, V);
      while (probe_ld_acquire(flags + 32 * b) != (unsigned)r) {}
    } else {
      while (probe_ld_acquire(flags + 32 * b) != (unsigned)r) {}
      release_then_store(flags + 32 * partner, r, V);
    }
    o[2 + r - 1] = probe_clk() - c0;
  }
}

extern "C" __global__ void __launch_bounds__(512, 1)
    probe(const char* src, size_t per_block, unsigned* flags, const unsigned* warm, long long* out, int mode, int V,
          int iters, int at) {
  probe_ring(src, per_block, mode, iters, at, [&] { measure(flags, warm, out, V); });
}

int main() {
  const ProbeGrid g = probe_grid();
  const int grid = g.grid;
  const size_t bytes = g.bytes, per_block = g.per_block;
  char* src;
  unsigned *flags, *warm;
  long long* out;
  cudaMalloc(&src, bytes);
  cudaMemset(src, 1, bytes);
  cudaMalloc(&flags, grid * 128);
  cudaMalloc(&warm, grid * 128);
  cudaMemset(warm, 0, grid * 128);
  cudaMalloc(&out, grid * (2 + kRounds) * 8);
  const int smem = kProbeStages * kProbeTile;
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  printf("grid %d blocks, SM clock %d MHz (attribute), 4 tiles of 32 KiB in flight a streaming block\n", grid, g.sm_mhz);
  const char* modes[] = {"no stream", "all warps stream, warp 0 measures", "warps 0-14 stream, warp 15 measures"};
  const char* vs[] = {"st.relaxed", "fence.sc + st", "fence.acq_rel + st", "st.release"};
  std::vector<long long> h(grid * (2 + kRounds));
  for (int rep = 0; rep < 2; ++rep)
    for (int mode = 0; mode < 3; ++mode)
      for (int V = 0; V < 4; ++V) {
        cudaMemset(flags, 0, grid * 128);
        cudaMemset(out, 0, grid * (2 + kRounds) * 8);
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0), cudaEventCreate(&e1);
        cudaEventRecord(e0);
        probe<<<grid, 512, smem>>>(src, per_block, flags, warm, out, mode, V, 160, 60);
        cudaEventRecord(e1);
        cudaError_t err = cudaDeviceSynchronize();
        if (err != cudaSuccess) { printf("error %s\n", cudaGetErrorString(err)); return 1; }
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        cudaMemcpy(h.data(), out, h.size() * 8, cudaMemcpyDeviceToHost);
        auto med = [&](int col, long long& lo, long long& hi) {
          std::vector<long long> v;
          for (int b = 0; b < grid; ++b) v.push_back(h[b * (2 + kRounds) + col]);
          std::sort(v.begin(), v.end());
          lo = v.front(), hi = v.back();
          return v[v.size() / 2];
        };
        long long lo, hi;
        printf("rep %d | %-38s | %-18s | kernel %.1f us (%.2f TB/s streamed)\n", rep, modes[mode], vs[V], ms * 1e3,
               mode ? (double)grid * 160 * kProbeTile / (ms * 1e-3) / 1e12 * (mode == 2 ? 15.0 / 16 : 1.0) : 0.0);
        long long m = med(0, lo, hi);
        printf("    fence %lld cyc [%lld, %lld]", m, lo, hi);
        m = med(1, lo, hi);
        printf("  load %lld [%lld, %lld]\n    rtt by round (even blocks' median):", m, lo, hi);
        for (int r = 0; r < kRounds; ++r) {
          std::vector<long long> v;
          for (int b = 0; b < grid; b += 2) v.push_back(h[b * (2 + kRounds) + 2 + r]);
          std::sort(v.begin(), v.end());
          printf(" %lld", v[v.size() / 2]);
        }
        printf("\n");
      }
  return 0;
}
