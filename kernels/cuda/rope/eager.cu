// @thrive op: rope
// @thrive backend: cuda
// @thrive entry: thrive_rope_eager_gather
// @thrive entry: thrive_rope_eager_q_x1cos
// @thrive entry: thrive_rope_eager_q_x2sin
// @thrive entry: thrive_rope_eager_q_sub
// @thrive entry: thrive_rope_eager_q_x2cos
// @thrive entry: thrive_rope_eager_q_x1sin
// @thrive entry: thrive_rope_eager_q_add
// @thrive entry: thrive_rope_eager_q_cat
// @thrive entry: thrive_rope_eager_q_copy
// @thrive entry: thrive_rope_eager_k_x1cos
// @thrive entry: thrive_rope_eager_k_x2sin
// @thrive entry: thrive_rope_eager_k_sub
// @thrive entry: thrive_rope_eager_k_x2cos
// @thrive entry: thrive_rope_eager_k_x1sin
// @thrive entry: thrive_rope_eager_k_add
// @thrive entry: thrive_rope_eager_k_cat
// @thrive entry: thrive_rope_eager_k_copy
// @thrive launch: entry=thrive_rope_eager_gather block=128 grid=cdiv(T*D,512),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_q_x1cos block=128 grid=max(1,cdiv(T*NQ*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_q_x2sin block=128 grid=max(1,cdiv(T*NQ*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_q_sub block=128 grid=max(1,cdiv(T*NQ*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_q_x2cos block=128 grid=max(1,cdiv(T*NQ*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_q_x1sin block=128 grid=max(1,cdiv(T*NQ*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_q_add block=128 grid=max(1,cdiv(T*NQ*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_q_cat block=128 grid=cdiv(T*NQ*D,512),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_q_copy block=128 grid=cdiv(T*NQ*D,512),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_k_x1cos block=128 grid=max(1,cdiv(T*NKV*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_k_x2sin block=128 grid=max(1,cdiv(T*NKV*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_k_sub block=128 grid=max(1,cdiv(T*NKV*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_k_x2cos block=128 grid=max(1,cdiv(T*NKV*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_k_x1sin block=128 grid=max(1,cdiv(T*NKV*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_k_add block=128 grid=max(1,cdiv(T*NKV*(D/2),512)),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_k_cat block=128 grid=cdiv(T*NKV*D,512),1,1 smem=0
// @thrive launch: entry=thrive_rope_eager_k_copy block=128 grid=cdiv(T*NKV*D,512),1,1 smem=0
//
// Eager baseline: what PyTorch eager runs on the GPU for vLLM's RotaryEmbedding.forward_native
// (neox style, rotary_dim = head_size), written back in place:
//   cos_sin = cos_sin_cache.index_select(0, positions); cos, sin = cos_sin.chunk(2, dim=-1)
//   x1, x2 = torch.chunk(x, 2, dim=-1)                 (views of q or k as [T, heads, D])
//   o1 = x1 * cos - x2 * sin; o2 = x2 * cos + x1 * sin
//   x.copy_(torch.cat((o1, o2), dim=-1))
// one kernel per elementary op: the gather, then for q and again for k four multiplies, a
// subtract, an add, the cat and the copy back (17 launches). The f32 cache is NOT cast to bf16
// first (vLLM does cos.to(x.dtype) when its cache is in the model dtype): with bf16 cos/sin and bf16
// products, the cancellation in x1*cos - x2*sin loses ~2^-9 of |x| on near-zero outputs, far
// outside THRIVE's bf16 tolerance (1% of rms floor). With the f32 cache, PyTorch's type promotion
// (bf16 * f32 -> f32) keeps every intermediate in f32, which is what this file does.
// Elementwise kernels: PyTorch's unrolled kernel shape, 128 threads x 4 elements, index split by
// multiply-shift dividers (PyTorch's IntDivider).
// Workspace (regions 256-byte aligned): cs f32 [T, D] | for q then k: x1cos, x2sin, o1, x2cos,
// x1sin, o2 f32 [T, heads, D/2] each, cat f32 [T, heads, D].
#include "thrive_eager.cuh"

enum Buf { X1COS = 0, X2SIN, O1, X2COS, X1SIN, O2, CAT };

struct Geo {
  long long T, NQ, NKV, D, half;
  float* cs;
  float* buf[2][7];  // [q, k][Buf]
};
__device__ __forceinline__ Geo geo_of(const ThriveCudaArgs& a) {
  Geo g;
  g.T = a.dims[0];
  g.NQ = a.dims[1];
  g.NKV = a.dims[2];
  g.D = a.dims[3];
  g.half = g.D / 2;
  char* p = (char*)a.workspace;
  g.cs = (float*)p;
  p += al256(g.T * g.D * 4);
  for (int w = 0; w < 2; ++w) {
    const long long heads = w == 0 ? g.NQ : g.NKV;
    for (int b = 0; b < 6; ++b) {
      g.buf[w][b] = (float*)p;
      p += al256(g.T * heads * g.half * 4);
    }
    g.buf[w][CAT] = (float*)p;
    p += al256(g.T * heads * g.D * 4);
  }
  return g;
}

// cos_sin = cache.index_select(0, positions)
extern "C" __global__ void __launch_bounds__(128) thrive_rope_eager_gather(ThriveCudaArgs args) {
  __shared__ FastDiv fd;
  const Geo g = geo_of(args);
  const long long* pos = (const long long*)args.tensors[0];
  const float* cache = (const float*)args.tensors[3];
  const long long n = g.T * g.D;
  if (threadIdx.x == 0) fd = fd_make((unsigned int)g.D);
  __syncthreads();
  const bool narrow = n < 0xffffffffLL;
  elementwise(
      n,
      [&](long long i) {
        const long long t = fd_div(fd, i, g.D, narrow);
        return cache[pos[t] * g.D + (i - t * g.D)];
      },
      [&](long long i, float v) { g.cs[i] = v; });
}

// out[t, h, j] = x[t, h, XH * half + j] * cs[t, CSH * half + j]   (bf16 * f32 -> f32)
template <int W, int XH, int CSH, int OUT>
__device__ __forceinline__ void mul_kernel(const ThriveCudaArgs& args) {
  __shared__ FastDiv fd[2];
  const Geo g = geo_of(args);
  const bf16_t* x = (const bf16_t*)args.tensors[W == 0 ? 1 : 2];
  const long long heads = W == 0 ? g.NQ : g.NKV;
  const long long n = g.T * heads * g.half;
  if (n == 0) return;
  if (threadIdx.x == 0) {
    fd[0] = fd_make((unsigned int)g.half);
    fd[1] = fd_make((unsigned int)heads);
  }
  __syncthreads();
  const bool narrow = n < 0xffffffffLL;
  float* out = g.buf[W][OUT];
  elementwise(
      n,
      [&](long long i) {
        const long long th = fd_div(fd[0], i, g.half, narrow);  // token * heads + head
        const long long j = i - th * g.half;
        const long long t = fd_div(fd[1], th, heads, narrow);
        return thrive_bf16_to_f32(x[th * g.D + XH * g.half + j]) * g.cs[t * g.D + CSH * g.half + j];
      },
      [&](long long i, float v) { out[i] = v; });
}

// out = a - b (SUB) or a + b
template <int W, int A, int B, int OUT, bool SUB>
__device__ __forceinline__ void binary_kernel(const ThriveCudaArgs& args) {
  const Geo g = geo_of(args);
  const long long n = g.T * (W == 0 ? g.NQ : g.NKV) * g.half;
  const float* a = g.buf[W][A];
  const float* b = g.buf[W][B];
  float* out = g.buf[W][OUT];
  elementwise(
      n, [&](long long i) { return SUB ? a[i] - b[i] : a[i] + b[i]; }, [&](long long i, float v) { out[i] = v; });
}

// cat((o1, o2), -1) -> [T, heads, D] f32 (an odd D's last element passes through)
template <int W>
__device__ __forceinline__ void cat_kernel(const ThriveCudaArgs& args) {
  __shared__ FastDiv fd;
  const Geo g = geo_of(args);
  const bf16_t* x = (const bf16_t*)args.tensors[W == 0 ? 1 : 2];
  const long long n = g.T * (W == 0 ? g.NQ : g.NKV) * g.D;
  if (threadIdx.x == 0) fd = fd_make((unsigned int)g.D);
  __syncthreads();
  const bool narrow = n < 0xffffffffLL;
  const float* o1 = g.buf[W][O1];
  const float* o2 = g.buf[W][O2];
  float* out = g.buf[W][CAT];
  elementwise(
      n,
      [&](long long i) {
        const long long th = fd_div(fd, i, g.D, narrow);
        const long long d = i - th * g.D;
        if (d < g.half) return o1[th * g.half + d];
        if (d < 2 * g.half) return o2[th * g.half + d - g.half];
        return thrive_bf16_to_f32(x[i]);
      },
      [&](long long i, float v) { out[i] = v; });
}

// x.copy_(cat): f32 -> bf16 in place
template <int W>
__device__ __forceinline__ void copy_kernel(const ThriveCudaArgs& args) {
  const Geo g = geo_of(args);
  bf16_t* x = (bf16_t*)args.tensors[W == 0 ? 1 : 2];
  const long long n = g.T * (W == 0 ? g.NQ : g.NKV) * g.D;
  const float* cat = g.buf[W][CAT];
  elementwise(
      n, [&](long long i) { return cat[i]; }, [&](long long i, float v) { x[i] = thrive_f32_to_bf16(v); });
}

#define ROPE_ENTRY(name, call) \
  extern "C" __global__ void __launch_bounds__(128) name(ThriveCudaArgs args) { call; }

ROPE_ENTRY(thrive_rope_eager_q_x1cos, (mul_kernel<0, 0, 0, X1COS>(args)))
ROPE_ENTRY(thrive_rope_eager_q_x2sin, (mul_kernel<0, 1, 1, X2SIN>(args)))
ROPE_ENTRY(thrive_rope_eager_q_sub, (binary_kernel<0, X1COS, X2SIN, O1, true>(args)))
ROPE_ENTRY(thrive_rope_eager_q_x2cos, (mul_kernel<0, 1, 0, X2COS>(args)))
ROPE_ENTRY(thrive_rope_eager_q_x1sin, (mul_kernel<0, 0, 1, X1SIN>(args)))
ROPE_ENTRY(thrive_rope_eager_q_add, (binary_kernel<0, X2COS, X1SIN, O2, false>(args)))
ROPE_ENTRY(thrive_rope_eager_q_cat, (cat_kernel<0>(args)))
ROPE_ENTRY(thrive_rope_eager_q_copy, (copy_kernel<0>(args)))
ROPE_ENTRY(thrive_rope_eager_k_x1cos, (mul_kernel<1, 0, 0, X1COS>(args)))
ROPE_ENTRY(thrive_rope_eager_k_x2sin, (mul_kernel<1, 1, 1, X2SIN>(args)))
ROPE_ENTRY(thrive_rope_eager_k_sub, (binary_kernel<1, X1COS, X2SIN, O1, true>(args)))
ROPE_ENTRY(thrive_rope_eager_k_x2cos, (mul_kernel<1, 1, 0, X2COS>(args)))
ROPE_ENTRY(thrive_rope_eager_k_x1sin, (mul_kernel<1, 0, 1, X1SIN>(args)))
ROPE_ENTRY(thrive_rope_eager_k_add, (binary_kernel<1, X2COS, X1SIN, O2, false>(args)))
ROPE_ENTRY(thrive_rope_eager_k_cat, (cat_kernel<1>(args)))
ROPE_ENTRY(thrive_rope_eager_k_copy, (copy_kernel<1>(args)))
