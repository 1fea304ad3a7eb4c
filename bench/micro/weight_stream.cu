// How fast can one persistent block per SM stream a weight matrix through shared memory on this
// GPU? The question behind engine_decode_layers (kernels/cuda/engine/qwen3_engine.cu), whose GEMV
// stages run well below the copy ceiling. Three ways to read the same bytes, timed with CUDA
// events (median, min and max of REPS launches after a warm-up; the matrix is 2 GiB, 40 times the
// H200's 50 MB L2, so every launch reads DRAM):
//   ld     : a plain grid-stride read, 16 bytes a thread a load, 4 loads in flight a thread, 8
//            blocks of 256 threads an SM (the copy ceiling of a read-only stream).
//   cpasync: the persistent kernel's scheme: grid = SM count, 512 threads, a ring of NS 32 KiB
//            stages; a tile is 16 rows x 1024 columns bf16 of a [N, K] row-major matrix, warp w
//            copies columns [64 w, 64 w + 64) of the 16 rows with cp.async (16 bytes a thread,
//            L2 evict-first), waits for its own groups (cp.async.wait_group NS - 2) and reads its
//            slice back.
//   bulk   : the same tiles and ring, filled by the Tensor Memory Accelerator: one thread issues a
//            2 KiB cp.async.bulk per tile row (PTX ISA 8.0, sm_90) completing on the stage's
//            "full" mbarrier; rows land 2064 bytes apart (a 16-byte skew a row: the ldmatrix
//            reads of 8 rows then hit different banks); every warp arrives on the stage's "empty"
//            mbarrier after reading it, and the producer waits for that before refilling it.
//   tma    : the same ring filled by tensor copies (stream_mbar, OPS >= 1): OPS copies a tile of a 3-D tensor
//            map (one 32 KiB copy at OPS = 1), landing in the persistent kernel's swizzled
//            warp-slice layout; thread 0 issues them as in `bulk`.
// Every variant folds what it read into a checksum (XOR of 32-bit words) so nothing is skipped;
// the checksums must agree.
// Then the question behind the persistent kernel's GEMV stages running at about one tile a µs a
// block whatever the number of streaming blocks (bench/results/h200-persistent-decode-2026-12-01/
// session4/, runs 1-2): the two rings on a quarter, half, three quarters and all of the SMs, over
// the whole matrix (DRAM) and over its first 16 MB read kL2Passes times in one launch (L2-resident
// on a 50 MB L2: what one block can ingest when DRAM is not the limit), with GB/s per block.
// Last, whether an L2 prefetch issued while the ring idles (the persistent kernel's attention
// stage) makes the later stream faster: stream_prefetched, a fresh 24 MB slice each launch.
// Build and run (sm_90): nvcc -O3 -arch=sm_90 -std=c++17 -o weight_stream weight_stream.cu -lcuda &&
// ./weight_stream [K=2048] [REPS=20]; scripts/device-weight-stream.sh does both on the GPU machine.
// Output: one line a variant, ring depth and grid: µs a launch (median [min, max]), GB/s at the
// median, and GB/s a block.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

constexpr int kRows = 16, kCols = 1024, kTileBytes = kRows * kCols * 2, kBulkRowStride = 2048 + 16;
// passes over the L2-resident slice in one launch (21 x 16 MB: about 35 µs at 10 TB/s; odd, so the
// checksum is the slice's own); 16 MB, a third of the 50 MB L2, so evict-first reads keep it there
constexpr int kL2Passes = 21;
constexpr long long kL2SliceBytes = 16ll << 20;

__global__ void stream_ld(const uint4* __restrict__ w, long long n16, unsigned* out) {
  unsigned acc = 0;
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldg(w + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    const uint4 v = __ldg(w + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  atomicXor(out, acc);
}

// This block's row groups of an N-row matrix: cdiv(N, 16) groups split evenly.
__device__ void block_groups(long long N, long long& g0, long long& g1) {
  const long long groups = (N + kRows - 1) / kRows;
  g0 = groups * blockIdx.x / gridDim.x, g1 = groups * (blockIdx.x + 1) / gridDim.x;
}

// The cp.async ring over this block's row groups of w [N, K], `passes` times; returns the XOR of
// what the thread read.
template <int NS>
__device__ unsigned ring_cpasync(const unsigned short* __restrict__ w, long long N, long long K, int passes) {
  extern __shared__ __align__(128) unsigned char ring[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, chunk = lane & 7;
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  long long g0, g1;
  block_groups(N, g0, g1);
  const long long tiles_per_group = K / kCols, mine = (g1 - g0) * tiles_per_group, tiles = mine * passes;
  const unsigned base = (unsigned)__cvta_generic_to_shared(ring);
  auto issue = [&](long long t) {
    if (t < tiles) {
      const long long g = g0 + t % mine / tiles_per_group, kc = (t % mine % tiles_per_group) * kCols;
      const unsigned dst = base + (unsigned)((t % NS) * kTileBytes + warp * 2048 + (lane >> 3) * 128);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int r = (lane >> 3) + 4 * u;
        const unsigned short* src = w + (g * kRows + r) * K + kc + warp * 64 + chunk * 8;
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(
                         dst + (unsigned)(u * 512 + ((chunk ^ (r & 7)) << 4))),
                     "l"(src), "l"(policy)
                     : "memory");
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  for (int i = 0; i + 1 < NS; ++i) issue(i);
  unsigned acc = 0;
  for (long long t = 0; t < tiles; ++t) {
    asm volatile("cp.async.wait_group %0;" ::"n"(NS - 2) : "memory");
    __syncwarp();
    issue(t + NS - 1);
    const uint4* slice = (const uint4*)(ring + (t % NS) * kTileBytes + warp * 2048);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const uint4 v = slice[lane + 32 * u];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  }
  return acc;
}
template <int NS>
__global__ void __launch_bounds__(512, 1) stream_cpasync(const unsigned short* __restrict__ w, long long N,
                                                         long long K, int passes, unsigned* out) {
  atomicXor(out, ring_cpasync<NS>(w, N, K, passes));
}
__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// Does an L2 prefetch make the ring faster later? (The persistent kernel's DRAM idles during the
// attention stage; session4/ run 1 prefetched later weights into L2 then and saw no gain.) With
// `prefetch`, thread 0 first issues cp.async.bulk.prefetch.L2 (PTX ISA 8.0, sm_90) for the block's
// whole share of w in 64 KiB pieces; then every block idles until wait_ns have passed since its
// start (the DRAM is free to land the prefetches), and streams its share once through the ring.
// times[2 b], times[2 b + 1]: the %globaltimer ns at which block b's stream phase began and ended.
template <int NS>
__global__ void __launch_bounds__(512, 1) stream_prefetched(const unsigned short* __restrict__ w, long long N,
                                                            long long K, bool prefetch, long long wait_ns,
                                                            unsigned long long* times, unsigned* out) {
  const unsigned long long t0 = globaltimer_ns();
  if (prefetch && threadIdx.x == 0) {
    long long g0, g1;
    block_groups(N, g0, g1);
    const char* lo = (const char*)(w + g0 * kRows * K);
    const char* hi = (const char*)(w + (g1 * kRows < N ? g1 * kRows : N) * K);
    for (const char* p = lo; p < hi; p += 65536) {
      const unsigned n = (unsigned)(hi - p < 65536 ? hi - p : 65536);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(n) : "memory");
    }
  }
  while (globaltimer_ns() - t0 < (unsigned long long)wait_ns) {
  }
  __syncthreads();
  const unsigned long long t1 = globaltimer_ns();
  const unsigned acc = ring_cpasync<NS>(w, N, K, 1);
  __syncthreads();
  if (threadIdx.x == 0) times[2 * blockIdx.x] = t1, times[2 * blockIdx.x + 1] = globaltimer_ns();
  atomicXor(out, acc);
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done)
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}

// The rings the copy engine fills: OPS = 0 is `bulk` (16 cp.async.bulk of one 2 KiB tile row
// each, rows kBulkRowStride apart), OPS >= 1 is `tma` (OPS tensor copies of map, a 3-D view of
// w, landing in the persistent kernel's warp-slice layout at a 1024-byte aligned ring). Thread 0
// issues a tile once the stage's "empty" mbarrier says every warp read it before.
template <int NS, int OPS>
__global__ void __launch_bounds__(512, 1) stream_mbar(const unsigned short* __restrict__ w, const CUtensorMap* map,
                                                      long long N, long long K, int passes, unsigned* out) {
  extern __shared__ __align__(128) unsigned char dyn[];
  constexpr int kStage = OPS == 0 ? kRows * kBulkRowStride : kTileBytes;  // 33,024 or 32,768 bytes
  __shared__ __align__(8) unsigned long long full[NS], empty[NS];
  unsigned char* ring = OPS == 0 ? dyn : dyn + ((1024u - ((unsigned)__cvta_generic_to_shared(dyn) & 1023u)) & 1023u);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long long g0, g1;
  block_groups(N, g0, g1);
  const long long tiles_per_group = K / kCols, mine = (g1 - g0) * tiles_per_group, tiles = mine * passes;
  const unsigned base = (unsigned)__cvta_generic_to_shared(ring);
  const unsigned full0 = (unsigned)__cvta_generic_to_shared(full), empty0 = (unsigned)__cvta_generic_to_shared(empty);
  if (threadIdx.x == 0) {
    for (int s = 0; s < NS; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(full0 + 8 * s) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 16;" ::"r"(empty0 + 8 * s) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  auto issue = [&](long long t) {  // thread 0 only
    if (t >= tiles) return;
    const int s = (int)(t % NS);
    if (t >= NS) mbar_wait(empty0 + 8 * s, (unsigned)((t / NS - 1) & 1));  // the stage's last reads are done
    const long long g = g0 + t % mine / tiles_per_group, kc = (t % mine % tiles_per_group) * kCols;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full0 + 8 * s), "r"(kTileBytes)
                 : "memory");
    if constexpr (OPS == 0) {
      for (int r = 0; r < kRows; ++r)
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
                base + (unsigned)(s * kStage + r * kBulkRowStride)),
            "l"(w + (g * kRows + r) * K + kc), "r"(kCols * 2), "r"(full0 + 8 * s), "l"(policy)
            : "memory");
    } else {
#pragma unroll
      for (int o = 0; o < OPS; ++o)
        asm volatile(
            "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
            " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(base + (unsigned)(s * kStage + o * (kTileBytes / OPS))),
            "l"(map), "r"(0), "r"((int)(g * kRows)), "r"((int)(kc / 64 + o * (16 / OPS))), "r"(full0 + 8 * s),
            "l"(policy)
            : "memory");
    }
  };
  if (threadIdx.x == 0)
    for (int i = 0; i + 1 < NS; ++i) issue(i);
  unsigned acc = 0;
  for (long long t = 0; t < tiles; ++t) {
    const int s = (int)(t % NS);
    mbar_wait(full0 + 8 * s, (unsigned)((t / NS) & 1));
    // warp w reads columns [64 w, 64 w + 64) of the 16 rows: bulk, lane i row i / 2, 64 bytes; tma,
    // the warp's 2 KiB slice (swizzled inside: the XOR does not care)
    const uint4* piece = OPS == 0 ? (const uint4*)(ring + s * kStage + (lane >> 1) * kBulkRowStride + warp * 128 + (lane & 1) * 64)
                                  : (const uint4*)(ring + s * kStage + warp * 2048) + lane;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const uint4 v = piece[OPS == 0 ? u : 32 * u];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __syncwarp();
    if (lane == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(empty0 + 8 * s) : "memory");
    if (threadIdx.x == 0) issue(t + NS - 1);
  }
  atomicXor(out, acc);
}

struct Timing {
  float median, min, max;
};
template <class F>
Timing time_launches(F launch, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  launch();  // warm-up
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float t = 0.f;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t * 1000.f);
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), ms.back()};
}

// Times `kernel` (launched as kernel<<<sms, 512, smem>>>(args...)), checks its checksum against
// `expect` (0 for an even number of passes: every word XORed twice) and prints one line.
template <class... P, class... A>
void measure(const char* name, void (*kernel)(P...), int smem, int sms, int reps, double bytes, unsigned expect,
             const char* where, int passes, unsigned* out, A... args) {
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const Timing t = time_launches([&] { kernel<<<sms, 512, smem>>>(args..., passes, out); }, reps);
  unsigned sum = 0;
  CHECK(cudaMemset(out, 0, 4));
  kernel<<<sms, 512, smem>>>(args..., passes, out);
  CHECK(cudaMemcpy(&sum, out, 4, cudaMemcpyDeviceToHost));
  const unsigned want = passes % 2 == 0 ? 0u : expect;
  bytes *= passes;
  std::printf("%-8s, %3d blocks, %s x%-2d: %8.1f us [%8.1f, %8.1f]  %7.1f GB/s  %6.1f GB/s a block  checksum %s\n",
              name, sms, where, passes, t.median, t.min, t.max, bytes / t.median * 1e-3, bytes / t.median * 1e-3 / sms,
              sum == want ? "ok" : "MISMATCH");
}
// The 3-D tensor map of w [N, K] for the tma ring (box 64 x 16 x 16 / OPS); exits if the driver
// refuses it.
CUtensorMap tma_map(const unsigned short* w, long long N, long long K, int ops) {
  CUtensorMap m;
  const cuuint64_t dims[3] = {64, cuuint64_t(N), cuuint64_t(K / 64)}, strides[2] = {cuuint64_t(K) * 2, 128};
  const cuuint32_t box[3] = {64, kRows, cuuint32_t(16 / ops)}, steps[3] = {1, 1, 1};
  const CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, (void*)w, dims, strides, box, steps,
                                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    const char* e = nullptr;
    cuGetErrorString(r, &e);
    std::fprintf(stderr, "cuTensorMapEncodeTiled(3-D, box 64 x 16 x %d): %s\n", 16 / ops, e ? e : "?");
    std::exit(1);
  }
  return m;
}
// One ring over w [N, K] (rows of it): the cp.async ring (OPS < 0), bulk (OPS = 0) or tma (OPS >= 1).
template <int NS, int OPS>
void run_ring(const unsigned short* w, long long N, long long K, unsigned* out, int sms, int reps, double bytes,
              unsigned expect, const char* where = "DRAM", int passes = 1) {
  char name[32];
  if (OPS < 0) {
    std::snprintf(name, sizeof name, "cpasync  NS %d", NS);
    measure(name, stream_cpasync<NS>, NS * kTileBytes, sms, reps, bytes, expect, where, passes, out, w, N, K);
    return;
  }
  CUtensorMap* map = nullptr;
  if (OPS > 0) {
    const CUtensorMap host = tma_map(w, N, K, OPS);
    CHECK(cudaMalloc(&map, sizeof(CUtensorMap)));
    CHECK(cudaMemcpy(map, &host, sizeof(CUtensorMap), cudaMemcpyHostToDevice));
  }
  if (OPS == 0) std::snprintf(name, sizeof name, "bulk     NS %d", NS);
  else std::snprintf(name, sizeof name, "tma x%d   NS %d", OPS, NS);
  const int smem = OPS == 0 ? NS * kRows * kBulkRowStride : NS * kTileBytes + 1024;
  measure(name, stream_mbar<NS, OPS>, smem, sms, reps, bytes, expect, where, passes, out, w,
          (const CUtensorMap*)map, N, K);
  if (map) CHECK(cudaFree(map));
}

int main(int argc, char** argv) {
  const long long K = argc > 1 ? std::atoll(argv[1]) : 2048;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  if (K <= 0 || K % kCols != 0 || reps < 1) {
    std::fprintf(stderr, "usage: weight_stream [K, a multiple of %d] [REPS >= 1]\n", kCols);
    return 2;
  }
  const long long bytes = 2ll << 30, N = bytes / (K * 2) / kRows * kRows;
  int dev = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  unsigned short* w = nullptr;
  unsigned* out = nullptr;
  CHECK(cudaMalloc(&w, N * K * 2));
  CHECK(cudaMalloc(&out, 4));
  {
    std::vector<unsigned short> host(N * K);
    unsigned s = 12345u;
    for (auto& x : host) s = s * 1664525u + 1013904223u, x = (unsigned short)(s >> 16);
    CHECK(cudaMemcpy(w, host.data(), N * K * 2, cudaMemcpyHostToDevice));
  }
  const double total = double(N * K * 2);
  std::printf("%d SMs, matrix [%lld, %lld] bf16 = %.0f MB, %d launches each\n", sms, N, K, total * 1e-6, reps);
  unsigned expect = 0;
  CHECK(cudaMemset(out, 0, 4));
  stream_ld<<<sms * 8, 256>>>((const uint4*)w, N * K * 2 / 16, out);
  CHECK(cudaMemcpy(&expect, out, 4, cudaMemcpyDeviceToHost));
  const Timing t = time_launches([&] { stream_ld<<<sms * 8, 256>>>((const uint4*)w, N * K * 2 / 16, out); }, reps);
  std::printf("%-8s      : %8.1f us [%8.1f, %8.1f]  %7.1f GB/s\n", "ld", t.median, t.min, t.max, total / t.median * 1e-3);
  run_ring<2, -1>(w, N, K, out, sms, reps, total, expect);
  run_ring<4, -1>(w, N, K, out, sms, reps, total, expect);
  run_ring<6, -1>(w, N, K, out, sms, reps, total, expect);
  run_ring<2, 0>(w, N, K, out, sms, reps, total, expect);
  run_ring<4, 0>(w, N, K, out, sms, reps, total, expect);
  run_ring<6, 0>(w, N, K, out, sms, reps, total, expect);
  run_ring<4, 1>(w, N, K, out, sms, reps, total, expect);
  run_ring<6, 1>(w, N, K, out, sms, reps, total, expect);
  run_ring<6, 4>(w, N, K, out, sms, reps, total, expect);
  // Fewer blocks, from DRAM and from an L2-resident 16 MB slice (its checksum from the plain read);
  // all blocks on DRAM are the NS 6 / NS 4 lines above
  const long long l2_rows = kL2SliceBytes / (K * 2) / kRows * kRows;
  for (const long long rows : {N, l2_rows}) {
    unsigned slice_expect = expect;
    if (rows != N) {
      CHECK(cudaMemset(out, 0, 4));
      stream_ld<<<sms * 8, 256>>>((const uint4*)w, rows * K * 2 / 16, out);
      CHECK(cudaMemcpy(&slice_expect, out, 4, cudaMemcpyDeviceToHost));
    }
    const char* where = rows == N ? "DRAM" : "L2";
    for (const int blocks : {sms / 4, sms / 2, 3 * sms / 4, sms}) {
      if (rows == N && blocks == sms) continue;  // measured above
      // the L2 slice is read kL2Passes times a launch: one pass (about 10 µs) is launch-dominated
      const int passes = rows == N ? 1 : kL2Passes;
      const double bytes = double(rows * K * 2);
      run_ring<6, -1>(w, rows, K, out, blocks, reps, bytes, slice_expect, where, passes);
      run_ring<4, 0>(w, rows, K, out, blocks, reps, bytes, slice_expect, where, passes);
      run_ring<6, 1>(w, rows, K, out, blocks, reps, bytes, slice_expect, where, passes);
      run_ring<6, 4>(w, rows, K, out, blocks, reps, bytes, slice_expect, where, passes);
    }
  }
  // Prefetched into L2, then streamed: each launch takes a fresh 24 MB slice (the next one in the
  // 2 GiB matrix, so it starts in DRAM); the stream phase is from the first block's start to the
  // last block's end (%globaltimer, 32 ns steps on this GPU), median [min, max] over REPS launches.
  {
    const long long rows = (24ll << 20) / (K * 2) / kRows * kRows, slices = N / rows;
    unsigned long long* times = nullptr;
    CHECK(cudaMalloc(&times, sms * 16));
    CHECK(cudaFuncSetAttribute(stream_prefetched<6>, cudaFuncAttributeMaxDynamicSharedMemorySize, 6 * kTileBytes));
    std::vector<unsigned long long> host(2 * sms);
    for (const long long wait_us : {0ll, 20ll})
      for (const bool prefetch : {false, true}) {
        if (wait_us == 0 && prefetch) continue;
        std::vector<double> us;
        for (int r = 0; r < reps + 1; ++r) {
          const unsigned short* slice = w + (r % slices) * rows * K;
          stream_prefetched<6><<<sms, 512, 6 * kTileBytes>>>(slice, rows, K, prefetch, wait_us * 1000, times, out);
          CHECK(cudaMemcpy(host.data(), times, sms * 16, cudaMemcpyDeviceToHost));
          unsigned long long lo = ~0ull, hi = 0;
          for (int b = 0; b < sms; ++b) lo = std::min(lo, host[2 * b]), hi = std::max(hi, host[2 * b + 1]);
          if (r > 0) us.push_back((hi - lo) * 1e-3);  // the first launch is the warm-up
        }
        std::sort(us.begin(), us.end());
        const double med = us[us.size() / 2], bytes = double(rows * K * 2);
        std::printf("cpasync  NS 6, %3d blocks, %s, idle %2lld us first: stream phase %7.1f us [%7.1f, %7.1f]  "
                    "%7.1f GB/s  %6.1f GB/s a block\n",
                    sms, prefetch ? "L2-prefetched" : "from DRAM    ", wait_us, med, us.front(), us.back(),
                    bytes / med * 1e-3, bytes / med * 1e-3 / sms);
      }
    CHECK(cudaFree(times));
  }
  CHECK(cudaGetLastError());
  CHECK(cudaFree(w));
  CHECK(cudaFree(out));
  return 0;
}
