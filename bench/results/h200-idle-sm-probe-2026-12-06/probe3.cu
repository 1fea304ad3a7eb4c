// Probe (2026-12-06, session 30): is a handoff between two SMs that have no copies of their own in
// flight slow while the *other* SMs stream weights at the DRAM's rate?
//
// Why: ../h200-tma-store-probe-2026-12-05/ measured a flag's round trip between two streaming SMs
// at about 14,000 cycles with 128 KiB in flight a block, against 1,400 with no stream anywhere; its
// mode 2 (warp 15 of a streaming SM copies nothing) was as slow, so the wait is the SM's. Not
// measured: an SM with nothing in flight while the rest of the GPU streams. If its round trips are
// near 1,400 cycles, attention could run on SMs that stream nothing (its chain of about three
// round trips a layer at the quiet latency); if not, the queue is past the SM (crossbar, L2) and no
// assignment of work to SMs shortens it. ../h200-part-hold-2026-12-06/ (call 1) found the kernel's
// attention no shorter when the part-running blocks held back their copies, which points to the
// second answer; this measures it directly.
//
// The frame: bench/micro/ring_probe.cuh (one 512-thread block an SM; a streaming block's 16 warps
// copy 2 KiB each a 32 KiB tile into a 5-stage ring, 4 tiles in flight, cp.async.cg, L2
// evict-first). Pairs of blocks (b, b ^ 1) ping-pong a flag 8 rounds (`rtt`, cycles a round, the
// median over the measuring pairs), after `publish` (the flag write alone).
// mode 0: no block streams; every pair measures at once.
// mode 1: every block streams; every pair measures at tile 60 (as probe2's mode 1).
// mode 3: pairs p = b / 2 with p % 4 == 0 stream nothing and measure once the streaming blocks
//         are under way (after 60,000 cycles); the other three quarters stream.
// mode 4: only pair 0 streams nothing and measures (after 60,000 cycles); all the others stream.
// V 0: st.relaxed.gpu; 1: fence.sc.gpu + st.relaxed.gpu (the kernel's release before a count).
// Build: nvcc -O3 -arch=sm_90 -o probe3 probe3.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "../../micro/ring_probe.cuh"

constexpr int kRounds = 8;

__device__ __forceinline__ void publish(unsigned* p, unsigned v, int V) {
  if (V == 1) asm volatile("fence.sc.gpu;" ::: "memory");
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ void measure(unsigned* flags, long long* out, int V) {
  const int b = blockIdx.x, partner = b ^ 1;
  long long* o = out + (long long)b * (2 + kRounds);
  long long c0 = probe_clk();
  publish(flags + 32 * b + 4, 0u, V);
  o[0] = probe_clk() - c0;
  o[1] = 1;  // this block measured
  for (int r = 1; r <= kRounds; ++r) {
    c0 = probe_clk();
    if ((b & 1) == 0) {
      publish(flags + 32 * partner, r, V);
      while (probe_ld_acquire(flags + 32 * b) != (unsigned)r) {}
    } else {
      while (probe_ld_acquire(flags + 32 * b) != (unsigned)r) {}
      publish(flags + 32 * partner, r, V);
    }
    o[2 + r - 1] = probe_clk() - c0;
  }
}
// The ring of probe_ring written out without lambdas: built from ring_probe.cuh's loop, this
// probe's streaming blocks hit an illegal instruction at the cache-hinted cp.async (compute-sanitizer
// on an H100, 2026-12-06: the copy lambda had become a real call there). PROBE_NO_HINT drops the
// L2 evict-first hint.
__device__ __forceinline__ void probe3_issue(unsigned dst, const char* base, size_t off, size_t per_block, int warp,
                                             int lane) {
#ifndef PROBE_NO_HINT
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const char* s = base + (off + warp * 2048 + u * 512 + lane * 16) % per_block;
#ifndef PROBE_NO_HINT
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst + u * 512), "l"(s),
                 "l"(policy)
                 : "memory");
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst + u * 512), "l"(s) : "memory");
#endif
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

extern "C" __global__ void __launch_bounds__(512, 1)
    probe(const char* src, size_t per_block, unsigned* flags, long long* out, int mode, int V, int iters, int at) {
  extern __shared__ __align__(128) unsigned char ring3[];
  const int pair = blockIdx.x / 2;
  const bool idle = mode == 0 || (mode == 3 && pair % 4 == 0) || (mode == 4 && pair == 0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (idle) {
    // measures once: at once in mode 0; in modes 3 and 4 after 60,000 cycles (about 30 us), when
    // the streaming blocks are under way
    if (threadIdx.x != 0) return;
    if (mode != 0) {
      const long long c0 = probe_clk();
      while (probe_clk() - c0 < 60000) {}
    }
    measure(flags, out, V);
    return;
  }
  const char* base = src + blockIdx.x * per_block;
  const unsigned ring_s = (unsigned)__cvta_generic_to_shared(ring3) + warp * 2048 + lane * 16;
  unsigned sink = 0;
  for (int t = 0; t < kProbeStages - 1; ++t)
    probe3_issue(ring_s + (t % kProbeStages) * kProbeTile, base, size_t(t) * kProbeTile, per_block, warp, lane);
  for (int t = 0; t < iters; ++t) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kProbeStages - 2) : "memory");
    __syncwarp();
    sink += ((const unsigned*)(ring3 + (t % kProbeStages) * kProbeTile + warp * 2048))[lane];
    const int n = t + kProbeStages - 1;
    probe3_issue(ring_s + (n % kProbeStages) * kProbeTile, base, size_t(n) * kProbeTile, per_block, warp, lane);
    if (mode == 1 && t == at && warp == 0) {
      if (lane == 0) measure(flags, out, V);
      __syncwarp();
    }
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  asm volatile("" ::"r"(sink));
}

int main() {
  const ProbeGrid g = probe_grid();
  const int grid = g.grid;
  char* src;
  unsigned* flags;
  long long* out;
  const int cols = 2 + kRounds;
  if (cudaMalloc(&src, g.bytes) != cudaSuccess || cudaMalloc(&flags, grid * 128) != cudaSuccess ||
      cudaMalloc(&out, grid * cols * 8) != cudaSuccess) {
    printf("cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(src, 1, g.bytes);
  const int smem = kProbeStages * kProbeTile;
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  printf("grid %d blocks, SM clock %d MHz (attribute), %d tiles of 32 KiB in flight a streaming block\n", grid,
         g.sm_mhz, kProbeStages - 1);
  const char* modes[] = {"no stream", "all stream, all pairs measure", "", "3/4 stream, idle quarter measures",
                         "all but pair 0 stream, pair 0 measures"};
  const char* vs[] = {"st.relaxed", "fence.sc + st"};
  std::vector<long long> h(size_t(grid) * cols);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int rep = 0; rep < 2; ++rep)
    for (int mode : {0, 1, 3, 4})
      for (int V = 0; V < 2; ++V) {
        cudaMemset(flags, 0, grid * 128);
        cudaMemset(out, 0, h.size() * 8);
        cudaEventRecord(e0);
        probe<<<grid, 512, smem>>>(src, g.per_block, flags, out, mode, V, 160, 60);
        cudaEventRecord(e1);
        const cudaError_t err = cudaDeviceSynchronize();
        if (err != cudaSuccess) {
          printf("mode %d V %d: %s\n", mode, V, cudaGetErrorString(err));
          return 1;
        }
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        cudaMemcpy(h.data(), out, h.size() * 8, cudaMemcpyDeviceToHost);
        int streaming = 0;
        std::vector<long long> pub, rounds[kRounds];
        for (int b = 0; b < grid; ++b) {
          const long long* o = h.data() + size_t(b) * cols;
          const int pair = b / 2;
          const bool idle = mode == 0 || (mode == 3 && pair % 4 == 0) || (mode == 4 && pair == 0);
          streaming += idle ? 0 : 1;
          if (o[1] != 1) continue;
          pub.push_back(o[0]);
          if (b % 2 == 0)
            for (int r = 0; r < kRounds; ++r) rounds[r].push_back(o[2 + r]);
        }
        const double tbps = streaming * 160.0 * kProbeTile / (ms * 1e-3) / 1e12;
        printf("rep %d | %-40s | %-13s | kernel %.1f us, %d blocks streamed %.2f TB/s\n", rep, modes[mode], vs[V],
               ms * 1e3, streaming, tbps);
        if (pub.empty()) {
          printf("    no block measured\n");
          continue;
        }
        std::sort(pub.begin(), pub.end());
        printf("    %zu blocks measured; publish %lld cyc [%lld, %lld]; rtt by round (median):", pub.size(),
               pub[pub.size() / 2], pub.front(), pub.back());
        for (int r = 0; r < kRounds; ++r) {
          std::sort(rounds[r].begin(), rounds[r].end());
          printf(" %lld", rounds[r][rounds[r].size() / 2]);
        }
        printf("\n");
      }
  return 0;
}
