// The THRIVE outer loop (issue 7) over the Qwen3 engine: Profile the system, Attribute its
// time to stages (model/attribution.hpp), Dispatch the stage with the most headroom to its
// specialist, Verify the changed system end to end, Profile again, and keep the change only if
//   T' / T_best > 1 + r_t   or   T' - T_best > a_t
// else revert; recurse until the budget is spent or no specialist can act on any stage.
// T is dimensionless: the metric's throughput (decode tokens/s, prefill tokens/s, or
// W x decode + (1 - W) x prefill for mix:W, each as a multiple of the starting system's), so the
// starting system has T = 1 and a_t = 0.3 means "30% of the starting throughput", a gain that
// still counts once T_best has grown and the relative test has become harder.
// This release drives the float32 CPU engine, whose knobs are the GEMMs' thread count (the
// kernels specialist) and the fusion of the residual add with the next RMSNorm (the compilation
// specialist); the memory, data and communication specialists have nothing to change there and
// say so. The CUDA engine's knobs (graphs, the kernel registry) are the next step.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "thrive/model/qwen3.hpp"

namespace thrive::model {

/// The system configuration the loop changes.
struct SystemConfig {
  int threads = 0;                  ///< GEMM threads, 0 = all cores
  bool fuse_residual_norm = false;  ///< residual add + next RMSNorm in one pass
  nlohmann::json to_json() const { return {{"threads", threads}, {"fuse_residual_norm", fuse_residual_norm}}; }
};

/// What the loop optimizes and how it decides.
struct LoopOptions {
  std::string metric = "decode";  ///< decode | prefill | mix:W (W in [0, 1], the decode weight)
  double r_t = 0.3, a_t = 0.3;    ///< acceptance thresholds (relative, absolute in units of T)
  int budget = 4;                 ///< most changes tried
  int batch = 1, prompt = 16, gen = 16;
  uint64_t seed = 1;
  double logits_tol = 1e-3;       ///< verification: max |logit - reference| / max |reference|
  int repeats = 3;                ///< profile runs per measurement; the fastest counts
  std::vector<std::string> tried; ///< configurations (SystemConfig::to_json().dump()) memory saw tried
};

/// One measurement of the system.
struct SystemProfile {
  double prefill_ms = 0, decode_ms = 0, prefill_tps = 0, decode_tps = 0;
  int decode_steps = 0;
  StageTimes prefill_stages, decode_stages;
  std::vector<std::vector<int32_t>> tokens;      ///< greedy tokens per sequence
  std::vector<std::vector<float>> prefill_logits;
  int64_t prompt_tokens = 0;   ///< real prompt tokens the prefill ran
  int64_t kv_cache_bytes = 0;  ///< the engine's float32 KV cache
};

/// `batch` prompts of `prompt` token ids uniform in [0, vocab), from mt19937_64(seed): the
/// harness's default inputs (`thrive e2e` without --prompts-file, the outer loop).
std::vector<std::vector<int32_t>> random_prompts(int batch, int prompt, int64_t vocab, uint64_t seed);

/// The CPU harness: a fresh engine with `sc` over `weights` (moved in; pass a copy to keep
/// them), prefill of `prompts`, then gen - 1 greedy decode steps (the last token needs none);
/// wall times, stage times, tokens and prefill logits. Error(kUsage) as the engine raises it.
SystemProfile profile_cpu(const Qwen3Config& cfg, Qwen3Weights weights, const std::vector<std::vector<int32_t>>& prompts,
                          int gen, const SystemConfig& sc);

/// One iteration of the loop.
struct LoopIteration {
  int index = 0;
  nlohmann::json ranking;  ///< the Attribute step's ranking of the phase the metric weighs most
  std::string stage, specialist, change;
  SystemConfig before, after;
  double t_before = 0, t_after = 0;  ///< T (multiples of the starting throughput)
  bool verified = false, accepted = false;
  std::string verdict;               ///< why it was kept, reverted or rejected
};

/// The loop's result: every iteration, the specialists' reports, and the best system.
struct LoopResult {
  SystemConfig start, best;
  double t_start = 1, t_best = 1;
  std::vector<LoopIteration> iterations;
  std::vector<std::string> notes;  ///< e.g. "communication: one device, nothing to do"
  std::string stop_reason;
  SystemProfile start_profile, best_profile;
};

/// Parses --metric: "decode", "prefill" or "mix:W" with W in [0, 1]; Error(kUsage) otherwise.
/// Returns W, the decode weight (1 for decode, 0 for prefill).
double metric_weight(const std::string& metric);

/// Runs the loop on the CPU engine over `weights` from `start`. `bandwidth_gbps` and `tflops`
/// are the measured ceilings for the stage floors. `sink` sees each iteration as it ends.
/// Error(kUsage) for bad options.
LoopResult run_system_loop(const Qwen3Config& cfg, const Qwen3Weights& weights, const LoopOptions& opts,
                           const SystemConfig& start, double bandwidth_gbps, double tflops,
                           const std::function<void(const LoopIteration&)>& sink = {});

}  // namespace thrive::model
