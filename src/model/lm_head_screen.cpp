// The screened lm_head's int8 copy: see include/thrive/model/lm_head_screen.hpp.
#include "thrive/model/lm_head_screen.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "src/model/parallel_for.hpp"
#include "thrive/core/error.hpp"
#include "thrive/ops/dtype.hpp"

namespace thrive::model {
namespace {

// The byte of (row r, column k) within its group's chunk (r < 16, k < 32): lane 4 (r % 8) + (k % 8) / 2,
// k-step k / 16, then the fragment register ((k % 16) / 8: a0/a1 or a2/a3, r / 8: the row half)
// and the element within it (k % 2).
int64_t chunk_byte(int64_t r, int64_t k) {
  const int64_t lane = 4 * (r % 8) + (k % 8) / 2, step = k / 16, reg = 2 * ((k % 16) / 8) + r / 8;
  return lane * 16 + step * 8 + reg * 2 + k % 2;
}

// f32 rounded toward +inf from a non-negative double (+inf stays +inf).
float round_up(double x) {
  float f = float(x);
  if (double(f) < x) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

}  // namespace

ScreenedLmHead screen_lm_head(const uint16_t* w, int64_t vocab, int64_t hidden, int threads) {
  if (w == nullptr || vocab < 1 || hidden < 1)
    fail(ErrorCategory::kUsage, "screen_lm_head: vocab {}, hidden {}{}: expected both >= 1 and the weights", vocab,
         hidden, w == nullptr ? ", no weights" : "");
  ScreenedLmHead s;
  s.vocab = vocab, s.hidden = hidden;
  s.hidden_padded = screen_hidden_padded(hidden);
  s.groups = (vocab + 15) / 16;
  s.packed.assign(size_t(s.groups * s.hidden_padded * 16), uint8_t(128));  // q = 0 everywhere padded
  s.scale.assign(size_t(vocab), 0.f);
  s.coef.assign(size_t(2 * vocab), 0.f);
  const double g = screen_accumulation_factor(hidden);
  const int64_t chunks = s.hidden_padded / 32;
  parallel_for(vocab, 256, [&](int64_t j0, int64_t j1) {
    std::vector<double> row(static_cast<size_t>(hidden));
    for (int64_t j = j0; j < j1; ++j) {
      double amax = 0;
      bool finite = true;
      for (int64_t k = 0; k < hidden; ++k) {
        row[size_t(k)] = double(ops::bf16_to_float(w[j * hidden + k]));
        finite = finite && std::isfinite(row[size_t(k)]);
        amax = std::max(amax, std::fabs(row[size_t(k)]));
      }
      if (!finite) {  // always a candidate: its exact logit is NaN or infinite, and counted
        s.coef[size_t(2 * j)] = s.coef[size_t(2 * j + 1)] = std::numeric_limits<float>::infinity();
        continue;
      }
      const float sc = float(amax / 127.0);  // the kernel multiplies by this f32 value
      s.scale[size_t(j)] = sc;
      double err2 = 0, w2 = 0, q2 = 0;
      uint8_t* group = s.packed.data() + (j / 16) * chunks * 512;
      for (int64_t k = 0; k < hidden; ++k) {
        const double x = row[size_t(k)];
        const long q = sc > 0 ? std::lround(std::clamp(x / double(sc), -127.0, 127.0)) : 0;
        const double e = x - double(sc) * double(q);
        err2 += e * e, w2 += x * x, q2 += double(q) * double(q);
        group[(k / 32) * 512 + chunk_byte(j % 16, k % 32)] = uint8_t(q + 128);
      }
      const double wq = double(sc) * std::sqrt(q2), wn = std::sqrt(w2);
      s.coef[size_t(2 * j)] = round_up((std::sqrt(err2) + g * (wq + wn)) * (1 + 1e-6));
      s.coef[size_t(2 * j + 1)] = round_up(wq * (1 + g) * (1 + 1e-6));
    }
  }, threads);
  return s;
}

int screened_q(const ScreenedLmHead& s, int64_t j, int64_t k) {
  if (j < 0 || k < 0 || j >= s.vocab || k >= s.hidden) return 0;
  const uint8_t* group = s.packed.data() + (j / 16) * (s.hidden_padded / 32) * 512;
  return int(group[(k / 32) * 512 + chunk_byte(j % 16, k % 32)]) - 128;
}

}  // namespace thrive::model
