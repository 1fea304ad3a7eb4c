// Attribute: stage floors from the model's work and the headroom ranking.
#include <gtest/gtest.h>

#include "thrive/core/error.hpp"
#include "thrive/model/attribution.hpp"

namespace thrive::model {
namespace {

TEST(Attribution, StageWorkFollowsTheModelsSizes) {
  const auto c = Qwen3Config::preset("tiny");  // H 64, I 128, 2 layers, 4/2 heads of 16, vocab 256
  const PassShape p{8, 8 * 9 / 2, 0, 1};
  const auto w = stage_work(c, p, 2, 2);
  const double qkv = (4 + 2 * 2) * 16;
  EXPECT_DOUBLE_EQ(w.at("qkv_gemm").flops, 2 * 2.0 * 8 * qkv * 64);
  EXPECT_DOUBLE_EQ(w.at("qkv_gemm").bytes, 2 * (qkv * 64 * 2 + 8 * (qkv + 64) * 2));
  EXPECT_DOUBLE_EQ(w.at("attention").flops, 2 * 4.0 * 36 * 4 * 16);
  EXPECT_DOUBLE_EQ(w.at("lm_head").flops, 2.0 * 64 * 256);
  EXPECT_EQ(w.at("swiglu").flops, 0);
  // decode reads the cache: bytes grow with the context read
  const auto d1 = stage_work(c, {1, 100, 100, 1}, 2, 2), d2 = stage_work(c, {1, 200, 200, 1}, 2, 2);
  EXPECT_GT(d2.at("attention").bytes, d1.at("attention").bytes);
  // the screened lm_head reads its int8 copy (a byte a weight, 12 a row) instead of the bf16 rows
  PassShape s{1, 100, 100, 1};
  s.screened_lm_head = true;
  const auto ds = stage_work(c, s, 2, 2);
  EXPECT_DOUBLE_EQ(ds.at("lm_head").bytes, 256.0 * 64 + 256 * 12 + (64 * 2 + 256 * 4));
  EXPECT_DOUBLE_EQ(d1.at("lm_head").bytes - ds.at("lm_head").bytes, 256.0 * 64 - 256 * 12);
  EXPECT_DOUBLE_EQ(ds.at("sampling").bytes, 256.0 * 4 + 256 * 8 + 64 * 2);
  EXPECT_DOUBLE_EQ(ds.at("lm_head").flops, d1.at("lm_head").flops);
  // EC12 tiles: the four projections' weights at 1.53 bytes a weight, nothing else changes
  PassShape e{1, 100, 100, 1};
  e.projection_weight_bytes = 1.53125;
  const auto de = stage_work(c, e, 2, 2);
  for (const char* g : {"qkv_gemm", "o_gemm", "mlp_gate_up_gemm", "mlp_down_gemm"}) {
    const double weights = (d1.at(g).bytes - de.at(g).bytes) / (2 - 1.53125);  // n x k x layers
    EXPECT_GT(weights, 0) << g;
    EXPECT_DOUBLE_EQ(de.at(g).flops, d1.at(g).flops) << g;
  }
  EXPECT_DOUBLE_EQ((d1.at("o_gemm").bytes - de.at("o_gemm").bytes) / (2 - 1.53125),
                   double(c.layers * c.hidden * c.heads * c.head_dim));
  EXPECT_DOUBLE_EQ(de.at("lm_head").bytes, d1.at("lm_head").bytes);
  EXPECT_DOUBLE_EQ(de.at("attention").bytes, d1.at("attention").bytes);
}

TEST(Attribution, HeadroomIsShareTimesDistanceFromTheFloor) {
  // 1 GB/s and 1 TFLOP/s: a stage of 1e6 bytes has a 1 ms floor.
  std::map<std::string, StageWork> work = {{"at_floor", {1e6, 0}}, {"twice", {1e6, 0}}, {"gemm", {0, 4e9}}};
  StageTimes st;
  st.add("at_floor", 1000);  // µs
  st.add("twice", 2000);
  st.add("gemm", 2000);       // 4e9 flops at 1 TFLOP/s: 4 ms floor, measured faster: clamped
  st.add("copies_in", 1000);  // no floor
  const auto r = attribute(st, 10.0, 1, work, 1.0, 1.0);
  ASSERT_EQ(r.size(), 5u);
  std::map<std::string, StageRank> by;
  for (const auto& x : r) by[x.stage] = x;
  EXPECT_DOUBLE_EQ(by["at_floor"].headroom, 0.0);
  EXPECT_DOUBLE_EQ(by["twice"].headroom, 0.2 * 0.5);
  EXPECT_EQ(by["twice"].bound, "memory");
  EXPECT_EQ(by["gemm"].bound, "compute");
  EXPECT_DOUBLE_EQ(by["gemm"].headroom, 0.0);
  EXPECT_DOUBLE_EQ(by["copies_in"].headroom, 0.1);
  EXPECT_DOUBLE_EQ(by["host_other"].ms, 4.0);  // 10 ms wall, 6 ms covered
  EXPECT_EQ(r.front().stage, "host_other");     // 0.4 of the wall, no floor
  for (size_t i = 1; i < r.size(); ++i) EXPECT_GE(r[i - 1].headroom, r[i].headroom);
  // two passes double the floor
  const auto two = attribute(st, 10.0, 2, work, 1.0, 1.0);
  for (const auto& x : two) {
    if (x.stage == "twice") {
      EXPECT_DOUBLE_EQ(x.headroom, 0.0);
    }
  }
  EXPECT_THROW(attribute(st, 10.0, 1, work, 0.0, 1.0), Error);
  EXPECT_THROW(attribute(st, 10.0, 0, work, 1.0, 1.0), Error);
}

// A matrix ceiling below what a stage achieved is no ceiling: the fastest GEMM sets it, so the
// slower GEMMs keep a headroom instead of every GEMM showing 0 against a probe that read low.
TEST(Attribution, AMatrixCeilingBelowAStagesRateIsRaisedToIt) {
  std::map<std::string, StageWork> work = {{"fast_gemm", {0, 4e9}}, {"slow_gemm", {0, 4e9}}, {"norm", {1e6, 0}}};
  StageTimes st;
  st.add("fast_gemm", 2000);  // 4e9 flops in 2 ms: 2 TFLOP/s
  st.add("slow_gemm", 4000);  // 1 TFLOP/s
  st.add("norm", 1000);
  EXPECT_DOUBLE_EQ(achieved_tflops(st, 1, work), 2.0);
  EXPECT_DOUBLE_EQ(achieved_tflops(st, 2, work), 4.0);  // per-pass work over two passes' time
  EXPECT_DOUBLE_EQ(achieved_tflops(StageTimes{}, 1, work), 0.0);
  std::map<std::string, StageRank> by;
  for (const auto& x : attribute(st, 7.0, 1, work, 1.0, 0.5)) by[x.stage] = x;  // probe read 0.5 TFLOP/s
  EXPECT_DOUBLE_EQ(by["fast_gemm"].floor_ms, 2.0);
  EXPECT_DOUBLE_EQ(by["fast_gemm"].headroom, 0.0);
  EXPECT_DOUBLE_EQ(by["slow_gemm"].floor_ms, 2.0);
  EXPECT_DOUBLE_EQ(by["slow_gemm"].headroom, 4.0 / 7.0 * 0.5);
  // a probe above every stage's rate stands
  for (const auto& x : attribute(st, 7.0, 1, work, 1.0, 8.0)) by[x.stage] = x;
  EXPECT_DOUBLE_EQ(by["fast_gemm"].floor_ms, 0.5);
}

}  // namespace
}  // namespace thrive::model
