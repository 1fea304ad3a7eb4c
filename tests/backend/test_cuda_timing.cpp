// Timing on a real GPU that other tests must not disturb (RUN_SERIAL: tests/CMakeLists.txt):
// paired timing on the graph footing. Skips, visibly, where no GPU is present (CI).
#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"
#include "thrive/backend/cuda_backend.hpp"
#include "thrive/memory/store.hpp"
#include "thrive/sandbox/sandbox.hpp"
#include "thrive/tools/toolbox.hpp"

namespace thrive {
namespace {

// Paired timing (the search's keep/revert test and the reported speedup) is on the footing the
// benchmark reports, the graph time: the eager baseline (one launch per elementary op) paired with
// itself reads about 1x, and its paired time is near its graph time, far from its launched time
// (on the H200 at T=1: 11.3 us in a graph, 49.7 launched one at a time, 2026-12-04).
TEST(CudaTiming, PairedTimingIsOnTheGraphFooting) {
  std::string why;
  if (!backend::cuda_compiled_in() || !backend::cuda_probably_available(&why))
    GTEST_SKIP() << "no GPU: " << (backend::cuda_compiled_in() ? why : "built without the CUDA toolkit");
  test::TempDir home;
  const config::Config cfg = test::fast_config(home.path());
  const ops::ShapeCase shape{"T=16", {{"T", 16}, {"H", 2048}}};
  memory::Store store(home.path() + "/memory.db");
  tools::Toolbox tools(cfg, store, "cuda");
  const auto eager = tools.eager_kernel("rmsnorm_residual");
  const auto r = tools.compare(eager, eager, shape);
  ASSERT_EQ(r.status, sandbox::Status::kPassed) << r.detail;
  ASSERT_GT(r.paired.pairs, 0);
  EXPECT_NEAR(r.paired.ratio, 1.0, 0.25) << r.paired.ratio;
  ASSERT_GT(r.bench.graph_us, 0);
  ASSERT_GT(r.bench.median_us, 2 * r.bench.graph_us) << "the eager's launches should cost more than its kernels";
  EXPECT_LT(r.paired.a_median_us, 0.5 * (r.bench.graph_us + r.bench.median_us))
      << "paired " << r.paired.a_median_us << " us, graph " << r.bench.graph_us << ", launched " << r.bench.median_us;
  EXPECT_LT(r.paired.b_median_us, 0.5 * (r.bench.graph_us + r.bench.median_us));
}

}  // namespace
}  // namespace thrive
