// The THRIVE outer loop (issue 7) over the Qwen3 engine: Profile the system, Attribute its
// time to stages (model/attribution.hpp), Dispatch the stage with the most headroom to its
// specialist, Verify the changed system end to end, Profile again, and keep the change only if
//   T' / T_best > 1 + r_t   or   T' - T_best > a_t
// else revert; recurse until the budget is spent or no specialist can act on any stage.
// T is dimensionless: the metric's throughput (decode tokens/s, prefill tokens/s, or
// W x decode + (1 - W) x prefill for mix:W, each as a multiple of the starting system's), so the
// starting system has T = 1 and a_t = 0.3 means "30% of the starting throughput", a gain that
// still counts once T_best has grown and the relative test has become harder.
// The loop itself (run_outer_loop) is engine-neutral: a SystemDriver profiles a configuration,
// ranks its stages, maps a stage to its specialist's proposal and verifies a changed system.
// run_system_loop drives the float32 CPU engine, whose knobs are the GEMMs' thread count (the
// kernels specialist) and the fusion of the residual add with the next RMSNorm (the compilation
// specialist); the memory, data and communication specialists have nothing to change there and
// say so. The CUDA engine's driver (src/cli/commands/system.cpp) changes CudaEngineOptions'
// knobs and runs the inner kernel loop at the engine's call-site shapes.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "thrive/model/attribution.hpp"
#include "thrive/model/qwen3.hpp"

namespace thrive::model {

/// The system configuration the loop changes. device "cpu": the CPU engine's knobs; "cuda": the
/// CUDA engine's (model/cuda_engine.hpp CudaEngineOptions) and which ops' call sites take
/// memory's best verified kernel (the others: their template's simplest variant).
struct SystemConfig {
  int threads = 0;                  ///< cpu: GEMM threads, 0 = all cores
  bool fuse_residual_norm = false;  ///< cpu: residual add + next RMSNorm in one pass
  std::string device = "cpu";       ///< "cpu" | "cuda"
  bool graphs = false;              ///< cuda: decode steps as one CUDA graph
  bool flash_prefill = false;       ///< cuda: FlashAttention-2 prefill kernel (else cuBLASLt S, softmax, PV)
  bool fuse_qk_rope_kv = false;     ///< cuda: q/k norm + RoPE + KV-cache write in one kernel
  bool gemv = false;                ///< cuda: GEMV for projections at <= 4 tokens
  bool fuse_swiglu_down = false;    ///< cuda: SwiGLU inside the down GEMV
  bool fuse_norm_residual = false;  ///< cuda: RMSNorms and residual adds inside the GEMVs
  bool pdl = false;                 ///< cuda: programmatic dependent launch of the engine's kernels
  bool engine_decode_attention = false;  ///< cuda: the engine's split-KV decode attention at batch <= 4
  bool persistent_decode = false;   ///< cuda: every decoder layer in one persistent kernel at batch <= 4
  std::set<std::string> best_ops;   ///< cuda: ops whose call sites take memory's best kernel
  /// cpu: {"threads", "fuse_residual_norm"} (the stored form since the first release); cuda: the
  /// CUDA fields (fuse_norm_residual, pdl, engine_decode_attention and persistent_decode only when on, so configurations stored before they
  /// existed keep their identity). The dump of this JSON is the configuration's identity in memory.
  nlohmann::json to_json() const;
  /// Inverse of to_json for `device`; missing fields keep their defaults.
  static SystemConfig from_json(const nlohmann::json& j, const std::string& device);
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
  std::vector<std::vector<float>> decode_logits;  ///< the first decode step's [B][vocab] (CUDA profiles), or empty
  int64_t prompt_tokens = 0;   ///< real prompt tokens the prefill ran
  int64_t kv_cache_bytes = 0;  ///< the engine's float32 KV cache
  /// NaN or infinite logits greedy skipped (CpuQwen3Engine::nonfinite_logits, or the CUDA
  /// engine's count in e2e's JSON) and the first (first_nonfinite_logit; "" for CUDA profiles)
  int64_t nonfinite_logits = 0;
  std::string first_nonfinite_logit;
  /// The harness's own headroom rankings when it computed them (CUDA: `thrive e2e --json`'s
  /// prefill_headroom / decode_headroom rows), else null.
  nlohmann::json prefill_ranking, decode_ranking;
};

/// `batch` prompts of `prompt` token ids uniform in [0, vocab), from mt19937_64(seed): the
/// harness's default inputs (`thrive e2e` without --prompts-file, the outer loop).
std::vector<std::vector<int32_t>> random_prompts(int batch, int prompt, int64_t vocab, uint64_t seed);

/// The CPU harness: a fresh engine with `sc` over `weights` (moved in; pass a copy to keep
/// them), prefill of `prompts`, then gen - 1 greedy decode steps (the last token needs none);
/// wall times, stage times, tokens and prefill logits. Error(kUsage) as the engine raises it.
SystemProfile profile_cpu(const Qwen3Config& cfg, Qwen3Weights weights, const std::vector<std::vector<int32_t>>& prompts,
                          int gen, const SystemConfig& sc);

/// A specialist's proposal for a stage: the changed configuration and, optionally, work to do
/// before the changed system is profiled (the kernels specialist's inner loop), which returns a
/// line for the report.
struct Proposal {
  std::string specialist, change;
  SystemConfig next;
  bool any = false;  ///< false: the specialist has nothing (left) to try; `why` says so
  std::function<std::string()> prepare;
  /// The kernels specialist on the CUDA engine: run the inner loop for this op at the engine's
  /// call-site shape of `inner_phase` ("decode": T = batch; "prefill": T = batch x prompt) before
  /// its call sites take memory's best kernel. Empty: no inner loop.
  std::string inner_op, inner_phase;
};

/// What the loop needs from an engine.
struct SystemDriver {
  /// One measurement of the system in configuration `sc`.
  std::function<SystemProfile(const SystemConfig& sc)> profile;
  /// Headroom ranking of one phase of a profile (decode = true: decode steps; else prefill).
  std::function<std::vector<StageRank>(const SystemProfile& p, bool decode)> rank;
  /// The specialist for `stage` of `phase` ("decode" | "prefill"), from `cur`; configurations in
  /// `tried` (SystemConfig::to_json().dump()) are not proposed again. Sets `why` when it has none.
  std::function<Proposal(const std::string& phase, const std::string& stage, const SystemConfig& cur,
                         const std::set<std::string>& tried, std::string& why)>
      dispatch;
  /// End-to-end check of `cand` against the starting system `ref`; `detail` says what was seen.
  std::function<bool(const SystemProfile& cand, const SystemProfile& ref, std::string& detail)> verify;
  std::vector<std::string> notes;  ///< reports that hold for the whole run (communication, ...)
};

/// One iteration of the loop.
struct LoopIteration {
  int index = 0;
  nlohmann::json ranking;  ///< the Attribute step's ranking: both phases, headroom x the metric's phase weight
  std::string phase, stage, specialist, change;
  std::string prepared;    ///< what the specialist did before the profile (e.g. the inner loop's result)
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

/// The prefill-logit error of `cand` against `ref`: the largest over sequences of
/// max_i |cand_i - ref_i| / max_i |ref_i| over the logits finite in both; +inf when the shapes
/// differ or a logit is non-finite in one system and not the same NaN or infinity in the other
/// (the same overflow in both, which greedy skips in both, matches).
double max_logit_error(const SystemProfile& cand, const SystemProfile& ref);

/// The CUDA engine's specialists, as a pure function of the stage, the phase, the current
/// configuration and what was tried (the caller attaches the inner loop for proposals with
/// `inner_op`); `batch` decides whether the GEMV path (<= 4 tokens) applies. Stages:
/// host_other (decode) -> compilation: CUDA graphs; qk_norm, rope, kv_cache_write ->
/// compilation: the q/k norm + RoPE + KV-write fusion, then (rope) the kernels specialist;
/// swiglu -> compilation: SwiGLU into the down GEMV (with GEMV), else kernels; residual_norm,
/// mlp_residual_norm, decode attention, rope, swiglu -> kernels: inner loop + best kernel;
/// prefill attention -> kernels: the FlashAttention-2 kernel; projections at <= 4 tokens ->
/// kernels: GEMV; the rest report why they have nothing to change.
Proposal dispatch_cuda(const std::string& phase, const std::string& stage, const SystemConfig& cur,
                       const std::set<std::string>& tried, int batch, std::string& why);

/// End-to-end check of a bf16 system against the starting one, on both paths: prefill logits
/// within `tol` (max_logit_error) and each sequence's first greedy token unchanged wherever the
/// starting system's top-2 logit margin exceeds twice the observed error on that sequence; then,
/// for the sequences whose first token agrees (so both systems decoded the same input), the
/// first decode step's logits within `tol` and its greedy token unchanged where decisive. Below
/// a decisive margin two correct bf16 systems may pick either token; on random weights such
/// near-ties are common, so later tokens, which follow from the first divergence, are reported,
/// not required. `detail` gets the errors, the decisive tokens and the tokens that agree.
bool verify_bf16(const SystemProfile& cand, const SystemProfile& ref, double tol, std::string& detail);

/// The canonical spelling of a metric, which memory keys on: "decode" (also mix:1), "prefill"
/// (also mix:0), else "mix:W" with W printed shortest ("mix:0.50" -> "mix:0.5"). Error(kUsage)
/// as metric_weight.
std::string metric_name(const std::string& metric);

/// Parses --metric: "decode", "prefill" or "mix:W" with W in [0, 1]; Error(kUsage) otherwise.
/// Returns W, the decode weight (1 for decode, 0 for prefill).
double metric_weight(const std::string& metric);

/// The loop over any engine: profile `start`, then up to opts.budget times rank both phases
/// (each stage's headroom times the metric's weight of its phase), dispatch the top stage a
/// specialist can act on, prepare, profile, verify, accept or revert. Error(kUsage) for bad
/// options.
LoopResult run_outer_loop(const LoopOptions& opts, const SystemConfig& start, const SystemDriver& driver,
                          const std::function<void(const LoopIteration&)>& sink = {});

/// Runs the loop on the CPU engine over `weights` from `start`. `bandwidth_gbps` and `tflops`
/// are the measured ceilings for the stage floors. `sink` sees each iteration as it ends.
/// Error(kUsage) for bad options.
LoopResult run_system_loop(const Qwen3Config& cfg, const Qwen3Weights& weights, const LoopOptions& opts,
                           const SystemConfig& start, double bandwidth_gbps, double tflops,
                           const std::function<void(const LoopIteration&)>& sink = {});

}  // namespace thrive::model
