// The adversarial suite of issue 4 on the CUDA backend (tests/sandbox/test_adversarial.cpp is the
// CPU one): one candidate per trick, through Toolbox::benchmark (fresh worker, verification,
// timing, post-verification), each ending with the expected status and archived with its verdict;
// the honest kernels pass. GPU only: skips, visibly, where no GPU is present.
#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"
#include "thrive/backend/cuda_backend.hpp"
#include "thrive/core/error.hpp"

namespace thrive {
namespace {

using sandbox::Status;

constexpr const char* kRmsLaunch = "entry=k block=256 grid=T,1,1 smem=0";

// `honest(a)`: the correct rmsnorm_residual as a device function (out written where WRITE_OUT(i)).
std::string honest_rmsnorm(const std::string& write_out = "true") {
  return "#define WRITE_OUT(i) (" + write_out + ")\n__device__ void honest(const ThriveCudaArgs& a) {" +
         test::cuda_rmsnorm_body() + "\n}\n";
}

// A correct softmax, one block of 256 threads per row; ROUND(p) post-processes each prob.
std::string softmax_body(const std::string& round) {
  return R"(
  const long long T = a.dims[0], V = a.dims[1], t = blockIdx.x;
  if (t >= T) return;
  const unsigned short* x = (const unsigned short*)a.tensors[0] + t * V;
  float* y = (float*)a.tensors[1] + t * V;
  __shared__ float red[256];
  float m = __int_as_float(0xff800000u);
  for (long long v = threadIdx.x; v < V; v += 256) m = fmaxf(m, thrive_bf16_to_f32(x[v]));
  red[threadIdx.x] = m;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float s = 0.f;
  for (long long v = threadIdx.x; v < V; v += 256) s += expf(thrive_bf16_to_f32(x[v]) - m);
  red[threadIdx.x] = s;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
    __syncthreads();
  }
  const float inv = 1.f / red[0];
  for (long long v = threadIdx.x; v < V; v += 256) {
    const float p = expf(thrive_bf16_to_f32(x[v]) - m) * inv;
    y[v] = )" + round + R"(;
  }
)";
}

using Trick = test::AdversarialCase;

std::vector<Trick> tricks() {
  const std::string H = honest_rmsnorm();
  const std::string first = "if (blockIdx.x == 0 && threadIdx.x == 0) ";
  const std::string out = "unsigned short* o = (unsigned short*)a.tensors[3]; const long long n = a.dims[0] * a.dims[1];";
  return {
      {"honest_rmsnorm", "rmsnorm_residual", H, "honest(a);", {Status::kPassed}},
      {"honest_softmax", "softmax", "", softmax_body("p"), {Status::kPassed}},
      {"unwritten_output", "rmsnorm_residual", "", "", {Status::kIncorrect}},
      {"partial_write", "rmsnorm_residual", honest_rmsnorm("i < H / 2"), "honest(a);", {Status::kIncorrect}},
      {"constant_output", "rmsnorm_residual", H,
       out + "honest(a); for (long long i = blockIdx.x * a.dims[1] + threadIdx.x; i < (blockIdx.x + 1) * a.dims[1];"
             " i += blockDim.x) o[i] = 0x3f80;",
       {Status::kIncorrect}},
      {"input_mutation", "rmsnorm_residual", H,
       "honest(a); " + first + "((unsigned short*)a.tensors[0])[0] ^= 1;", {Status::kIncorrect}},
      // a module global survives between launches: later calls return without computing
      {"cached_result", "rmsnorm_residual", H + "__device__ int done;",
       "if (done) return; honest(a); __syncthreads(); " + first + "done = 1;", {Status::kIncorrect}},
      // work handed to a child grid that outlives the timed launch: needs the device runtime
      // (separate compilation), which THRIVE's NVRTC build does not link
      {"side_grid_work", "rmsnorm_residual", H + "extern \"C\" __global__ void k(ThriveCudaArgs a);",
       first + "k<<<1, 1>>>(a);", {Status::kCompileFailed}},
      {"systematic_bias", "rmsnorm_residual", H,
       out + "honest(a); for (long long i = blockIdx.x * a.dims[1] + threadIdx.x; i < (blockIdx.x + 1) * a.dims[1];"
             " i += blockDim.x) o[i] = thrive_f32_to_bf16(thrive_bf16_to_f32(o[i]) * 1.004f);",
       {Status::kIncorrect}},
      {"out_of_bounds_write", "rmsnorm_residual", H, out + "honest(a); " + first + "o[n] = 0;", {Status::kIncorrect}},
      {"run_to_run_difference", "rmsnorm_residual", H + "__device__ unsigned calls;",
       out + "honest(a); __syncthreads(); " + first + "{ if (atomicAdd(&calls, 1u) % 2) o[0] ^= 1; }",
       {Status::kIncorrect}},
      {"precision_drop", "softmax", "", softmax_body("thrive_bf16_to_f32(thrive_f32_to_bf16(p))"), {Status::kIncorrect}},
      {"fails_after_n_calls", "rmsnorm_residual", H + "__device__ unsigned calls;",
       out + "honest(a); __syncthreads(); " + first + "{ if (atomicAdd(&calls, 1u) > 60) o[0] ^= 0x4000; }",
       {Status::kIncorrect}},
      {"too_fast_to_be_true", "rmsnorm_residual", H, "honest(a);", {Status::kIncorrect}, 1e-6},
      // (a `volatile int` spin loop was compiled away by NVRTC and returned: the H200 run called
      // it incorrect; __nanosleep is an instruction the compiler keeps)
      {"infinite_loop", "rmsnorm_residual", "", "for (;;) __nanosleep(1000);", {Status::kTimeout}, 0, 15},
      {"illegal_address", "rmsnorm_residual", "", "((float*)a.tensors[3])[1ll << 40] = 1.f;", {Status::kCrashed}},
      {"null_pointer_write", "rmsnorm_residual", "", "*(volatile int*)0 = 1;", {Status::kCrashed}},
      {"trap", "rmsnorm_residual", "", "__trap();", {Status::kCrashed}},
  };
}

class CudaAdversarial : public ::testing::TestWithParam<Trick> {};

TEST_P(CudaAdversarial, EndsWithTheRightStatusAndIsArchived) {
  std::string why;
  if (!backend::cuda_compiled_in() || !backend::cuda_probably_available(&why))
    GTEST_SKIP() << "no GPU: " << (why.empty() ? "built without the CUDA toolkit" : why);
  const Trick& t = GetParam();
  test::expect_adversarial_verdict("cuda", t, test::cuda_kernel(kRmsLaunch, t.body, t.prelude, t.op));
}

// Without a GPU (CI), NVRTC still checks the suite: every candidate meant to run compiles for
// sm_90, and the child-grid one fails to compile, as the GPU test expects.
TEST_P(CudaAdversarial, CompilesWithNvrtcAsExpected) {
  const Trick& t = GetParam();
  if (!backend::cuda_compiled_in()) GTEST_SKIP() << "built without the CUDA toolkit";
  backend::NvrtcOutput out;
  try {
    out = backend::nvrtc_compile(test::cuda_kernel(kRmsLaunch, t.body, t.prelude, t.op), "sm_90");
  } catch (const Error& e) {
    GTEST_SKIP() << "NVRTC unavailable: " << e.what();
  }
  if (!out.ok) RecordProperty("nvrtc", out.log.substr(0, 300));
  EXPECT_EQ(out.ok, !t.expect.count(Status::kCompileFailed)) << t.name << ":\n" << out.log.substr(0, 2000);
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaAdversarial, ::testing::ValuesIn(tricks()),
                         [](const ::testing::TestParamInfo<Trick>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace thrive
