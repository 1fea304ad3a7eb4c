// The CUDA backend on a real GPU: NVRTC compile and cache, launch-plan limits checked
// before launch, faults contained by the sandbox, every op's eager baseline and template
// defaults verified. Skips, visibly, where no GPU is present (CI).
#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"
#include "thrive/backend/cuda_backend.hpp"
#include "thrive/backend/embedded.hpp"
#include "thrive/sandbox/sandbox.hpp"
#include "thrive/tools/toolbox.hpp"

namespace thrive {
namespace {

bool gpu_present(std::string* why) {
  if (!backend::cuda_compiled_in()) {
    *why = "built without the CUDA toolkit";
    return false;
  }
  return backend::cuda_probably_available(why);
}

#define THRIVE_REQUIRE_GPU()                                             \
  do {                                                                   \
    std::string why_;                                                    \
    if (!gpu_present(&why_)) GTEST_SKIP() << "no GPU: " << why_;         \
  } while (0)

class CudaBackendTest : public ::testing::Test {
 protected:
  test::TempDir home;
  config::Config cfg = test::fast_config(home.path());
  ops::ShapeCase shape{"T=16", {{"T", 16}, {"H", 2048}}};

  sandbox::EvalResult eval(const std::string& text, bool bench = false) {
    auto k = backend::KernelSource::parse(text, "test.cu");
    return sandbox::evaluate(cfg, "cuda", {k, shape, true, bench, 4000.0, std::nullopt});
  }
};

TEST_F(CudaBackendTest, CorrectKernelPassesAndIsTimedLaunchedAndGraph) {
  THRIVE_REQUIRE_GPU();
  auto r = eval(test::cuda_kernel("entry=k block=256 grid=T,1,1 smem=0", test::cuda_rmsnorm_body()), true);
  ASSERT_EQ(r.status, sandbox::Status::kPassed) << r.detail << r.compile_log;
  EXPECT_GT(r.bench.median_us, 0);
  EXPECT_GT(r.bench.graph_us, 0);
  EXPECT_GT(r.stats.registers_per_thread, 0);
  EXPECT_GT(r.stats.occupancy, 0);
  auto again = eval(test::cuda_kernel("entry=k block=256 grid=T,1,1 smem=0", test::cuda_rmsnorm_body()));
  EXPECT_TRUE(again.compile_cached);
  // shared memory sized by a shape symbol: dynamic smem and occupancy at the benchmark shape
  auto shaped = eval(test::cuda_kernel("entry=k block=256 grid=T,1,1 smem=T*1024", test::cuda_rmsnorm_body()));
  ASSERT_EQ(shaped.status, sandbox::Status::kPassed) << shaped.detail;
  EXPECT_EQ(shaped.stats.dynamic_smem_bytes, 16 * 1024);
  EXPECT_GT(shaped.stats.occupancy, 0);
}

TEST_F(CudaBackendTest, NvrtcFailureKeepsTheLog) {
  THRIVE_REQUIRE_GPU();
  auto r = eval(test::cuda_kernel("entry=k block=256 grid=T,1,1 smem=0", "int x = ;"));
  EXPECT_EQ(r.status, sandbox::Status::kCompileFailed);
  EXPECT_NE(r.compile_log.find("error"), std::string::npos) << r.compile_log;
}

TEST_F(CudaBackendTest, LaunchPlanBeyondDeviceLimitsIsRejectedBeforeLaunch) {
  THRIVE_REQUIRE_GPU();
  auto threads = eval(test::cuda_kernel("entry=k block=2048 grid=T,1,1 smem=0", test::cuda_rmsnorm_body()));
  EXPECT_NE(threads.status, sandbox::Status::kPassed);
  EXPECT_NE(threads.detail.find("block 2048"), std::string::npos) << threads.detail;
  auto smem = eval(test::cuda_kernel("entry=k block=256 grid=T,1,1 smem=1000000", test::cuda_rmsnorm_body()));
  EXPECT_NE(smem.status, sandbox::Status::kPassed);
  EXPECT_NE(smem.detail.find("shared memory"), std::string::npos) << smem.detail;
}

TEST_F(CudaBackendTest, IllegalAddressIsContainedAndTheNextCandidateRuns) {
  THRIVE_REQUIRE_GPU();
  auto bad = eval(test::cuda_kernel("entry=k block=256 grid=T,1,1 smem=0",
                              "((float*)a.tensors[3])[1ll << 40] = 1.f;"));
  EXPECT_EQ(bad.status, sandbox::Status::kCrashed) << bad.detail;
  auto oob = eval(test::cuda_kernel("entry=k block=256 grid=T,1,1 smem=0",
                              "unsigned short* o = (unsigned short*)a.tensors[3];"
                              "o[a.dims[0] * a.dims[1] + threadIdx.x] = 1;"));
  EXPECT_NE(oob.status, sandbox::Status::kPassed);
  auto good = eval(test::cuda_kernel("entry=k block=256 grid=T,1,1 smem=0", test::cuda_rmsnorm_body()));
  EXPECT_EQ(good.status, sandbox::Status::kPassed) << good.detail;
}

TEST(CudaOps, EagerAndTemplateDefaultsVerifyForEveryOp) {
  THRIVE_REQUIRE_GPU();
  test::TempDir home;
  auto cfg = test::fast_config(home.path());
  memory::Store store(home.path() + "/memory.db");
  tools::Toolbox tools(cfg, store, "cuda");
  for (const auto& op : ops::registry()) {
    if (backend::embedded_paths("cuda/" + op->name() + "/template.cu").empty()) {
      ADD_FAILURE() << "no cuda template for " << op->name();
      continue;
    }
    const auto shape = op->bench_shapes(cfg.model).front();
    auto eager = tools.verify(tools.eager_kernel(op->name()), shape);
    EXPECT_EQ(eager.status, sandbox::Status::kPassed) << op->name() << " eager: " << eager.detail;
    auto seed = tools.verify(tools.op_template(op->name()).instantiate({}), shape);
    EXPECT_EQ(seed.status, sandbox::Status::kPassed) << op->name() << " defaults: " << seed.detail;
  }
}

// Every declared value of every template parameter (one moved at a time from the defaults)
// verifies on the GPU at the op's verification shapes (ragged sizes, context lengths that
// differ within a batch, the 1-token / 1-sequence cases) plus its smallest bench shape.
class CudaTemplateValues : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaTemplateValues, EveryParameterValueVerifies) {
  THRIVE_REQUIRE_GPU();
  test::TempDir home;
  auto cfg = test::fast_config(home.path());
  memory::Store store(home.path() + "/memory.db");
  tools::Toolbox tools(cfg, store, "cuda");
  const auto& op = ops::find_op(GetParam());
  const auto tmpl = tools.op_template(op.name());
  const auto shape = op.bench_shapes(cfg.model).front();
  int points = 0;
  for (const auto& spec : tmpl.param_specs)
    for (const auto& v : spec.values) {
      if (v == spec.default_value) continue;
      auto r = tools.verify(tmpl.instantiate({{spec.name, v}}), shape);
      EXPECT_EQ(r.status, sandbox::Status::kPassed)
          << op.name() << " " << spec.name << "=" << v << ": " << r.detail << r.compile_log.substr(0, 2000);
      ++points;
    }
  RecordProperty("points", points);
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaTemplateValues,
                         ::testing::Values("rmsnorm_residual", "swiglu_act", "rope", "softmax",
                                           "gqa_decode_attention"));

}  // namespace
}  // namespace thrive
