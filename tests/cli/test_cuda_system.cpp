// The outer loop on the CUDA engine from the command line (issue 7), on a tiny random checkpoint:
// it starts from the engine with baseline kernels, no graphs, no flash attention, fusions or
// GEMV; every change it makes is verified end to end in bf16; at least one is kept; memory holds
// the best system and the next run starts there without re-trying anything. Skips visibly
// without a GPU.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.hpp"
#include "thrive/backend/cuda_backend.hpp"

namespace thrive {
namespace {

TEST(CudaSystemLoop, ChangesAreVerifiedKeptOrRevertedAndTheNextRunStartsFromTheBest) {
  std::string why;
  if (!backend::cuda_compiled_in() || !backend::cuda_probably_available(&why))
    GTEST_SKIP() << "no GPU: " << (why.empty() ? "built without the CUDA toolkit" : why);
  test::TempDir home, files;
  const std::vector<std::string> env = {"THRIVE_HOME=" + home.path(), "THRIVE_ROUNDS=1"};
  const std::string dir = files.path() + "/tiny";
  ASSERT_EQ(test::run_thrive({"model", "init", "--preset", "tiny", "--out", dir}, env).exit_code, 0);
  const std::vector<std::string> args = {"optimize", "--system", "--device", "cuda", "--model", dir, "--batch", "2",
                                         "--prompt", "8", "--gen", "6", "--budget", "4", "--metric", "mix:0.5",
                                         "--json"};
  const auto first = test::run_thrive(args, env);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto a = nlohmann::json::parse(first.out);
  EXPECT_EQ(a["start"]["device"], "cuda");
  EXPECT_EQ(a["start"]["graphs"], false);
  EXPECT_EQ(a["start"]["best_ops"], nlohmann::json::array());
  ASSERT_FALSE(a["iterations"].empty()) << first.err;
  int accepted = 0;
  for (const auto& it : a["iterations"]) {
    EXPECT_TRUE(it["verified"].get<bool>()) << it.dump();  // every change the specialists make is correct
    EXPECT_FALSE(it["ranking"].empty());
    accepted += it["accepted"].get<bool>();
  }
  EXPECT_GE(accepted, 1) << first.err;
  EXPECT_GT(a["t_best"].get<double>(), 1.0);
  const auto second = test::run_thrive(args, env);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const auto b = nlohmann::json::parse(second.out);
  EXPECT_EQ(b["start"], a["best"]);
  for (const auto& it : b["iterations"])
    for (const auto& prev : a["iterations"]) EXPECT_NE(it["after"], prev["after"]);
}

}  // namespace
}  // namespace thrive
