// Qwen3 decoder: configuration (Hugging Face config.json), checkpoint layout, random-weight
// checkpoints, and the float32 CPU engine (the reference path of issue 6).
//
// Architecture (transformers' Qwen3ForCausalLM): token embedding; per layer
//   h = x + O( attn( RoPE(q_norm(Q(n1))), RoPE(k_norm(K(n1))), V(n1) ) ),  n1 = RMSNorm(x)
//   y = h + down( silu(gate(n2)) * up(n2) ),                               n2 = RMSNorm(h)
// final RMSNorm, lm_head (tied to the embedding when tie_word_embeddings). RMSNorm(x) =
// x / sqrt(mean(x^2) + eps) * w, in float32; q_norm/k_norm normalize each head (head_dim);
// RoPE is the neox form: the two halves of a head rotate together, angle = pos * theta^(-2i/D);
// attention is causal GQA with scale 1/sqrt(head_dim); query head h reads KV head h / (NQ/NKV).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "thrive/model/safetensors.hpp"

namespace thrive::model {

/// Model dimensions and constants, with Hugging Face's config.json field names in comments.
struct Qwen3Config {
  int64_t hidden = 0;        ///< hidden_size
  int64_t intermediate = 0;  ///< intermediate_size
  int64_t layers = 0;        ///< num_hidden_layers
  int64_t heads = 0;         ///< num_attention_heads
  int64_t kv_heads = 0;      ///< num_key_value_heads
  int64_t head_dim = 0;      ///< head_dim
  int64_t vocab = 0;         ///< vocab_size
  int64_t max_position = 0;  ///< max_position_embeddings
  double rope_theta = 1e6;   ///< rope_theta
  double rms_eps = 1e-6;     ///< rms_norm_eps
  bool tie_embeddings = true;  ///< tie_word_embeddings

  /// "qwen3-1.7b" (Qwen/Qwen3-1.7B's config.json: hidden 2048, intermediate 6144, 28 layers,
  /// 16/8 heads of 128, vocab 151936, theta 1e6, eps 1e-6, tied) or "tiny" (hidden 64,
  /// intermediate 128, 2 layers, 4/2 heads of 16, vocab 256). Error(kUsage) otherwise.
  static Qwen3Config preset(const std::string& name);
  /// Reads DIR/config.json, as transformers 4.51 onwards writes it (top-level "rope_theta" and
  /// "rope_scaling") or transformers 5 does ("rope_parameters": {"rope_type", "rope_theta"}).
  /// Required: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
  /// num_key_value_heads, head_dim, vocab_size and the RoPE base. Optional, with transformers'
  /// Qwen3Config defaults: rms_norm_eps 1e-6, max_position_embeddings 32768,
  /// tie_word_embeddings false. Error(kInput) naming the file and field when it is missing,
  /// malformed, of another architecture (architectures must hold "Qwen3ForCausalLM" or
  /// model_type be "qwen3"), inconsistent (heads not a multiple of kv_heads, odd head_dim, two
  /// RoPE bases that disagree), or asks for what this engine does not implement: a RoPE scaling
  /// other than rope_type "default" (YaRN, linear, dynamic), sliding-window layers
  /// (use_sliding_window true, layer_types other than "full_attention"), attention bias, or an
  /// activation other than "silu". A config.json over kMaxConfigJsonBytes is refused unread.
  static Qwen3Config load(const std::string& dir);
  /// The largest config.json load() reads: a real one is a few KiB, and parsing a file takes
  /// about 20 times its size in memory.
  static constexpr uintmax_t kMaxConfigJsonBytes = uintmax_t(4) << 20;
  /// config.json content (HF field names; architectures, model_type, torch_dtype "bfloat16").
  nlohmann::json to_json() const;
  /// Checks ranges and divisibility; Error(kInput) prefixed with `where`.
  void validate(const std::string& where) const;

  /// Every tensor of a checkpoint in HF names and shapes ([out, in] for projections), in
  /// file order, with dtype `dtype`.
  std::vector<StTensorInfo> tensor_layout(StDtype dtype) const;
  /// Parameter count (tied lm_head counted once).
  int64_t parameters() const;
};

/// Writes DIR/config.json and DIR/model.safetensors with random weights: projections and the
/// embedding N(0, 0.02^2) (HF's initializer_range), norm weights 1 + N(0, 0.1^2) so a wrong norm
/// is visible, all rounded to `dtype`. Deterministic in `seed`. Streams tensor by tensor into
/// temporary files beside the two (StagedFile), then renames both into place, after checking
/// neither name holds a directory, FIFO or device. With `replace` an existing config.json or
/// model.safetensors (or a symlink in their place: the link, never its target) is replaced,
/// the old weights kept aside until config.json is in place (a failed rename puts them back);
/// without it, either existing is Error(kStorage). Error(kStorage) when the directory cannot be
/// written.
void init_checkpoint(const Qwen3Config& cfg, const std::string& dir, uint64_t seed,
                     StDtype dtype = StDtype::kBF16, bool replace = true);

/// float32 weights of one layer, HF layout ([out, in] row-major for projections).
struct Qwen3LayerWeights {
  std::vector<float> input_norm, q, k, v, o, q_norm, k_norm, post_norm, gate, up, down;
};
struct Qwen3Weights {
  std::vector<float> embed, final_norm, lm_head;  ///< lm_head empty when tied
  std::vector<Qwen3LayerWeights> layers;
};
/// Error(kInput) naming the directory and tensor unless the checkpoint fits what this engine
/// runs: exactly cfg.layers decoder layers (model.layers.{L-1} present, model.layers.{L}
/// absent) and no bias tensor (`*.bias`: Qwen3's projections are bias-free; Qwen2's q/k/v
/// biases would otherwise be dropped silently), and every tensor of cfg.tensor_layout present with
/// the shape config.json implies and a dtype the engine reads, BF16, F16 or F32 (the headers
/// only: no weight is read; a tensor outside the layout may have any safetensors dtype). The layer count is checked
/// first, so the tensor layout of an absurd num_hidden_layers is never built. Any tensor of a layer
/// at or past cfg.layers is an Error(kInput) naming it and its file; any other tensor outside the
/// layout is named in a warning (spdlog) and ignored.
void check_checkpoint_fits(const Checkpoint& ck, const Qwen3Config& cfg, const std::string& dir);
/// Loads and checks every tensor of `cfg.tensor_layout` from the checkpoint directory: a missing
/// tensor, or one whose shape differs or whose dtype is not BF16/F16/F32, is an Error(kInput)
/// naming the tensor, the file, the shape found and the shape expected; a file that changed while
/// it was read (SafetensorsFile::check_unchanged) is one too. Opens the directory and runs
/// check_checkpoint_fits first.
Qwen3Weights load_weights(const Qwen3Config& cfg, const std::string& dir);
/// The same from a checkpoint already opened and passed by check_checkpoint_fits(ck, cfg, ...)
/// (a caller that checks before other limits, as e2e does, opens and checks it once).
Qwen3Weights load_weights(const Qwen3Config& cfg, const Checkpoint& ck);
/// One tensor of an open checkpoint as float32, after checking its shape against `want` (the
/// config's layout): Error(kInput) naming the tensor, file, shape found and shape expected, or
/// naming the tensor, file and count when it holds NaN or infinite values.
std::vector<float> load_tensor_f32(const Checkpoint& ck, const StTensorInfo& want);

/// The CPU engine's float32 matrix rate, GFLOP/s: the best of 5 runs of its own projection
/// routine (OpenMP over output features) on a 256 x 1024 x 1024 product.
double cpu_gemm_gflops();

/// Accumulated time per stage, µs, and how many times each ran.
struct StageTimes {
  std::map<std::string, double> us;
  std::map<std::string, int64_t> calls;
  void add(const std::string& stage, double t_us) {
    us[stage] += t_us;
    calls[stage] += 1;
  }
  double total_us() const;
};

/// The float32 CPU engine's default KV-cache limit (bytes): 16 GiB.
constexpr int64_t kCpuMaxCacheBytes = int64_t(16) << 30;
/// Throws Error(kUsage), naming batch, context and the bytes needed, when the CPU engine's float32
/// KV cache (2 x batch x layers x max_context x kv_heads x head_dim x 4 bytes) would exceed
/// `max_cache_bytes`, or batch < 1, or max_context is not in [1, max_position_embeddings]. The e2e
/// command calls it before it builds prompts or loads weights; the engine's constructor again.
void check_cpu_kv_cache(const Qwen3Config& cfg, int64_t batch, int64_t max_context,
                        int64_t max_cache_bytes = kCpuMaxCacheBytes);
/// The KV-cache positions a sequence uses when a run generates `gen` tokens after a `prompt`-token
/// prompt: prompt + gen - 1. The first token comes from prefill, each of the gen - 1 decode steps
/// feeds one back, and the last generated token never is (prompt alone for gen <= 1). The e2e
/// harness, the outer loop and the CPU memory estimate size and check contexts by it.
int64_t decode_context(int64_t prompt, int64_t gen);
/// Throws Error(kUsage) "--prompt P --gen G: a context of N positions (...), more than
/// max_position_embeddings M" when decode_context(prompt, gen) passes cfg.max_position: the
/// e2e harness's and the outer loop's check, before any work.
void check_decode_context(const Qwen3Config& cfg, int64_t prompt, int64_t gen);
/// Bytes of the CPU engine's float32 KV cache, K and V: 2 x batch x layers x max_context x
/// kv_heads x head_dim x 4, as a double (exact below 2^53; no overflow for any int64 inputs).
double cpu_kv_cache_bytes(const Qwen3Config& cfg, int64_t batch, int64_t max_context);
/// Bytes this process can allocate now: /proc/meminfo's MemAvailable (kB x 1024, the kernel's
/// estimate without swapping), or, where lower, the least room of any limited memory cgroup from
/// the process's own (/proc/self/cgroup) up to the root: its limit less its working set, usage
/// less inactive file pages (page cache the kernel reclaims first). cgroup v2: memory.max,
/// memory.current, memory.stat's inactive_file; v1: memory.limit_in_bytes,
/// memory.usage_in_bytes, total_inactive_file. -1 where nothing can be read. `root`, ending in
/// '/', prefixes every path read (tests point it at a fake tree).
int64_t host_available_bytes(const std::string& root = "/");
/// The CPU engine's host memory for a run, in bytes (doubles: no overflow for any int64 inputs).
struct CpuEngineBytes {
  double weights = 0;      ///< float32 weights: 4 x parameters()
  double kv_cache = 0;     ///< cpu_kv_cache_bytes(batch, decode_context(prompt, gen))
  double logits = 0;       ///< batch x vocab x 4 for prefill's kept rows, twice that with gen > 1 (a decode step's)
  double activations = 0;  ///< one sequence's prefill buffers: prompt x (3 H + 2 NQ D + 2 NKV D + 2 I) x 4
  double total() const { return weights + kv_cache + logits + activations; }
};
/// What CpuQwen3Engine and the e2e harness hold for batch sequences of `prompt` tokens plus `gen`.
CpuEngineBytes cpu_engine_bytes(const Qwen3Config& cfg, int64_t batch, int64_t prompt, int64_t gen);
/// Throws Error(kUsage), naming each part of cpu_engine_bytes in GB and the bytes available,
/// when their total exceeds `available_bytes` (host_available_bytes(); negative: unknown, no
/// check). Linux overcommits memory, so such a run would not get bad_alloc but be killed by the
/// OOM killer mid-run. The e2e command calls it before the weights load.
void check_cpu_host_memory(const Qwen3Config& cfg, int64_t batch, int64_t prompt, int64_t gen, int64_t available_bytes);

/// The float32 CPU engine: batched prefill and decode over a contiguous per-sequence KV cache
/// ([layer][position][kv_head][head_dim], float32), OpenMP across output features.
class CpuQwen3Engine {
 public:
  /// Throws Error(kUsage) when batch < 1 or max_context < 1 or the KV cache (bytes named) does
  /// not fit in `max_cache_bytes`.
  CpuQwen3Engine(Qwen3Config cfg, Qwen3Weights weights, int batch, int64_t max_context,
                 int64_t max_cache_bytes = kCpuMaxCacheBytes);
  /// Runs every prompt (one per sequence, lengths may differ, each >= 1 token, ids in
  /// [0, vocab)) from position 0 and returns the logits of each sequence's last prompt token,
  /// [batch][vocab]. Resets the cache. Error(kUsage) on a bad id, length or batch mismatch.
  std::vector<std::vector<float>> prefill(const std::vector<std::vector<int32_t>>& prompts);
  /// One decode step: `tokens[b]` at each sequence's next position; returns [batch][vocab].
  /// Error(kUsage) when a sequence would pass max_context.
  std::vector<std::vector<float>> decode(const std::vector<int32_t>& tokens);
  /// Greedy choice per row (row b is sequence b): the largest finite logit (lowest index on
  /// ties), timed as the "sampling" stage. Error(kInput) for a row with no finite logit
  /// (overflowing weights), naming the layer and position where that sequence's hidden state
  /// first held a NaN or infinity since its prefill, or the final norm / lm_head where none did.
  /// A row with some non-finite logits but a finite one is chosen from its finite ones (where
  /// transformers' argmax would pick the NaN) and counted: nonfinite_logits().
  std::vector<int32_t> greedy(const std::vector<std::vector<float>>& logits);
  /// NaN or infinite logits greedy() has skipped in rows it could choose from, since construction,
  /// and the first of them ("sequence B's logit I at greedy call C", C = 0 for prefill's), or "".
  int64_t nonfinite_logits() const { return nonfinite_logits_; }
  const std::string& first_nonfinite_logit() const { return first_nonfinite_; }

  const StageTimes& stages() const { return stages_; }
  void reset_stages() { stages_ = StageTimes{}; }
  int64_t cache_bytes() const { return int64_t(k_cache_.size() + v_cache_.size()) * 4; }
  const Qwen3Config& config() const { return cfg_; }

  /// System knobs the outer loop's specialists change (results are bit-identical either way):
  /// `threads`: most threads a projection (GEMM) uses, 0 = hardware_concurrency; `fuse`: the
  /// residual add after the MLP and the next layer's input RMSNorm in one pass.
  void set_threads(int threads) { threads_ = threads; }
  void set_fuse_residual_norm(bool fuse) { fuse_residual_norm_ = fuse; }

 private:
  // Runs `n` new tokens of sequence `b` starting at position pos_[b]; returns the final
  // hidden state's logits of the last one.
  std::vector<float> forward(int b, const int32_t* tokens, int64_t n);

  Qwen3Config cfg_;
  Qwen3Weights w_;
  int batch_;
  int64_t max_context_;
  std::vector<int64_t> pos_;
  // per sequence: where its residual stream first held a NaN or infinity since prefill
  // ("after layer L (model.layers.L.*) at position P"), empty while it is finite
  std::vector<std::string> overflow_;
  std::vector<float> k_cache_, v_cache_;  // [batch][layer][max_context][kv_heads][head_dim]
  std::vector<float> inv_freq_;
  StageTimes stages_;
  int threads_ = 0;
  bool fuse_residual_norm_ = false;
  int64_t nonfinite_logits_ = 0, greedy_calls_ = 0;
  std::string first_nonfinite_;
};

}  // namespace thrive::model
