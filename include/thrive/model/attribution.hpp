// Attribute (the outer loop's second step, issue 7): where an engine pass's time goes against
// what it must cost. Each stage gets a roofline floor, max(bytes / bandwidth, flops / matrix
// rate), from the work the stage must do at least once (every weight and activation byte read or
// written once, the multiply-adds of its GEMMs and attention), and a headroom:
//   headroom = share x (1 - floor / measured)      (the seed's ranking; 0 <= headroom <= share)
// so a stage that takes much of the pass and runs far from its floor ranks first. Stages with no
// floor (copies, host gaps, gathers) have headroom equal to their share.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "thrive/model/qwen3.hpp"

namespace thrive::model {

/// The shape of one engine pass (a prefill or a decode step over the batch).
struct PassShape {
  int64_t tokens = 0;      ///< new tokens computed (prefill: batch x prompt; decode: batch)
  int64_t attended = 0;    ///< (query, key) pairs attention scores: causal prefill sum P(P+1)/2, decode sum ctx
  int64_t kv_read = 0;     ///< cached positions whose K and V must be read (decode: sum ctx; prefill: 0)
  int64_t logit_rows = 0;  ///< rows through lm_head and sampling (the batch)
  /// The CUDA engine's screened lm_head (model/lm_head_screen.hpp): lm_head reads the int8 copy
  /// (1 byte a weight, 12 bytes a row of scale and coefficients) and writes approximations;
  /// sampling reads those, 8 bytes a row of coefficients and h (its exact rows are not counted:
  /// how many depends on the logits).
  bool screened_lm_head = false;
  /// Bytes a weight of the four projections (qkv, o, gate|up, down) when the pass streams them in
  /// another form than `weight_bytes`: the persistent kernel's EC12 tiles (model/weight_coding.hpp)
  /// read kEc12TileBytes a 16 x 1024 tile, 1.53 bytes a weight. 0: `weight_bytes`.
  double projection_weight_bytes = 0;
};

/// Minimum work of a stage: bytes that cross memory at least once, and flops.
struct StageWork {
  double bytes = 0, flops = 0;
};

/// Work per stage name (both engines' names: embedding, input_norm, qkv_gemm, qk_norm, rope,
/// kv_cache_write, qk_norm_rope_kv (the three fused), attention, o_gemm, residual_norm, mlp_gate_up_gemm, swiglu, mlp_down_gemm,
/// mlp_residual_norm, residual, final_norm, lm_head, sampling) for one pass of `p`, with
/// activations of `act_bytes` and weights of `weight_bytes` per element (float32 CPU engine: 4, 4;
/// bf16 CUDA engine: 2, 2). Formulas: GEMM flops 2 T N K (Qwen3 projection sizes from `c`),
/// attention 4 x attended x NQ x D per layer (scores and P.V).
std::map<std::string, StageWork> stage_work(const Qwen3Config& c, const PassShape& p, int act_bytes, int weight_bytes);

/// One ranked stage.
struct StageRank {
  std::string stage;
  double ms = 0, share = 0;  ///< measured time and its share of the pass's wall time
  double floor_ms = 0;       ///< roofline floor (0: none)
  std::string bound;         ///< "memory" | "compute" | "none": which side sets the floor
  double headroom = 0;       ///< share x (1 - floor / measured), clamped to [0, share]
};

/// The highest matrix rate, in TFLOP/s, that a stage of `st` (µs per stage over `passes` passes)
/// achieved: passes x its flops (from `work`, per pass) over its time; 0 when no stage has flops.
/// A matrix ceiling measured below it is no ceiling (a short probe on a busy machine, or a probe
/// shape the GEMM code runs less well than the engine's): attribute() takes the larger of the two.
double achieved_tflops(const StageTimes& st, int passes, const std::map<std::string, StageWork>& work);

/// Ranks the stages of `st` (µs per stage over `passes` passes) by headroom, largest first, with
/// floors from `work` (per pass) at `bandwidth_gbps` (GB/s, reads + writes: the measured copy
/// ceiling) and the matrix rate max(`tflops` (the measured one), achieved_tflops(...)). `wall_ms`
/// is the passes' wall time; the time no stage covers is ranked as "host_other". Error(kUsage) for
/// non-positive rates or passes.
std::vector<StageRank> attribute(const StageTimes& st, double wall_ms, int passes,
                                 const std::map<std::string, StageWork>& work, double bandwidth_gbps,
                                 double tflops);

}  // namespace thrive::model
