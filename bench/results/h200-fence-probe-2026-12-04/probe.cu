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
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

constexpr int kStages = 5, kTile = 32768, kRounds = 8;

__device__ __forceinline__ long long clk() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
  return t;
}
__device__ __forceinline__ void release_then_store(unsigned* p, unsigned v, int V) {
  if (V == 1) asm volatile("fence.sc.gpu;" ::: "memory");
  if (V == 2) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  if (V == 3) asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ void measure(unsigned* flags, const unsigned* warm, long long* out, int V) {
  const int b = blockIdx.x, partner = b ^ 1;
  long long* o = out + (long long)b * (2 + kRounds);
  // fence alone
  long long c0 = clk();
  if (V == 1) asm volatile("fence.sc.gpu;" ::: "memory");
  else if (V == 2 || V == 3) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  long long c1 = clk();
  o[0] = c1 - c0;
  // one L2 load
  unsigned v;
  c0 = clk();
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(warm + 32 * b) : "memory");
  asm volatile("add.u32 %0, %0, 1;" : "+r"(v));
  c1 = clk();
  o[1] = c1 - c0 + (v == 0xffffffffu);
  if (partner >= (int)gridDim.x) return;
  for (int r = 1; r <= kRounds; ++r) {
    c0 = clk();
    if ((b & 1) == 0) {
      release_then_store(flags + 32 * partner, r, V);
      while (ld_acquire(flags + 32 * b) != (unsigned)r) {}
    } else {
      while (ld_acquire(flags + 32 * b) != (unsigned)r) {}
      release_then_store(flags + 32 * partner, r, V);
    }
    o[2 + r - 1] = clk() - c0;
  }
}

extern "C" __global__ void __launch_bounds__(512, 1)
    probe(const char* src, size_t per_block, unsigned* flags, const unsigned* warm, long long* out, int mode, int V,
          int iters, int at) {
  extern __shared__ __align__(128) unsigned char ring[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool streams = mode != 0 && !(mode == 2 && warp == 15);
  const int mw = mode == 2 ? 15 : 0;
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  const char* base = src + blockIdx.x * per_block;
  const unsigned ring_s = (unsigned)__cvta_generic_to_shared(ring);
  size_t off = 0;
  unsigned sink = 0;
  auto issue = [&](int t) {
    if (streams) {
      const unsigned dst = ring_s + (t % kStages) * kTile + warp * 2048 + lane * 16;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const char* s = base + (off + warp * 2048 + u * 512 + lane * 16) % per_block;
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst + u * 512), "l"(s),
                     "l"(policy)
                     : "memory");
      }
      off += kTile;
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  if (mode == 2 && warp == 15) {
    asm volatile("bar.sync 1, 64;" ::: "memory");
    if (lane == 0) measure(flags, warm, out, V);
    return;
  }
  for (int t = 0; t < kStages - 1; ++t) issue(t);
  for (int t = 0; t < iters; ++t) {
    asm volatile("cp.async.wait_group 3;" ::: "memory");
    __syncwarp();
    sink += ((const unsigned*)(ring + (t % kStages) * kTile + warp * 2048))[lane];
    issue(t + kStages - 1);
    if (t == at && warp == mw) {
      if (mode == 2) asm volatile("bar.arrive 1, 64;" ::: "memory");
      else if (lane == 0) measure(flags, warm, out, V);
    }
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  if (sink == 0x12345678u) out[0] = -1;
}

int main() {
  int sms = 0, khz = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  const int grid = sms & ~1;
  const size_t bytes = 4ull << 30, per_block = bytes / grid / kTile * kTile;
  char* src;
  unsigned *flags, *warm;
  long long* out;
  cudaMalloc(&src, bytes);
  cudaMemset(src, 1, bytes);
  cudaMalloc(&flags, grid * 128);
  cudaMalloc(&warm, grid * 128);
  cudaMemset(warm, 0, grid * 128);
  cudaMalloc(&out, grid * (2 + kRounds) * 8);
  const int smem = kStages * kTile;
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  printf("grid %d blocks, SM clock %d MHz (attribute), 4 tiles of 32 KiB in flight a streaming block\n", grid, khz / 1000);
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
               mode ? (double)grid * 160 * kTile / (ms * 1e-3) / 1e12 * (mode == 2 ? 15.0 / 16 : 1.0) : 0.0);
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
