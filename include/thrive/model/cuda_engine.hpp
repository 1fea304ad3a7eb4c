// The CUDA path of the Qwen3 engine (issue 6): bf16 weights and activations on one GPU,
// cuBLASLt GEMMs (f32 accumulation), THRIVE kernels for the ops THRIVE optimizes installed from
// a kernel registry, the engine's own kernels for the rest (kernels/cuda/engine/qwen3_engine.cu),
// a contiguous per-sequence KV cache, batched decode, CUDA graphs for decode steps and greedy
// sampling on the GPU.
//
// Per layer, T tokens (prefill: batch x the longest prompt, right-padded; decode: batch):
//   qkv = n1 . Wqkv^T (one GEMM over q|k|v rows)        -> qkv_gemm
//   q, k, v = split, per-head RMSNorm of q and k        -> qk_norm (engine kernel)
//   RoPE(q, k) at each token's position                 -> rope (THRIVE op `rope`)
//   k, v -> KV cache at (sequence, position)            -> kv_cache_write
//   (with fuse_qk_rope_kv, the three stages above are one kernel        -> qk_norm_rope_kv)
//   prefill: FlashAttention-2 over the cache (flash_prefill), or per query head S = Q K^T
//   (cuBLASLt, batched over sequences, f32), causal softmax, O = P V (cuBLASLt); decode: THRIVE
//   op `gqa_decode_attention` over the cache, at batch <= 4 with engine_decode_attention the
//   engine's one-launch split-KV kernel                                   -> attention
//   o = attn . Wo^T                                     -> o_gemm
//   h += o; n2 = RMSNorm(h)                             -> residual_norm (THRIVE op `rmsnorm_residual`)
//   gu = n2 . Wgu^T (gate|up rows, one GEMM)            -> mlp_gate_up_gemm
//   act = silu(gate) * up                               -> swiglu (THRIVE op `swiglu_act`)
//   d = act . Wdown^T                                   -> mlp_down_gemm
//   (decode at batch <= 4 with persistent_decode: every layer above in one persistent kernel,
//   engine_decode_layers, with the fusions below)
//   (T <= 4 with gemv: the projections are the engine's GEMV, and with fuse_swiglu_down the
//   down GEMV computes act itself: no swiglu stage; with fuse_norm_residual the qkv and gate|up
//   GEMVs compute RMSNorm(h) themselves and the o and down GEMVs add into h: no norm stages in
//   the layer, one final_norm before lm_head)
//   h += d; n1 = RMSNorm(h) with the next layer's input norm (the final norm after the last
//   layer)                                               -> mlp_residual_norm (`rmsnorm_residual`)
// then lm_head on each sequence's last token (f32 logits) and argmax -> lm_head, sampling.
// Right padding is exact for causal attention: a real token attends only to earlier positions,
// which are real; pad positions in the cache are overwritten by decode before they are read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "thrive/backend/backend.hpp"
#include "thrive/backend/kernel.hpp"
#include "thrive/config/config.hpp"
#include "thrive/model/qwen3.hpp"
#include "thrive/ops/op.hpp"

namespace thrive::model {

/// Engine geometry: sequences decoded together and the cache length.
struct CudaEngineOptions {
  int batch = 1;              ///< sequences (B)
  int64_t max_prompt = 1;     ///< longest prompt prefill() accepts (sets prefill buffers)
  int64_t max_context = 2;    ///< KV-cache length per sequence (L), >= max_prompt: the prompt, then one a decode step
  bool graphs = true;         ///< decode steps replayed as one CUDA graph
  /// Prefill attention: true = engine_flash_attention (FlashAttention-2 on tensor cores, one
  /// kernel per layer; head_dim 16/32/64/128), false = per query head cuBLASLt S = QK^T (f32),
  /// causal softmax, O = PV. Other head dims always take the cuBLASLt path.
  bool flash_prefill = true;
  /// q/k RMSNorm + RoPE + KV-cache write as one kernel (engine_qk_norm_rope_kv, stage
  /// "qk_norm_rope_kv"); the `rope` op's call sites are then not used.
  bool fuse_qk_rope_kv = true;
  /// Projections at T <= 4 tokens (decode at small batch) through the engine's GEMV
  /// (weight-streaming, one warp per output row) instead of cuBLASLt. Needs hidden,
  /// intermediate and heads x head_dim multiples of 8.
  bool gemv = true;
  /// With the GEMV path: SwiGLU computed inside the down projection (no swiglu stage; the
  /// `swiglu_act` call site at that T is then not used). Needs T x intermediate x 2 <= 48 KiB.
  bool fuse_swiglu_down = true;
  /// With the GEMV path: the RMSNorm before the qkv and gate|up projections computed by each
  /// block of those GEMVs (engine_gemv_norm), and the residual adds done in the epilogues of the
  /// o and down GEMVs (h updated in place): no input_norm, residual_norm or mlp_residual_norm
  /// stage at that T (the `rmsnorm_residual` call site at that T is then not used), and a
  /// final_norm stage before lm_head. Needs T x hidden x 2 <= 48 KiB.
  bool fuse_norm_residual = true;
  /// The engine's own kernels (GEMVs, norms, q/k norm + RoPE, argmax) launched with
  /// programmatic dependent launch (sm_90+; ignored below): each may start while the kernel
  /// before it drains, the GEMVs streaming their first weights before they wait for it. Registry
  /// (THRIVE op) kernels and cuBLASLt always launch normally.
  bool pdl = true;
  /// Output rows per warp of the GEMV path: 1 (grid N/8 blocks of 256 threads) or 2 (N/16 blocks,
  /// twice the weight bytes in flight per warp, half the blocks).
  int gemv_rows = 1;
  /// Decode attention at batch <= 4 by the engine's split-KV kernel (engine_decode_attention:
  /// about 32 keys a block, the parts merged by the last block in the same launch, programmatic
  /// launch) instead of the `gqa_decode_attention` op, whose call site is then not used; with
  /// fuse_qk_rope_kv (head_dim >= 16) the kernel also does decode's q/k RMSNorm, RoPE and
  /// KV-cache write (no qk_norm_rope_kv stage at decode). Needs head_dim / 8 a power of two <= 32
  /// and NQ / NKV in {1, 2, 4, 8}; off otherwise.
  bool engine_decode_attention = true;
  /// Decode at batch <= 4 as one persistent kernel for all decoder layers
  /// (engine_decode_layers: a block a SM, persistent_blocks of them, streams its share of every
  /// layer's weights through a ring of shared-memory stages filled by cp.async, stages
  /// synchronized by counters in global memory instead of kernel boundaries; stage
  /// "decoder_layers", split into the layer stages by in-kernel timestamps when stages are timed).
  /// Needs the GEMV path with fuse_swiglu_down and
  /// fuse_norm_residual at that batch, engine_decode_attention with the q/k kernel fused, sm_90 or
  /// newer and at least two 32 KiB stages of shared memory; off otherwise. Off by default here
  /// (`thrive e2e --persistent auto` turns it on where it can run): on the H200 it decodes batch 1 in 1.58 ms/step
  /// against the layered path's 1.67 with CUDA graphs and PDL, batch 4 in 1.99 against 3.27
  /// (2026-12-01, README; with the device decode loop and tagged handoffs, 1.48 and 1.92 on
  /// 2026-12-02).
  bool persistent_decode = false;
  /// Ring stages of the persistent kernel (32 KiB of weights each, in flight or landed per SM): 0 =
  /// automatic, 5 or as many as fit in shared memory if fewer (on the H200, Qwen3-1.7B: 1.35
  /// ms/step at batch 1 with 5 against 1.39 with 6 and 1.40 with 4, 2026-12-04), else that many
  /// (2 to 8) or as many as fit if fewer.
  int persistent_stages = 0;
  /// The automatic depth's cap (persistent_stages = 0); the source of its figures is the comment
  /// at kDlTileBytes in src/model/cuda_engine.cpp.
  static constexpr int kAutoPersistentStages = 5;
  /// The deepest ring persistent_stages may ask for: the kernel's cp.async.wait_group switch
  /// (engine_dl_wait_stage in kernels/cuda/engine/qwen3_engine.cu) covers 2 to 8 stages.
  static constexpr int kMaxPersistentStages = 8;
  /// Attention splits of the persistent kernel (parts per sequence and KV head, each a contiguous
  /// range of the context): 0 = automatic (about 64 keys a part for the tensor-core parts, 32 for
  /// the CUDA-core parts), else that many (1 to 64), capped where the parallel merge's limit is
  /// lower: every part of a (sequence, KV head) must run at once, at most 2 x blocks / (batch x
  /// kv_heads) splits (persistent_blocks). options() reports the count used (0 whenever
  /// persistent_decode is off).
  /// For measuring the split count, e.g. on the H200 at batch 1, prompt 512 the automatic count
  /// is 9.
  int persistent_splits = 0;
  /// Blocks of the persistent kernel (at most one a SM; each streams its even share of every
  /// GEMV's groups of 16 rows): 0 = automatic, persistent_decode_blocks(); else that many (1 to
  /// the device's SM count; more is an error naming the SM count, whether or not the persistent
  /// kernel runs), with the attention splits capped at 2 x blocks / (batch x kv_heads) (one
  /// split where that is below 1: the parts then take turns). options() reports the count used
  /// (0 whenever persistent_decode is off).
  int persistent_blocks = 0;
  /// Prefetch each layer's KV cache (keys [0, n) of every sequence) into L2 as the persistent
  /// kernel's qkv stage starts, a 1 / gridDim share per block (cp.async.bulk.prefetch.L2, sm_90):
  /// attention's key loads then wait on L2 rather than on DRAM queues full of the weight stream.
  /// On the H200 at batch 1, prompt 512: 1.657 ms/step against 1.666 without, attention 15.2
  /// against 16.0 µs a layer, qkv 8.0 against 7.5 (2026-12-01, before the parallel merge:
  /// bench/results/h200-persistent-decode-2026-12-01/session3/README.md, run 2). The engine turns
  /// it off (false in options()) where one layer's KV cache, batch x max_context x NKV x head_dim x
  /// 4 bytes, exceeds a quarter of the L2, and whenever persistent_decode is off.
  /// Off by default since 2026-12-02: with the kernel as it is now, the prefetch cost time. On the
  /// H200 at batch 1, prompt 512 (one call, alternating): 1.384 ms/step without it against 1.421
  /// and 1.421 with it; moving it off the qkv stage's path, to the previous layer's attention
  /// window, still gave 1.421 and 1.420 (bench/results/h200-l2-window-2026-12-02/, run 4).
  bool persistent_kv_prefetch = false;
  /// The persistent kernel's attention parts on tensor cores (head_dim 64 or 128; off otherwise,
  /// and whenever persistent_decode is off): a part of 8 warps, each taking tiles of 8 keys with
  /// one mma.sync product a k-step for Q K^T and one a 16 output elements for P V, instead of
  /// the CUDA-core parts (16 lanes a key, a shuffle sum and an online-softmax update a key and
  /// head). About 64 keys a part instead of 32; the softmax weights enter the P V product as two
  /// bf16 terms each (hi + lo). See engine_dl_attention_part_tc in kernels/cuda/engine/qwen3_engine.cu.
  bool persistent_tc_attention = true;
  /// The tensor-core parts with a unified max (engine_dl_attention_part_tc<.., UM = true> in
  /// kernels/cuda/engine/qwen3_engine.cu; FlashDecoding++, Hong et al. 2023): every part weighs
  /// its keys by 2^(s - M) with one M a query head that bounds every score (|q~| times the
  /// largest |k~| the k_norm weights allow), so the parts' sums add at L2 and the o stage divides:
  /// no per-part max, no merge of the parts. On the H200 at batch 1 (Qwen3-1.7B, prompt 512) a
  /// step took 1.326-1.339 ms against 1.352 with the merge (2026-12-04,
  /// bench/results/h200-unified-max-2026-12-04/). Off by default: the sums are float atomics
  /// added in the order the parts finish, so the logits vary in their last bits from run to run
  /// and a greedy token can flip where two logits nearly tie (random Qwen3-1.7B weights: first
  /// at steps 19-56 of 64 between runs); the merge adds in a fixed order and repeats bit for bit.
  /// The engine turns it off (false in options(), with a warning) where the checkpoint's q_norm /
  /// k_norm weights allow a bound above kUnifiedMaxLimit (unified_max_bound), and whenever the
  /// tensor-core parts or persistent_decode are off.
  bool persistent_unified_max = false;
  /// The persistent kernel streams its four projections (qkv, o, gate|up, down) as EC12 copies,
  /// a lossless 12-bit coding of the bf16 weights (include/thrive/model/weight_coding.hpp: each
  /// weight's low byte, a 4-bit sign-and-exponent code, and per 1024 weights a window and up to 7
  /// patch words for weights outside it), decoded to the same bf16 values in the kernel's MMA
  /// fragments: 25,088 bytes a 16 x 1024 tile instead of 32,768 (77%). The engine packs the
  /// copies on the host while it loads (about 2 s more at Qwen3-1.7B on 16 cores) and keeps them beside the
  /// bf16 weights, which prefill and the other paths read: about 0.77 x the layers' bf16 bytes of
  /// GPU memory more (2.2 GB at Qwen3-1.7B). Products of patched weights are added in another
  /// order (the f32 sums can differ in their last bits; the bf16 outputs almost never). Off in
  /// options() when persistent_decode is off, and, with a warning (ec12_fallback()), when a
  /// matrix has a 1024-weight slice with more than 7 weights outside its window. On an H100 at
  /// batch 1 (Qwen3-1.7B, prompt 512) a step took 1.435-1.451 ms against 1.559-1.563 with bf16
  /// tiles, at batch 4 2.075 against 1.988 (2026-12-07, bench/results/ec12-2026-12-07/; no H200
  /// figure yet). On by default here at every batch the persistent kernel runs (the GPU tests run
  /// it so); `thrive e2e --persistent-weights auto`, the CLI's default, turns it on at batch 1 only.
  bool persistent_ec12 = true;
  /// Greedy decode steps at batch <= 8 whose logits are not asked for (decode() without
  /// `logits`, decode_greedy()) take the screened lm_head (include/thrive/model/lm_head_screen.hpp):
  /// engine_lm_head_screen reads an int8 copy of the lm_head (about vocab x hidden bytes more of GPU
  /// memory, packed on the host at load) and bounds every logit, then engine_argmax_screened
  /// computes the bf16 logits of the rows that could still be the argmax only. The token is the
  /// argmax of exact f32 sums of the bf16 weights, as without it, up to ties within the sums'
  /// rounding; the logits are not materialized (the `logits` buffer holds the screening's
  /// approximations). Stages "lm_head" (the screening) and "sampling" (the exact pass). Prefill,
  /// and decode() with `logits`, always run cuBLASLt's lm_head and engine_argmax. Needs hidden a
  /// multiple of 8 and the screening's shared memory within the device's per-block limit: h's
  /// fragments (hidden rounded up to 32 x 16 bytes), batch x hidden x 2 bytes and two ring stages
  /// of at least 8.25 KiB beside about 9.4 KiB of static shared memory (hidden past about 6,300 at
  /// batch 8 does not fit); off otherwise (false in options()). On the H200 at batch 1
  /// (Qwen3-1.7B, prompt 512) a step took 1.284 ms against 1.353 with the exact lm_head, the same
  /// tokens (2026-12-06, two calls:
  /// bench/results/lm-head-screen-2026-12-06/).
  bool lm_head_screen = true;
  /// The most sequences the screened lm_head takes (its MMA's 8 columns).
  static constexpr int kMaxScreenBatch = 8;
};

/// The persistent kernel's automatic block count (CudaEngineOptions::persistent_blocks = 0) on a
/// device of `sms` SMs: the fewest blocks that give no block more row groups (16 rows) of any of
/// the four GEMVs (qkv: (heads + 2 kv_heads) x head_dim rows, o: hidden, gate|up: 2 x
/// intermediate, down: hidden) than `sms` blocks would, and at least cdiv(parts, 2), so that the
/// attention's `parts` (batch x kv_heads x splits wanted: each block runs two at once, and every
/// part of a (sequence, KV head) runs at once) keep their count; at least 1, at most `sms`. At
/// Qwen3-1.7B dims (256, 128, 768 and 128 groups) on 132 SMs (H100 and H200) with up to 256
/// parts (batch 1 up to 32 splits: the automatic count up to a context of about 2048; batch 4 up
/// to 8: the most 132 SMs allow) it is 128: every block then has 2, 1, 6 and 1 groups, where 132
/// blocks give the same largest shares but leave 4 blocks without o and down rows; with more
/// parts (a longer context at batch 1 to 3) the parts' floor raises it, to 132 at most.
/// Measured on H100s at batch 1, prompt 512 (2026-12-06, three calls on three machines, two
/// rounds alternating in each, bench/results/h200-gemv-drift-2026-12-06/): 1.662-1.663 ms/step
/// with 128 blocks against 1.677-1.678 with 132, then 1.644-1.646 against 1.647-1.649, then
/// 1.645-1.647 against 1.647; batch 4 2.053 against 2.066. Unbalanced counts are much slower:
/// 124 blocks (two o and down groups on some) 1.841, 120 blocks 1.855. Throws Error (kInput) for
/// a config that Qwen3Config::validate refuses, (kUsage) for sms < 1 or parts < 0.
int64_t persistent_decode_blocks(const Qwen3Config& cfg, int64_t sms, int64_t parts);

/// The largest score bound M (log2 units) of the unified max for a layer whose q_norm and k_norm
/// weights have largest magnitudes q_norm_max and k_norm_max (head dim head_dim, softmax scale
/// 1 / sqrt(head_dim), Qwen3's config): log2(e) / sqrt(D) |q~| |k~| with |q~| <= sqrt(D) q_norm_max
/// and |k~| <= sqrt(D) k_norm_max (an RMSNorm output has unit RMS; RoPE is a rotation), times 1.04
/// for the bf16 roundings. Throws Error (kUsage) for head_dim < 1 or a non-finite or negative magnitude.
double unified_max_bound(double q_norm_max, double k_norm_max, int64_t head_dim);
/// The engine runs the unified max only where every layer's unified_max_bound is at most this:
/// the largest weight of a query, 2^(s_max - M) >= 2^(-2 M), stays >= 2^-80, far above f32's
/// smallest normal (2^-126).
inline constexpr double kUnifiedMaxLimit = 40.0;

/// One call site of a THRIVE op in the engine: the op at the engine's shape.
struct OpCallSite {
  std::string op;
  ops::ShapeCase shape;  ///< label in the op's own convention ("T=256", "B=256,L=640")
  std::string key() const { return op + "@" + shape.label; }
};

/// The kernel installed at a call site, and where it came from.
struct OpKernel {
  backend::KernelSource kernel;
  std::string origin;     ///< "baseline (template, simplest variant)", "memory: <id> (...)", ...
  std::string kernel_id;
};

/// Kernels by OpCallSite::key(); the registry of one engine.
using KernelRegistry = std::map<std::string, OpKernel>;

/// bf16 Qwen3 on the GPU. Not thread-safe; one per process (it owns a CUDA backend).
class CudaQwen3Engine {
 public:
  /// Every THRIVE-op call site the engine will launch for `opts` (prefill and decode shapes;
  /// fused-away sites are left out),
  /// so a caller can resolve the registry before the engine creates its CUDA context (kernel
  /// verification forks sandbox workers, which must happen before CUDA is initialised).
  static std::vector<OpCallSite> call_sites(const Qwen3Config& cfg, const CudaEngineOptions& opts);
  /// The op-level model dims (config::ModelDims: hidden, heads, eps, RoPE theta, ...) of `cfg`,
  /// which the toolbox verifies THRIVE kernels with when it tunes them for this engine.
  static config::ModelDims op_dims(const Qwen3Config& cfg);

  /// Loads the checkpoint in `dir` (bf16/fp16/fp32 tensors, converted to bf16), allocates the
  /// weights, KV cache ([layer][B][L][NKV][D] bf16) and activation buffers, compiles the engine
  /// kernels and every kernel of `registry` (which must cover call_sites()). Throws
  /// Error(kUsage) for bad options, Error(kInput) for a bad checkpoint (load_weights' checks),
  /// Error(kBackend) when CUDA, cuBLASLt or a registry kernel is unusable.
  CudaQwen3Engine(const Qwen3Config& cfg, const std::string& dir, const config::Config& run_cfg,
                  const CudaEngineOptions& opts, const KernelRegistry& registry);
  ~CudaQwen3Engine();
  CudaQwen3Engine(const CudaQwen3Engine&) = delete;
  CudaQwen3Engine& operator=(const CudaQwen3Engine&) = delete;

  /// Runs every prompt (one per sequence, 1..max_prompt tokens, ids in [0, vocab)) from
  /// position 0; returns the greedy next token per sequence and, when `logits` is given, the
  /// f32 logits of each sequence's last prompt token [B][vocab]. Resets the cache positions.
  /// Error(kUsage) on a bad id, length or batch.
  std::vector<int32_t> prefill(const std::vector<std::vector<int32_t>>& prompts,
                               std::vector<std::vector<float>>* logits = nullptr);
  /// One decode step: `tokens[b]` at each sequence's next position; returns the greedy next
  /// tokens (and logits [B][vocab] when asked). Error(kUsage) when a sequence would pass
  /// max_context. With graphs on and no stage timing, the step is one CUDA graph replay.
  std::vector<int32_t> decode(const std::vector<int32_t>& tokens, std::vector<std::vector<float>>* logits = nullptr);
  /// Greedy decode of `steps` steps with the host out of the loop: `tokens[b]` goes in at each
  /// sequence's next position, as in decode(), and from then on each step's greedy token is the
  /// next step's input on the device (engine_argmax advances the token ids, positions and
  /// context lengths and appends to a device history), so the host only enqueues the steps (with
  /// graphs on: one graph launch per kGreedyChunk steps, then single-step graphs) and reads the
  /// tokens back once at the end. Returns [steps][B]: the tokens that `steps` decode() calls, each
  /// fed the last one's result, return (the same kernels and roundings). With stage timing on it
  /// runs decode() step by step. Error(kUsage), before any GPU work: tokens.size() != batch, an
  /// id outside [0, vocab), steps < 0, or a sequence whose position + steps passes max_context.
  /// Error(kBackend) after the steps when a step had a sequence with no finite logit (the greedy
  /// token -1, which decode() returns and then refuses as input; the positions have advanced).
  std::vector<std::vector<int32_t>> decode_greedy(const std::vector<int32_t>& tokens, int64_t steps);
  /// Decode steps per CUDA graph in decode_greedy.
  static constexpr int kGreedyChunk = 8;
  /// Captures the CUDA graphs decode_greedy(…, steps) will replay and uploads them to the device
  /// (no decode step runs), so that a timed call includes neither. No-op with graphs off or stage
  /// timing on. Error(kBackend) when a capture fails, Error(kDevice) on a device fault.
  void prepare_decode_greedy(int64_t steps);

  /// Stage timing: when on, events are recorded on the stream between stages (and decode does
  /// not use the graph), and each step's GPU intervals accumulate into stages(), µs.
  void set_stage_timing(bool on) { stage_timing_ = on; }
  const StageTimes& stages() const { return stages_; }
  void reset_stages() { stages_ = StageTimes{}; }
  /// Bytes this engine allocated on the device (weights, KV cache, activations, workspaces).
  int64_t allocated_bytes() const { return allocated_; }
  /// NaN or infinite logits the greedy argmax has skipped since construction, summed over rows
  /// and steps (prefill, decode and decode_greedy): it chooses among each row's finite logits, as
  /// CpuQwen3Engine::greedy does (which also names the first; this count comes from the device,
  /// where no position is kept). Reads a device counter: waits for the stream's work.
  int64_t nonfinite_logits() const;
  /// Device memory in use on the whole GPU, bytes (driver's total - free), -1 if unknown.
  int64_t device_memory_used() const;
  /// Rows whose exact logit the screened lm_head computed, summed over every screened greedy
  /// call and sequence since the engine was built (0 without CudaEngineOptions::lm_head_screen):
  /// divided by the screened tokens, the bf16 rows read per token besides the int8 copy.
  int64_t screened_exact_rows() const;
  /// EC12 (CudaEngineOptions::persistent_ec12): bytes of the packed copies on the device, and
  /// weights held in patch words; 0 when the kernel streams bf16.
  int64_t ec12_bytes() const;
  int64_t ec12_patches() const;
  /// Why EC12 was asked for and is off: the first matrix and slice that did not fit ("" otherwise).
  const std::string& ec12_fallback() const;
  /// The device's bf16 matrix rate, TFLOP/s: the best of 10 cuBLASLt GEMMs of 4096^3 (f32
  /// accumulation), the compute side of the stage floors (model/attribution.hpp).
  double measure_gemm_tflops();
  /// Which kernel runs at each call site.
  const KernelRegistry& registry() const { return registry_; }
  const backend::DeviceInfo& device() const;
  /// The options the engine runs with (after the head-dim and alignment fallbacks).
  const CudaEngineOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  KernelRegistry registry_;
  StageTimes stages_;
  bool stage_timing_ = false;
  void start_decode(const std::vector<int32_t>& tokens, int64_t steps, const char* what, bool upload);
  int64_t allocated_ = 0;
};

}  // namespace thrive::model
