// The outer loop on the CPU engine with a tiny model: one change accepted (GEMMs on one thread:
// no thread start-up per projection, several times faster at these sizes), one reverted (the
// residual/RMSNorm fusion: bit-identical and within noise), both verified end to end.
#include <gtest/gtest.h>

#include <thread>

#include "tests/support/test_support.hpp"
#include "thrive/core/error.hpp"
#include "thrive/model/system_loop.hpp"

namespace thrive::model {
namespace {

// Random tiny-preset weights, through a checkpoint as a user's would come.
Qwen3Weights tiny_weights(const Qwen3Config& cfg) {
  test::TempDir home;
  init_checkpoint(cfg, home.path() + "/tiny", 5);
  return load_weights(cfg, home.path() + "/tiny");
}

TEST(SystemLoop, MetricParsing) {
  EXPECT_EQ(metric_weight("decode"), 1.0);
  EXPECT_EQ(metric_weight("prefill"), 0.0);
  EXPECT_EQ(metric_weight("mix:0.25"), 0.25);
  for (const char* bad : {"mix:", "mix:2", "mix:-0.1", "mix:0.5x", "throughput", ""}) EXPECT_THROW(metric_weight(bad), Error) << bad;
}

TEST(SystemLoop, AcceptsTheThreadChangeAndRevertsTheFusionOnATinyModel) {
  const auto cfg = Qwen3Config::preset("tiny");
  const auto w = tiny_weights(cfg);
  LoopOptions o;
  o.batch = 2, o.prompt = 16, o.gen = 8, o.budget = 4;
  std::vector<LoopIteration> seen;
  const auto r = run_system_loop(cfg, w, o, SystemConfig{}, 20.0, 0.05,
                                 [&](const LoopIteration& it) { seen.push_back(it); });
  ASSERT_EQ(seen.size(), r.iterations.size());
  ASSERT_FALSE(r.stop_reason.empty());
  for (const auto& it : r.iterations) {
    EXPECT_TRUE(it.verified) << it.change << ": " << it.verdict;  // both changes are bit-identical
    EXPECT_FALSE(it.ranking.empty());
  }
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: the GEMM thread change does not exist";
  bool accepted = false, reverted = false;
  for (const auto& it : r.iterations) {
    accepted = accepted || (it.accepted && it.specialist == "kernels" && it.after.threads == 1);
    reverted = reverted || (!it.accepted && it.specialist == "compilation");
  }
  EXPECT_TRUE(accepted) << "GEMMs on one thread should win by far on a tiny model";
  EXPECT_TRUE(reverted) << "the fusion changes nothing measurable";
  EXPECT_EQ(r.best.threads, 1);
  EXPECT_GT(r.t_best, 1.3);
  EXPECT_GT(r.best_profile.decode_tps, r.start_profile.decode_tps);
  // A configuration memory saw tried is not tried again.
  o.tried = {SystemConfig{1, true}.to_json().dump(), SystemConfig{0, false}.to_json().dump()};
  o.budget = 3;
  const auto again = run_system_loop(cfg, w, o, r.best, 20.0, 0.05);
  EXPECT_TRUE(again.iterations.empty()) << again.iterations.front().change;
}

TEST(SystemLoop, BadOptionsAreUsageErrors) {
  const auto cfg = Qwen3Config::preset("tiny");
  const auto w = tiny_weights(cfg);
  LoopOptions o;
  o.gen = 1;
  EXPECT_THROW(run_system_loop(cfg, w, o, {}, 20.0, 0.05), Error);
  o.gen = 4;
  o.r_t = -1;
  EXPECT_THROW(run_system_loop(cfg, w, o, {}, 20.0, 0.05), Error);
}

}  // namespace
}  // namespace thrive::model
