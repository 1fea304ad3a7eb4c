// The op registry: bf16 conversions, each op's contract (tensors, dims, scalars,
// shapes), the byte model at Qwen3-1.7B dims, and sanity of the float64 references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "kernels/cpu/thrive_cpu.h"
#include "tests/support/test_support.hpp"
#include "thrive/core/error.hpp"
#include "thrive/ops/op.hpp"

namespace thrive::ops {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---------------------------------------------------------------------------- bf16

TEST(Bf16, EveryBf16ValueRoundTripsExactly) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float f = bf16_to_float(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f)))) << std::hex << b;
    } else {
      ASSERT_EQ(float_to_bf16(f), bits) << std::hex << b;
    }
  }
}

TEST(Bf16, RoundsToNearestTiesToEven) {
  struct Case {
    uint32_t f32;
    uint16_t bf16;
  };
  const Case cases[] = {
      {0x3F800000u, 0x3F80},  // 1.0 exact
      {0x3F808000u, 0x3F80},  // 1 + 2^-8: halfway, 0x3F80 is even -> down
      {0x3F818000u, 0x3F82},  // halfway between 0x3F81 (odd) and 0x3F82 -> up to even
      {0x3F808001u, 0x3F81},  // just above halfway -> up
      {0x3F807FFFu, 0x3F80},  // just below halfway -> down
      {0xBF818000u, 0xBF82},  // negative halfway -> even
      {0x7F7FFFFFu, 0x7F80},  // FLT_MAX rounds to +inf
      {0x7F800000u, 0x7F80},  // +inf stays inf
      {0xFF800000u, 0xFF80},  // -inf stays -inf
      {0x00000001u, 0x0000},  // smallest denormal -> +0
      {0x80000000u, 0x8000},  // -0 keeps its sign
  };
  for (const auto& c : cases) {
    EXPECT_EQ(float_to_bf16(float_of(c.f32)), c.bf16) << std::hex << c.f32;
    EXPECT_EQ(thrive_f32_to_bf16(float_of(c.f32)), c.bf16) << "kernel ABI header, " << std::hex << c.f32;
  }
  EXPECT_DOUBLE_EQ(round_bf16(1.0 + 1.0 / 256.0), 1.0);
  EXPECT_DOUBLE_EQ(round_bf16(1.0 + 3.0 / 256.0), 1.0 + 2.0 / 128.0);
  EXPECT_DOUBLE_EQ(round_bf16(-2.5), -2.5);
}

TEST(Bf16, NanStaysNan) {
  // Quiet, signalling (payload only in the low 16 bits, which truncation would turn
  // into infinity), and negative NaNs.
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0x7F80FFFFu, 0xFF800001u, 0xFFC00000u, 0x7FFFFFFFu}) {
    const uint16_t b = float_to_bf16(float_of(nan));
    EXPECT_TRUE(std::isnan(bf16_to_float(b))) << std::hex << nan << " -> " << b;
    EXPECT_EQ(b & 0x8000, (nan >> 16) & 0x8000) << "sign kept";
    EXPECT_TRUE(std::isnan(thrive_bf16_to_f32(thrive_f32_to_bf16(float_of(nan))))) << std::hex << nan;
  }
  EXPECT_TRUE(std::isnan(round_bf16(std::numeric_limits<double>::quiet_NaN())));
}

// The checked conversion the CUDA engine loads weights with: values that round to a finite bf16
// pass (bf16's largest finite, 0x7F7F, included), a finite float that rounds past it is an input
// error naming the tensor, the index and the value.
TEST(Bf16, CheckedConversionRefusesValuesPastTheRange) {
  const std::vector<float> ok = {0.f, -0.f, 1.5f, -3.0e38f, bf16_to_float(0x7F7F), 1e-40f};
  std::vector<uint16_t> out(ok.size());
  floats_to_bf16_checked(ok.data(), ok.size(), out.data(), "tensor t");
  for (size_t i = 0; i < ok.size(); ++i) EXPECT_EQ(out[i], float_to_bf16(ok[i]));
  for (const float bad : {3.4e38f, -3.4e38f, std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
    const std::vector<float> v = {1.f, 2.f, bad};
    std::vector<uint16_t> o(v.size());
    try {
      floats_to_bf16_checked(v.data(), v.size(), o.data(), "tensor model.layers.3.self_attn.k_norm.weight");
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInput) << e.what();
      EXPECT_NE(std::string(e.what()).find("tensor model.layers.3.self_attn.k_norm.weight: element 2 = "), std::string::npos)
          << e.what();
    }
  }
}

// The kernel ABI header and the host agree bit for bit on a spread of float patterns.
TEST(Bf16, KernelHeaderMatchesHost) {
  for (uint64_t u = 0; u <= 0xffffffffull; u += 9973) {
    const float f = float_of(uint32_t(u));
    ASSERT_EQ(thrive_f32_to_bf16(f), float_to_bf16(f)) << std::hex << u;
  }
  for (uint32_t b = 0; b <= 0xffff; ++b)
    ASSERT_EQ(bits_of(thrive_bf16_to_f32(uint16_t(b))), bits_of(bf16_to_float(uint16_t(b))));
}

TEST(DType, NamesSizesAndHostTensorStorage) {
  struct Case {
    DType d;
    const char* name;
    size_t bytes;
    double value, stored;
  };
  const Case cases[] = {{DType::kBF16, "bf16", 2, 1.0 + 1.0 / 256.0, 1.0},
                        {DType::kF32, "f32", 4, 0.1, double(0.1f)},
                        {DType::kI32, "i32", 4, -7.0, -7.0},
                        {DType::kI64, "i64", 8, 40959.0, 40959.0}};
  for (const auto& c : cases) {
    EXPECT_STREQ(dtype_name(c.d), c.name);
    EXPECT_EQ(dtype_bytes(c.d), c.bytes);
    EXPECT_EQ(dtype_from_name(c.name), c.d);
    HostTensor t{{"t", {"N"}, c.d, Role::kIn}, {3}, std::vector<uint8_t>(3 * c.bytes, 0)};
    t.set(1, c.value);
    EXPECT_EQ(t.get(1), c.stored) << c.name;
    EXPECT_EQ(t.get(0), 0.0);
    EXPECT_EQ(t.elements(), 3);
  }
  try {
    dtype_from_name("f16");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(e.what()).find("f16"), std::string::npos);
  }
}

// ----------------------------------------------------------------- op contracts

std::vector<std::string> expected_ops() {
  return {"rmsnorm_residual", "swiglu_act", "rope", "softmax", "gqa_decode_attention"};
}

TEST(Registry, HoldsTheFiveOpsInStableOrder) {
  EXPECT_EQ(op_names(), expected_ops());
  for (const auto& name : expected_ops()) EXPECT_EQ(find_op(name).name(), name);
}

TEST(Registry, UnknownOpIsAUsageErrorListingTheOps) {
  try {
    find_op("nope");
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.category(), ErrorCategory::kUsage);
    EXPECT_NE(what.find("'nope'"), std::string::npos) << what;
    for (const auto& name : expected_ops()) EXPECT_NE(what.find(name), std::string::npos) << what;
    EXPECT_TRUE(test::is_one_line(what));
  }
}

class OpContract : public ::testing::TestWithParam<std::string> {};

TEST_P(OpContract, TensorsDimsScalarsAndShapesAreConsistent) {
  const Op& op = find_op(GetParam());
  const auto tensors = op.tensors();
  const auto symbols = op.dim_symbols();
  ASSERT_FALSE(tensors.empty());
  ASSERT_FALSE(symbols.empty());
  std::set<std::string> names;
  bool has_output = false;
  for (const auto& t : tensors) {
    EXPECT_TRUE(names.insert(t.name).second) << "duplicate tensor " << t.name;
    EXPECT_FALSE(t.dims.empty()) << t.name;
    has_output = has_output || t.role != Role::kIn;
  }
  EXPECT_TRUE(has_output);
  EXPECT_FALSE(op.summary().empty());
  for (const auto& model : {config::ModelDims{}, test::small_model()}) {
    std::vector<ShapeCase> all = op.bench_shapes(model);
    EXPECT_FALSE(all.empty());
    std::set<std::string> labels;
    for (const auto& s : all) EXPECT_TRUE(labels.insert(s.label).second) << "duplicate " << s.label;
    const auto verify = op.verify_shapes(model);
    EXPECT_FALSE(verify.empty());
    all.insert(all.end(), verify.begin(), verify.end());
    for (const auto& sc : all) {
      SCOPED_TRACE(sc.label);
      for (const auto& t : tensors)
        for (const auto& d : t.dims)
          EXPECT_TRUE(sc.shape.count(d)) << "tensor " << t.name << " needs " << d;
      for (const auto& d : symbols) EXPECT_TRUE(sc.shape.count(d)) << "dims() needs " << d;
      const auto dims = op.dims(sc.shape);
      ASSERT_EQ(dims.size(), symbols.size());
      for (size_t i = 0; i < symbols.size(); ++i) EXPECT_EQ(dims[i], sc.shape.at(symbols[i]));
      for (const auto& [sym, v] : sc.shape) EXPECT_GT(v, 0) << sym;
      EXPECT_EQ(op.scalars(sc.shape, model).size(), op.scalar_names().size());
      EXPECT_GT(op.min_bytes(sc.shape), 0);
      EXPECT_GT(op.flops(sc.shape), 0.0);
      EXPECT_GT(op.workspace_bytes(sc.shape), 0);
    }
  }
}

TEST_P(OpContract, MakeTensorsAndReferenceHaveTheDeclaredSizes) {
  const Op& op = find_op(GetParam());
  const auto model = test::small_model();
  std::mt19937_64 rng(7);
  for (const auto& sc : op.verify_shapes(model)) {
    if (op.min_bytes(sc.shape) > (8 << 20)) continue;
    SCOPED_TRACE(sc.label);
    auto t = op.make_tensors(sc.shape, model, Distribution::kNormal, rng, false);
    const auto specs = op.tensors();
    ASSERT_EQ(t.size(), specs.size());
    size_t outputs = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_EQ(t[i].spec.name, specs[i].name);
      EXPECT_EQ(int64_t(t[i].bytes.size()), specs[i].bytes(sc.shape));
      if (specs[i].role == Role::kOut) {
        for (uint8_t b : t[i].bytes) ASSERT_EQ(b, 0) << "outputs start zeroed";
      }
      if (specs[i].role != Role::kIn) ++outputs;
    }
    const auto ref = op.reference(t, sc.shape, model);
    ASSERT_EQ(ref.size(), outputs);
    size_t k = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (specs[i].role == Role::kIn) continue;
      EXPECT_EQ(int64_t(ref[k].size()), t[i].elements()) << specs[i].name;
      for (double v : ref[k]) ASSERT_TRUE(std::isfinite(v)) << specs[i].name;
      ++k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpContract, ::testing::ValuesIn(expected_ops()),
                         [](const auto& info) { return info.param; });

TEST(OpContract, DimsFollowDeclaredOrder) {
  EXPECT_EQ(find_op("rmsnorm_residual").dim_symbols(), (std::vector<std::string>{"T", "H"}));
  EXPECT_EQ(find_op("swiglu_act").dim_symbols(), (std::vector<std::string>{"T", "I"}));
  EXPECT_EQ(find_op("rope").dim_symbols(), (std::vector<std::string>{"T", "NQ", "NKV", "D", "P"}));
  EXPECT_EQ(find_op("softmax").dim_symbols(), (std::vector<std::string>{"T", "V"}));
  EXPECT_EQ(find_op("gqa_decode_attention").dim_symbols(),
            (std::vector<std::string>{"B", "L", "NQ", "NKV", "D"}));
  const Shape s = {{"V", 5}, {"T", 3}};  // map order differs from the op's order
  EXPECT_EQ(find_op("softmax").dims(s), (std::vector<int64_t>{3, 5}));
  EXPECT_THROW(find_op("softmax").dims({{"T", 3}}), Error);
}

// ------------------------------------------------------------------ byte model

struct BytesCase {
  std::string op, label;
  int64_t bytes;
};

void PrintTo(const BytesCase& b, std::ostream* os) { *os << b.op << " " << b.label; }

class MinBytes : public ::testing::TestWithParam<BytesCase> {};

TEST_P(MinBytes, MatchesHandComputedTrafficAtQwen3Dims) {
  const auto& p = GetParam();
  const Op& op = find_op(p.op);
  const config::ModelDims qwen;
  for (const auto& sc : op.bench_shapes(qwen))
    if (sc.label == p.label) {
      EXPECT_EQ(op.min_bytes(sc.shape), p.bytes);
      return;
    }
  FAIL() << "no bench shape " << p.label << " for " << p.op;
}

// H=2048, I=6144, NQ=16, NKV=8, D=128, V=151936.
INSTANTIATE_TEST_SUITE_P(
    Qwen3, MinBytes,
    ::testing::Values(
        // x read, residual read+written, out written (bf16), weight read once.
        BytesCase{"rmsnorm_residual", "T=4096", int64_t{4096} * 2048 * 2 * 4 + 2048 * 2},
        BytesCase{"rmsnorm_residual", "T=1", int64_t{1} * 2048 * 2 * 4 + 2048 * 2},
        // [T, 2I] bf16 in, [T, I] bf16 out.
        BytesCase{"swiglu_act", "T=4096", int64_t{4096} * 12288 * 2 + int64_t{4096} * 6144 * 2},
        // positions i64, q and k read+written, only T cache rows read.
        BytesCase{"rope", "T=16", 16 * 8 + 2 * 2 * 16 * (16 + 8) * 128 + 16 * 128 * 4},
        // bf16 logits in, f32 probs out.
        BytesCase{"softmax", "T=1", int64_t{151936} * (2 + 4)},
        BytesCase{"softmax", "T=256", int64_t{256} * 151936 * (2 + 4)},
        // q and out, K and V caches, context lengths.
        BytesCase{"gqa_decode_attention", "B=16,L=1024",
                  2 * 16 * 16 * 128 * 2 + int64_t{2} * 16 * 1024 * 8 * 128 * 2 + 16 * 4}),
    [](const auto& info) {
      std::string n = info.param.op + "_" + info.param.label;
      for (auto& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

TEST(Tolerance, PerDtype) {
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kBF16).rtol, 0.008);
  EXPECT_DOUBLE_EQ(tolerance_for(DType::kF32).rtol, 1e-4);
  EXPECT_LT(tolerance_for(DType::kF32).nmse, tolerance_for(DType::kBF16).nmse);
}

// ------------------------------------------------------------ reference sanity

struct Made {
  std::vector<HostTensor> t;
  std::vector<std::vector<double>> ref;
};

Made make(const std::string& op_name, const Shape& shape, Distribution d = Distribution::kNormal,
          uint64_t seed = 11) {
  const Op& op = find_op(op_name);
  std::mt19937_64 rng(seed);
  Made m;
  m.t = op.make_tensors(shape, test::small_model(), d, rng, false);
  m.ref = op.reference(m.t, shape, test::small_model());
  return m;
}

TEST(Reference, SoftmaxRowsSumToOne) {
  for (auto d : {Distribution::kNormal, Distribution::kLargeMagnitude, Distribution::kNearZero,
                 Distribution::kMixedSigns}) {
    SCOPED_TRACE(distribution_name(d));
    const int64_t T = 3, V = 1003;
    auto m = make("softmax", {{"T", T}, {"V", V}}, d);
    for (int64_t r = 0; r < T; ++r) {
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) {
        const double p = m.ref[0][size_t(r * V + v)];
        EXPECT_GE(p, 0.0);
        EXPECT_LE(p, 1.0);
        sum += p;
      }
      EXPECT_NEAR(sum, 1.0, 1e-12);
    }
  }
}

TEST(Reference, SoftmaxOfEqualLogitsIsUniform) {
  const Op& op = find_op("softmax");
  const Shape s = {{"T", 1}, {"V", 8}};
  std::mt19937_64 rng(1);
  auto t = op.make_tensors(s, test::small_model(), Distribution::kNormal, rng, false);
  for (int64_t i = 0; i < 8; ++i) t[0].set(i, 3.0);
  const auto ref = op.reference(t, s, test::small_model());
  for (double p : ref[0]) EXPECT_DOUBLE_EQ(p, 0.125);
}

TEST(Reference, RopePreservesTheNormOfEveryHeadVector) {
  const int64_t T = 7, NQ = 3, NKV = 1, D = 40, P = 4096;
  auto m = make("rope", {{"T", T}, {"NQ", NQ}, {"NKV", NKV}, {"D", D}, {"P", P}});
  // The cache rows hold cos then sin: cos^2 + sin^2 = 1 (to f32 precision).
  for (int64_t p : {int64_t{0}, int64_t{1}, int64_t{1000}, P - 1})
    for (int64_t i = 0; i < D / 2; ++i) {
      const double c = m.t[3].get(p * D + i), s = m.t[3].get(p * D + D / 2 + i);
      ASSERT_NEAR(c * c + s * s, 1.0, 1e-6) << "p=" << p << " i=" << i;
    }
  for (int which : {1, 2}) {
    const int64_t heads = which == 1 ? NQ : NKV;
    const auto& out = m.ref[size_t(which - 1)];
    for (int64_t v = 0; v < T * heads; ++v) {
      double in2 = 0, out2 = 0;
      for (int64_t i = 0; i < D; ++i) {
        in2 += m.t[size_t(which)].get(v * D + i) * m.t[size_t(which)].get(v * D + i);
        out2 += out[size_t(v * D + i)] * out[size_t(v * D + i)];
      }
      EXPECT_NEAR(std::sqrt(out2), std::sqrt(in2), 1e-6 * std::sqrt(in2)) << "vector " << v;
    }
  }
  // Position 0 is the identity rotation.
  const Op& op = find_op("rope");
  const Shape s = {{"T", 1}, {"NQ", 1}, {"NKV", 1}, {"D", 6}, {"P", 4}};
  std::mt19937_64 rng(3);
  auto t = op.make_tensors(s, test::small_model(), Distribution::kNormal, rng, false);
  t[0].set(0, 0.0);
  auto ref = op.reference(t, s, test::small_model());
  for (int64_t i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(ref[0][size_t(i)], t[1].get(i));
}

TEST(Reference, RmsNormOutputHasWeightScaledUnitRms) {
  const int64_t T = 17, H = 37;
  auto m = make("rmsnorm_residual", {{"T", T}, {"H", H}});
  for (int64_t r = 0; r < T; ++r) {
    double sumsq = 0;
    for (int64_t c = 0; c < H; ++c) {
      // The residual output is x + residual.
      EXPECT_DOUBLE_EQ(m.ref[0][size_t(r * H + c)], m.t[0].get(r * H + c) + m.t[1].get(r * H + c));
      const double unweighted = m.ref[1][size_t(r * H + c)] / m.t[2].get(c);
      sumsq += unweighted * unweighted;
    }
    EXPECT_NEAR(std::sqrt(sumsq / double(H)), 1.0, 1e-3) << "row " << r;
  }
}

TEST(Reference, AttentionWithContextLengthOneReturnsV) {
  const int64_t B = 2, L = 5, NQ = 4, NKV = 2, D = 8;
  const Op& op = find_op("gqa_decode_attention");
  const Shape s = {{"B", B}, {"L", L}, {"NQ", NQ}, {"NKV", NKV}, {"D", D}};
  std::mt19937_64 rng(5);
  auto t = op.make_tensors(s, test::small_model(), Distribution::kNormal, rng, false);
  for (int64_t b = 0; b < B; ++b) t[3].set(b, 1.0);
  const auto out = op.reference(t, s, test::small_model())[0];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NQ; ++h) {
      const int64_t g = h / (NQ / NKV);
      for (int64_t i = 0; i < D; ++i)
        EXPECT_NEAR(out[size_t((b * NQ + h) * D + i)], t[2].get(((b * L + 0) * NKV + g) * D + i), 1e-12);
    }
}

TEST(Reference, AttentionWithEqualKeysAveragesValues) {
  const int64_t B = 1, L = 4, NQ = 2, NKV = 1, D = 4;
  const Op& op = find_op("gqa_decode_attention");
  const Shape s = {{"B", B}, {"L", L}, {"NQ", NQ}, {"NKV", NKV}, {"D", D}};
  std::mt19937_64 rng(9);
  auto t = op.make_tensors(s, test::small_model(), Distribution::kNormal, rng, false);
  t[3].set(0, 3.0);  // only the first 3 positions count
  for (int64_t j = 0; j < L; ++j)
    for (int64_t i = 0; i < D; ++i) t[1].set(j * D + i, 0.5);
  const auto out = op.reference(t, s, test::small_model())[0];
  for (int64_t h = 0; h < NQ; ++h)
    for (int64_t i = 0; i < D; ++i) {
      const double mean = (t[2].get(0 * D + i) + t[2].get(1 * D + i) + t[2].get(2 * D + i)) / 3.0;
      EXPECT_NEAR(out[size_t(h * D + i)], mean, 1e-12);
    }
}

TEST(Reference, SwigluMatchesADirectFormula) {
  const int64_t T = 3, I = 13;
  auto m = make("swiglu_act", {{"T", T}, {"I", I}, {"I2", 2 * I}}, Distribution::kMixedSigns);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t i = 0; i < I; ++i) {
      const double gate = m.t[0].get(r * 2 * I + i), up = m.t[0].get(r * 2 * I + I + i);
      const double silu = gate * 0.5 * (1.0 + std::tanh(gate / 2.0));  // x * sigmoid(x)
      EXPECT_NEAR(m.ref[0][size_t(r * I + i)], silu * up, 1e-12 * (1 + std::abs(silu * up)));
    }
}

TEST(Reference, DistributionsDifferInScale) {
  auto rms = [](Distribution d) {
    auto m = make("softmax", {{"T", 4}, {"V", 512}}, d, 21);
    double s = 0;
    for (int64_t i = 0; i < m.t[0].elements(); ++i) s += m.t[0].get(i) * m.t[0].get(i);
    return std::sqrt(s / double(m.t[0].elements()));
  };
  EXPECT_GT(rms(Distribution::kLargeMagnitude), 100.0);
  EXPECT_LT(rms(Distribution::kNearZero), 0.01);
  EXPECT_NEAR(rms(Distribution::kNormal), 1.0, 0.2);
}

}  // namespace
}  // namespace thrive::ops
