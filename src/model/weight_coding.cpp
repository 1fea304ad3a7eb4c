// EC12 weight coding: see include/thrive/model/weight_coding.hpp.
#include "thrive/model/weight_coding.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "src/model/parallel_for.hpp"
#include "thrive/core/error.hpp"

namespace thrive::model {
namespace {

constexpr int64_t kSliceCols = 64, kPatchAt = 1536;

// Where a slice's weight (r < 16, c < 64) lives: its lane, k-step and index e_i among the lane's 8.
struct Place {
  int64_t lane, step, i;
};
Place place(int64_t r, int64_t c) {
  const int64_t cc = c % 16;
  return {4 * (r % 8) + (c % 8) / 2, c / 16, 4 * (cc / 8) + 2 * (r / 8) + c % 2};
}
int64_t low_byte_at(const Place& p) {
  return p.step < 2 ? 16 * p.lane + 8 * p.step + p.i : 512 + 16 * p.lane + 8 * (p.step - 2) + p.i;
}
int64_t code_word_at(const Place& p) { return 1024 + 16 * p.lane + 4 * p.step; }
int k_shift(int64_t i) { return int(i < 4 ? 4 * i : 16 + 4 * (i - 4)); }
int sign_shift(int64_t i) { return int(i < 4 ? 8 * i + 7 : 8 * (i - 4) + 3); }

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// The high byte's table: k = 0 -> 0, k = 1..7 -> h0 + k - 1 (sign apart).
uint32_t table_byte(uint32_t h0, uint32_t k) { return k == 0 ? 0u : h0 + k - 1u; }

}  // namespace

Ec12Matrix pack_ec12(const uint16_t* w, int64_t rows, int64_t cols, int threads) {
  if (w == nullptr || rows < 1 || cols < 1)
    fail(ErrorCategory::kUsage, "pack_ec12: rows {}, cols {}{}: expected both >= 1 and the weights", rows, cols,
         w == nullptr ? ", no weights" : "");
  Ec12Matrix m;
  m.rows = rows, m.cols = cols;
  m.groups = (rows + kEc12TileRows - 1) / kEc12TileRows;
  m.col_tiles = (cols + kEc12TileCols - 1) / kEc12TileCols;
  m.packed.assign(size_t(m.groups * m.col_tiles * kEc12TileBytes), uint8_t(0));
  std::atomic<int64_t> patches{0}, worst{0};
  std::mutex why_mutex;
  int64_t first_bad = -1;  // the lowest slice index that did not fit (deterministic message)
  const int64_t slices = m.groups * m.col_tiles * 16;
  parallel_for(slices, 256, [&](int64_t s0, int64_t s1) {
    int64_t local_patches = 0, local_worst = 0;
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t tile = s / 16, warp = s % 16, g = tile / m.col_tiles, t = tile % m.col_tiles;
      const int64_t row0 = g * kEc12TileRows, col0 = t * kEc12TileCols + warp * kSliceCols;
      uint8_t* out = m.packed.data() + tile * kEc12TileBytes + warp * kEc12SliceBytes;
      auto bits_at = [&](int64_t r, int64_t c) -> uint16_t {
        const int64_t row = row0 + r, col = col0 + c;
        return row < rows && col < cols ? w[row * cols + col] : uint16_t(0);
      };
      // the window of 7 consecutive h7 values (sign and exponent bits 7..1) that holds the most weights
      int64_t hist[128] = {};
      for (int64_t r = 0; r < kEc12TileRows; ++r)
        for (int64_t c = 0; c < kSliceCols; ++c) ++hist[(bits_at(r, c) >> 8) & 0x7f];
      uint32_t h0 = 1;
      int64_t best = -1;
      for (uint32_t lo = 1; lo <= 121; ++lo) {
        int64_t n = 0;
        for (uint32_t h = lo; h < lo + 7; ++h) n += hist[h];
        if (n > best) best = n, h0 = lo;
      }
      store_u32(out + kPatchAt, h0);
      int64_t used = 0;
      for (int64_t r = 0; r < kEc12TileRows; ++r)
        for (int64_t c = 0; c < kSliceCols; ++c) {
          const uint16_t x = bits_at(r, c);
          const uint32_t sign = x >> 15, h7 = (x >> 8) & 0x7fu;
          uint32_t k = 0, low = x & 0xffu;
          if (h7 >= h0 && h7 <= h0 + 6) k = h7 - h0 + 1;
          else if (h7 != 0) {  // outside the window: +0 here, the bits in a patch word
            if (used < kEc12SlicePatches)
              store_u32(out + kPatchAt + 4 + 4 * used, (uint32_t(r) << 28) | (uint32_t(c) << 16) | x);
            ++used;
            continue;  // code 0 (sign 0, k 0) and low byte 0: +0
          }
          const Place p = place(r, c);
          out[low_byte_at(p)] = uint8_t(low);
          uint8_t* cw = out + code_word_at(p);
          store_u32(cw, load_u32(cw) | (k << k_shift(p.i)) | (sign << sign_shift(p.i)));
        }
      if (used <= kEc12SlicePatches) local_patches += used;  // the slices that fit
      local_worst = std::max(local_worst, used);
      if (used > kEc12SlicePatches) {
        std::lock_guard<std::mutex> lock(why_mutex);
        if (first_bad < 0 || s < first_bad) {
          first_bad = s;
          m.why = fmt::format("rows [{}, {}), columns [{}, {}): {} weights outside the slice's exponent window, {} fit",
                              row0, std::min(row0 + kEc12TileRows, rows), col0, std::min(col0 + kSliceCols, cols), used,
                              kEc12SlicePatches);
        }
      }
    }
    patches += local_patches;
    for (int64_t seen = worst.load(); local_worst > seen && !worst.compare_exchange_weak(seen, local_worst);) {
    }
  }, threads);
  m.patches = patches.load();
  m.worst_slice = worst.load();
  m.ok = first_bad < 0;
  if (!m.ok) m.packed = {};
  return m;
}

uint16_t ec12_weight(const Ec12Matrix& m, int64_t row, int64_t col) {
  if (!m.ok) fail(ErrorCategory::kUsage, "ec12_weight: the matrix was not packed ({})", m.why);
  if (row < 0 || col < 0) fail(ErrorCategory::kUsage, "ec12_weight: row {}, col {}: expected both >= 0", row, col);
  if (row >= m.rows || col >= m.cols) return 0;
  const int64_t g = row / kEc12TileRows, t = col / kEc12TileCols, warp = (col % kEc12TileCols) / kSliceCols;
  const int64_t r = row % kEc12TileRows, c = col % kSliceCols;
  const uint8_t* slice = m.packed.data() + (g * m.col_tiles + t) * kEc12TileBytes + warp * kEc12SliceBytes;
  const Place p = place(r, c);
  const uint32_t code = load_u32(slice + code_word_at(p)), h0 = load_u32(slice + kPatchAt);
  const uint32_t k = (code >> k_shift(p.i)) & 7u, sign = (code >> sign_shift(p.i)) & 1u;
  uint16_t bits = uint16_t(((sign << 7 | table_byte(h0, k)) << 8) | slice[low_byte_at(p)]);
  for (int64_t j = 0; j < kEc12SlicePatches; ++j) {  // a patch word replaces the stored +0
    const uint32_t pw = load_u32(slice + kPatchAt + 4 + 4 * j);
    if (pw != 0 && int64_t(pw >> 28) == r && int64_t((pw >> 16) & 63u) == c) bits = uint16_t(pw & 0xffffu);
  }
  return bits;
}

}  // namespace thrive::model
