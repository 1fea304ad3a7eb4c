// Probe (prepared 2026-12-05, not yet run): do stores issued by the TMA unit (cp.async.bulk from
// shared to global) reach another SM sooner than ordinary stores while the writing SM's cp.async
// weight stream is in flight?
//
// Why: in the persistent decode kernel a stage's output and its count reach the next stage's
// readers late while the writer's ring copies are in flight (a release took ~4,800 cycles against
// ~500 with none, ../h200-unified-max-2026-12-04/; stores without a fence were no sooner,
// ../h200-tagged-handoffs-2026-12-04/; a warp with no copies of its own waits too,
// cluster-probe-3.txt there). If the wait is the LSU/L1 path's (the ordinary store queues behind
// the SM's outstanding cp.async requests), a store issued by the TMA unit, which reads shared
// memory and writes to L2 without the LSU, may not queue there. The kernel's handoffs (the qkv
// rows, the parts' results, the attention output, h and gu, the counts) could then go out that
// way while the weight ring stays cp.async (TMA for the ring was slower, ../h200-tma-2026-12-03/).
//
// The frame (bench/micro/ring_probe.cuh) is ../h200-fence-probe-2026-12-04/probe.cu's, whose mode
// 2 never ran there: warp 15 waited at a named barrier that only warp 15 itself would have arrived
// at; warp 0 arrives now: one 512-thread block per SM, each streaming warp copying 2 KiB a tile into a 5-stage ring
// of 32 KiB tiles (4 tiles in flight, cp.async.cg with an L2 evict-first policy, as
// EngineDlStream) from a 4 GiB buffer. At tile `at`, lane 0 of the measuring warp times, in SM
// cycles (clock64):
//   publish: writing a flag the variant's way, until the writer may go on (V 4: until the bulk
//            group completes, cp.async.bulk.wait_group 0)
//   rtt    : 8 ping-pong rounds with the partner block (blockIdx ^ 1): write the flag (variant V),
//            the partner sees it (ld.acquire.gpu poll) and answers the same way; cycles a round
// mode 0: no block streams; 1: all 16 warps stream, warp 0 measures (its own copies in flight);
// 2: warps 0-14 stream, warp 15 copies nothing and measures.
// V 0: st.relaxed.gpu; 1: fence.sc.gpu + st.relaxed.gpu (the kernel's release today);
//   2: st.release.gpu; 3: fence.sc.gpu + a 16-byte line by cp.async.bulk (TMA) + wait_group 0;
//   4: a 16-byte line by cp.async.bulk (TMA) + wait_group 0, no fence; 5: as 4 but wait_group.read 0
//   (the shared line read, the global write not waited for: a tagged word's reader checks the data).
// Read: V 3/4 against V 1/0 in mode 1. If the TMA store's rtt is near mode 0's while V 1's is
// thousands of cycles, the handoffs are worth moving to bulk stores; if not, the wait is past
// the LSU (the crossbar or L2) and this lever is closed too.
// Build: nvcc -O3 -arch=sm_90 -o probe2 probe2.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "../../micro/ring_probe.cuh"

constexpr int kRounds = 8, kVariants = 6;

// Writes v to the 16-byte flag line p (word 0 read by the partner) the variant's way; line is a
// 16-byte shared-memory buffer of the measuring lane.
__device__ __forceinline__ void publish(unsigned* p, unsigned v, int V, unsigned* line) {
  if (V == 1 || V == 3) asm volatile("fence.sc.gpu;" ::: "memory");
  if (V <= 1) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  } else if (V == 2) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  } else {
    line[0] = v;
    // the generic-proxy write to shared memory made visible to the async proxy (the TMA unit)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const unsigned s = (unsigned)__cvta_generic_to_shared(line);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 16;" ::"l"(p), "r"(s) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    // V 5: only until the copy has read shared memory (the line may be written again), not
    // until its write is performed: the tagged-word handoff's way, whose reader checks the data
    if (V == 5) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    else asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}
__device__ void measure(unsigned* flags, long long* out, int V, unsigned* line) {
  const int b = blockIdx.x, partner = b ^ 1;
  long long* o = out + (long long)b * (1 + kRounds);
  // publish alone, to a word no one polls (the block's own flag line + 16 bytes)
  long long c0 = probe_clk();
  publish(flags + 32 * b + 4, 0u, V, line);
  o[0] = probe_clk() - c0;
  if (partner >= (int)gridDim.x) return;
  for (int r = 1; r <= kRounds; ++r) {
    c0 = probe_clk();
    if ((b & 1) == 0) {
      publish(flags + 32 * partner, r, V, line);
      while (probe_ld_acquire(flags + 32 * b) != (unsigned)r) {}
    } else {
      while (probe_ld_acquire(flags + 32 * b) != (unsigned)r) {}
      publish(flags + 32 * partner, r, V, line);
    }
    o[1 + r - 1] = probe_clk() - c0;
  }
}

extern "C" __global__ void __launch_bounds__(512, 1)
    probe(const char* src, size_t per_block, unsigned* flags, long long* out, int mode, int V, int iters, int at) {
  __shared__ __align__(16) unsigned line[4];
  probe_ring(src, per_block, mode, iters, at, [&] { measure(flags, out, V, line); });
}

int main() {
  const ProbeGrid g = probe_grid();
  const int grid = g.grid;
  const size_t bytes = g.bytes, per_block = g.per_block;
  char* src;
  unsigned* flags;
  long long* out;
  if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&flags, grid * 128) != cudaSuccess ||
      cudaMalloc(&out, grid * (1 + kRounds) * 8) != cudaSuccess) {
    printf("cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(src, 1, bytes);
  const int smem = kProbeStages * kProbeTile;
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  printf("grid %d blocks, SM clock %d MHz (attribute), %d tiles of 32 KiB in flight a streaming block\n", grid,
         g.sm_mhz, kProbeStages - 1);
  const char* modes[] = {"no stream", "all warps stream, warp 0 measures", "warps 0-14 stream, warp 15 measures"};
  const char* vs[] = {"st.relaxed", "fence.sc + st", "st.release", "fence.sc + TMA store", "TMA store", "TMA store, .read"};
  std::vector<long long> h(grid * (1 + kRounds));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int rep = 0; rep < 2; ++rep)
    for (int mode = 0; mode < 3; ++mode)
      for (int V = 0; V < kVariants; ++V) {
        cudaMemset(flags, 0, grid * 128);
        cudaMemset(out, 0, grid * (1 + kRounds) * 8);
        cudaEventRecord(e0);
        probe<<<grid, 512, smem>>>(src, per_block, flags, out, mode, V, 160, 60);
        cudaEventRecord(e1);
        const cudaError_t err = cudaDeviceSynchronize();
        if (err != cudaSuccess) {
          printf("mode %d V %d: %s\n", mode, V, cudaGetErrorString(err));
          return 1;
        }
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        cudaMemcpy(h.data(), out, h.size() * 8, cudaMemcpyDeviceToHost);
        const auto column = [&](int col, int step) {
          std::vector<long long> v;
          for (int b = 0; b < grid; b += step) v.push_back(h[size_t(b) * (1 + kRounds) + col]);
          std::sort(v.begin(), v.end());
          return v;
        };
        printf("rep %d | %-36s | %-20s | kernel %.1f us (%.2f TB/s streamed)\n", rep, modes[mode], vs[V], ms * 1e3,
               mode ? (double)grid * 160 * kProbeTile / (ms * 1e-3) / 1e12 * (mode == 2 ? 15.0 / 16 : 1.0) : 0.0);
        const auto p = column(0, 1);
        printf("    publish %lld cyc [%lld, %lld]; rtt by round (even blocks' median):", p[p.size() / 2], p.front(),
               p.back());
        for (int r = 0; r < kRounds; ++r) printf(" %lld", column(1 + r, 2)[grid / 4]);
        printf("\n");
      }
  return 0;
}
