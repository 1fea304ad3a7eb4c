// The screened lm_head's int8 copy (include/thrive/model/lm_head_screen.hpp), checked on the CPU
// in float64: the packed layout reads back as each row's round(w / s) (ragged vocab and hidden
// sizes, zero padding), the margin coefficients bound the int8 copy's error for every row and
// many hidden states (Gaussian, with outlier channels, tiny), so a selection by those margins
// always keeps the exact argmax while keeping few rows of a random model's vocabulary; all-zero
// and non-finite rows; bad arguments. The GPU kernels are checked against the exact lm_head in
// tests/model/test_cuda_engine.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "thrive/core/error.hpp"
#include "thrive/model/lm_head_screen.hpp"
#include "thrive/ops/dtype.hpp"

namespace thrive::model {
namespace {

// bf16 bits of N(0, std^2) draws
std::vector<uint16_t> random_rows(int64_t vocab, int64_t hidden, double std, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0.0, std);
  std::vector<uint16_t> w(size_t(vocab * hidden));
  for (auto& x : w) x = ops::float_to_bf16(float(n(gen)));
  return w;
}

double row_dot(const std::vector<uint16_t>& w, int64_t j, const std::vector<double>& h) {
  double s = 0;
  for (size_t k = 0; k < h.size(); ++k) s += double(ops::bf16_to_float(w[size_t(j) * h.size() + k])) * h[k];
  return s;
}

TEST(LmHeadScreen, PackedLayoutReadsBackAsEachRowsRoundedQuotient) {
  const int64_t vocab = 37, hidden = 80;  // 3 groups (the last with 5 rows), 3 chunks (the last half past hidden)
  auto w = random_rows(vocab, hidden, 0.02, 1);
  w[size_t(5 * hidden + 7)] = ops::float_to_bf16(-0.5f);  // a row whose absmax is negative
  const auto s = screen_lm_head(w.data(), vocab, hidden, 2);
  EXPECT_EQ(s.hidden_padded, 96);
  EXPECT_EQ(s.groups, 3);
  ASSERT_EQ(s.packed.size(), size_t(3 * 96 * 16));
  for (int64_t j = 0; j < vocab; ++j) {
    double amax = 0;
    for (int64_t k = 0; k < hidden; ++k) amax = std::max(amax, std::fabs(double(ops::bf16_to_float(w[size_t(j * hidden + k)]))));
    EXPECT_EQ(s.scale[size_t(j)], float(amax / 127.0)) << "row " << j;
    for (int64_t k = 0; k < hidden; ++k) {
      const double x = ops::bf16_to_float(w[size_t(j * hidden + k)]);
      const long want = std::lround(std::clamp(x / double(s.scale[size_t(j)]), -127.0, 127.0));
      ASSERT_EQ(screened_q(s, j, k), want) << "row " << j << ", column " << k;
    }
  }
  EXPECT_EQ(screened_q(s, 5, 7), -127);
  // every byte belongs to one (row, column); the padding (rows 37-47, columns 80-95) holds q = 0
  int64_t padding = 0;
  for (uint8_t b : s.packed) padding += b == 128;
  int64_t zeros_inside = 0;
  for (int64_t j = 0; j < vocab; ++j)
    for (int64_t k = 0; k < hidden; ++k) zeros_inside += screened_q(s, j, k) == 0;
  EXPECT_EQ(padding, zeros_inside + (48 * 96 - vocab * hidden));
}

TEST(LmHeadScreen, MarginsBoundEveryRowsErrorAndKeepTheArgmax) {
  const int64_t vocab = 4096, hidden = 256;
  const auto w = random_rows(vocab, hidden, 0.02, 2);
  const auto s = screen_lm_head(w.data(), vocab, hidden);
  std::mt19937_64 gen(3);
  std::normal_distribution<double> n(0.0, 1.0);
  int64_t kept_total = 0;
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<double> h(static_cast<size_t>(hidden));
    for (auto& x : h) x = n(gen);
    if (trial % 3 == 1) h[size_t(trial)] *= 300;  // an outlier channel, as real models' hidden states have
    if (trial % 3 == 2)
      for (auto& x : h) x *= 1e-20;
    double hn = 0;
    for (double x : h) hn += x * x;
    hn = std::sqrt(hn);
    const auto n_rows = static_cast<size_t>(vocab);
    std::vector<double> exact(n_rows), approx(n_rows), margin(n_rows);
    for (int64_t j = 0; j < vocab; ++j) {
      exact[size_t(j)] = row_dot(w, j, h);
      double a = 0, qn = 0;
      for (int64_t k = 0; k < hidden; ++k) {
        a += double(s.scale[size_t(j)]) * screened_q(s, j, k) * h[size_t(k)];
        qn += double(screened_q(s, j, k)) * screened_q(s, j, k);
      }
      approx[size_t(j)] = a;
      margin[size_t(j)] = hn * double(s.coef[size_t(2 * j)]);
      // the quantization error alone is within the margin (Cauchy-Schwarz), with room left for the
      // f32 sums' error, and coef_d bounds the int8 row's norm
      EXPECT_LE(std::fabs(exact[size_t(j)] - a), margin[size_t(j)]) << "trial " << trial << ", row " << j;
      EXPECT_GE(double(s.coef[size_t(2 * j + 1)]), double(s.scale[size_t(j)]) * std::sqrt(qn)) << "row " << j;
    }
    double lower = -INFINITY;
    for (int64_t j = 0; j < vocab; ++j) lower = std::max(lower, approx[size_t(j)] - margin[size_t(j)]);
    const auto top = std::max_element(exact.begin(), exact.end()) - exact.begin();
    EXPECT_GE(approx[size_t(top)] + margin[size_t(top)], lower) << "trial " << trial << ": the argmax was screened out";
    int64_t kept = 0;
    for (int64_t j = 0; j < vocab; ++j) kept += approx[size_t(j)] + margin[size_t(j)] >= lower;
    kept_total += kept;
  }
  // a Gaussian model's logits: the margins (about 0.4 of a logit's standard deviation) keep the
  // top few percent at most (the screening's point: few bf16 rows to read)
  EXPECT_LT(double(kept_total) / 12.0, 0.05 * double(vocab));
  EXPECT_GT(kept_total, 12);
}

TEST(LmHeadScreen, ZeroAndNonFiniteRows) {
  const int64_t vocab = 20, hidden = 64;
  auto w = random_rows(vocab, hidden, 0.02, 4);
  for (int64_t k = 0; k < hidden; ++k) w[size_t(3 * hidden + k)] = 0;            // all zero
  w[size_t(7 * hidden + 10)] = 0x7f80;                                           // +inf
  w[size_t(11 * hidden + 63)] = 0x7fc0;                                          // NaN
  w[size_t(12 * hidden + 1)] = 0x7f7f;                                           // bf16's largest finite
  const auto s = screen_lm_head(w.data(), vocab, hidden, 1);
  EXPECT_EQ(s.scale[3], 0.f);
  EXPECT_EQ(s.coef[6], 0.f);  // exact: a zero row's logit is 0, as is its approximation
  for (int64_t j : {7, 11}) {
    EXPECT_EQ(s.coef[size_t(2 * j)], std::numeric_limits<float>::infinity()) << "row " << j << ": always a candidate";
    EXPECT_EQ(s.scale[size_t(j)], 0.f);
    for (int64_t k = 0; k < hidden; ++k) EXPECT_EQ(screened_q(s, j, k), 0);
  }
  EXPECT_TRUE(std::isfinite(s.scale[12]));
  EXPECT_EQ(screened_q(s, 12, 1), 127);
  EXPECT_GT(s.coef[24], 0.f);  // finite or +inf: an overflowing norm bounds nothing smaller
}

TEST(LmHeadScreen, BadArgumentsAreRefused) {
  const std::vector<uint16_t> w(64, 0);
  EXPECT_THROW(screen_lm_head(w.data(), 0, 64), Error);
  EXPECT_THROW(screen_lm_head(w.data(), 1, 0), Error);
  EXPECT_THROW(screen_lm_head(nullptr, 1, 64), Error);
  const auto s = screen_lm_head(w.data(), 1, 64);
  EXPECT_EQ(screened_q(s, -1, 0), 0);
  EXPECT_EQ(screened_q(s, 0, 64), 0);
  EXPECT_EQ(screened_q(s, 1, 0), 0);
}

}  // namespace
}  // namespace thrive::model
