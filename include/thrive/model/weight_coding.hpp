// EC12: a lossless 12-bit coding of bf16 weight matrices for the persistent decode kernel's weight
// stream (CudaEngineOptions::persistent_ec12, kernels/cuda/engine/qwen3_engine.cu's
// engine_dl_gemv<.., PK = true>).
//
// Why: at batch 1 the decode step streams every weight once, and the persistent kernel's stream
// stages run at a rate set by the bytes in flight, not by the arithmetic (on an H100, 2026-12-07,
// bench/results/ec12-2026-12-07/: copying 3/4 of every weight tile, a timing-only probe, took a
// step from 1.555 to 1.356 ms). A bf16 value is 1 sign bit, 8 exponent bits and 7 mantissa bits,
// and the exponents of a weight matrix are few: the 16 bits carry about 11 bits of information
// (Zhang et al., "70% Size, 100% Accuracy: Lossless LLM Compression for Efficient GPU Inference
// via Dynamic-Length Float" (DFloat11), 2025, measured on real LLMs). EC12 keeps each weight's low
// byte as it is (exponent bit 0 and the 7 mantissa bits) and replaces its high byte (sign and
// exponent bits 7..1, `h7`) by a 4-bit code: the sign and k in 0..7, where k = 0 means h7 = 0
// (zero and the smallest exponents) and k = 1..7 a window h7 in [h0, h0 + 6] chosen per slice
// (14 consecutive exponents). A weight outside (a very small or very large magnitude for its slice)
// is stored as +0 and its bf16 bits go to the slice's patch list, added by the kernel as a separate
// product. Decoding restores the bf16 bits exactly; only the order of the f32 additions differs
// for patched weights.
//
// Layout (bytes). A matrix [rows, cols] is cut into tiles of 16 rows x 1024 columns (the kernel's
// ring tiles; rows past `rows` and columns past `cols` are zeros), tile (g, t) of row group g and
// column tile t at byte (g x col_tiles + t) x kEc12TileBytes. A tile is 16 slices of
// kEc12SliceBytes, slice w holding the tile's columns [64 w, 64 w + 64), consumed by warp w. In a
// slice, lane l (r = l / 4, c = l % 4) of mma.sync m16n8k16 (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type") owns for k-step s (columns 16 s ..) 8 weights:
//   e0 (r, 16s+2c), e1 (r, 16s+2c+1), e2 (r+8, 16s+2c), e3 (r+8, 16s+2c+1), e4..e7: the same rows, columns + 8
// (the A fragment's registers a0 = e0|e1, a1 = e2|e3, a2 = e4|e5, a3 = e6|e7). Their low bytes are at
// 16 l + 8 s + i (s < 2) or 512 + 16 l + 8 (s - 2) + i (s >= 2) for e_i, and their codes in the u32 at
// 1024 + 16 l + 4 s: bits 4 i..4 i + 2 hold k of e_i (i < 4), bits 16 + 4 (i - 4).. of e_i (i >= 4);
// the sign bits sit where one byte-permute and one mask put them (bit 7, 15, 23, 31: e0..e3;
// bit 3, 11, 19, 27: e4..e7). Then the trailer at 1536: u32 h0 (1..121), and kEc12SlicePatches
// u32 patch words (row << 28) | (column within the slice << 16) | bf16 bits, 0 when unused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace thrive::model {

inline constexpr int64_t kEc12TileRows = 16;      ///< rows of a tile (the kernel's kDlTileRows)
inline constexpr int64_t kEc12TileCols = 1024;    ///< columns of a tile (the kernel's kDlTileCols)
inline constexpr int64_t kEc12SlicePatches = 7;   ///< patch words a slice holds
inline constexpr int64_t kEc12SliceBytes = 1536 + 4 + 4 * kEc12SlicePatches;  ///< 1568: 98 pieces of 16 bytes
inline constexpr int64_t kEc12TileBytes = 16 * kEc12SliceBytes;               ///< 25,088 (bf16: 32,768)

/// One matrix in EC12, or why it cannot be (a slice with more than kEc12SlicePatches weights
/// outside its window).
struct Ec12Matrix {
  int64_t rows = 0, cols = 0;
  int64_t groups = 0;     ///< cdiv(rows, 16)
  int64_t col_tiles = 0;  ///< cdiv(cols, 1024)
  std::vector<uint8_t> packed;  ///< groups x col_tiles x kEc12TileBytes; empty when !ok
  bool ok = false;
  int64_t patches = 0;       ///< weights in patch lists (over the slices that fit)
  int64_t worst_slice = 0;   ///< the most patches a slice needed
  std::string why;           ///< when !ok: the first slice that did not fit (row group, columns, count)
};

/// Packs `w` (bf16 bits, [rows, cols] row-major) in EC12. Uses up to `threads` threads (0:
/// hardware_concurrency); Qwen3-1.7B's 1.4 G layer weights add about 2 s to an engine's
/// load on 16 cores (bench/results/ec12-2026-12-07/).
/// Throws Error(kUsage) for rows < 1, cols < 1 or a null `w`. A slice that needs more than
/// kEc12SlicePatches patches leaves `ok` false and `packed` empty (the engine then streams bf16).
Ec12Matrix pack_ec12(const uint16_t* w, int64_t rows, int64_t cols, int threads = 0);

/// The bf16 bits of (row, col) decoded from `m.packed` as the kernel decodes them (code tables,
/// sign bits, patch words); 0 past rows or cols. For tests and tools: the layout's definition read
/// back. Throws Error(kUsage) when `m` is not ok or (row, col) is negative.
uint16_t ec12_weight(const Ec12Matrix& m, int64_t row, int64_t col);

}  // namespace thrive::model
