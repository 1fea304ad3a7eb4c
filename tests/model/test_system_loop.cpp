// The outer loop on the CPU engine with a tiny model: one change accepted (GEMMs on one thread:
// no thread start-up per projection, several times faster at these sizes), one reverted (the
// residual/RMSNorm fusion: bit-identical and within noise), both verified end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
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
  for (const char* bad : {"mix:", "mix:2", "mix:-0.1", "mix:0.5x", "throughput", "", "mix: 0.5", "mix:0x1p-1", "mix:5e-1"})
    EXPECT_THROW(metric_weight(bad), Error) << bad;
  EXPECT_EQ(metric_name("mix:1"), "decode");
  EXPECT_EQ(metric_name("mix:0"), "prefill");
  EXPECT_EQ(metric_name("mix:0.50"), "mix:0.5");
  EXPECT_EQ(metric_name("decode"), "decode");
}

TEST(SystemLoop, AcceptsTheThreadChangeAndRevertsTheFusionOnATinyModel) {
  const auto cfg = Qwen3Config::preset("tiny");
  const auto w = tiny_weights(cfg);
  LoopOptions o;
  o.batch = 2, o.prompt = 16, o.gen = 8, o.budget = 4;
  // Wall-clock timing decides acceptance, and on a loaded 2-core machine (ctest running other
  // tests on both cores) one loop has seen a bit-identical fusion 35% "faster" (2026-12-01): the
  // expected outcome (the thread change kept, the fusion reverted) must hold in one of three
  // loops; what does not depend on timing must hold in every one.
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: the GEMM thread change does not exist";
  LoopResult r;
  std::string ts;  // each loop's changes and T, for the message below
  bool outcome = false;
  for (int attempt = 0; attempt < 3 && !outcome; ++attempt) {
    std::vector<LoopIteration> seen;
    r = run_system_loop(cfg, w, o, SystemConfig{}, 20.0, 0.05, [&](const LoopIteration& it) { seen.push_back(it); });
    ASSERT_EQ(seen.size(), r.iterations.size());
    ASSERT_FALSE(r.stop_reason.empty());
    bool accepted = false, reverted = false;
    ts += fmt::format("; loop {}", attempt + 1);
    for (const auto& it : r.iterations) {
      EXPECT_TRUE(it.verified) << it.change << ": " << it.verdict;  // both changes are bit-identical
      EXPECT_FALSE(it.ranking.empty());
      accepted = accepted || (it.accepted && it.specialist == "kernels" && it.after.threads == 1);
      reverted = reverted || (!it.accepted && it.specialist == "compilation");
      ts += fmt::format(": {} T {:.3f} -> {:.3f} {}", it.change, it.t_before, it.t_after, it.accepted ? "kept" : "reverted");
    }
    outcome = accepted && reverted;
  }
  ASSERT_TRUE(outcome) << "GEMMs on one thread should win by far on a tiny model, and the fusion changes nothing "
                          "measurable"
                       << ts;
  EXPECT_EQ(r.best.threads, 1);
  EXPECT_GT(r.t_best, 1.3);
  EXPECT_GT(r.best_profile.decode_tps, r.start_profile.decode_tps);
  // A configuration memory saw tried is not tried again: from GEMMs on one thread, unfused, both
  // neighbours (all cores; fused) are in memory.
  SystemConfig one_unfused, one_fused, all_unfused;
  one_unfused.threads = 1;
  one_fused.threads = 1, one_fused.fuse_residual_norm = true;
  o.tried = {one_fused.to_json().dump(), all_unfused.to_json().dump()};
  o.budget = 3;
  const auto again = run_system_loop(cfg, w, o, one_unfused, 20.0, 0.05);
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

// ---- the engine-neutral loop and the CUDA specialists (pure functions, no GPU needed) ----

TEST(SystemConfig, CpuFormIsUnchangedAndCudaRoundTrips) {
  SystemConfig cpu;
  EXPECT_EQ(cpu.to_json(), nlohmann::json({{"threads", 0}, {"fuse_residual_norm", false}}));
  SystemConfig c;
  c.device = "cuda";
  c.graphs = c.gemv = true;
  c.best_ops = {"rope", "gqa_decode_attention"};
  const auto back = SystemConfig::from_json(c.to_json(), "cuda");
  EXPECT_EQ(back.to_json(), c.to_json());
  EXPECT_TRUE(back.graphs);
  EXPECT_FALSE(back.flash_prefill);
  EXPECT_EQ(back.best_ops.size(), 2u);
  EXPECT_EQ(SystemConfig::from_json(nlohmann::json::parse("[1]"), "cuda").to_json(), SystemConfig::from_json({}, "cuda").to_json());
  // Knobs added later appear only when on: configurations stored before them keep their identity
  EXPECT_FALSE(c.to_json().contains("pdl"));
  c.pdl = c.fuse_norm_residual = c.engine_decode_attention = true;
  const auto on = SystemConfig::from_json(c.to_json(), "cuda");
  EXPECT_TRUE(on.pdl && on.fuse_norm_residual && on.engine_decode_attention);
  EXPECT_EQ(on.to_json(), c.to_json());
}

TEST(DispatchCuda, EachStageGoesToItsSpecialist) {
  SystemConfig base;
  base.device = "cuda";
  std::string why;
  auto p = dispatch_cuda("decode", "host_other", base, {}, 256, why);
  EXPECT_TRUE(p.any && p.specialist == "compilation" && p.next.graphs);
  p = dispatch_cuda("prefill", "attention", base, {}, 256, why);
  EXPECT_TRUE(p.any && p.specialist == "kernels" && p.next.flash_prefill && p.inner_op.empty());
  p = dispatch_cuda("decode", "attention", base, {}, 256, why);
  EXPECT_TRUE(p.any && p.inner_op == "gqa_decode_attention" && p.inner_phase == "decode");
  EXPECT_EQ(p.next.best_ops.count("gqa_decode_attention"), 1u);
  p = dispatch_cuda("decode", "residual_norm", base, {}, 256, why);
  EXPECT_EQ(p.inner_op, "rmsnorm_residual");
  p = dispatch_cuda("decode", "rope", base, {}, 256, why);
  EXPECT_TRUE(p.any && p.specialist == "compilation" && p.next.fuse_qk_rope_kv);
  // The fusion tried: the rope stage goes to the kernels specialist instead
  p = dispatch_cuda("decode", "rope", base, {p.next.to_json().dump()}, 256, why);
  EXPECT_TRUE(p.any && p.inner_op == "rope");
  p = dispatch_cuda("decode", "qkv_gemm", base, {}, 1, why);
  EXPECT_TRUE(p.any && p.next.gemv);
  p = dispatch_cuda("decode", "qkv_gemm", base, {}, 256, why);
  EXPECT_FALSE(p.any);
  EXPECT_NE(why.find("cuBLASLt"), std::string::npos);
  auto gemv = base;
  gemv.gemv = true;
  p = dispatch_cuda("decode", "swiglu", gemv, {}, 1, why);
  EXPECT_TRUE(p.any && p.specialist == "compilation" && p.next.fuse_swiglu_down);
  p = dispatch_cuda("decode", "swiglu", base, {}, 256, why);
  EXPECT_EQ(p.inner_op, "swiglu_act");
  for (const char* stage : {"lm_head", "sampling", "copies_in", "qk_norm_rope_kv"}) {
    why.clear();
    EXPECT_FALSE(dispatch_cuda("decode", stage, base, {}, 256, why).any) << stage;
    EXPECT_FALSE(why.empty()) << stage;
  }
  auto graphs = base;
  graphs.graphs = true;
  p = dispatch_cuda("decode", "host_other", graphs, {}, 256, why);
  EXPECT_TRUE(p.any && p.specialist == "compilation" && p.next.pdl);
  graphs.pdl = true;
  EXPECT_FALSE(dispatch_cuda("decode", "host_other", graphs, {}, 256, why).any);
  // Batch 1: attention goes to the engine's split-KV kernel first, the norms into the GEMVs
  p = dispatch_cuda("decode", "attention", base, {}, 1, why);
  EXPECT_TRUE(p.any && p.next.engine_decode_attention && p.inner_op.empty());
  why.clear();
  EXPECT_FALSE(dispatch_cuda("decode", "attention", p.next, {}, 1, why).any);
  EXPECT_FALSE(why.empty());
  p = dispatch_cuda("decode", "residual_norm", gemv, {}, 1, why);
  EXPECT_TRUE(p.any && p.specialist == "compilation" && p.next.fuse_norm_residual);
  // Nothing tried twice
  auto graphs_only = base, pdl_only = base;
  graphs_only.graphs = true;
  pdl_only.pdl = true;
  // graphs tried (and rejected): PDL is still proposed; both tried: nothing
  p = dispatch_cuda("decode", "host_other", base, {graphs_only.to_json().dump()}, 256, why);
  EXPECT_TRUE(p.any && p.next.pdl && !p.next.graphs);
  EXPECT_FALSE(
      dispatch_cuda("decode", "host_other", base, {graphs_only.to_json().dump(), pdl_only.to_json().dump()}, 256, why).any);
  why.clear();
  EXPECT_FALSE(dispatch_cuda("decode", "final_norm", base, {}, 1, why).any);
  EXPECT_NE(why.find("RMSNorm"), std::string::npos) << why;
  // The persistent decode kernel: proposed at batch <= 4 for the projections and the host gap once
  // every fusion it needs is on, never at batch 256, never twice
  auto fused = gemv;
  fused.fuse_swiglu_down = fused.fuse_norm_residual = fused.fuse_qk_rope_kv = fused.engine_decode_attention = true;
  fused.graphs = fused.pdl = true;
  p = dispatch_cuda("decode", "mlp_gate_up_gemm", fused, {}, 1, why);
  EXPECT_TRUE(p.any && p.next.persistent_decode && p.specialist == "kernels");
  p = dispatch_cuda("decode", "host_other", fused, {}, 4, why);
  EXPECT_TRUE(p.any && p.next.persistent_decode && p.specialist == "compilation");
  EXPECT_FALSE(dispatch_cuda("decode", "qkv_gemm", fused, {p.next.to_json().dump()}, 1, why).any);
  EXPECT_FALSE(dispatch_cuda("decode", "qkv_gemm", fused, {}, 256, why).any);
  EXPECT_FALSE(dispatch_cuda("decode", "qkv_gemm", gemv, {}, 1, why).next.persistent_decode);  // fusions off
  why.clear();
  EXPECT_FALSE(dispatch_cuda("decode", "decoder_layers", p.next, {}, 1, why).any);
  EXPECT_FALSE(why.empty());
  EXPECT_TRUE(SystemConfig::from_json(p.next.to_json(), "cuda").persistent_decode);
  EXPECT_FALSE(fused.to_json().contains("persistent_decode"));
}

SystemProfile profile_with(std::vector<std::vector<float>> logits, std::vector<std::vector<int32_t>> tokens) {
  SystemProfile p;
  p.prefill_logits = std::move(logits);
  p.tokens = std::move(tokens);
  return p;
}

TEST(VerifyBf16, ToleranceAndDecisiveTokensOnBothPaths) {
  auto ref = profile_with({{0.f, 1.f, 10.f}, {5.f, 5.01f, 0.f}}, {{2, 0, 0}, {1, 3, 3}});
  ref.decode_logits = {{8.f, 1.f, 0.f}, {0.f, 1.f, 9.f}};
  std::string detail;
  EXPECT_TRUE(verify_bf16(ref, ref, 5e-2, detail)) << detail;
  // Within tolerance, the near-tie of sequence 1 flips and decode then diverges (its decode
  // logits are not comparable and are not compared): allowed
  auto flip = profile_with({{0.f, 1.1f, 10.f}, {5.01f, 5.f, 0.f}}, {{2, 0, 0}, {0, 4, 4}});
  flip.decode_logits = {{8.f, 1.f, 0.f}, {7.f, 0.f, 0.f}};
  EXPECT_TRUE(verify_bf16(flip, ref, 5e-2, detail)) << detail;
  EXPECT_NE(detail.find("3/6"), std::string::npos) << detail;
  // Rejected: a decisive first token that changes, prefill logits far off or NaN, and errors of
  // the decode path behind an identical prefill (decode logits off, the decisive second token
  // changed, decode logits missing)
  const std::vector<std::pair<const char*, std::function<void(SystemProfile&)>>> faults = {
      {"first token", [](SystemProfile& p) { p.tokens[0][0] = 1; }},
      {"prefill logits", [](SystemProfile& p) { p.prefill_logits[0][1] = 2.f; }},
      {"prefill NaN", [](SystemProfile& p) { p.prefill_logits[0][1] = NAN; }},
      {"decode logits", [](SystemProfile& p) { p.decode_logits[1][0] = 3.f; }},
      {"second token", [](SystemProfile& p) { p.tokens[0][1] = 1; }},
      {"decode logits missing", [](SystemProfile& p) { p.decode_logits.clear(); }}};
  for (const auto& [what, fault] : faults) {
    auto bad = ref;
    fault(bad);
    EXPECT_FALSE(verify_bf16(bad, ref, 5e-2, detail)) << what << ": " << detail;
  }
}

// The same overflow in both systems (a NaN, or one infinity, at the same logit) is no error: both
// greedy choices skip it, and the finite logits decide. A non-finite logit in one system only, or a
// different one, is infinite error; the scale and the decisive margin come from finite logits.
TEST(VerifyBf16, TheSameNonFiniteLogitInBothSystemsMatches) {
  const float inf = INFINITY;
  auto ref = profile_with({{NAN, 1.f, 10.f, inf}, {-inf, 5.f, 0.f, NAN}}, {{2, 0}, {1, 1}});
  ref.decode_logits = {{NAN, 8.f, 1.f, 0.f}, {0.f, 1.f, 9.f, inf}};
  std::string detail;
  EXPECT_EQ(max_logit_error(ref, ref), 0.0);
  EXPECT_TRUE(verify_bf16(ref, ref, 5e-2, detail)) << detail;
  EXPECT_NE(detail.find("first 2/2, second 2/2"), std::string::npos) << detail;  // decisive by finite margins
  auto near = ref;
  near.prefill_logits[0][2] = 10.2f;
  EXPECT_NEAR(max_logit_error(near, ref), 0.02, 1e-6);  // 0.2 / the largest finite |logit|, 10
  for (const float other : {1.f, -inf, NAN}) {
    auto bad = ref;
    bad.prefill_logits[0][3] = other;  // +inf in ref
    EXPECT_EQ(max_logit_error(bad, ref), INFINITY) << other;
    EXPECT_FALSE(verify_bf16(bad, ref, 5e-2, detail)) << other << ": " << detail;
  }
  auto bad = ref;
  bad.prefill_logits[0][1] = NAN;  // finite in ref
  EXPECT_EQ(max_logit_error(bad, ref), INFINITY);
}

// A scripted engine: two phases, a stage per phase; the loop must weigh phases by the metric,
// run a proposal's preparation before profiling it, and never keep an unverified change.
TEST(OuterLoop, WeighsPhasesPreparesAndRejectsUnverifiedChanges) {
  SystemDriver d;
  int prepared = 0;
  d.profile = [](const SystemConfig& sc) {
    SystemProfile p;
    p.decode_tps = sc.graphs ? 300 : 100;
    p.prefill_tps = sc.flash_prefill ? 100 : 100;
    p.prefill_logits = {{sc.flash_prefill ? 9.f : 1.f, 0.f}};  // the "flash" change is wrong
    p.tokens = {{0}};
    return p;
  };
  d.rank = [](const SystemProfile&, bool decode) {
    StageRank r;
    r.stage = decode ? "host_other" : "attention";
    r.share = r.headroom = decode ? 0.2 : 0.6;
    return std::vector<StageRank>{r};
  };
  d.dispatch = [&](const std::string& phase, const std::string& stage, const SystemConfig& cur,
                   const std::set<std::string>& tried, std::string& why) {
    auto p = dispatch_cuda(phase, stage, cur, tried, 256, why);
    p.prepare = [&] { return "prepared " + std::to_string(++prepared); };
    return p;
  };
  d.verify = [](const SystemProfile& cand, const SystemProfile& ref, std::string& detail) {
    return verify_bf16(cand, ref, 5e-2, detail);
  };
  LoopOptions o;
  o.metric = "mix:0.5";
  o.budget = 4;
  o.gen = 4;
  SystemConfig start;
  start.device = "cuda";
  const auto r = run_outer_loop(o, start, d);
  ASSERT_EQ(r.iterations.size(), 3u);
  // prefill attention ranks first (0.5 x 0.6 > 0.5 x 0.2): flash, which fails verification
  EXPECT_EQ(r.iterations[0].phase, "prefill");
  EXPECT_TRUE(r.iterations[0].after.flash_prefill);
  EXPECT_FALSE(r.iterations[0].verified);
  EXPECT_FALSE(r.iterations[0].accepted);
  EXPECT_EQ(r.iterations[0].prepared, "prepared 1");
  // then the decode gaps: graphs, 3x decode = T 2.0 (mix 0.5): accepted
  EXPECT_EQ(r.iterations[1].phase, "decode");
  EXPECT_TRUE(r.iterations[1].accepted) << r.iterations[1].verdict;
  EXPECT_TRUE(r.best.graphs);
  EXPECT_FALSE(r.best.flash_prefill);
  EXPECT_DOUBLE_EQ(r.t_best, 2.0);
  // then programmatic dependent launch for the remaining gaps: no gain in this script, reverted
  EXPECT_TRUE(r.iterations[2].after.pdl);
  EXPECT_FALSE(r.iterations[2].accepted);
  EXPECT_FALSE(r.best.pdl);
  EXPECT_EQ(prepared, 3);
}

}  // namespace
}  // namespace thrive::model
