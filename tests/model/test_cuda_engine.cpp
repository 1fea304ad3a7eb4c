// The CUDA Qwen3 engine against the float32 CPU engine on a tiny random checkpoint: prefill
// logits of ragged prompts and teacher-forced decode steps agree within bf16 tolerance, greedy
// tokens agree wherever the CPU's top-2 margin exceeds the observed error, with the registry's
// baseline (each template's simplest variant) and its defaults, graphs on and off. Skips
// visibly without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/support/test_support.hpp"
#include "thrive/backend/cuda_backend.hpp"
#include "thrive/backend/embedded.hpp"
#include "thrive/core/error.hpp"
#include "thrive/model/cuda_engine.hpp"

namespace thrive::model {
namespace {

bool gpu_present(std::string* why) {
  if (!backend::cuda_compiled_in()) {
    *why = "built without the CUDA toolkit";
    return false;
  }
  return backend::cuda_probably_available(why);
}

KernelRegistry registry_of(const Qwen3Config& cfg, const CudaEngineOptions& o, bool simplest) {
  KernelRegistry reg;
  for (const auto& site : CudaQwen3Engine::call_sites(cfg, o)) {
    const auto tmpl = backend::KernelSource::parse(backend::embedded_file("cuda/" + site.op + "/template.cu"), site.op);
    reg[site.key()] = {tmpl.instantiate(simplest ? tmpl.simplest() : tmpl.defaults()), simplest ? "simplest" : "defaults", ""};
  }
  return reg;
}

std::string tiny_checkpoint(const test::TempDir& home, const Qwen3Config& cfg, uint64_t seed) {
  const std::string dir = home.path() + "/tiny";
  init_checkpoint(cfg, dir, seed);
  return dir;
}

CudaEngineOptions options(int batch, int64_t max_prompt, int64_t max_context, bool graphs) {
  CudaEngineOptions o;
  o.batch = batch;
  o.max_prompt = max_prompt;
  o.max_context = max_context;
  o.graphs = graphs;
  return o;
}

// max |a - b| / max |a| over a row
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, double(std::abs(a[i] - b[i])));
    den = std::max(den, double(std::abs(a[i])));
  }
  return den > 0 ? num / den : num;
}

// The CPU's greedy token must be the GPU's unless the CPU's top two are closer than `slack`.
void expect_same_greedy(const std::vector<float>& cpu, int32_t gpu_token, double slack, const std::string& where) {
  const auto top = std::max_element(cpu.begin(), cpu.end()) - cpu.begin();
  float second = -INFINITY;
  for (size_t i = 0; i < cpu.size(); ++i)
    if (int64_t(i) != top) second = std::max(second, cpu[i]);
  if (cpu[size_t(top)] - second > slack) {
    EXPECT_EQ(gpu_token, int32_t(top)) << where;
  }
}

class CudaEngine : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(CudaEngine, MatchesTheCpuReferenceOnATinyCheckpoint) {
  std::string why;
  if (!gpu_present(&why)) GTEST_SKIP() << "no GPU: " << why;
  const auto [simplest, graphs] = GetParam();
  test::TempDir home;
  const auto cfg = Qwen3Config::preset("tiny");
  const auto dir = tiny_checkpoint(home, cfg, 7);
  const auto o = options(3, 9, 20, graphs);
  CudaQwen3Engine gpu(cfg, dir, test::fast_config(home.path()), o, registry_of(cfg, o, simplest));
  CpuQwen3Engine cpu(cfg, load_weights(cfg, dir), o.batch, o.max_context);
  const std::vector<std::vector<int32_t>> prompts = {{1, 5, 9, 200, 3}, {7, 7, 7, 7, 7, 7, 7, 7, 255}, {42, 0}};
  std::vector<std::vector<float>> gl;
  auto gt = gpu.prefill(prompts, &gl);
  auto cl = cpu.prefill(prompts);
  const double tol = 3e-2;  // bf16 activations and weights through 2 layers, vs float32
  for (size_t b = 0; b < prompts.size(); ++b) {
    const double e = rel_diff(cl[b], gl[b]);
    EXPECT_LT(e, tol) << "prefill, sequence " << b;
    expect_same_greedy(cl[b], gt[b], 2 * e * 4, "prefill, sequence " + std::to_string(b));
  }
  // Teacher-forced decode: both engines get the CPU's greedy tokens.
  auto next = cpu.greedy(cl);
  for (int step = 0; step < 8; ++step) {
    gt = gpu.decode(next, &gl);
    cl = cpu.decode(next);
    for (size_t b = 0; b < prompts.size(); ++b) {
      const double e = rel_diff(cl[b], gl[b]);
      EXPECT_LT(e, tol) << "decode step " << step << ", sequence " << b;
      expect_same_greedy(cl[b], gt[b], 2 * e * 4, "decode step " + std::to_string(step));
    }
    next = cpu.greedy(cl);
  }
  EXPECT_GT(gpu.allocated_bytes(), 0);
}

INSTANTIATE_TEST_SUITE_P(RegistryAndGraphs, CudaEngine,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(CudaEngineStages, TimingCoversEveryStageAndBadInputIsRefused) {
  std::string why;
  if (!gpu_present(&why)) GTEST_SKIP() << "no GPU: " << why;
  test::TempDir home;
  const auto cfg = Qwen3Config::preset("tiny");
  const auto dir = tiny_checkpoint(home, cfg, 3);
  const auto o = options(2, 4, 6, true);
  CudaQwen3Engine gpu(cfg, dir, test::fast_config(home.path()), o, registry_of(cfg, o, false));
  gpu.set_stage_timing(true);
  auto t = gpu.prefill({{1, 2, 3, 4}, {5}});
  for (const char* stage : {"embedding", "qkv_gemm", "qk_norm", "rope", "kv_cache_write", "attention", "o_gemm",
                            "residual_norm", "mlp_gate_up_gemm", "swiglu", "mlp_down_gemm", "mlp_residual_norm",
                            "lm_head", "sampling", "copies_in", "copies_out"})
    EXPECT_GT(gpu.stages().us.count(stage), 0u) << stage;
  EXPECT_EQ(gpu.stages().calls.at("qkv_gemm"), cfg.layers);
  EXPECT_THROW(gpu.decode({1}), Error);                 // one token for a batch of two
  EXPECT_THROW(gpu.decode({1, int32_t(cfg.vocab)}), Error);  // id out of range
  EXPECT_THROW(gpu.prefill({{1, 2, 3, 4, 5}, {1}}), Error);  // longer than max_prompt
  t = gpu.decode(t);  // position 4
  t = gpu.decode(t);  // position 5, the last of the context of 6
  EXPECT_THROW(gpu.decode(t), Error);
}

}  // namespace
}  // namespace thrive::model
