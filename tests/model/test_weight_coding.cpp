// EC12, the persistent kernel's 12-bit weight coding (include/thrive/model/weight_coding.hpp),
// checked on the CPU: every weight of random matrices at ragged shapes reads back bit for bit
// (ec12_weight: the layout as the kernel decodes it), including ±0, subnormals, infinities, NaNs,
// the largest finite values and weights far outside their slice's window (patch words); a slice
// with more outliers than patch words is refused with its place named; the bytes per weight; an
// emulation of the kernel's byte-permute decode (PRMT, PTX ISA) of a whole k-step builds the same
// A-fragment registers as the layout's definition; bad arguments. The GPU path (the persistent
// kernel with EC12 tiles against bf16 tiles and the CPU engine) is in tests/model/test_cuda_engine.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "thrive/core/error.hpp"
#include "thrive/model/weight_coding.hpp"
#include "thrive/ops/dtype.hpp"

namespace thrive::model {
namespace {

// bf16 bits of N(0, std^2) draws; with `floor`, magnitudes below it are raised to it (no weight
// then falls below its slice's window: the tests that count patch words place their own)
std::vector<uint16_t> gaussian_bits(int64_t rows, int64_t cols, double std, uint64_t seed, double floor = 0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0.0, std);
  std::vector<uint16_t> w(size_t(rows * cols));
  for (auto& x : w) {
    double v = n(gen);
    if (std::fabs(v) < floor) v = v < 0 ? -floor : floor;
    x = ops::float_to_bf16(float(v));
  }
  return w;
}

void expect_reads_back(const std::vector<uint16_t>& w, int64_t rows, int64_t cols) {
  const auto m = pack_ec12(w.data(), rows, cols, 2);
  ASSERT_TRUE(m.ok) << m.why;
  EXPECT_EQ(m.groups, (rows + 15) / 16);
  EXPECT_EQ(m.col_tiles, (cols + 1023) / 1024);
  EXPECT_EQ(int64_t(m.packed.size()), m.groups * m.col_tiles * kEc12TileBytes);
  int64_t wrong = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (ec12_weight(m, r, c) != w[size_t(r * cols + c)] && ++wrong <= 5)
        ADD_FAILURE() << "(" << r << ", " << c << "): " << std::hex << ec12_weight(m, r, c) << " != " << w[size_t(r * cols + c)];
  EXPECT_EQ(wrong, 0);
  // past the matrix: zeros (the kernel multiplies the padding)
  EXPECT_EQ(ec12_weight(m, rows, 0), 0);
  EXPECT_EQ(ec12_weight(m, 0, cols), 0);
}

TEST(WeightCoding, GaussianMatricesReadBackBitForBitAtRaggedShapes) {
  // ragged rows (a partial group), ragged columns (a partial tile, a partial slice, a partial k-step)
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{16, 1024}, {37, 2048}, {5, 1100}, {48, 70}, {1, 1}})
    expect_reads_back(gaussian_bits(rows, cols, 0.02, uint64_t(rows * 131 + cols)), rows, cols);
}

TEST(WeightCoding, SpecialValuesAndOutliersReadBackThroughPatchWords) {
  const int64_t rows = 32, cols = 2048;
  auto w = gaussian_bits(rows, cols, 0.02, 7, 1e-3);
  // one slice (rows 0-15, columns 0-63) gets 7 weights outside any window of the others
  const uint16_t outliers[] = {0x7f80 /* +inf */, 0xff80 /* -inf */, 0x7fc1 /* NaN */, 0x7f7f /* largest */,
                               0x0001 /* smallest subnormal, h7 = 0: in the code */, 0x3f80 /* 1.0 */, 0x2f00};
  for (int i = 0; i < 7; ++i) w[size_t((i * 2) * cols + i * 9)] = outliers[i];
  // zeros of both signs and subnormals elsewhere (representable without a patch)
  w[size_t(20 * cols + 100)] = 0x0000, w[size_t(21 * cols + 101)] = 0x8000, w[size_t(22 * cols + 102)] = 0x807f;
  w[size_t(23 * cols + 103)] = 0x0080;  // the smallest normal: h7 = 0, exponent bit 0 in the low byte
  const auto m = pack_ec12(w.data(), rows, cols, 1);
  ASSERT_TRUE(m.ok) << m.why;
  // the subnormal needs none, nor does 1.0 (h7 63): the window [57, 63] holds it and every Gaussian
  // weight (|w| from 1e-3, h7 58, to about 0.08, h7 61); the other five need a patch word
  EXPECT_EQ(m.patches, 5);
  EXPECT_LE(m.worst_slice, kEc12SlicePatches);
  expect_reads_back(w, rows, cols);
}

TEST(WeightCoding, ASliceWithTooManyOutliersIsRefusedWithItsPlace) {
  const int64_t rows = 20, cols = 1024;
  auto w = gaussian_bits(rows, cols, 0.02, 3, 1e-3);
  for (int i = 0; i < 8; ++i) w[size_t(i * cols + 64 * 3 + i)] = 0x4780;  // 65536.0 x 8 in slice 3 of group 0
  const auto m = pack_ec12(w.data(), rows, cols, 2);
  EXPECT_FALSE(m.ok);
  EXPECT_TRUE(m.packed.empty());
  EXPECT_NE(m.why.find("rows [0, 16), columns [192, 256)"), std::string::npos) << m.why;
  EXPECT_NE(m.why.find("8 weights outside"), std::string::npos) << m.why;
  EXPECT_THROW(ec12_weight(m, 0, 0), Error);
  // 7 fit
  w[size_t(7 * cols + 64 * 3 + 7)] = w[size_t(8 * cols + 64 * 3 + 7)];
  EXPECT_TRUE(pack_ec12(w.data(), rows, cols, 2).ok);
}

TEST(WeightCoding, TakesThreeQuartersOfTheBf16BytesPlusTheTrailers) {
  const auto w = gaussian_bits(64, 4096, 0.02, 11);
  const auto m = pack_ec12(w.data(), 64, 4096);
  ASSERT_TRUE(m.ok);
  EXPECT_DOUBLE_EQ(double(m.packed.size()) / double(w.size() * 2), 25088.0 / 32768.0);
  // N(0, 0.02) in bf16: about 3e-4 of the weights fall below a 14-exponent window (|w| < 2^-17)
  EXPECT_LT(double(m.patches) / double(w.size()), 1e-3);
}

// The kernel's decode of lane l's k-step s (engine_dl_gemv<.., PK = true>), emulated: prmt.b32
// in its default mode picks bytes of {b, a} by the selector's nibbles (bit 3 replicates the
// picked byte's sign; the kernel's selectors have it clear).
uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  const uint64_t x = uint64_t(a) | uint64_t(b) << 32;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t nib = (sel >> (4 * i)) & 15u;
    uint32_t byte = uint32_t(x >> (8 * (nib & 7u))) & 0xffu;
    if (nib & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;
    r |= byte << (8 * i);
  }
  return r;
}

TEST(WeightCoding, TheKernelsBytePermuteDecodeBuildsTheFragmentRegisters) {
  const int64_t rows = 16, cols = 1024;
  auto w = gaussian_bits(rows, cols, 0.05, 5);
  w[3] = 0x8000, w[17] = 0x0001;
  const auto m = pack_ec12(w.data(), rows, cols, 1);
  ASSERT_TRUE(m.ok);
  for (int64_t warp = 0; warp < 16; ++warp) {
    const uint8_t* slice = m.packed.data() + warp * kEc12SliceBytes;
    uint32_t h0;
    std::memcpy(&h0, slice + 1536, 4);
    const uint32_t ta = h0 * 0x01010100u + 0x02010000u, tb = h0 * 0x01010101u + 0x06050403u;
    for (int64_t lane = 0; lane < 32; ++lane)
      for (int64_t s = 0; s < 4; ++s) {
        uint32_t lo, hi, code;
        const int64_t lb = (s < 2 ? 16 * lane + 8 * s : 512 + 16 * lane + 8 * (s - 2));
        std::memcpy(&lo, slice + lb, 4);
        std::memcpy(&hi, slice + lb + 4, 4);
        std::memcpy(&code, slice + 1024 + 16 * lane + 4 * s, 4);
        const uint32_t hb = prmt(ta, tb, code & 0x7777u) | (code & 0x80808080u),
                       hb2 = prmt(ta, tb, (code >> 16) & 0x7777u) | ((code << 4) & 0x80808080u);
        const uint32_t af[4] = {prmt(lo, hb, 0x5140u), prmt(lo, hb, 0x7362u), prmt(hi, hb2, 0x5140u), prmt(hi, hb2, 0x7362u)};
        // mma.m16n8k16's A fragment: a0 = (g, 2c..2c+1), a1 = (g+8, ..), a2 = (g, 2c+8..), a3 = (g+8, 2c+8..)
        const int64_t g = lane / 4, c = lane % 4, col = warp * 64 + 16 * s + 2 * c;
        const int64_t at[4][2] = {{g, col}, {g + 8, col}, {g, col + 8}, {g + 8, col + 8}};
        for (int reg = 0; reg < 4; ++reg) {
          // a patched weight decodes to +0 here (its product is the patch word's)
          auto expect = [&](int64_t r, int64_t k) {
            for (int64_t j = 0; j < kEc12SlicePatches; ++j) {
              uint32_t pw;
              std::memcpy(&pw, slice + 1540 + 4 * j, 4);
              if (pw != 0 && int64_t(pw >> 28) == r && int64_t((pw >> 16) & 63u) == k % 64) return uint32_t(0);
            }
            return uint32_t(w[size_t(r * cols + k)]);
          };
          const uint32_t want = expect(at[reg][0], at[reg][1]) | expect(at[reg][0], at[reg][1] + 1) << 16;
          ASSERT_EQ(af[reg], want) << "warp " << warp << " lane " << lane << " step " << s << " register " << reg;
        }
      }
  }
}

TEST(WeightCoding, BadArgumentsAreRefused) {
  const uint16_t one = 0x3f80;
  EXPECT_THROW(pack_ec12(nullptr, 1, 1), Error);
  EXPECT_THROW(pack_ec12(&one, 0, 1), Error);
  EXPECT_THROW(pack_ec12(&one, 1, -3), Error);
  const auto m = pack_ec12(&one, 1, 1);
  ASSERT_TRUE(m.ok);
  EXPECT_EQ(ec12_weight(m, 0, 0), 0x3f80);
  EXPECT_THROW(ec12_weight(m, -1, 0), Error);
}

}  // namespace
}  // namespace thrive::model
