// Probe (2026-12-06, session 31): does a handoff through a thread-block cluster's distributed
// shared memory (DSMEM) stay fast while the rest of the GPU streams weights at the DRAM's rate?
//
// Why: ../h200-idle-sm-probe-2026-12-06/ (probe3) measured a flag's round trip through L2 between
// two SMs at 16,400-24,200 cycles while 130 SMs stream (916-935 quiet): the queue a handoff waits
// in is the whole GPU's. The batch-1 attention stage of the persistent decode kernel is a chain of
// such handoffs (qkv rows -> parts -> merge -> o stage). The 2026-12-04 cluster probe
// (bench/micro/cluster_probe.cu) found a cluster barrier (~500 cycles) no faster than a *quiet* L2
// handoff (450-800), and clusters were not pursued; a handoff under load was not compared. DSMEM
// traffic goes SM to SM inside a GPC (CUDA Programming Guide, "Distributed Shared Memory"), not
// through L2, so it may not wait behind the weight stream. If it does not, a cluster layout of the
// attention (one cluster a KV head: its parts and merge exchanged in DSMEM) removes most of the
// attention stage's wait.
//
// The frame is probe3's: one 512-thread block an SM, streaming blocks copy 4 tiles of 32 KiB in
// flight through a 5-stage ring (cp.async.cg, L2 evict-first), launched as clusters of C blocks
// (C = 2 or 8). Blocks (r, r ^ 1) of a cluster ping-pong 8 rounds; cycles a round (SM clock).
// mode 0: no block streams; every cluster measures at once.
// mode 1: every block streams; measures at tile 60 with its own copies in flight.
// mode 3: clusters with id % 4 == 0 stream nothing and measure after 60,000 cycles; others stream.
// mode 4: only cluster 0 streams nothing and measures (after 60,000 cycles); all others stream.
// V 0: DSMEM flag: st.release.cluster.shared::cluster into the partner's word, polls of its own
//      word with ld.acquire.cluster.shared::cta.
// V 1: mbarrier: mbarrier.arrive.release.cluster on the partner's barrier (shared::cluster), waits
//      on its own with try_wait.parity.acquire.cluster.
// V 2: barrier.cluster.arrive.release + wait.acquire by every thread of the cluster: cycles a barrier.
// V 3: an L2 flag between the same pair (st.relaxed.gpu, ld.acquire.gpu polls), as probe3's V 0.
// Build: nvcc -O3 -arch=sm_90 -o probe4 probe4.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "../../micro/ring_probe.cuh"

constexpr int kRounds = 8;

__device__ __forceinline__ unsigned cl_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned cl_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cl_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ unsigned ld_acq_cluster(unsigned a) {
  unsigned v;
  asm volatile("ld.acquire.cluster.shared::cta.u32 %0, [%1];" : "=r"(v) : "r"(a) : "memory");
  return v;
}
__device__ __forceinline__ void st_rel_cluster(unsigned a, unsigned v) {
  asm volatile("st.release.cluster.shared::cluster.u32 [%0], %1;" ::"r"(a), "r"(v) : "memory");
}
__device__ __forceinline__ void mbar_arrive_remote(unsigned a) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(a) : "memory");
}
__device__ __forceinline__ void mbar_wait_cluster(unsigned a, unsigned parity) {
  unsigned ok = 0;
  while (!ok)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(ok)
        : "r"(a), "r"(parity)
        : "memory");
}

// The ring's copy of one tile (probe3's, written out: no lambda).
__device__ __forceinline__ void probe4_issue(unsigned dst, const char* base, size_t off, size_t per_block, int warp,
                                             int lane) {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const char* s = base + (off + warp * 2048 + u * 512 + lane * 16) % per_block;
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst + u * 512), "l"(s),
                 "l"(policy)
                 : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Called by every thread of the block (V 2 needs them all); thread 0 times and records.
// flag_s: this block's shared word/mbarrier (V 0: word at +0; V 1: mbarrier at +8).
__device__ void measure(unsigned flag_s, unsigned* gflags, long long* out, int V) {
  const unsigned r = cl_rank(), partner_rank = r ^ 1;
  const int b = blockIdx.x, partner = b ^ 1;
  long long* o = out + (long long)b * (2 + kRounds);
  if (V == 2) {
    for (int k = 1; k <= kRounds; ++k) {
      const long long c0 = probe_clk();
      cl_sync();
      if (threadIdx.x == 0) o[2 + k - 1] = probe_clk() - c0;
    }
    if (threadIdx.x == 0) o[1] = 1;
    return;
  }
  if (threadIdx.x != 0) return;
  unsigned peer_s;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(peer_s) : "r"(flag_s), "r"(partner_rank));
  o[0] = 0;
  o[1] = 1;
  const bool even = (r & 1) == 0;
  for (int k = 1; k <= kRounds; ++k) {
    const long long c0 = probe_clk();
    if (V == 0) {
      if (even) {
        st_rel_cluster(peer_s, k);
        while (ld_acq_cluster(flag_s) != (unsigned)k) {}
      } else {
        while (ld_acq_cluster(flag_s) != (unsigned)k) {}
        st_rel_cluster(peer_s, k);
      }
    } else if (V == 1) {
      if (even) {
        mbar_arrive_remote(peer_s + 8);
        mbar_wait_cluster(flag_s + 8, (k - 1) & 1);
      } else {
        mbar_wait_cluster(flag_s + 8, (k - 1) & 1);
        mbar_arrive_remote(peer_s + 8);
      }
    } else {
      if (even) {
        asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(gflags + 32 * partner), "r"(k) : "memory");
        while (probe_ld_acquire(gflags + 32 * b) != (unsigned)k) {}
      } else {
        while (probe_ld_acquire(gflags + 32 * b) != (unsigned)k) {}
        asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(gflags + 32 * partner), "r"(k) : "memory");
      }
    }
    o[2 + k - 1] = probe_clk() - c0;
  }
}

__host__ __device__ inline bool idle_cluster(int mode, int cid) {
  return mode == 0 || (mode == 3 && cid % 4 == 0) || (mode == 4 && cid == 0);
}

extern "C" __global__ void __launch_bounds__(512, 1)
    probe4(const char* src, size_t per_block, unsigned* gflags, long long* out, int mode, int V, int iters, int at) {
  extern __shared__ __align__(128) unsigned char ring4[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned flag_s = (unsigned)__cvta_generic_to_shared(ring4 + kProbeStages * kProbeTile);
  if (threadIdx.x == 0) {
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(flag_s), "r"(0u) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(flag_s + 8) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cl_sync();
  if (idle_cluster(mode, (int)cl_id())) {
    if (mode != 0) {
      if (threadIdx.x == 0) {
        const long long c0 = probe_clk();
        while (probe_clk() - c0 < 60000) {}
      }
      __syncthreads();
    }
    measure(flag_s, gflags, out, V);
  } else {
    const char* base = src + blockIdx.x * per_block;
    const unsigned ring_s = (unsigned)__cvta_generic_to_shared(ring4) + warp * 2048 + lane * 16;
    unsigned sink = 0;
    for (int t = 0; t < kProbeStages - 1; ++t)
      probe4_issue(ring_s + (t % kProbeStages) * kProbeTile, base, size_t(t) * kProbeTile, per_block, warp, lane);
    for (int t = 0; t < iters; ++t) {
      asm volatile("cp.async.wait_group %0;" ::"n"(kProbeStages - 2) : "memory");
      __syncwarp();
      sink += ((const unsigned*)(ring4 + (t % kProbeStages) * kProbeTile + warp * 2048))[lane];
      const int n = t + kProbeStages - 1;
      probe4_issue(ring_s + (n % kProbeStages) * kProbeTile, base, size_t(n) * kProbeTile, per_block, warp, lane);
      if (mode == 1 && t == at) measure(flag_s, gflags, out, V);
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    asm volatile("" ::"r"(sink));
  }
  __syncthreads();
  cl_sync();  // no block leaves while a peer may still touch its shared memory
}

int main() {
  const ProbeGrid g0 = probe_grid();
  const int smem = kProbeStages * kProbeTile + 128;
  cudaFuncSetAttribute(probe4, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(probe4, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  const int cols = 2 + kRounds;
  const char* modes[] = {"no stream", "all stream, all measure at tile 60", "", "3/4 stream, idle quarter measures",
                         "all but cluster 0 stream, cluster 0 measures"};
  const char* vs[] = {"dsmem flag", "dsmem mbarrier", "barrier.cluster", "L2 flag"};
  printf("SM clock %d MHz (attribute), %d tiles of 32 KiB in flight a streaming block\n", g0.sm_mhz,
         kProbeStages - 1);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int C : {2, 8}) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = C;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cfg.blockDim = dim3(512);
    cfg.dynamicSmemBytes = smem;
    cfg.gridDim = dim3(C);
    int clusters = 0;
    cudaError_t oe = cudaOccupancyMaxActiveClusters(&clusters, probe4, &cfg);
    if (oe != cudaSuccess || clusters <= 0) {
      printf("C %d: occupancy query: %s, %d clusters\n", C, cudaGetErrorString(oe), clusters);
      continue;
    }
    const int grid = clusters * C;
    cfg.gridDim = dim3(grid);
    const size_t bytes = size_t(4) << 30, per_block = bytes / size_t(grid) / kProbeTile * kProbeTile;
    char* src;
    unsigned* gflags;
    long long* out;
    if (cudaMalloc(&src, bytes) != cudaSuccess || cudaMalloc(&gflags, grid * 128) != cudaSuccess ||
        cudaMalloc(&out, size_t(grid) * cols * 8) != cudaSuccess) {
      printf("cudaMalloc failed\n");
      return 1;
    }
    cudaMemset(src, 1, bytes);
    printf("== clusters of %d: %d co-resident (%d blocks)\n", C, clusters, grid);
    std::vector<long long> h(size_t(grid) * cols);
    for (int rep = 0; rep < 2; ++rep)
      for (int mode : {0, 1, 3, 4})
        for (int V = 0; V < 4; ++V) {
          cudaMemset(gflags, 0, grid * 128);
          cudaMemset(out, 0, h.size() * 8);
          cudaEventRecord(e0);
          const cudaError_t le = cudaLaunchKernelEx(&cfg, probe4, (const char*)src, per_block, gflags, out, mode, V,
                                                    160, 60);
          cudaEventRecord(e1);
          const cudaError_t err = le != cudaSuccess ? le : cudaDeviceSynchronize();
          if (err != cudaSuccess) {
            printf("C %d mode %d V %d: %s\n", C, mode, V, cudaGetErrorString(err));
            return 1;
          }
          float ms = 0;
          cudaEventElapsedTime(&ms, e0, e1);
          cudaMemcpy(h.data(), out, h.size() * 8, cudaMemcpyDeviceToHost);
          int streaming = 0;
          std::vector<long long> rounds;  // rounds 2-8 of the measuring blocks (even ranks)
          for (int b = 0; b < grid; ++b) {
            const long long* o = h.data() + size_t(b) * cols;
            streaming += idle_cluster(mode, b / C) ? 0 : 1;
            if (o[1] != 1 || (b % 2) != 0) continue;
            for (int r = 1; r < kRounds; ++r) rounds.push_back(o[2 + r]);
          }
          const double tbps = streaming * 160.0 * kProbeTile / (ms * 1e-3) / 1e12;
          printf("rep %d | %-44s | %-15s | kernel %6.1f us, %3d blocks streamed %.2f TB/s", rep, modes[mode], vs[V],
                 ms * 1e3, streaming, tbps);
          if (rounds.empty()) {
            printf(" | no block measured\n");
            continue;
          }
          std::sort(rounds.begin(), rounds.end());
          const size_t n = rounds.size();
          printf(" | cycles a round (rounds 2-8, %zu samples): p10 %lld median %lld p90 %lld max %lld\n", n,
                 rounds[n / 10], rounds[n / 2], rounds[n * 9 / 10], rounds[n - 1]);
        }
    cudaFree(src);
    cudaFree(gflags);
    cudaFree(out);
  }
  return 0;
}
