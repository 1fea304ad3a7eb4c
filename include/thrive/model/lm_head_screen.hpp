// The screened greedy lm_head: an exact argmax over the vocabulary that reads an int8 copy of
// the lm_head instead of its bf16 rows, then the bf16 rows of the few tokens that could still win.
//
// Greedy decoding needs only argmax_j logit_j, logit_j = w_j . h (w_j: lm_head row j, bf16 [H];
// h: the final-normed hidden state, bf16 [H]). Each row is kept a second time as int8 with one
// f32 scale a row (absmax / 127, round to nearest): w^_j = s_j q_j. Then, by the Cauchy-Schwarz
// inequality,
//   |w_j . h - w^_j . h| <= ||w_j - w^_j|| ||h||,
// so the screening pass (engine_lm_head_screen, kernels/cuda/engine/qwen3_engine.cu) computes
// a_j ~ w^_j . h for every row with tensor-core MMAs (int8 -> f16 exactly, h scaled by a power of
// two into f16, f32 accumulation) and the margin
//   m_j = ||h|| coef_h[j] + ||h - h16|| coef_d[j]
// with coef_h[j] = ||w_j - w^_j|| + g_K (||w^_j|| + ||w_j||) and coef_d[j] = ||w^_j|| (g_K =
// 4 K 2^-24: four times the f32 accumulation error bound gamma_K of K products, Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 3.5, for both the screening sum
// and the exact sum; h16: h in f16 after the power-of-two scaling, its rounding error measured).
// Every logit then lies in [a_j - m_j, a_j + m_j], and so does the exact pass's f32 sum. A row
// whose upper end a_j + m_j is below the largest lower end max_i (a_i - m_i) cannot be the
// argmax; the exact pass (engine_argmax_screened) computes the bf16 dot products of the others
// only (the candidates) and takes their argmax, the lowest index on ties, as engine_argmax does.
// The result is the argmax of the exact pass's f32 sums, which equals the cuBLASLt + engine_argmax
// path's token except where two logits tie within the f32 summation order's error, or where a
// sum overflows f32 in one summation order and not in the other.
//
// A non-finite row (a NaN or infinite weight) has coef_h = +inf: it is always a candidate, and its
// exact logit is counted as skipped as engine_argmax counts it. So are all rows when h holds a
// NaN or infinity, and every row with finite weights whose sums might overflow (the bound
// ||w|| ||h|| at 1e37 or above): its exact sum is computed whatever its interval, so the count of
// skipped logits (CudaQwen3Engine::nonfinite_logits) is the exact path's, up to a sum that
// overflows in one summation order and not in the other. The lower ends come only from rows whose
// sums cannot overflow.
//
// Bytes per decode step at Qwen3-1.7B (vocab 151936, hidden 2048): 311 MB of int8 and 1.8 MB of
// scales and coefficients, against 622 MB of bf16; then the approximations (4 bytes a row and
// sequence) written and read back, the coefficients read again (8 bytes a row), and one 4 KiB
// bf16 row per candidate (33.6 a token on the random Qwen3-1.7B checkpoint, H200, 2026-12-06).
// GPU memory: the int8 copy (cdiv(vocab, 16) 16 x hidden rounded up to 32 bytes) and 12 bytes a
// row; the host packs it in a buffer of the same size while the engine loads.
#pragma once

#include <cstdint>
#include <vector>

namespace thrive::model {

/// The int8 copy of an lm_head [vocab, hidden] in the screening kernel's fragment order, with
/// its per-row scale and margin coefficients (f32, rounded up).
///
/// Layout of `packed` (bytes, each q + 128 in [1, 255]): row groups of 16 rows (the last one
/// zero-padded: q = 0), each `hidden_padded` / 32 chunks of 512 bytes, chunk kk of group G at
/// byte (G hidden_padded / 32 + kk) 512. Lane l of the warp (r = l / 4, c = l % 4) reads the 16
/// bytes at 16 l: for k-step s in {0, 1} (columns k0 = 32 kk + 16 s), 8 bytes
///   (r, k0+2c), (r, k0+2c+1), (r+8, k0+2c), (r+8, k0+2c+1),
///   (r, k0+2c+8), (r, k0+2c+9), (r+8, k0+2c+8), (r+8, k0+2c+9)
/// (row indices within the group): the A fragments a0..a3 of mma.sync m16n8k16 (PTX ISA,
/// "Matrix Fragments for mma.m16n8k16 with floating point type"), two f16 each. Columns past
/// `hidden` are zeros. screened_q() reads it back.
struct ScreenedLmHead {
  int64_t vocab = 0, hidden = 0;
  int64_t hidden_padded = 0;   ///< hidden rounded up to 32
  int64_t groups = 0;          ///< cdiv(vocab, 16)
  std::vector<uint8_t> packed;  ///< groups x hidden_padded x 16 bytes
  std::vector<float> scale;     ///< s_j [vocab] (0 for an all-zero or non-finite row)
  /// (coef_h, coef_d) [vocab] interleaved, as float2: coef_h = +inf for a non-finite row
  std::vector<float> coef;
};

/// Packs `w` (bf16 bits, [vocab, hidden] row-major) for the screening kernel: per row the absmax
/// scale, the int8 values and the margin coefficients (computed in double from the bf16 values,
/// rounded up to f32). Uses up to `threads` threads (0: hardware_concurrency); at Qwen3-1.7B's
/// 311 M weights about a second. Throws Error(kUsage) for vocab < 1, hidden < 1 or a null `w`.
ScreenedLmHead screen_lm_head(const uint16_t* w, int64_t vocab, int64_t hidden, int threads = 0);

/// The int8 value of row j, column k as stored in `s.packed` (q in [-127, 127]; 0 past hidden or
/// vocab). For tests and tools: it is the layout's definition read back.
int screened_q(const ScreenedLmHead& s, int64_t j, int64_t k);

/// The hidden size the packed copy and the screening kernel use: rounded up to 32 (a chunk's columns).
inline int64_t screen_hidden_padded(int64_t hidden) { return (hidden + 31) / 32 * 32; }

/// The accumulation error factor g_K of the margins: 4 K 2^-24.
inline double screen_accumulation_factor(int64_t k) { return 4.0 * double(k) / 16777216.0; }

}  // namespace thrive::model
