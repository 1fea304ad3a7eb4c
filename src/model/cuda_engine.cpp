// The CUDA Qwen3 engine: see include/thrive/model/cuda_engine.hpp for the data flow.
#include "thrive/model/cuda_engine.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "src/model/cublaslt.hpp"
#include "thrive/backend/embedded.hpp"
#include "thrive/core/error.hpp"
#include "thrive/model/lm_head_screen.hpp"
#include "thrive/model/weight_coding.hpp"
#include "thrive/ops/dtype.hpp"

namespace thrive::model {
namespace {

constexpr int64_t kLtWorkspaceBytes = int64_t(32) << 20;  // cuBLASLt's Hopper heuristics use 32 MiB

config::ModelDims model_dims(const Qwen3Config& c) {
  config::ModelDims m;
  m.hidden = c.hidden;
  m.intermediate = c.intermediate;
  m.num_heads = c.heads;
  m.num_kv_heads = c.kv_heads;
  m.head_dim = c.head_dim;
  m.vocab = c.vocab;
  m.max_position = c.max_position;
  m.rope_theta = c.rope_theta;
  m.rms_eps = c.rms_eps;
  return m;
}

// The engine kernels' launch plans (block, grid, dynamic shared memory over the symbols each
// call passes).
struct EngineKernel {
  const char* entry;
  const char* block;
  const char* grid;
  const char* grid_y = "1";
  const char* grid_z = "1";
  const char* smem = "0";
};
constexpr EngineKernel kEngineKernels[] = {
    {"engine_embed", "256", "T"},
    {"engine_rmsnorm", "256", "R"},
    {"engine_qk_norm_split", "256", "cdiv(T*(NQ+2*NKV),8)"},
    {"engine_kv_write", "256", "T"},
    {"engine_qk_norm_rope_kv", "256", "cdiv(T*(NQ+NKV),8)"},
    {"engine_causal_softmax", "256", "B*P"},
    {"engine_flash_attention_d16", "128", "cdiv(P,64)", "NQ", "B"},
    {"engine_flash_attention_d32", "128", "cdiv(P,64)", "NQ", "B"},
    {"engine_flash_attention_d64", "128", "cdiv(P,64)", "NQ", "B"},
    {"engine_flash_attention_d128", "128", "cdiv(P,64)", "NQ", "B"},
    {"engine_gemv", "256", "cdiv(N,8)"},
    {"engine_gemv_residual", "256", "cdiv(N,8)"},
    {"engine_gemv_norm", "256", "cdiv(N,8)", "1", "1", "T*K*2"},
    {"engine_gemv_swiglu", "256", "cdiv(N,8)", "1", "1", "T*K*2"},
    {"engine_gemv_swiglu_residual", "256", "cdiv(N,8)", "1", "1", "T*K*2"},
    {"engine_gemv_r2", "256", "cdiv(N,16)"},
    {"engine_gemv_residual_r2", "256", "cdiv(N,16)"},
    {"engine_gemv_norm_r2", "256", "cdiv(N,16)", "1", "1", "T*K*2"},
    {"engine_gemv_swiglu_r2", "256", "cdiv(N,16)", "1", "1", "T*K*2"},
    {"engine_gemv_swiglu_residual_r2", "256", "cdiv(N,16)", "1", "1", "T*K*2"},
    {"engine_decode_attention_g1", "128", "S", "NKV", "B"},
    {"engine_decode_attention_g2", "128", "S", "NKV", "B"},
    {"engine_decode_attention_g4", "128", "S", "NKV", "B"},
    {"engine_decode_attention_g8", "128", "S", "NKV", "B"},
    {"engine_decode_attention_qk_g1", "128", "S", "NKV", "B"},
    {"engine_decode_attention_qk_g2", "128", "S", "NKV", "B"},
    {"engine_decode_attention_qk_g4", "128", "S", "NKV", "B"},
    {"engine_decode_attention_qk_g8", "128", "S", "NKV", "B"},
    {"engine_decode_layers_g1", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_g2", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_g4", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_g8", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_g1_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_g2_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_g4_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_g8_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_g1_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_g2_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_g4_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_g8_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_um_g1_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_um_g2_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_um_g4_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_um_g8_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_um_g1_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_um_g2_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_um_g4_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_tc_um_g8_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_g1", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_g2", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_g4", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_g8", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_g1_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_g2_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_g4_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_g8_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_g1_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_g2_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_g4_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_g8_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_um_g1_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_um_g2_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_um_g4_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_um_g8_d64", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_um_g1_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_um_g2_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_um_g4_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_decode_layers_ec12_tc_um_g8_d128", "512", "P", "1", "1", "SMEM"},
    {"engine_gather_rows", "256", "R"},
    {"engine_argmax", "256", "G", "R"},
    {"engine_lm_head_screen", "512", "GR", "1", "1", "SMEM"},
    {"engine_argmax_screened", "256", "G", "R", "1", "SMEM"},
};
// Engine kernels that call engine_pdl_wait() before touching anything an earlier kernel wrote,
// so they may be launched with programmatic dependent launch (CudaEngineOptions::pdl).
bool pdl_safe(const std::string& entry) {
  return entry.rfind("engine_gemv", 0) == 0 || entry == "engine_rmsnorm" || entry == "engine_qk_norm_rope_kv" ||
         entry == "engine_argmax" || entry == "engine_lm_head_screen" || entry == "engine_argmax_screened" ||
         entry.rfind("engine_decode_attention_", 0) == 0 ||
         entry.rfind("engine_decode_layers_", 0) == 0;
}
// The screened lm_head's screening kernel (engine_lm_head_screen, one 512-thread block a SM): its
// dynamic shared memory is h's fragments (screen_hidden_padded x 16 bytes), h (batch x hidden
// bf16, rounded up to 16 bytes) and a ring of stages, each a slab of up to `slab` 32-column
// chunks of a 16-row group (512 bytes a chunk) and 256 bytes of the group's scales and
// coefficients.
constexpr int64_t kScreenMaxStages = 8;
int64_t screen_stage_bytes(int64_t hidden, int64_t slab) {
  return std::min<int64_t>(screen_hidden_padded(hidden) / 32, slab) * 512 + 256;
}
int64_t screen_fixed_bytes(int64_t batch, int64_t hidden) {
  return screen_hidden_padded(hidden) * 16 + (batch * hidden * 2 + 15) / 16 * 16;
}
// The ring: the largest slab (64, 32 or 16 chunks) of which 2 stages fit `room` bytes of shared
// memory a block beside `static_bytes`, and as many of its stages as fit, at most kScreenMaxStages
// ({0, 0} when none does: hidden past about 6,300 at batch 8).
struct ScreenLayout {
  int64_t slab = 0, stages = 0;
};
ScreenLayout screen_layout(int64_t batch, int64_t hidden, int64_t room, int64_t static_bytes) {
  for (const int64_t slab : {64, 32, 16}) {
    const int64_t n = (room - static_bytes - screen_fixed_bytes(batch, hidden)) / screen_stage_bytes(hidden, slab);
    if (n >= 2) return {slab, std::min(n, kScreenMaxStages)};
  }
  return {};
}
int64_t screen_smem_bytes(int64_t batch, int64_t hidden, const ScreenLayout& l) {
  return screen_fixed_bytes(batch, hidden) + l.stages * screen_stage_bytes(hidden, l.slab);
}
// The screening kernel's static shared memory is about 9.4 KiB (its cross-warp sums and per-token
// constants); before it is compiled the engine assumes at most this much.
constexpr int64_t kScreenStaticBound = 12 * 1024;
// The screened lm_head's stats buffer (the kernels' layout: f32 nh [8], f32 dh [8], u32 lbmax [8],
// then the u64 count of exact rows) and engine_argmax_screened's table of 4 device pointers.
constexpr int64_t kScreenStatsBytes = 128, kScreenExactRowsAt = 96, kScreenTableBytes = 32;
// Blocks per row of the greedy argmax: about 2048 logits a block (8 per thread), at most 1024.
int64_t argmax_blocks(int64_t vocab) { return std::min<int64_t>(1024, (vocab + 2047) / 2048); }

// The GEMV path's limits (kernels/cuda/engine/qwen3_engine.cu): at most 4 tokens, 16-byte rows;
// the fused SwiGLU stages T x intermediate bf16 in the 48 KiB of static-limit shared memory.
constexpr int64_t kGemvMaxTokens = 4;
constexpr int64_t kSmemLimitBytes = 48 * 1024;
// The longest context the engine takes (CudaQwen3Engine's constructor checks it).
constexpr int64_t kMaxContext = int64_t{1} << 30;

bool flash_supported(const Qwen3Config& c) {
  return c.head_dim == 16 || c.head_dim == 32 || c.head_dim == 64 || c.head_dim == 128;
}
// engine_decode_attention: a key row in 16-byte pieces over a power-of-two number of lanes <= 32,
// and a template for the GQA group size.
bool decode_attention_supported(const Qwen3Config& c) {
  const int64_t lanes = c.head_dim / 8, g = c.heads / c.kv_heads;
  return c.head_dim % 8 == 0 && lanes >= 1 && lanes <= 32 && (lanes & (lanes - 1)) == 0 &&
         (g == 1 || g == 2 || g == 4 || g == 8);
}
// With fuse_qk_rope_kv (and head_dim >= 16: the rotation pairs lanes) decode attention does the
// q/k norm, RoPE and KV-cache write itself: the _qk entry, no q/k kernel at decode.
bool decode_attention_fuses_qk(const Qwen3Config& c, const CudaEngineOptions& o) {
  return o.engine_decode_attention && o.fuse_qk_rope_kv && c.head_dim >= 16;
}
std::string decode_attention_entry(const Qwen3Config& c, const CudaEngineOptions& o) {
  return std::string(decode_attention_fuses_qk(c, o) ? "engine_decode_attention_qk_g" : "engine_decode_attention_g") +
         std::to_string(c.heads / c.kv_heads);
}
// Its splits along the context: about 32 keys a block (one round of loads per key slot), at most 64.
int64_t decode_attention_splits(int64_t max_context) { return std::clamp<int64_t>((max_context + 31) / 32, 1, 64); }
// engine_decode_layers (kernels/cuda/engine/qwen3_engine.cu): weight tiles of 16 rows x 1024
// columns bf16 (32 KiB) in a ring of at most 8 stages, after a head (128 bytes: ctx_lens, then the GEMV's
// cross-warp sums: two buffers of 16 warps x 16 rows x 4 tokens f32, 8 KiB), the per-layer
// pointer table (decode_layers_table_bytes), the attention constants (decode_layers_const_bytes) and a region
// that holds either the GEMV input (T x the widest K rounded up to 64, bf16) or kDlAttnGroups 128-thread attention
// groups' EngineAttentionSmem<G> (float ml[128][G][2], float acc[1024 G], bool last, 16-byte aligned: 5120 G + 16 bytes).
// With 0 stages in the options, kDlAutoStages or as many as fit if fewer. On the H200 (2026-12-04,
// bench/results/h200-lm-head-2026-12-04/ run 3, three rounds alternating in one call, Qwen3-1.7B,
// prompt 512): batch 1 decoded a step in 1.349-1.351 ms with 5 stages against 1.392-1.396 with 6
// (as many as fit there; the attention stage 10.2-10.4 against 11.5-11.8 µs a layer, the GEMVs
// the same) and 1.403-1.404 with 4; batch 4 in 1.754-1.755 with 5 (as many as fit) against
// 1.788-1.789 with 4. Run 2, a call before it, gave batch 1 1.350 with 5, 1.391-1.393 with 6 and
// 1.404 with 4. (On 2026-12-01, with an earlier kernel, 6 stages took 1.65 ms against 1.72 with
// 2.) More can be asked for (CudaEngineOptions::persistent_stages), up to kDlMaxStages.
constexpr int64_t kDlTileBytes = 32 * 1024, kDlMaxStages = CudaEngineOptions::kMaxPersistentStages, kDlAutoStages = CudaEngineOptions::kAutoPersistentStages,
                  kDlHeadBytes = 128 + 8192;  // the kernel's kDlHead (ctx_lens) and kDlReduceBytes
// With EC12 tiles (CudaEngineOptions::persistent_ec12): kEc12TileBytes a stage, and the kernel's
// per-warp patch sums after the ring (kDlPkPatchBytes: 16 warps x 16 rows x 4 tokens f32).
constexpr int64_t kDlPkPatchBytes = 16 * 16 * 4 * 4;
int64_t decode_layers_tile_bytes(const CudaEngineOptions& o) { return o.persistent_ec12 ? kEc12TileBytes : kDlTileBytes; }
// The kernel's kDlAttnGroups: attention groups a block (128 threads for the CUDA-core parts, 256
// for the tensor-core parts), one part each at a time.
constexpr int64_t kDlAttnGroups = 2;
// The per-layer pointer table: 9 device pointers a layer (the kernel's kDlTableCols, in the order
// the engine uploads them below), rounded up to 128 bytes.
constexpr int64_t kDlTableCols = 9;
int64_t decode_layers_table_bytes(const Qwen3Config& c) { return (c.layers * kDlTableCols * 8 + 127) / 128 * 128; }
// The attention stage's constants in shared memory (the kernel's engine_dl_rope_bytes and
// engine_dl_qknorm_bytes): the t sequences' cos_sin rows (f32 [t, head_dim]) and one layer's
// q_norm | k_norm (bf16 [2 head_dim]), each rounded up to 128 bytes.
int64_t decode_layers_const_bytes(const Qwen3Config& c, int64_t t) {
  return (t * c.head_dim * 4 + 127) / 128 * 128 + (2 * c.head_dim * 2 + 127) / 128 * 128;
}
int64_t decode_layers_region(const Qwen3Config& c, int64_t t) {
  const int64_t kmax = std::max({c.hidden, c.heads * c.head_dim, c.intermediate}), g = c.heads / c.kv_heads;
  // the GEMV input's rows are padded to 64 columns (fragment order: engine_xs_store8 in the kernel)
  return (std::max(t * ((kmax + 63) / 64 * 64) * 2, kDlAttnGroups * (5120 * g + 16)) + 127) / 128 * 128;
}
// The persistent kernel's attention parts on tensor cores (engine_dl_attention_part_tc): head
// dims 64 and 128; 8 warps a part, 8 keys a warp's tile.
bool decode_layers_tc_supported(const Qwen3Config& c) { return c.head_dim == 64 || c.head_dim == 128; }
constexpr int64_t kDlTcKeysPerPart = 64;
// The persistent kernel's entry: engine_decode_layers_g<G> (CUDA-core attention parts),
// engine_decode_layers_tc_g<G>_d<head_dim>, or engine_decode_layers_tc_um_g<G>_d<head_dim> (the
// tensor-core parts with the unified max); with EC12 weight tiles "engine_decode_layers_ec12" in
// place of "engine_decode_layers".
std::string decode_layers_entry(const Qwen3Config& c, const CudaEngineOptions& o) {
  const std::string g = std::to_string(c.heads / c.kv_heads), base = o.persistent_ec12 ? "engine_decode_layers_ec12" : "engine_decode_layers";
  if (!o.persistent_tc_attention) return base + "_g" + g;
  return base + (o.persistent_unified_max ? "_tc_um_g" : "_tc_g") + g + "_d" + std::to_string(c.head_dim);
}
// Attention splits of the persistent kernel: at most kDlAttnGroups parts per block over B x NKV
// (sequence, KV head) pairs (its parallel merge needs every part of a pair running at once), and
// no more than the context in parts of the parts' key count: the CUDA-core parts take the layered
// path's splits (about 32 keys a part: fewer partial results to merge; with two groups a block, 18 splits instead of 33 at
// prompt 512 measured 0.08 ms a step faster on the H200, 2026-12-01), the tensor-core parts about
// 64 (one 8-key tile a warp); at most 64. `requested` > 0 (CudaEngineOptions::persistent_splits)
// replaces the count by keys, under the same cap.
int64_t decode_layers_splits(int64_t blocks, int64_t b, int64_t nkv, int64_t max_context, bool tc, int64_t requested) {
  const int64_t by_keys = tc ? (max_context + kDlTcKeysPerPart - 1) / kDlTcKeysPerPart : decode_attention_splits(max_context);
  return std::clamp<int64_t>(std::min(kDlAttnGroups * blocks / (b * nkv), requested > 0 ? requested : by_keys), 1, 64);
}
// engine_decode_layers' workspace (kernels/cuda/engine/qwen3_engine.cu): stage counters u32 [5
// layers + 1] and the launch epoch u32, padded to 256 bytes; then the tagged words (u64, 32 bits
// of data each): the attention parts' (max, sum) pairs and accumulators, the qkv rows and the
// attention output (two bf16 a word).
int64_t decode_layers_counter_bytes(int64_t layers) { return ((5 * layers + 2) * 4 + 255) / 256 * 256; }
int64_t decode_attention_counter_bytes(int64_t b, int64_t nkv) { return (b * nkv * 4 + 255) / 256 * 256; }
int64_t decode_attention_ws_bytes(const Qwen3Config& c, int64_t b, int64_t splits) {
  const int64_t parts = b * c.kv_heads * splits * (c.heads / c.kv_heads);
  return decode_attention_counter_bytes(b, c.kv_heads) + parts * 2 * 4 + parts * c.head_dim * 4;
}
// Then (16-byte aligned) the unified-max sums: two buffers of b x heads x (head_dim + 1) f32,
// each rounded up to 4 floats (the kernel's engine_dl_um and engine_dl_um_floats).
int64_t decode_layers_um_floats(const Qwen3Config& c, int64_t b) { return (b * c.heads * (c.head_dim + 1) + 3) / 4 * 4; }
int64_t decode_layers_ws_bytes(const Qwen3Config& c, int64_t b, int64_t splits) {
  const int64_t parts = b * c.kv_heads * splits * (c.heads / c.kv_heads), qkv = (c.heads + 2 * c.kv_heads) * c.head_dim;
  const int64_t tagged = decode_layers_counter_bytes(c.layers) + parts * (2 + c.head_dim) * 8 + b * qkv / 2 * 8 +
                         b * c.heads * c.head_dim / 2 * 8;
  return (tagged + 15) / 16 * 16 + 2 * decode_layers_um_floats(c, b) * 4;
}
bool gemv_supported(const Qwen3Config& c) {
  return c.hidden % 8 == 0 && c.intermediate % 8 == 0 && (c.heads * c.head_dim) % 8 == 0;
}
bool gemv_at(const CudaEngineOptions& o, int64_t t) { return o.gemv && t <= kGemvMaxTokens; }
bool swiglu_fused_at(const Qwen3Config& c, const CudaEngineOptions& o, int64_t t) {
  return gemv_at(o, t) && o.fuse_swiglu_down && t * c.intermediate * 2 <= kSmemLimitBytes;
}
// RMSNorm inside the qkv and gate|up GEMVs, residual adds inside the o and down GEMVs.
bool norm_fused_at(const Qwen3Config& c, const CudaEngineOptions& o, int64_t t) {
  return gemv_at(o, t) && o.fuse_norm_residual && t * c.hidden * 2 <= kSmemLimitBytes;
}
// The persistent kernel off, and the options that only it reads with it.
void persistent_off(CudaEngineOptions& o) {
  o.persistent_decode = false, o.persistent_stages = 0, o.persistent_kv_prefetch = false, o.persistent_tc_attention = false;
  o.persistent_splits = 0, o.persistent_blocks = 0, o.persistent_unified_max = false, o.persistent_ec12 = false;
}
// The options as the engine runs them: a knob the model's dims do not allow is off.
CudaEngineOptions effective(const Qwen3Config& c, CudaEngineOptions o) {
  o.flash_prefill = o.flash_prefill && flash_supported(c);
  o.gemv = o.gemv && gemv_supported(c);
  o.fuse_swiglu_down = o.fuse_swiglu_down && o.gemv;
  o.fuse_norm_residual = o.fuse_norm_residual && o.gemv;
  o.engine_decode_attention = o.engine_decode_attention && o.batch <= kGemvMaxTokens && decode_attention_supported(c);
  o.persistent_decode = o.persistent_decode && o.engine_decode_attention && decode_attention_fuses_qk(c, o) &&
                        swiglu_fused_at(c, o, o.batch) && norm_fused_at(c, o, o.batch);
  o.persistent_tc_attention = o.persistent_tc_attention && o.persistent_decode && decode_layers_tc_supported(c);
  o.persistent_unified_max = o.persistent_unified_max && o.persistent_tc_attention;
  if (!o.persistent_decode) persistent_off(o);
  o.lm_head_screen = o.lm_head_screen && o.batch <= CudaEngineOptions::kMaxScreenBatch && c.hidden % 8 == 0;
  return o;
}
// Engine kernels the options use (the flash entry of the model's head dim only).
bool engine_kernel_used(const std::string& entry, const Qwen3Config& c, const CudaEngineOptions& o) {
  if (entry.rfind("engine_flash_attention_d", 0) == 0)
    return o.flash_prefill && entry == "engine_flash_attention_d" + std::to_string(c.head_dim);
  if (entry.rfind("engine_gemv", 0) == 0) {
    const bool r2 = entry.size() > 3 && entry.compare(entry.size() - 3, 3, "_r2") == 0;
    if (r2 != (o.gemv_rows == 2)) return false;
    const std::string base = r2 ? entry.substr(0, entry.size() - 3) : entry;
    if (base == "engine_gemv" || base == "engine_gemv_swiglu") return o.gemv;
    return o.fuse_norm_residual;
  }
  if (entry == "engine_qk_norm_rope_kv") return o.fuse_qk_rope_kv;
  if (entry == "engine_qk_norm_split" || entry == "engine_kv_write") return !o.fuse_qk_rope_kv;
  if (entry == "engine_causal_softmax") return !o.flash_prefill;
  if (entry.rfind("engine_decode_attention_", 0) == 0)
    return o.engine_decode_attention && entry == decode_attention_entry(c, o);
  if (entry.rfind("engine_decode_layers_", 0) == 0) return o.persistent_decode && entry == decode_layers_entry(c, o);
  if (entry == "engine_lm_head_screen" || entry == "engine_argmax_screened") return o.lm_head_screen;
  return true;
}

void* at(void* base, int64_t elements, int64_t elem_bytes = 2) {
  return static_cast<uint8_t*>(base) + elements * elem_bytes;
}

ops::ShapeCase token_shape(const std::string& op, const Qwen3Config& c, int64_t t, int64_t max_context) {
  ops::Shape s{{"T", t}};
  if (op == "rmsnorm_residual") s["H"] = c.hidden;
  if (op == "swiglu_act") s["I"] = c.intermediate, s["I2"] = 2 * c.intermediate;
  if (op == "rope") s["NQ"] = c.heads, s["NKV"] = c.kv_heads, s["D"] = c.head_dim, s["P"] = max_context;
  return {"T=" + std::to_string(t), s};
}

}  // namespace

struct CudaQwen3Engine::Impl {
  Qwen3Config cfg;
  CudaEngineOptions opts;
  config::ModelDims dims;
  std::unique_ptr<backend::Backend> be;
  std::unique_ptr<CublasLt> lt;
  std::vector<void*> allocations;
  int64_t allocated = 0;
  struct Layer {
    void *wqkv, *wo, *wgu, *wdown, *in_norm, *post_norm;
    void *q_norm, *k_norm;  // k_norm = q_norm + head_dim: one [2, D] tensor for the fused kernel
    // the four projections in EC12 for the persistent kernel (weight_coding.hpp), or null
    void *pk_qkv = nullptr, *pk_o = nullptr, *pk_gu = nullptr, *pk_down = nullptr;
  };
  std::vector<Layer> layers;
  void *embed = nullptr, *final_norm = nullptr, *lm_head = nullptr;
  void *k_cache = nullptr, *v_cache = nullptr;
  void *h, *n1, *n2, *qkv, *q, *k, *v, *attn, *o, *gu, *act, *d;
  void *ids, *pos, *seq, *ctx_lens, *last_idx, *last_h, *logits, *next, *scores, *probs, *cos_sin;
  // engine_argmax's per-block (max, index) pairs, and its counters: u64 skipped (non-finite)
  // logits, then u32 per-row arrival counts
  void *argmax_part, *argmax_count;
  // decode's token history: u32 counts [B], then i32 tokens [max_context, B] (engine_argmax's advance)
  void* history = nullptr;
  // engine_decode_attention's workspace: per-(b, g) counters (padded to 256 bytes), part (max, sum)
  // pairs, part accumulators; attn_ws_bytes in all
  void *attn_ws = nullptr, *attn_ml = nullptr, *attn_acc = nullptr;
  int64_t attn_ws_bytes = 0;
  // engine_decode_layers: the per-layer pointer table, its workspace (stage counters | attention),
  // the in-kernel stage timestamps, and its launch (blocks, dynamic shared memory, ring stages,
  // attention splits)
  void *dl_table = nullptr, *dl_ws = nullptr, *dl_stamps = nullptr;
  int64_t dl_ws_bytes = 0, dl_blocks = 0, dl_smem = 0, dl_stages = 0, dl_splits = 0;
  void *op_ws = nullptr, *lt_ws = nullptr;
  int64_t op_ws_bytes = 0;
  // The screened lm_head (lm_head_screen.hpp): the int8 copy, scales, coefficients, the kernels'
  // stats (nh [8], dh [8], lbmax [8], u64 exact rows) and engine_argmax_screened's pointer table;
  // the screening's grid
  void *lh_packed = nullptr, *lh_scale = nullptr, *lh_coef = nullptr, *lh_stats = nullptr, *lh_table = nullptr;
  int64_t lh_blocks = 0;
  ScreenLayout lh_layout;
  std::map<std::string, std::shared_ptr<backend::Module>> engine_modules, op_modules;
  std::string prefill_t_label, decode_t_label, gqa_label;
  // decode's single-step graphs: the screened lm_head's (no logits asked for) and the exact one's
  std::unique_ptr<backend::Backend::Graph> graph, graph_exact;
  // decode_greedy's graph of kGreedyChunk decode steps (the host launches one graph per chunk)
  std::unique_ptr<backend::Backend::Graph> chunk_graph;
  std::unique_ptr<backend::Backend::Timeline> timeline;
  std::vector<std::string> marked;
  bool timing = false;
  std::vector<int64_t> cur;  // next position per sequence

  void* alloc(int64_t bytes) {
    void* p = be->allocate(std::max<int64_t>(bytes, 256));
    allocations.push_back(p);
    allocated += std::max<int64_t>(bytes, 256);
    return p;
  }
  // Gives back a block of `bytes` from alloc() (e.g. EC12 copies the engine stopped using).
  void free_block(void* p, int64_t bytes) {
    if (p == nullptr) return;
    allocations.erase(std::remove(allocations.begin(), allocations.end(), p), allocations.end());
    allocated -= std::max<int64_t>(bytes, 256);
    be->release(p);
  }
  // EC12: weights held in patch words, the packed bytes, and why the engine streams bf16 instead
  // when it was asked for EC12 and a matrix did not fit (empty otherwise)
  int64_t ec12_patches = 0, ec12_bytes = 0;
  std::string ec12_fallback;
  std::vector<std::pair<void*, int64_t>> ec12_blocks;  // the packed copies, for release_ec12
  void release_ec12() {
    for (const auto& [p, bytes] : ec12_blocks) free_block(p, bytes);
    ec12_blocks.clear();
    ec12_patches = ec12_bytes = 0;
  }

  void mark_start() {
    marked.clear();
    if (timing) timeline->mark();
  }
  void done(const char* stage) {
    if (!timing) return;
    timeline->mark();
    marked.emplace_back(stage);
  }

  void engine(const std::string& entry, ops::Shape symbols, std::vector<void*> tensors, std::vector<int64_t> d,
              std::vector<double> scalars = {}, void* workspace = nullptr, int64_t workspace_bytes = 0) {
    backend::LaunchArgs a;
    a.workspace = workspace;
    a.workspace_bytes = workspace_bytes;
    a.symbols = std::move(symbols);
    a.tensors = std::move(tensors);
    a.dims = std::move(d);
    a.scalars = std::move(scalars);
    a.programmatic = opts.pdl && pdl_safe(entry);
    const bool r2 = opts.gemv_rows == 2 && entry.rfind("engine_gemv", 0) == 0;
    if (be->launch(*engine_modules.at(r2 ? entry + "_r2" : entry), a) != 0)
      fail(ErrorCategory::kBackend, "engine kernel {}: {}", entry, be->last_error());
  }

  void op(const std::string& key, const ops::Shape& shape, std::vector<void*> tensors) {
    const auto& o = ops::find_op(key.substr(0, key.find('@')));
    backend::LaunchArgs a;
    a.symbols = shape;
    a.tensors = std::move(tensors);
    a.dims = o.dims(shape);
    a.scalars = o.scalars(shape, dims);
    a.workspace = op_ws;
    a.workspace_bytes = o.workspace_bytes(shape);
    if (a.workspace_bytes > op_ws_bytes)
      fail(ErrorCategory::kInternal, "{}: needs {} workspace bytes, the engine holds {}", key, a.workspace_bytes, op_ws_bytes);
    if (be->launch(*op_modules.at(key), a) != 0)
      fail(ErrorCategory::kBackend, "registry kernel at {}: {}", key, be->last_error());
  }

  // One forward pass over T = nb * p tokens (prefill: p = the longest prompt; decode: p = 1);
  // `screen`: the screened lm_head and its exact pass instead of cuBLASLt's and engine_argmax.
  void forward(int64_t nb, int64_t p, bool prefill, bool screen = false) {
    const auto& c = cfg;
    const int64_t T = nb * p, H = c.hidden, I = c.intermediate, NQ = c.heads, NKV = c.kv_heads, D = c.head_dim;
    const int64_t QKV = (NQ + 2 * NKV) * D, L = opts.max_context, G = NQ / NKV;
    const std::string tkey = prefill ? prefill_t_label : decode_t_label;
    const auto norm_shape = token_shape("rmsnorm_residual", c, T, L).shape;
    const auto act_shape = token_shape("swiglu_act", c, T, L).shape;
    const auto rope_shape = token_shape("rope", c, T, L).shape;
    const ops::Shape gqa_shape{{"B", nb}, {"L", L}, {"NQ", NQ}, {"NKV", NKV}, {"D", D}};
    const double eps = c.rms_eps;
    const bool gemv = gemv_at(opts, T), fused_norm = norm_fused_at(c, opts, T);
    // y[T, n] = x[T, k] . W^T: the GEMV at small T, cuBLASLt otherwise
    auto proj = [&](int64_t n, int64_t k, void* x, void* w, void* y) {
      if (gemv)
        engine("engine_gemv", {{"T", T}, {"N", n}}, {x, w, y}, {T, n, k});
      else
        lt->run({.m = T, .n = n, .k = k, .ldx = k, .ldw = k, .ldy = n}, x, w, y);
    };
    mark_start();
    // y = RMSNorm(h) . W^T, the norm computed inside the GEMV (fused_norm)
    auto norm_proj = [&](int64_t n, void* w, void* norm, void* y) {
      engine("engine_gemv_norm", {{"T", T}, {"N", n}, {"K", H}}, {h, w, y, norm}, {T, n, H}, {eps});
    };
    engine("engine_embed", {{"T", T}}, {ids, embed, h}, {T, H, c.vocab});
    done("embedding");
    if (!fused_norm) {
      engine("engine_rmsnorm", {{"R", T}}, {h, layers[0].in_norm, n1}, {T, H}, {eps});
      done("input_norm");
    }
    const bool persistent = !prefill && opts.persistent_decode;
    if (persistent) {
      engine(decode_layers_entry(c, opts), {{"P", dl_blocks}, {"SMEM", dl_smem}},
             {h, dl_table, qkv, attn, gu, cos_sin, ctx_lens, timing ? dl_stamps : nullptr},
             {T, H, NQ, NKV, D, L, I, c.layers},
             {1.0 / std::sqrt(double(D)), eps,
              double(dl_stages + 16 * int64_t(opts.persistent_kv_prefetch)),
              double(dl_splits)},
             dl_ws, dl_ws_bytes);
      done("decoder_layers");
    }
    for (int64_t l = 0; l < c.layers && !persistent; ++l) {
      const auto& W = layers[size_t(l)];
      if (fused_norm)
        norm_proj(QKV, W.wqkv, W.in_norm, qkv);
      else
        proj(QKV, H, n1, W.wqkv, qkv);
      done("qkv_gemm");
      void* kc = at(k_cache, l * int64_t(opts.batch) * L * NKV * D);
      void* vc = at(v_cache, l * int64_t(opts.batch) * L * NKV * D);
      if (!prefill && decode_attention_fuses_qk(c, opts)) {
        // q/k norm, RoPE and the KV-cache write inside the decode attention kernel below
      } else if (opts.fuse_qk_rope_kv) {
        engine("engine_qk_norm_rope_kv", {{"T", T}, {"NQ", NQ}, {"NKV", NKV}}, {qkv, W.q_norm, pos, seq, cos_sin, q, kc, vc},
               {T, NQ, NKV, D, L}, {eps});
        done("qk_norm_rope_kv");
      } else {
        engine("engine_qk_norm_split", {{"T", T}, {"NQ", NQ}, {"NKV", NKV}}, {qkv, W.q_norm, W.k_norm, q, k, v},
               {T, NQ, NKV, D}, {eps});
        done("qk_norm");
        op("rope@" + tkey, rope_shape, {pos, q, k, cos_sin});
        done("rope");
        engine("engine_kv_write", {{"T", T}}, {k, v, pos, seq, kc, vc}, {T, NKV, D, L});
        done("kv_cache_write");
      }
      if (prefill && opts.flash_prefill) {
        engine("engine_flash_attention_d" + std::to_string(D), {{"P", p}, {"NQ", NQ}, {"B", nb}}, {q, kc, vc, attn},
               {nb, p, NQ, NKV, D, L}, {1.0 / std::sqrt(double(D))});
      } else if (prefill) {  // K and V from the cache, where both q/k/v paths leave them
        for (int64_t hq = 0; hq < NQ; ++hq) {
          const int64_t g = hq / G;
          lt->run({.m = p, .n = p, .k = D, .ldx = NQ * D, .ldw = NKV * D, .ldy = p, .y_f32 = true, .batch = int(nb),
                   .stride_x = p * NQ * D, .stride_w = L * NKV * D, .stride_y = p * p},
                  at(q, hq * D), at(kc, g * D), scores);
          engine("engine_causal_softmax", {{"B", nb}, {"P", p}}, {scores, probs}, {nb, p},
                 {1.0 / std::sqrt(double(D))});
          lt->run({.m = p, .n = D, .k = p, .ldx = p, .ldw = NKV * D, .ldy = NQ * D, .w_is_kn = true, .batch = int(nb),
                   .stride_x = p * p, .stride_w = L * NKV * D, .stride_y = p * NQ * D},
                  probs, at(vc, g * D), at(attn, hq * D));
        }
      } else if (decode_attention_fuses_qk(c, opts)) {
        engine(decode_attention_entry(c, opts), {{"S", decode_attention_splits(L)}, {"NKV", NKV}, {"B", nb}},
               {qkv, W.q_norm, cos_sin, kc, vc, ctx_lens, attn}, {nb, NQ, NKV, D, L}, {1.0 / std::sqrt(double(D)), eps},
               attn_ws, attn_ws_bytes);
      } else if (opts.engine_decode_attention) {
        engine(decode_attention_entry(c, opts), {{"S", decode_attention_splits(L)}, {"NKV", NKV}, {"B", nb}},
               {q, kc, vc, ctx_lens, attn, attn_ml, attn_acc, attn_ws}, {nb, NQ, NKV, D, L},
               {1.0 / std::sqrt(double(D))});
      } else {
        op("gqa_decode_attention@" + gqa_label, gqa_shape, {q, kc, vc, ctx_lens, attn});
      }
      done("attention");
      // fused_norm: h += attn . Wo^T; gu = RMSNorm(h) . Wgu^T; h += SwiGLU(gu) . Wdown^T (the residual
      // adds in the GEMVs, h updated in place); otherwise o and d, each followed by rmsnorm_residual
      if (fused_norm) {
        engine("engine_gemv_residual", {{"T", T}, {"N", H}}, {attn, W.wo, h}, {T, H, NQ * D});
        done("o_gemm");
      } else {
        proj(H, NQ * D, attn, W.wo, o);
        done("o_gemm");
        op("rmsnorm_residual@" + tkey, norm_shape, {o, h, W.post_norm, n2});
        done("residual_norm");
      }
      if (fused_norm)
        norm_proj(2 * I, W.wgu, W.post_norm, gu);
      else
        proj(2 * I, H, n2, W.wgu, gu);
      done("mlp_gate_up_gemm");
      void* down_out = fused_norm ? h : d;
      if (swiglu_fused_at(c, opts, T)) {
        engine(fused_norm ? "engine_gemv_swiglu_residual" : "engine_gemv_swiglu", {{"T", T}, {"N", H}, {"K", I}},
               {gu, W.wdown, down_out}, {T, H, I});
      } else {
        op("swiglu_act@" + tkey, act_shape, {gu, act});
        done("swiglu");
        if (fused_norm)
          engine("engine_gemv_residual", {{"T", T}, {"N", H}}, {act, W.wdown, h}, {T, H, I});
        else
          proj(H, I, act, W.wdown, d);
      }
      done("mlp_down_gemm");
      if (fused_norm) continue;
      // h += d, then the next layer's input norm (the final norm after the last layer)
      void* next_norm = l + 1 < c.layers ? layers[size_t(l + 1)].in_norm : final_norm;
      op("rmsnorm_residual@" + tkey, norm_shape, {d, h, next_norm, n1});
      done("mlp_residual_norm");
    }
    if (fused_norm) {
      engine("engine_rmsnorm", {{"R", T}}, {h, final_norm, n1}, {T, H}, {eps});
      done("final_norm");
    }
    const void* last = n1;
    if (prefill) {
      engine("engine_gather_rows", {{"R", nb}}, {n1, last_idx, last_h}, {nb, H});
      last = last_h;
      done("gather_last_token");
    }
    if (screen) {  // decode only: n1 holds each sequence's final-normed hidden state
      engine("engine_lm_head_screen", {{"GR", lh_blocks}, {"SMEM", screen_smem_bytes(nb, H, lh_layout)}},
             {n1, lh_packed, lh_scale, lh_coef, logits, lh_stats},
             {nb, c.vocab, H, screen_hidden_padded(H), lh_layout.stages, lh_layout.slab});
      done("lm_head");
      engine("engine_argmax_screened", {{"R", nb}, {"G", argmax_blocks(c.vocab)}, {"SMEM", H * 4}},
             {logits, next, argmax_part, argmax_count, ids, pos, ctx_lens, history}, {nb, c.vocab, opts.max_context, H}, {},
             lh_table, kScreenTableBytes);
      done("sampling");
      return;
    }
    lt->run({.m = nb, .n = c.vocab, .k = H, .ldx = H, .ldw = H, .ldy = c.vocab, .y_f32 = true}, last,
            lm_head ? lm_head : embed, logits);
    done("lm_head");
    // decode: the argmax also advances ids, pos and ctx_lens and appends to the history
    // (decode_greedy's device loop); prefill leaves them to the host
    if (prefill)
      engine("engine_argmax", {{"R", nb}, {"G", argmax_blocks(c.vocab)}}, {logits, next, argmax_part, argmax_count},
             {nb, c.vocab});
    else
      engine("engine_argmax", {{"R", nb}, {"G", argmax_blocks(c.vocab)}},
             {logits, next, argmax_part, argmax_count, ids, pos, ctx_lens, history}, {nb, c.vocab, opts.max_context});
    done("sampling");
  }

  // A CUDA graph of `n` decode steps at batch nb, uploaded to the device (cuGraphUpload: its first
  // replay costs what later ones do); Error(kBackend) naming `what` when the capture fails.
  std::unique_ptr<backend::Backend::Graph> capture_decode(int64_t nb, int n, const char* what, bool screen) {
    auto g = be->capture_graph([&] {
      for (int i = 0; i < n; ++i) forward(nb, 1, false, screen);
    });
    if (!g) fail(ErrorCategory::kBackend, "{}: CUDA graph capture of {} decode step(s) failed", what, n);
    g->upload();
    return g;
  }

  void collect(StageTimes& st) {
    if (!timing) return;
    const auto iv = timeline->intervals_us();
    for (size_t i = 0; i < iv.size() && i < marked.size(); ++i) {
      if (marked[i] == "decoder_layers")
        split_decoder_layers(st, iv[i]);
      else
        st.add(marked[i], iv[i]);
    }
    marked.clear();
  }
  // engine_decode_layers' interval split into the layer stages in proportion to the time between
  // block 0's stage starts (its %globaltimer stamps: when each stage's inputs were complete; for
  // attention, when block 0's own qkv rows were written), a
  // call per layer; the whole interval as "decoder_layers" when the stamps are not increasing.
  void split_decoder_layers(StageTimes& st, double us) {
    static const char* const names[5] = {"qkv_gemm", "attention", "o_gemm", "mlp_gate_up_gemm", "mlp_down_gemm"};
    const int64_t n = 5 * cfg.layers;
    std::vector<uint64_t> t(size_t(n + 1));
    be->download(t.data(), dl_stamps, (n + 1) * 8);
    be->synchronize();
    bool ok = t[size_t(n)] > t[0];
    for (int64_t i = 0; i < n && ok; ++i) ok = t[size_t(i + 1)] >= t[size_t(i)];
    if (!ok) {
      st.add("decoder_layers", us);
      return;
    }
    const double total = double(t[size_t(n)] - t[0]);
    for (int64_t i = 0; i < n; ++i) st.add(names[i % 5], us * double(t[size_t(i + 1)] - t[size_t(i)]) / total);
  }

  std::vector<int32_t> finish(int64_t nb, std::vector<std::vector<float>>* out_logits, StageTimes& st) {
    std::vector<int32_t> tokens(static_cast<size_t>(nb));
    if (timing) timeline->mark();
    be->download(tokens.data(), next, nb * 4);
    if (out_logits) {
      out_logits->assign(size_t(nb), std::vector<float>(size_t(cfg.vocab)));
      for (int64_t b = 0; b < nb; ++b)
        be->download((*out_logits)[size_t(b)].data(), at(logits, b * cfg.vocab, 4), cfg.vocab * 4);
    }
    be->synchronize();
    if (timing) {
      timeline->mark();
      marked.emplace_back("copies_out");
    }
    collect(st);
    return tokens;
  }
};

config::ModelDims CudaQwen3Engine::op_dims(const Qwen3Config& cfg) { return model_dims(cfg); }

std::vector<OpCallSite> CudaQwen3Engine::call_sites(const Qwen3Config& cfg, const CudaEngineOptions& opts) {
  const auto o = effective(cfg, opts);
  std::vector<OpCallSite> out;
  std::vector<int64_t> ts = {int64_t(o.batch) * o.max_prompt};
  if (o.max_prompt != 1) ts.push_back(o.batch);
  for (int64_t t : ts)
    for (const std::string op : {"rmsnorm_residual", "swiglu_act", "rope"}) {
      if (op == "rope" && o.fuse_qk_rope_kv) continue;
      if (op == "swiglu_act" && swiglu_fused_at(cfg, o, t)) continue;
      if (op == "rmsnorm_residual" && norm_fused_at(cfg, o, t)) continue;
      out.push_back({op, token_shape(op, cfg, t, o.max_context)});
    }
  if (!o.engine_decode_attention)
    out.push_back({"gqa_decode_attention",
                 {fmt::format("B={},L={}", o.batch, o.max_context),
                  {{"B", o.batch}, {"L", o.max_context}, {"NQ", cfg.heads}, {"NKV", cfg.kv_heads}, {"D", cfg.head_dim}}}});
  return out;
}

double unified_max_bound(double q_norm_max, double k_norm_max, int64_t head_dim) {
  if (head_dim < 1 || !std::isfinite(q_norm_max) || !std::isfinite(k_norm_max) || q_norm_max < 0 || k_norm_max < 0)
    fail(ErrorCategory::kUsage, "unified_max_bound: head_dim {}, norm magnitudes {} and {}: expected head_dim >= 1 and finite magnitudes >= 0",
         head_dim, q_norm_max, k_norm_max);
  return 1.4426950408889634 * std::sqrt(double(head_dim)) * q_norm_max * k_norm_max * 1.04;
}

int64_t persistent_decode_blocks(const Qwen3Config& cfg, int64_t sms, int64_t parts) {
  cfg.validate("persistent_decode_blocks");
  if (sms < 1 || parts < 0)
    fail(ErrorCategory::kUsage, "persistent_decode_blocks: {} SMs, {} attention parts: expected SMs >= 1 and parts >= 0",
         sms, parts);
  const auto cdiv = [](int64_t a, int64_t b) { return a / b + (a % b != 0); };  // a >= 0, b >= 1, no overflow
  int64_t qkv_rows;  // validated dims are at most 2^31 each: the product may pass 2^63
  if (__builtin_mul_overflow(cfg.heads + 2 * cfg.kv_heads, cfg.head_dim, &qkv_rows))
    qkv_rows = std::numeric_limits<int64_t>::max();
  const int64_t rows[4] = {qkv_rows, cfg.hidden, 2 * cfg.intermediate, cfg.hidden};
  int64_t blocks = cdiv(parts, kDlAttnGroups);
  for (const int64_t n : rows) {
    // the kernel splits a GEMV's groups evenly (engine_dl_groups): the largest share is cdiv(groups, blocks)
    const int64_t groups = cdiv(n, 16), share = cdiv(groups, sms);
    if (share > 0) blocks = std::max(blocks, cdiv(groups, share));
  }
  return std::max<int64_t>(1, std::min(blocks, sms));
}

CudaQwen3Engine::CudaQwen3Engine(const Qwen3Config& cfg, const std::string& dir, const config::Config& run_cfg,
                                 const CudaEngineOptions& opts, const KernelRegistry& registry)
    : impl_(std::make_unique<Impl>()), registry_(registry) {
  cfg.validate("engine");
  if (opts.persistent_stages < 0 || opts.persistent_stages == 1 || opts.persistent_stages > kDlMaxStages)
    fail(ErrorCategory::kUsage, "engine: {} persistent ring stages: expected 0 (automatic: at most {}) or 2 to {}",
         opts.persistent_stages, kDlAutoStages, kDlMaxStages);
  if (opts.persistent_splits < 0 || opts.persistent_splits > 64)
    fail(ErrorCategory::kUsage, "engine: {} persistent attention splits: expected 0 (automatic) or 1 to 64",
         opts.persistent_splits);
  if (opts.persistent_blocks < 0)
    fail(ErrorCategory::kUsage, "engine: {} persistent kernel blocks: expected 0 (automatic) or 1 to the SM count",
         opts.persistent_blocks);
  if (opts.gemv_rows != 1 && opts.gemv_rows != 2)
    fail(ErrorCategory::kUsage, "engine: {} GEMV rows per warp: expected 1 or 2", opts.gemv_rows);
  if (opts.batch < 1 || opts.max_prompt < 1 || opts.max_context < opts.max_prompt ||
      opts.max_context > cfg.max_position)
    fail(ErrorCategory::kUsage,
         "engine: batch {}, max prompt {}, context {}: expected batch >= 1, prompt >= 1, prompt <= context <= "
         "max_position_embeddings {}",
         opts.batch, opts.max_prompt, opts.max_context, cfg.max_position);
  // The decode kernels keep positions and context lengths in 32 bits (ctx_lens is i32, and the
  // attention parts' key loops step past the context by up to a few hundred positions)
  if (opts.max_context > kMaxContext)
    fail(ErrorCategory::kUsage, "engine: context {}: expected at most {} (2^30: the decode kernels' 32-bit positions)",
         opts.max_context, kMaxContext);
  auto& m = *impl_;
  m.cfg = cfg;
  m.opts = effective(cfg, opts);
  m.dims = model_dims(cfg);
  for (const auto& site : call_sites(cfg, opts))
    if (!registry.count(site.key()))
      fail(ErrorCategory::kInternal, "engine: the kernel registry has no kernel for {}", site.key());
  m.prefill_t_label = "T=" + std::to_string(int64_t(opts.batch) * opts.max_prompt);
  m.decode_t_label = "T=" + std::to_string(opts.batch);
  m.gqa_label = fmt::format("B={},L={}", opts.batch, opts.max_context);

  // The checkpoint's headers and layer count, once, before the GPU's context (both weight reads
  // below use it).
  Checkpoint ck(dir);
  check_checkpoint_fits(ck, cfg, dir);
  m.be = backend::make_backend("cuda", run_cfg);
  const auto& dev = m.be->device();
  // asked for (opts, not m.opts: a persistent kernel the options turn off reads 0 there)
  if (opts.persistent_blocks > dev.compute_units)
    fail(ErrorCategory::kUsage, "engine: {} persistent kernel blocks: expected at most the device's {} SMs (one block a SM)",
         opts.persistent_blocks, dev.compute_units);
  if (m.opts.persistent_decode && (dev.arch.rfind("sm_", 0) != 0 || std::stoi(dev.arch.substr(3)) < 90))
    persistent_off(m.opts);  // griddepcontrol and the tested path: sm_90+
  const int64_t H = cfg.hidden, I = cfg.intermediate, NQ = cfg.heads, NKV = cfg.kv_heads, D = cfg.head_dim;
  const int64_t B = opts.batch, Tmax = B * opts.max_prompt, L = opts.max_context, P = opts.max_prompt;

  // The unified max needs a bound on every score from the q/k norm weights (a few KiB to read),
  // as the engine will hold them: in bf16.
  if (m.opts.persistent_unified_max) {
    std::map<std::string, StTensorInfo> norms;
    for (const auto& t : cfg.tensor_layout(StDtype::kBF16)) norms[t.name] = t;
    double worst = 0;
    int64_t worst_layer = 0;
    for (int64_t l = 0; l < cfg.layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
      const auto max_abs = [&](const std::string& name) {
        double v = 0;
        const auto values = load_tensor_f32(ck, norms.at(p + name));
        std::vector<uint16_t> bits(values.size());
        ops::floats_to_bf16_checked(values.data(), values.size(), bits.data(), "tensor " + p + name);
        for (uint16_t b : bits) v = std::max(v, std::fabs(double(ops::bf16_to_float(b))));
        return v;
      };
      const double bound = unified_max_bound(max_abs("q_norm.weight"), max_abs("k_norm.weight"), D);
      if (bound > worst) worst = bound, worst_layer = l;
    }
    if (worst > kUnifiedMaxLimit) {
      m.opts.persistent_unified_max = false;
      spdlog::warn("engine: the unified max was asked for, but layer {}'s q_norm and k_norm weights allow a score bound "
                   "of {:.1f} (log2 units) above {}: the attention parts merge instead",
                   worst_layer, worst, kUnifiedMaxLimit);
    }
  }
  // The screened lm_head where its shared memory fits a block (hidden past about 6,300 at batch
  // 8 does not: cuBLASLt's lm_head then)
  if (m.opts.lm_head_screen && screen_layout(B, H, dev.smem_per_block_optin, kScreenStaticBound).stages == 0)
    m.opts.lm_head_screen = false;
  // Kernels first: a registry kernel that does not compile fails before gigabytes move.
  const auto engine_src = backend::KernelSource::parse(backend::embedded_file("cuda/engine/qwen3_engine.cu"),
                                                       "kernels/cuda/engine/qwen3_engine.cu");
  const auto compile_engine_kernel = [&](const std::string& entry) {
    const auto ek = *std::find_if(std::begin(kEngineKernels), std::end(kEngineKernels),
                                  [&](const EngineKernel& e) { return entry == e.entry; });
    auto k = engine_src;
    k.entries = {ek.entry};
    backend::LaunchSpec spec;
    spec.entry = ek.entry;
    spec.block = ek.block;
    spec.grid[0] = ek.grid;
    spec.grid[1] = ek.grid_y;
    spec.grid[2] = ek.grid_z;
    spec.smem = ek.smem;
    k.launches = {spec};
    auto r = m.be->compile(k);
    if (!r.module) fail(ErrorCategory::kBackend, "engine kernel {} does not compile:\n{}", ek.entry, r.log);
    m.engine_modules[ek.entry] = r.module;
  };
  for (const auto& ek : kEngineKernels)
    if (engine_kernel_used(ek.entry, cfg, m.opts)) compile_engine_kernel(ek.entry);
  // The persistent kernel's launch (run again with bf16 tiles when a matrix does not fit EC12).
  const int64_t asked_stages = m.opts.persistent_stages, asked_splits = m.opts.persistent_splits,
                asked_blocks = m.opts.persistent_blocks;
  const auto plan_persistent = [&] {
    if (!m.opts.persistent_decode) return;
    // One block a SM (persistent_decode_blocks of them, or as many as asked for), as much of the
    // SM's shared memory as the ring can use; fewer than two stages (a large T x intermediate, or a
    // device with little shared memory) takes the layered path.
    const std::string entry = decode_layers_entry(cfg, m.opts);
    if (!m.engine_modules.count(entry)) compile_engine_kernel(entry);
    const auto& mod = *m.engine_modules.at(entry);
    const int64_t tile = decode_layers_tile_bytes(m.opts), patch_sums = m.opts.persistent_ec12 ? kDlPkPatchBytes : 0;
    const int64_t region = decode_layers_region(cfg, B) + decode_layers_table_bytes(cfg) + decode_layers_const_bytes(cfg, B);
    const int64_t room = dev.smem_per_block_optin - mod.stats.static_smem_bytes - kDlHeadBytes - region - patch_sums;
    m.dl_stages = std::min<int64_t>(asked_stages > 0 ? asked_stages : kDlAutoStages, room / tile);
    const int64_t wanted = std::clamp<int64_t>(
        asked_splits > 0 ? asked_splits : decode_layers_splits(dev.compute_units, B, NKV, L, m.opts.persistent_tc_attention, 0),
        1, 64);
    m.dl_blocks = asked_blocks > 0 ? asked_blocks : persistent_decode_blocks(cfg, dev.compute_units, B * NKV * wanted);
    if (m.dl_stages < 2 || m.dl_blocks < 1) {
      persistent_off(m.opts);
    } else {
      m.dl_smem = kDlHeadBytes + region + m.dl_stages * tile + patch_sums;
      m.dl_splits = decode_layers_splits(m.dl_blocks, B, NKV, L, m.opts.persistent_tc_attention, asked_splits);
      m.opts.persistent_stages = int(m.dl_stages);
      m.opts.persistent_splits = int(m.dl_splits);
      m.opts.persistent_blocks = int(m.dl_blocks);
      // The KV prefetch only where one layer's cache fits a quarter of L2: a larger one would push
      // its own lines out before attention reads them (twice the KV traffic) and evict the
      // activations and counters the weight stream's evict-first hint keeps there.
      if (B * L * NKV * D * 2 * 2 > dev.cache_bytes / 4) m.opts.persistent_kv_prefetch = false;
    }
  };
  plan_persistent();
  for (const auto& [key, ok] : registry) {
    auto r = m.be->compile(ok.kernel);
    if (!r.module) fail(ErrorCategory::kBackend, "registry kernel for {} ({}) does not compile:\n{}", key, ok.origin, r.log);
    m.op_modules[key] = r.module;
  }

  // Weights, bf16, fused where one GEMM serves several projections.
  std::map<std::string, StTensorInfo> layout;
  for (const auto& t : cfg.tensor_layout(StDtype::kBF16)) layout[t.name] = t;
  std::vector<uint16_t> staging;
  auto put = [&](const std::string& name, void* dst) {
    const auto f = load_tensor_f32(ck, layout.at(name));
    staging.resize(f.size());
    ops::floats_to_bf16_checked(f.data(), f.size(), staging.data(), "tensor " + name);
    m.be->upload(dst, staging.data(), int64_t(staging.size()) * 2);
    m.be->synchronize();  // staging is reused
  };
  // The screened lm_head's int8 copy, from the bf16 bits the engine holds (staging, right after
  // the lm_head's upload)
  const auto screen = [&] {
    if (!m.opts.lm_head_screen) return;
    const auto s = screen_lm_head(staging.data(), cfg.vocab, H);
    m.lh_packed = m.alloc(int64_t(s.packed.size()));
    m.lh_scale = m.alloc(cfg.vocab * 4);
    m.lh_coef = m.alloc(cfg.vocab * 8);
    m.be->upload(m.lh_packed, s.packed.data(), int64_t(s.packed.size()));
    m.be->upload(m.lh_scale, s.scale.data(), cfg.vocab * 4);
    m.be->upload(m.lh_coef, s.coef.data(), cfg.vocab * 8);
    m.be->synchronize();  // `s` is freed here
  };
  m.embed = m.alloc(cfg.vocab * H * 2);
  put("model.embed_tokens.weight", m.embed);
  if (cfg.tie_embeddings) screen();
  m.final_norm = m.alloc(H * 2);
  put("model.norm.weight", m.final_norm);
  if (!cfg.tie_embeddings) {
    m.lm_head = m.alloc(cfg.vocab * H * 2);
    put("lm_head.weight", m.lm_head);
    screen();
  }
  // EC12 copies of the projections for the persistent kernel: each matrix's bf16 bits gathered on
  // the host (its parts in row order), packed, uploaded. The first matrix that does not fit
  // (a slice with too many weights outside its exponent window) turns EC12 off: the copies made
  // so far are freed and the kernel streams the bf16 weights.
  std::vector<uint16_t> host_matrix;
  const auto packing = [&] { return m.opts.persistent_ec12 && m.ec12_fallback.empty(); };
  // put() of one part of a projection, its bits also appended to host_matrix while EC12 is packing
  const auto put_part = [&](const std::string& name, void* dst) {
    put(name, dst);
    if (packing()) host_matrix.insert(host_matrix.end(), staging.begin(), staging.end());
  };
  const auto pack = [&](const std::string& what, int64_t rows, int64_t cols) -> void* {
    if (!packing()) {
      host_matrix.clear();
      return nullptr;
    }
    const auto pk = pack_ec12(host_matrix.data(), rows, cols);
    host_matrix.clear();
    if (!pk.ok) {
      m.ec12_fallback = fmt::format("{}: {}", what, pk.why);
      return nullptr;
    }
    void* dst = nullptr;
    try {
      dst = m.alloc(int64_t(pk.packed.size()));
    } catch (const Error& e) {  // out of device memory (kBackend): the bf16 weights alone may still fit
      if (e.category() != ErrorCategory::kBackend) throw;
      m.ec12_fallback = fmt::format("{}: no GPU memory for its EC12 copy ({} bytes): {}", what, pk.packed.size(), e.what());
      return nullptr;
    }
    m.be->upload(dst, pk.packed.data(), int64_t(pk.packed.size()));
    m.be->synchronize();  // `pk` is freed on return
    m.ec12_patches += pk.patches;
    m.ec12_bytes += int64_t(pk.packed.size());
    m.ec12_blocks.emplace_back(dst, int64_t(pk.packed.size()));
    return dst;
  };
  for (int64_t l = 0; l < cfg.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Impl::Layer W{};
    W.wqkv = m.alloc((NQ + 2 * NKV) * D * H * 2);
    put_part(p + "self_attn.q_proj.weight", W.wqkv);
    put_part(p + "self_attn.k_proj.weight", at(W.wqkv, NQ * D * H));
    put_part(p + "self_attn.v_proj.weight", at(W.wqkv, (NQ + NKV) * D * H));
    W.pk_qkv = pack(p + "self_attn.{q,k,v}_proj.weight", (NQ + 2 * NKV) * D, H);
    W.wo = m.alloc(H * NQ * D * 2);
    put_part(p + "self_attn.o_proj.weight", W.wo);
    W.pk_o = pack(p + "self_attn.o_proj.weight", H, NQ * D);
    W.wgu = m.alloc(2 * I * H * 2);
    put_part(p + "mlp.gate_proj.weight", W.wgu);
    put_part(p + "mlp.up_proj.weight", at(W.wgu, I * H));
    W.pk_gu = pack(p + "mlp.{gate,up}_proj.weight", 2 * I, H);
    W.wdown = m.alloc(H * I * 2);
    put_part(p + "mlp.down_proj.weight", W.wdown);
    W.pk_down = pack(p + "mlp.down_proj.weight", H, I);
    if (!m.ec12_fallback.empty() && m.opts.persistent_ec12) {  // stream bf16: free the copies, replan the launch
      m.opts.persistent_ec12 = false;
      for (auto& layer : m.layers) layer.pk_qkv = layer.pk_o = layer.pk_gu = layer.pk_down = nullptr;
      W.pk_qkv = W.pk_o = W.pk_gu = W.pk_down = nullptr;
      m.release_ec12();
      plan_persistent();  // bf16 tiles may leave room for fewer than 2 stages: the kernel is then off
      spdlog::warn("engine: EC12 weight tiles off, {}: {}",
                   m.opts.persistent_decode ? "the persistent kernel streams bf16"
                                            : "and the persistent kernel with it (bf16 tiles leave no room for 2 ring stages)",
                   m.ec12_fallback);
    }
    W.in_norm = m.alloc(H * 2);
    put(p + "input_layernorm.weight", W.in_norm);
    W.post_norm = m.alloc(H * 2);
    put(p + "post_attention_layernorm.weight", W.post_norm);
    W.q_norm = m.alloc(2 * D * 2);
    W.k_norm = at(W.q_norm, D);
    put(p + "self_attn.q_norm.weight", W.q_norm);
    put(p + "self_attn.k_norm.weight", W.k_norm);
    m.layers.push_back(W);
  }
  ck.check_unchanged();  // a checkpoint rewritten during the upload may have mixed two versions

  // KV cache and activations.
  const int64_t cache_elems = cfg.layers * B * L * NKV * D;
  m.k_cache = m.alloc(cache_elems * 2);
  m.v_cache = m.alloc(cache_elems * 2);
  m.be->memset(m.k_cache, 0, cache_elems * 2);
  m.be->memset(m.v_cache, 0, cache_elems * 2);
  m.h = m.alloc(Tmax * H * 2);
  m.n1 = m.alloc(Tmax * H * 2);
  m.n2 = m.alloc(Tmax * H * 2);
  m.o = m.alloc(Tmax * H * 2);
  m.d = m.alloc(Tmax * H * 2);
  m.qkv = m.alloc(Tmax * (NQ + 2 * NKV) * D * 2);
  m.q = m.alloc(Tmax * NQ * D * 2);
  m.k = m.alloc(Tmax * NKV * D * 2);
  m.v = m.alloc(Tmax * NKV * D * 2);
  m.attn = m.alloc(Tmax * NQ * D * 2);
  m.gu = m.alloc(Tmax * 2 * I * 2);
  m.act = m.alloc(Tmax * I * 2);
  m.ids = m.alloc(Tmax * 4);
  m.pos = m.alloc(Tmax * 8);
  m.seq = m.alloc(Tmax * 4);
  m.ctx_lens = m.alloc(B * 4);
  m.last_idx = m.alloc(B * 4);
  m.last_h = m.alloc(B * H * 2);
  m.logits = m.alloc(B * cfg.vocab * 4);
  m.next = m.alloc(B * 4);
  m.argmax_part = m.alloc(B * argmax_blocks(cfg.vocab) * 8);
  m.argmax_count = m.alloc(8 + B * 4);
  m.be->memset(m.argmax_count, 0, 8 + B * 4);
  m.history = m.alloc((B + B * L) * 4);
  m.be->memset(m.history, 0, B * 4);
  if (m.opts.lm_head_screen) {
    m.lh_stats = m.alloc(kScreenStatsBytes);
    m.be->memset(m.lh_stats, 0, kScreenStatsBytes);  // lbmax 0 (below every float), no exact rows yet
    const uint64_t tab[kScreenTableBytes / 8] = {reinterpret_cast<uint64_t>(m.lm_head ? m.lm_head : m.embed), reinterpret_cast<uint64_t>(m.n1),
                             reinterpret_cast<uint64_t>(m.lh_coef), reinterpret_cast<uint64_t>(m.lh_stats)};
    m.lh_table = m.alloc(kScreenTableBytes);
    m.be->upload(m.lh_table, tab, kScreenTableBytes);
    m.be->synchronize();  // `tab` is uploaded before it goes out of scope
    // the screening's grid: one block a SM, each taking a 16-row group gridDim apart; its ring the
    // stages that fit beside the compiled kernel's static shared memory
    m.lh_blocks = std::min<int64_t>((cfg.vocab + 15) / 16, dev.compute_units);
    const int64_t screen_static = m.engine_modules.at("engine_lm_head_screen")->stats.static_smem_bytes;
    m.lh_layout = screen_layout(B, H, dev.smem_per_block_optin, screen_static);
    if (m.lh_layout.stages == 0)
      fail(ErrorCategory::kBackend, "engine_lm_head_screen's static shared memory ({} bytes) leaves no room for 2 ring stages",
           screen_static);
  }
  if (m.opts.engine_decode_attention) {  // counters | (max, sum) | accumulators, as the kernel reads them
    const int64_t parts = B * NKV * decode_attention_splits(L) * (NQ / NKV), counters = decode_attention_counter_bytes(B, NKV);
    m.attn_ws_bytes = decode_attention_ws_bytes(cfg, B, decode_attention_splits(L));
    m.attn_ws = m.alloc(m.attn_ws_bytes);
    m.attn_ml = at(m.attn_ws, counters, 1);
    m.attn_acc = at(m.attn_ml, parts * 2, 4);
    m.be->memset(m.attn_ws, 0, counters);
  }
  if (m.opts.persistent_decode) {
    std::vector<uint64_t> table;
    for (int64_t l = 0; l < cfg.layers; ++l) {
      const auto& W = m.layers[size_t(l)];
      const bool pk = m.opts.persistent_ec12;  // the projections' EC12 copies (weight_coding.hpp) or bf16
      for (void* p : {pk ? W.pk_qkv : W.wqkv, pk ? W.pk_o : W.wo, pk ? W.pk_gu : W.wgu, pk ? W.pk_down : W.wdown, W.in_norm,
                      W.post_norm, W.q_norm, at(m.k_cache, l * B * L * NKV * D), at(m.v_cache, l * B * L * NKV * D)})
        table.push_back(reinterpret_cast<uint64_t>(p));
    }
    m.dl_table = m.alloc(int64_t(table.size()) * 8);
    m.be->upload(m.dl_table, table.data(), int64_t(table.size()) * 8);
    m.dl_ws_bytes = decode_layers_ws_bytes(cfg, B, m.dl_splits);
    m.dl_ws = m.alloc(m.dl_ws_bytes);
    m.be->memset(m.dl_ws, 0, m.dl_ws_bytes);  // counters, epoch, and tagged words that match no tag
    m.dl_stamps = m.alloc((5 * cfg.layers + 1) * 8);
    m.be->synchronize();  // `table` is uploaded before it goes out of scope
  }
  const bool gemm_attention = P > 1 && !m.opts.flash_prefill;
  m.scores = gemm_attention ? m.alloc(B * P * P * 4) : nullptr;
  m.probs = gemm_attention ? m.alloc(B * P * P * 2) : nullptr;
  // cos|sin cache [L, D] f32, as the rope op takes it (angles in double, then rounded).
  std::vector<float> cs(size_t(L * D));
  for (int64_t p = 0; p < L; ++p)
    for (int64_t i = 0; i < D / 2; ++i) {
      const double a = double(p) * std::pow(cfg.rope_theta, -2.0 * double(i) / double(D));
      cs[size_t(p * D + i)] = float(std::cos(a));
      cs[size_t(p * D + D / 2 + i)] = float(std::sin(a));
    }
  m.cos_sin = m.alloc(L * D * 4);
  m.be->upload(m.cos_sin, cs.data(), L * D * 4);
  for (const auto& site : call_sites(cfg, opts))
    m.op_ws_bytes = std::max(m.op_ws_bytes, ops::find_op(site.op).workspace_bytes(site.shape.shape));
  m.op_ws = m.alloc(m.op_ws_bytes);
  m.lt_ws = m.alloc(kLtWorkspaceBytes);
  m.lt = std::make_unique<CublasLt>(m.be->native_stream(), m.lt_ws, kLtWorkspaceBytes);
  m.timeline = m.be->make_timeline(16 + 16 * int(cfg.layers));
  // Decode's sequence of each token never changes: sequence b is row b.
  std::vector<int32_t> rows(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) rows[size_t(b)] = int32_t(b);
  m.be->upload(m.seq, rows.data(), B * 4);
  m.be->synchronize();
  m.cur.assign(size_t(B), 0);
  allocated_ = m.allocated;
}

CudaQwen3Engine::~CudaQwen3Engine() {
  if (!impl_ || !impl_->be) return;
  impl_->graph.reset();
  impl_->graph_exact.reset();
  impl_->chunk_graph.reset();
  impl_->lt.reset();
  for (void* p : impl_->allocations) impl_->be->release(p);
}

double CudaQwen3Engine::measure_gemm_tflops() {
  auto& m = *impl_;
  const int64_t n = 4096;
  void* x = m.be->allocate(n * n * 2);
  void* w = m.be->allocate(n * n * 2);
  void* y = m.be->allocate(n * n * 2);
  m.be->memset(x, 0x3c, n * n * 2);  // bf16 0x3c3c: about 0.0115, finite
  m.be->memset(w, 0x3c, n * n * 2);
  double best_us = 0;
  try {
    const GemmShape g{.m = n, .n = n, .k = n, .ldx = n, .ldw = n, .ldy = n};
    m.lt->run(g, x, w, y);  // plan and warm-up
    for (int i = 0; i < 10; ++i) {
      const double us = m.be->time_us([&] { m.lt->run(g, x, w, y); });
      if (us > 0 && (best_us == 0 || us < best_us)) best_us = us;
    }
  } catch (...) {
    m.be->release(x), m.be->release(w), m.be->release(y);
    throw;
  }
  m.be->release(x), m.be->release(w), m.be->release(y);
  return best_us > 0 ? 2.0 * double(n) * double(n) * double(n) / (best_us * 1e-6) / 1e12 : 0.0;
}

int64_t CudaQwen3Engine::nonfinite_logits() const {
  uint64_t n = 0;
  impl_->be->download(&n, impl_->argmax_count, 8);
  return int64_t(n);
}

int64_t CudaQwen3Engine::device_memory_used() const { return impl_->be->device_memory_used(); }

int64_t CudaQwen3Engine::ec12_bytes() const { return impl_->ec12_bytes; }
int64_t CudaQwen3Engine::ec12_patches() const { return impl_->ec12_patches; }
const std::string& CudaQwen3Engine::ec12_fallback() const { return impl_->ec12_fallback; }
int64_t CudaQwen3Engine::screened_exact_rows() const {
  if (!impl_->lh_stats) return 0;
  uint64_t n = 0;
  impl_->be->download(&n, static_cast<uint8_t*>(impl_->lh_stats) + kScreenExactRowsAt, 8);
  return int64_t(n);
}
const backend::DeviceInfo& CudaQwen3Engine::device() const { return impl_->be->device(); }
const CudaEngineOptions& CudaQwen3Engine::options() const { return impl_->opts; }

std::vector<int32_t> CudaQwen3Engine::prefill(const std::vector<std::vector<int32_t>>& prompts,
                                              std::vector<std::vector<float>>* logits) {
  auto& m = *impl_;
  const int64_t B = m.opts.batch;
  if (int64_t(prompts.size()) != B) fail(ErrorCategory::kUsage, "prefill: {} prompts for a batch of {}", prompts.size(), B);
  int64_t p = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (prompts[b].empty()) fail(ErrorCategory::kUsage, "prefill: prompt {} is empty", b);
    if (int64_t(prompts[b].size()) > m.opts.max_prompt)
      fail(ErrorCategory::kUsage, "prefill: prompt {} has {} tokens, more than the engine's max prompt {}", b,
           prompts[b].size(), m.opts.max_prompt);
    for (int32_t id : prompts[b])
      if (id < 0 || id >= m.cfg.vocab) fail(ErrorCategory::kUsage, "token id {}: expected 0 to {}", id, m.cfg.vocab - 1);
    p = std::max<int64_t>(p, int64_t(prompts[b].size()));
  }
  // Right-padded [B, p]: pad tokens (id 0) sit after each prompt and are never attended to.
  std::vector<int32_t> ids(size_t(B * p), 0), seq(size_t(B * p)), last(static_cast<size_t>(B));
  std::vector<int64_t> pos(size_t(B * p));
  for (int64_t b = 0; b < B; ++b) {
    const auto& pr = prompts[size_t(b)];
    for (int64_t i = 0; i < p; ++i) {
      ids[size_t(b * p + i)] = i < int64_t(pr.size()) ? pr[size_t(i)] : 0;
      pos[size_t(b * p + i)] = i;
      seq[size_t(b * p + i)] = int32_t(b);
    }
    last[size_t(b)] = int32_t(b * p + int64_t(pr.size()) - 1);
    m.cur[size_t(b)] = int64_t(pr.size());
  }
  m.timing = stage_timing_;
  if (m.timing) m.timeline->mark();
  m.be->upload(m.ids, ids.data(), B * p * 4);
  m.be->upload(m.pos, pos.data(), B * p * 8);
  m.be->upload(m.seq, seq.data(), B * p * 4);
  m.be->upload(m.last_idx, last.data(), B * 4);
  if (m.timing) {
    m.timeline->mark();
    m.marked = {"copies_in"};
    m.collect(stages_);
  }
  m.forward(B, p, true);
  m.collect(stages_);
  auto out = m.finish(B, logits, stages_);
  // decode's rows: sequence b is row b again
  std::vector<int32_t> rows(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) rows[size_t(b)] = int32_t(b);
  m.be->upload(m.seq, rows.data(), B * 4);
  return out;
}

// decode's and decode_greedy's checks (before any GPU work), then (with `upload`) each sequence's
// token, position and context length on the device for the first of the next `steps` steps.
void CudaQwen3Engine::start_decode(const std::vector<int32_t>& tokens, int64_t steps, const char* what, bool upload) {
  auto& m = *impl_;
  const int64_t B = m.opts.batch;
  if (int64_t(tokens.size()) != B) fail(ErrorCategory::kUsage, "{}: {} tokens for a batch of {}", what, tokens.size(), B);
  if (steps < 0) fail(ErrorCategory::kUsage, "{}: {} steps, expected 0 or more", what, steps);
  std::vector<int64_t> pos(static_cast<size_t>(B));
  std::vector<int32_t> lens(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    if (tokens[size_t(b)] < 0 || tokens[size_t(b)] >= m.cfg.vocab)
      fail(ErrorCategory::kUsage, "token id {}: expected 0 to {}", tokens[size_t(b)], m.cfg.vocab - 1);
    if (steps > m.opts.max_context - m.cur[size_t(b)])  // (no overflow for any steps)
      fail(ErrorCategory::kUsage, "{}: sequence {} is at position {}, and {} step(s) from there pass the end of the engine's context of {}",
           what, b, m.cur[size_t(b)], steps, m.opts.max_context);
    pos[size_t(b)] = m.cur[size_t(b)];
    lens[size_t(b)] = int32_t(m.cur[size_t(b)] + 1);
  }
  if (steps == 0 || !upload) return;
  m.timing = stage_timing_;
  if (m.timing) m.timeline->mark();
  m.be->upload(m.ids, tokens.data(), B * 4);
  m.be->upload(m.pos, pos.data(), B * 8);
  m.be->upload(m.ctx_lens, lens.data(), B * 4);
  if (m.timing) {
    m.timeline->mark();
    m.marked = {"copies_in"};
    m.collect(stages_);
  }
}

std::vector<int32_t> CudaQwen3Engine::decode(const std::vector<int32_t>& tokens, std::vector<std::vector<float>>* logits) {
  auto& m = *impl_;
  const int64_t B = m.opts.batch;
  start_decode(tokens, 1, "decode", true);
  const bool screen = m.opts.lm_head_screen && logits == nullptr;  // the logits need cuBLASLt's lm_head
  if (m.opts.graphs && !m.timing) {
    auto& g = screen ? m.graph : m.graph_exact;
    if (!g) g = m.capture_decode(B, 1, "decode", screen);
    g->replay();
  } else {
    m.forward(B, 1, false, screen);
    m.collect(stages_);
  }
  for (auto& c : m.cur) ++c;
  return m.finish(B, logits, stages_);
}

void CudaQwen3Engine::prepare_decode_greedy(int64_t steps) {
  auto& m = *impl_;
  const int64_t B = m.opts.batch;
  if (!m.opts.graphs || stage_timing_) return;
  m.timing = false;  // a stage-timed decode before may have left it on: no events in the graphs
  const bool screen = m.opts.lm_head_screen;
  if (steps >= kGreedyChunk && !m.chunk_graph) m.chunk_graph = m.capture_decode(B, kGreedyChunk, "decode_greedy", screen);
  if (steps % kGreedyChunk != 0 && !m.graph) m.graph = m.capture_decode(B, 1, "decode_greedy", screen);
  m.be->synchronize();
}

std::vector<std::vector<int32_t>> CudaQwen3Engine::decode_greedy(const std::vector<int32_t>& tokens, int64_t steps) {
  auto& m = *impl_;
  const int64_t B = m.opts.batch;
  std::vector<std::vector<int32_t>> out;
  // the checks, before any GPU work; the uploads too unless decode() does them step by step
  start_decode(tokens, steps, "decode_greedy", !stage_timing_);
  if (stage_timing_) {  // a step at a time, each with its stage breakdown
    auto t = tokens;
    for (int64_t s = 0; s < steps; ++s) out.push_back(t = decode(t));
    return out;
  }
  if (steps == 0) return out;
  prepare_decode_greedy(steps);
  m.be->memset(m.history, 0, B * 4);  // the history's counts
  if (m.opts.graphs) {
    int64_t s = 0;
    for (; s + kGreedyChunk <= steps; s += kGreedyChunk) m.chunk_graph->replay();
    for (; s < steps; ++s) m.graph->replay();
  } else {
    for (int64_t s = 0; s < steps; ++s) m.forward(B, 1, false, m.opts.lm_head_screen);
  }
  std::vector<int32_t> rows(static_cast<size_t>(steps * B));
  m.be->download(rows.data(), at(m.history, B, 4), steps * B * 4);
  for (auto& c : m.cur) c += steps;
  // engine_argmax gives -1 for a row with no finite logit; decode() returns it and refuses it as
  // the next input, but on the device it went on (its embedding is zeros): what followed is no
  // greedy continuation
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t b = 0; b < B; ++b)
      if (rows[size_t(s * B + b)] < 0)
        fail(ErrorCategory::kBackend,
             "decode_greedy: sequence {} had no finite logit at step {} of {} (every logit NaN or infinite); the positions "
             "advanced, and the tokens from there on are not a greedy continuation",
             b, s, steps);
  for (int64_t s = 0; s < steps; ++s) out.emplace_back(rows.begin() + s * B, rows.begin() + (s + 1) * B);
  return out;
}

}  // namespace thrive::model
