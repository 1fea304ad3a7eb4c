// The frame of the handoff probes (bench/results/h200-fence-probe-2026-12-04/probe.cu,
// bench/results/h200-tma-store-probe-2026-12-05/probe2.cu): a kernel of one 512-thread block an
// SM in which each streaming warp copies its 2 KiB of every 32 KiB tile into a 5-stage shared-
// memory ring (4 tiles in flight by default, cp.async.cg with an L2 evict-first policy, as the persistent
// decode kernel's EngineDlStream does) from a buffer of per_block bytes a block, and one lane
// measures something (the probe's `measure`) at tile `at`, with the copies in flight:
//   mode 0: no block streams, warp 0's lane 0 measures;
//   mode 1: all 16 warps stream, warp 0's lane 0 measures (its own copies in flight);
//   mode 2: warps 0-14 stream, warp 15 copies nothing and its lane 0 measures once warp 0 reaches
//           tile `at` (named barrier 1: warp 0 arrives, warp 15 waits).
// The dynamic shared memory is kProbeStages x kProbeTile bytes; the grid must be co-resident
// (the probes pair blocks blockIdx ^ 1 that wait for each other).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

// PROBE_STAGES (a -D at build time; default 5, the kernel's ring) sets the ring's depth: NS - 1
// tiles in flight a block.
#ifndef PROBE_STAGES
#define PROBE_STAGES 5
#endif
constexpr int kProbeStages = PROBE_STAGES, kProbeTile = 32768;
static_assert(kProbeStages >= 2 && kProbeStages <= 8, "PROBE_STAGES: 2 to 8");

// The launch of a probe: an even number of blocks, one an SM (blocks pair up), each streaming its
// share of a 4 GiB buffer in whole tiles; the SM clock in MHz (the device attribute) for reading
// cycles.
struct ProbeGrid {
  int grid = 0, sm_mhz = 0;
  size_t bytes = size_t(4) << 30, per_block = 0;
};
inline ProbeGrid probe_grid() {
  ProbeGrid g;
  int sms = 0, khz = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  g.grid = sms & ~1;
  g.sm_mhz = khz / 1000;
  g.per_block = g.grid > 0 ? g.bytes / size_t(g.grid) / kProbeTile * kProbeTile : 0;
  return g;
}

__device__ __forceinline__ long long probe_clk() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
  return t;
}
__device__ __forceinline__ unsigned probe_ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Runs `iters` tiles of the ring in `mode`; `measure()` is called by the measuring lane.
template <class Measure>
__device__ __forceinline__ void probe_ring(const char* src, size_t per_block, int mode, int iters, int at,
                                           Measure measure) {
  extern __shared__ __align__(128) unsigned char ring[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool streams = mode != 0 && !(mode == 2 && warp == 15);
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  const char* base = src + blockIdx.x * per_block;
  const unsigned ring_s = (unsigned)__cvta_generic_to_shared(ring);
  size_t off = 0;
  unsigned sink = 0;
  auto issue = [&](int t) {
    if (streams) {
      const unsigned dst = ring_s + (t % kProbeStages) * kProbeTile + warp * 2048 + lane * 16;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const char* s = base + (off + warp * 2048 + u * 512 + lane * 16) % per_block;
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst + u * 512), "l"(s),
                     "l"(policy)
                     : "memory");
      }
      off += kProbeTile;
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  if (mode == 2 && warp == 15) {
    asm volatile("bar.sync 1, 64;" ::: "memory");
    if (lane == 0) measure();
    return;
  }
  for (int t = 0; t < kProbeStages - 1; ++t) issue(t);
  for (int t = 0; t < iters; ++t) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kProbeStages - 2) : "memory");
    __syncwarp();
    sink += ((const unsigned*)(ring + (t % kProbeStages) * kProbeTile + warp * 2048))[lane];
    issue(t + kProbeStages - 1);
    if (t == at && warp == 0) {
      if (mode == 2) asm volatile("bar.arrive 1, 64;" ::: "memory");
      else if (lane == 0) measure();
      __syncwarp();
    }
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  asm volatile("" ::"r"(sink));  // the ring's loads stay: their sum is used
}
