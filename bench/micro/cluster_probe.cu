// Can the persistent decoder-layer kernel (kernels/cuda/engine/qwen3_engine.cu) hand data between
// blocks through a thread-block cluster's distributed shared memory instead of L2? The question
// behind a cluster layout of the batch-1 attention: one cluster a KV head, its qkv rows, attention
// parts, merge and o-projection slice exchanged inside the cluster (CUDA Programming Guide,
// "Thread Block Clusters" and "Distributed Shared Memory"; PTX ISA 8.0 barrier.cluster, mapa,
// ld/st.shared::cluster; cluster sizes above 8 are "non-portable", allowed on sm_90 by opt-in).
// Three measurements on one GPU:
//   occupancy: cudaOccupancyMaxActiveClusters for clusters of 8 and 16 blocks of 512 threads with
//              100 or 200 KB of dynamic shared memory (one block an SM): how many fit at once.
//   barrier  : grid of 8 clusters of 16 blocks, 512 threads; cycles (clock64, SM clock) per
//              barrier.cluster.arrive.release + wait.acquire, alone and with each thread's four
//              16-byte DRAM loads in flight across it (the weight stream's load on the memory
//              system), and per "store 16 bytes to the next block's shared memory, barrier, read
//              it back" exchange.
//   l2 pair  : the same grid without clusters' help: block 0 and block 64 pass a flag back and
//              forth through global memory (volatile polls), with and without every other block
//              streaming DRAM; half the round trip is one L2 handoff.
// Last, the cost of thread 0's release with the ring's copies in flight (fence_kernel).
// Build and run (sm_90): nvcc -O3 -arch=sm_90 -std=c++17 -o cluster_probe cluster_probe.cu &&
// ./cluster_probe. Output: one line a measurement, cycles at the median of the blocks.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#define CHECK(x)                                                                            \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

constexpr int kIters = 2000;

__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Spins until the mbarrier at shared address `bar` completes the phase of parity `phase`.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned phase) {
  unsigned ok = 0;
  while (!ok)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(ok)
                 : "r"(bar), "r"(phase)
                 : "memory");
}

// mode 0: barrier alone; 1: barrier with DRAM loads in flight; 2: DSMEM exchange + barrier.
// cycles[block] = clock64 cycles per iteration (thread 0's).
__global__ void __launch_bounds__(512, 1) barrier_kernel(int mode, const uint4* stream, long long stream_n,
                                                         long long* cycles, unsigned* sink) {
  extern __shared__ uint4 smem[];
  const unsigned rank = cluster_rank();
  unsigned remote;
  {
    const unsigned local = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"((rank + 1) % 16));
  }
  unsigned acc = 0;
  long long idx = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
  const long long step = (long long)gridDim.x * blockDim.x * 4;
  cluster_sync();
  const long long t0 = clock64();
  for (int i = 0; i < kIters; ++i) {
    if (mode == 1) {
      uint4 v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = __ldcs(stream + (idx + j) % stream_n);
      idx += step;
      cluster_sync();
#pragma unroll
      for (int j = 0; j < 4; ++j) acc ^= v[j].x ^ v[j].w;
    } else if (mode == 2) {
      if (threadIdx.x < 32) {
        const uint4 v = make_uint4(i, rank, threadIdx.x, 0);
        asm volatile("st.shared::cluster.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(remote + threadIdx.x * 16), "r"(v.x), "r"(v.y),
                     "r"(v.z), "r"(v.w)
                     : "memory");
      }
      cluster_sync();
      if (threadIdx.x < 32) acc ^= smem[threadIdx.x].x + smem[threadIdx.x].y;
      cluster_sync();  // the next round's store must not overwrite before the read
    } else {
      cluster_sync();
    }
  }
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.x] = (t1 - t0) / kIters;
  if (acc == 0x12345678u) sink[0] = acc;
}

// Block 0 and block `peer` bounce a counter through global memory (thread 0 of each, volatile
// polls). Warps 1-15 of every other block stream DRAM when `load` > 0, and of blocks 0 and peer
// too when `self` is set: load 1 = plain 16-byte loads (4 a thread in flight), 2 = the persistent
// kernel's cp.async ring (each warp keeps `stages` - 1 groups of 2 KiB in flight, evict-first
// 16-byte copies), 3 = the same ring by cp.async.bulk (lane 0 a warp, one 2 KiB copy a stage,
// mbarrier completion: the copy engine's path). cycles[0] = clock64 cycles per round trip.
__device__ __forceinline__ void stream_warps(int load, int stages, const uint4* stream, long long stream_n,
                                             volatile unsigned* stop, unsigned* sink, unsigned char* smem) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long per_round = (long long)gridDim.x * 15 * 128;  // uint4 a round over the grid
  long long idx = ((long long)blockIdx.x * 15 + (warp - 1)) * 128;
  unsigned acc = 0;
  if (load == 1) {
    idx += lane * 4;
    while (*stop == 0u) {
      uint4 v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = __ldcs(stream + (idx + j) % stream_n);
      idx += per_round;
#pragma unroll
      for (int j = 0; j < 4; ++j) acc ^= v[j].x ^ v[j].w;
    }
  } else if (load == 2) {
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    const unsigned base = (unsigned)__cvta_generic_to_shared(smem) + (warp - 1) * 2048 * 6;
    int s = 0;
    while (*stop == 0u) {
#pragma unroll
      for (int u = 0; u < 4; ++u)
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(base + s * 2048 + (u * 32 + lane) * 16),
                     "l"(stream + (idx + u * 32 + lane) % stream_n), "l"(policy)
                     : "memory");
      asm volatile("cp.async.commit_group;" ::: "memory");
      idx += per_round;
      s = s + 1 == stages ? 0 : s + 1;
      switch (stages) {  // at most stages - 1 groups in flight
        case 2: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
        case 4: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
        default: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
      }
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    acc = ((const unsigned*)smem)[threadIdx.x];
  } else if (load == 3) {
    // mbarriers after the warps' 15 x 6 x 2 KiB of stages (at most 6 stages)
    const unsigned base = (unsigned)__cvta_generic_to_shared(smem) + (warp - 1) * 2048 * 6,
                   bar = (unsigned)__cvta_generic_to_shared(smem) + 15 * 2048 * 6 + (warp - 1) * 64;
    if (lane == 0) {
      for (int i = 0; i < 8; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar + 8 * i) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      unsigned phase[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int s = 0, issued = 0;
      while (*stop == 0u) {
        if (issued >= stages - 1) {  // the oldest of the stages - 1 in flight lands first
          const int o = (s + 6 - (stages - 1)) % 6;
          mbar_wait(bar + 8 * o, phase[o]);
          phase[o] ^= 1u;
        }
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 2048;" ::"r"(bar + 8 * s) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 2048, [%2];" ::"r"(
                         base + s * 2048),
                     "l"(stream + idx % stream_n), "r"(bar + 8 * s)
                     : "memory");
        idx += per_round;
        s = (s + 1) % 6;
        ++issued;
      }
      for (int k = 1; k < stages && k <= issued; ++k) {  // drain before the block exits
        const int o = (s + 6 - k) % 6;
        mbar_wait(bar + 8 * o, phase[o]);
        phase[o] ^= 1u;
      }
    }
    __syncwarp();
    acc = ((const unsigned*)smem)[threadIdx.x];
  }
  if (acc == 0x12345678u) sink[0] = acc;
}

__global__ void __launch_bounds__(512, 1) l2_pair_kernel(int peer, int load, int self, int stages, const uint4* stream,
                                                         long long stream_n, volatile unsigned* flag, long long* cycles,
                                                         unsigned* sink, volatile unsigned* stop) {
  extern __shared__ __align__(128) unsigned char pair_smem[];
  const bool pinger = blockIdx.x == 0 || blockIdx.x == peer;
  if (threadIdx.x == 0 && pinger) {
    const bool ping = blockIdx.x == 0;
    const long long t0 = clock64();
    for (unsigned i = 0; i < (unsigned)kIters; ++i) {
      if (ping) {
        flag[0] = 2 * i + 1;
        while (flag[0] != 2 * i + 2) {
        }
      } else {
        while (flag[0] != 2 * i + 1) {
        }
        flag[0] = 2 * i + 2;
      }
    }
    if (ping) {
      cycles[0] = (clock64() - t0) / kIters;
      __threadfence();
      *stop = 1u;
    }
    return;
  }
  if (threadIdx.x < 32 || load == 0 || (pinger && !self)) return;
  stream_warps(load, stages, stream, stream_n, stop, sink, pair_smem);
}

// How long does thread 0's release (the persistent kernel's stage signal) take while the ring's
// copies are in flight? Every block first puts `groups` commit groups of 2 KiB a warp in flight
// from DRAM, from every warp (copy 1: 16-byte cp.async, evict-first, as the engine's ring;
// copy 2: one 2 KiB cp.async.bulk a warp a group, mbarrier completion: the copy engine's path) or
// none (copy 0); then thread 0 times (clock64) one release of kind `op`: 0 __threadfence()
// (fence.sc.gpu), 1 fence.acq_rel.gpu, 2 red.release.gpu.global.add.u32, 3 atom.release.gpu
// (result used), 4 a relaxed red (no ordering: the floor); cycles[block] = its cycles.
__global__ void __launch_bounds__(512, 1) fence_kernel(int copy, int op, int groups, const uint4* stream, long long stream_n,
                                                       long long* cycles, unsigned* sink, unsigned* counter) {
  extern __shared__ __align__(128) unsigned char fence_smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned base = (unsigned)__cvta_generic_to_shared(fence_smem) + warp * 2048 * 6,
                 bar = (unsigned)__cvta_generic_to_shared(fence_smem) + 16 * 2048 * 6 + warp * 64;
  long long idx = ((long long)blockIdx.x * 16 + warp) * 128;
  if (copy == 1) {
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    for (int g = 0; g < groups; ++g) {
#pragma unroll
      for (int u = 0; u < 4; ++u)
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(base + (g % 6) * 2048 + (u * 32 + lane) * 16),
                     "l"(stream + (idx + u * 32 + lane) % stream_n), "l"(policy)
                     : "memory");
      asm volatile("cp.async.commit_group;" ::: "memory");
      idx += (long long)gridDim.x * 16 * 128;
    }
  } else if (copy == 2 && lane == 0) {
    for (int g = 0; g < groups; ++g) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar + 8 * g) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 2048;" ::"r"(bar + 8 * g) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 2048, [%2];" ::"r"(
                       base + g * 2048),
                   "l"(stream + idx % stream_n), "r"(bar + 8 * g)
                   : "memory");
      idx += (long long)gridDim.x * 16 * 128;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned r = 0;
    const long long t0 = clock64();
    switch (op) {
      case 0: __threadfence(); break;
      case 1: asm volatile("fence.acq_rel.gpu;" ::: "memory"); break;
      case 2: asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory"); break;
      case 3: asm volatile("atom.release.gpu.global.add.u32 %0, [%1], 1;" : "=r"(r) : "l"(counter) : "memory"); break;
      default: asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory"); break;
    }
    const long long t1 = clock64();
    cycles[blockIdx.x] = t1 - t0 + (r == 0xffffffffu);
  }
  if (copy == 1) asm volatile("cp.async.wait_all;" ::: "memory");
  if (copy == 2 && lane == 0)
    for (int g = 0; g < groups; ++g) {
      mbar_wait(bar + 8 * g, 0u);
    }
  __syncthreads();
  if (((const unsigned*)fence_smem)[threadIdx.x] == 0x12345678u) sink[0] = 1;
}

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  CHECK(cudaFuncSetAttribute(barrier_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CHECK(cudaFuncSetAttribute(barrier_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  for (int cs : {8, 16})
    for (int kb : {100, 200}) {
      cudaLaunchConfig_t cfg{};
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = cs, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
      cfg.gridDim = dim3(cs * 8), cfg.blockDim = dim3(512), cfg.dynamicSmemBytes = kb * 1024;
      cfg.attrs = &attr, cfg.numAttrs = 1;
      int clusters = 0;
      const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, barrier_kernel, &cfg);
      std::printf("occupancy cluster %2d, 512 threads, %3d KB smem: %d clusters at once (%s)\n", cs, kb, clusters,
                  cudaGetErrorString(e));
    }
  const long long stream_n = (2ll << 30) / 16;  // 2 GiB of uint4
  uint4* stream = nullptr;
  long long* cycles = nullptr;
  unsigned *sink = nullptr, *flag = nullptr, *stop = nullptr;
  CHECK(cudaMalloc(&stream, stream_n * 16));
  CHECK(cudaMemset(stream, 1, stream_n * 16));
  CHECK(cudaMalloc(&cycles, 1024 * sizeof(long long)));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaMalloc(&flag, 4));
  CHECK(cudaMalloc(&stop, 4));
  const char* names[] = {"barrier alone", "barrier, DRAM loads in flight", "DSMEM store + 2 barriers"};
  for (int mode = 0; mode < 3; ++mode) {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 16, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(128), cfg.blockDim = dim3(512), cfg.dynamicSmemBytes = 200 * 1024;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    for (int rep = 0; rep < 2; ++rep) CHECK(cudaLaunchKernelEx(&cfg, barrier_kernel, mode, (const uint4*)stream, stream_n, cycles, sink));
    CHECK(cudaDeviceSynchronize());
    std::vector<long long> c(128);
    CHECK(cudaMemcpy(c.data(), cycles, 128 * sizeof(long long), cudaMemcpyDeviceToHost));
    std::sort(c.begin(), c.end());
    std::printf("cluster 16 x 8, %-30s: %lld cycles/iteration (median; min %lld, max %lld)\n", names[mode], c[64], c[0],
                c[127]);
  }
  CHECK(cudaFuncSetAttribute(l2_pair_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  struct Case {
    int load, self, stages;
    const char* what;
  };
  const Case cases[] = {{0, 0, 0, "idle"},
                        {1, 0, 0, "other blocks: plain loads"},
                        {1, 1, 0, "all blocks (pingers too): plain loads"},
                        {2, 0, 6, "other blocks: cp.async ring, 5 in flight"},
                        {2, 1, 2, "all blocks: cp.async ring, 1 in flight"},
                        {2, 1, 4, "all blocks: cp.async ring, 3 in flight"},
                        {2, 1, 6, "all blocks: cp.async ring, 5 in flight"},
                        {3, 0, 6, "other blocks: bulk ring, 5 in flight"},
                        {3, 1, 2, "all blocks: bulk ring, 1 in flight"},
                        {3, 1, 6, "all blocks: bulk ring, 5 in flight"}};
  for (const Case& k : cases) {
    CHECK(cudaMemset(flag, 0, 4));
    CHECK(cudaMemset(stop, 0, 4));
    l2_pair_kernel<<<prop.multiProcessorCount, 512, 200 * 1024>>>(64, k.load, k.self, k.stages, stream, stream_n, flag,
                                                                   cycles, sink, stop);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    long long c = 0;
    CHECK(cudaMemcpy(&c, cycles, sizeof(c), cudaMemcpyDeviceToHost));
    std::printf("L2 flag round trip, block 0 <-> 64, %-42s: %5lld cycles (one handoff about %lld)\n", k.what, c, c / 2);
  }
  CHECK(cudaFuncSetAttribute(fence_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  const char* copies[] = {"no copies in flight", "cp.async ring, 5 groups", "bulk ring, 5 groups"};
  const char* ops[] = {"__threadfence", "fence.acq_rel.gpu", "red.release.gpu", "atom.release.gpu", "red.relaxed (floor)"};
  for (int copy = 0; copy < 3; ++copy)
    for (int op = 0; op < 5; ++op) {
      for (int rep = 0; rep < 3; ++rep)
        fence_kernel<<<prop.multiProcessorCount, 512, 200 * 1024>>>(copy, op, 5, stream, stream_n, cycles, sink, flag);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      std::vector<long long> c(prop.multiProcessorCount);
      CHECK(cudaMemcpy(c.data(), cycles, c.size() * sizeof(long long), cudaMemcpyDeviceToHost));
      std::sort(c.begin(), c.end());
      std::printf("thread 0's %-20s with %-24s: %5lld cycles (median over blocks; min %lld, max %lld)\n", ops[op],
                  copies[copy], c[c.size() / 2], c[0], c.back());
    }
  return 0;
}
