// verify_kernel on hand-written rmsnorm_residual kernels: a correct one passes; each
// kind of wrong one fails with the matching figure in the report.
#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"
#include "thrive/backend/cpu_backend.hpp"
#include "thrive/backend/embedded.hpp"
#include "thrive/core/error.hpp"
#include "thrive/verify/verify.hpp"

namespace thrive::verify {
namespace {

class VerifyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    home_ = new test::TempDir();
    backend_ = new backend::CpuBackend(test::fast_config(home_->path()));
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete home_;
  }

  // Small ragged shapes: a vector width never divides H=37 or H=1003.
  static std::vector<ops::ShapeCase> shapes() {
    return {{"T=1,H=256", {{"T", 1}, {"H", 256}}},
            {"T=3,H=1003", {{"T", 3}, {"H", 1003}}},
            {"T=17,H=37", {{"T", 17}, {"H", 37}}}};
  }
  static std::vector<ops::Distribution> distributions() {
    return {ops::Distribution::kNormal, ops::Distribution::kMixedSigns,
            ops::Distribution::kLargeMagnitude, ops::Distribution::kNearZero};
  }

  VerifyReport verify_body(const std::string& body, const std::string& op_name = "rmsnorm_residual") {
    auto k = backend::KernelSource::parse(test::kernel_text(op_name, body), "k.cpp");
    auto c = backend_->compile(k);
    EXPECT_TRUE(c.module) << c.log;
    if (!c.module) return {};
    return verify_kernel(*backend_, ops::find_op(op_name), *c.module, test::small_model(), shapes(),
                         distributions(), 1234);
  }

  static test::TempDir* home_;
  static backend::CpuBackend* backend_;
};

test::TempDir* VerifyTest::home_ = nullptr;
backend::CpuBackend* VerifyTest::backend_ = nullptr;

const CaseResult& failing_case(const VerifyReport& r) {
  static const CaseResult none;
  for (const auto& c : r.cases)
    if (!c.passed) return c;
  ADD_FAILURE() << "no failing case";
  return none;
}

TEST_F(VerifyTest, CorrectKernelPasses) {
  const auto r = verify_body(test::rmsnorm_body());
  EXPECT_TRUE(r.passed) << r.failure;
  EXPECT_FALSE(r.unsupported);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  // Every shape runs with normal inputs and one more distribution.
  EXPECT_EQ(r.cases.size(), 2 * shapes().size());
  for (const auto& c : r.cases) {
    EXPECT_TRUE(c.passed) << c.shape_label << " " << c.distribution << ": " << c.failure;
    ASSERT_EQ(c.outputs.size(), 2u) << "residual (inout) and out";
    EXPECT_EQ(c.outputs[0].tensor, "residual");
    EXPECT_EQ(c.outputs[1].tensor, "out");
  }
  EXPECT_GT(r.max_rel_err, 0.0) << "bf16 rounding is visible";
  EXPECT_LT(r.max_rel_err, 0.008);
}

TEST_F(VerifyTest, ZerosFailWithTheErrorReported) {
  const auto r = verify_body(test::rmsnorm_body("for (int64_t i = 0; i < T * H; ++i) out[i] = 0;"));
  EXPECT_FALSE(r.passed);
  EXPECT_FALSE(r.unsupported);
  EXPECT_NEAR(r.max_rel_err, 1.0, 1e-9);
  const auto& c = failing_case(r);
  EXPECT_TRUE(c.guards_intact);
  EXPECT_TRUE(c.inputs_unchanged);
  ASSERT_EQ(c.outputs.size(), 2u);
  EXPECT_TRUE(c.outputs[0].passed) << "residual was right";
  EXPECT_FALSE(c.outputs[1].passed);
  EXPECT_GT(c.outputs[1].bad_elements, 0);
  EXPECT_GT(c.outputs[1].elements, 0);
  EXPECT_NE(r.failure.find(fmt::format("NaN of {} elements", c.outputs[1].elements)), std::string::npos) << r.failure;
  EXPECT_EQ(c.outputs[1].worst_got, 0.0);
  EXPECT_NE(r.failure.find("out"), std::string::npos) << r.failure;
  EXPECT_NE(r.failure.find("max_rel_err"), std::string::npos) << r.failure;
  EXPECT_TRUE(test::is_one_line(r.failure)) << r.failure;
}

TEST_F(VerifyTest, NanFails) {
  const auto r = verify_body(test::rmsnorm_body("out[T * H / 2] = 0x7fc0;"));
  EXPECT_FALSE(r.passed);
  const auto& c = failing_case(r);
  ASSERT_EQ(c.outputs.size(), 2u);
  EXPECT_EQ(c.outputs[1].nan_elements, 1);
  EXPECT_EQ(c.outputs[1].bad_elements, 1);
  EXPECT_EQ(c.outputs[0].nan_elements, 0);
}

TEST_F(VerifyTest, UnwrittenOutputIsCaughtByThePoison) {
  // Skips the last element: the poisoned NaN stays there.
  const auto r = verify_body(test::rmsnorm_body("out[T * H - 1] = 0xFFFF;"));
  EXPECT_FALSE(r.passed);
  EXPECT_GE(failing_case(r).outputs.at(1).nan_elements, 1);
}

TEST_F(VerifyTest, WritePastTheEndFails) {
  const auto r = verify_body(test::rmsnorm_body("out[T * H] = 0;"));
  EXPECT_FALSE(r.passed);
  const auto& c = failing_case(r);
  EXPECT_FALSE(c.guards_intact);
  EXPECT_NE(r.failure.find("out-of-bounds"), std::string::npos) << r.failure;
}

TEST_F(VerifyTest, WriteBeforeTheStartFails) {
  const auto r = verify_body(test::rmsnorm_body("res[-1] = 0;"));
  EXPECT_FALSE(r.passed);
  EXPECT_FALSE(failing_case(r).guards_intact);
}

TEST_F(VerifyTest, WorkspaceOverrunFails) {
  const auto r =
      verify_body(test::rmsnorm_body("((unsigned char*)a->workspace)[a->workspace_bytes] = 0;"));
  EXPECT_FALSE(r.passed);
  EXPECT_FALSE(failing_case(r).guards_intact);
}

TEST_F(VerifyTest, ModifyingAReadOnlyInputFails) {
  const auto r = verify_body(test::rmsnorm_body("((uint16_t*)x)[0] ^= 1;"));
  EXPECT_FALSE(r.passed);
  const auto& c = failing_case(r);
  EXPECT_TRUE(c.guards_intact);
  EXPECT_FALSE(c.inputs_unchanged);
  EXPECT_NE(r.failure.find("read-only input"), std::string::npos) << r.failure;
  // The weight is an input too.
  const auto w = verify_body(test::rmsnorm_body("((uint16_t*)w)[H - 1] ^= 0x100;"));
  EXPECT_FALSE(w.passed);
  EXPECT_FALSE(failing_case(w).inputs_unchanged);
}

TEST_F(VerifyTest, NondeterministicKernelFails) {
  // Every other call flips the lowest bit of out[0]: the first run is correct, the
  // second differs from it.
  const auto r = verify_body(test::rmsnorm_body("static int calls = 0; if (calls++ % 2) out[0] ^= 1;"));
  EXPECT_FALSE(r.passed);
  const auto& c = failing_case(r);
  EXPECT_FALSE(c.deterministic);
  EXPECT_TRUE(c.guards_intact);
  EXPECT_TRUE(c.inputs_unchanged);
  for (const auto& o : c.outputs) EXPECT_TRUE(o.passed) << o.tensor;
  EXPECT_NE(r.failure.find("differ"), std::string::npos) << r.failure;
}

TEST_F(VerifyTest, NonZeroStatusIsUnsupported) {
  const auto r = verify_body("return 7;");
  EXPECT_FALSE(r.passed);
  EXPECT_TRUE(r.unsupported);
  ASSERT_FALSE(r.cases.empty());
  EXPECT_EQ(r.cases[0].kernel_status, 7);
  EXPECT_NE(r.failure.find("status 7"), std::string::npos) << r.failure;
}

TEST_F(VerifyTest, ResidualMustBeWritten) {
  // Computes `out` from x + residual but leaves the in/out residual untouched.
  const std::string body = R"(
  const uint16_t* x = (const uint16_t*)a->tensors[0];
  const uint16_t* res = (const uint16_t*)a->tensors[1];
  const uint16_t* w = (const uint16_t*)a->tensors[2];
  uint16_t* out = (uint16_t*)a->tensors[3];
  const int64_t T = a->dims[0], H = a->dims[1];
  for (int64_t r = 0; r < T; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < H; ++c) {
      double v = thrive_bf16_to_f32(thrive_f32_to_bf16(thrive_bf16_to_f32(x[r*H+c]) + thrive_bf16_to_f32(res[r*H+c])));
      ss += v * v;
    }
    float inv = (float)(1.0 / sqrt(ss / H + a->scalars[0]));
    for (int64_t c = 0; c < H; ++c) {
      float v = thrive_bf16_to_f32(thrive_f32_to_bf16(thrive_bf16_to_f32(x[r*H+c]) + thrive_bf16_to_f32(res[r*H+c])));
      out[r*H+c] = thrive_f32_to_bf16(v * inv * thrive_bf16_to_f32(w[c]));
    }
  }
  return 0;)";
  const auto r = verify_body(body);
  EXPECT_FALSE(r.passed);
  const auto& c = failing_case(r);
  ASSERT_EQ(c.outputs.size(), 2u);
  EXPECT_FALSE(c.outputs[0].passed) << "residual";
  EXPECT_TRUE(c.outputs[1].passed) << "out";
}

TEST_F(VerifyTest, SameSeedSameInputs) {
  // With a fixed seed, two checks see identical inputs: the reported figures agree.
  const auto a = verify_body(test::rmsnorm_body());
  const auto b = verify_body(test::rmsnorm_body());
  EXPECT_EQ(a.max_rel_err, b.max_rel_err);
  EXPECT_EQ(a.nmse, b.nmse);
}

TEST_F(VerifyTest, ReportRoundTripsThroughJson) {
  const auto r = verify_body(test::rmsnorm_body("for (int64_t i = 0; i < T * H; ++i) out[i] = 0;"));
  nlohmann::json j = r;
  const auto back = j.get<VerifyReport>();
  EXPECT_EQ(back.passed, r.passed);
  EXPECT_EQ(back.failure, r.failure);
  EXPECT_DOUBLE_EQ(back.max_rel_err, r.max_rel_err);
  EXPECT_EQ(back.cases.size(), r.cases.size());
  // A NaN verdict serialises (JSON has no infinity).
  const auto n = verify_body(test::rmsnorm_body("out[0] = 0x7fc0;"));
  EXPECT_NO_THROW(nlohmann::json(n).dump());
}

TEST(VerificationShapes, AddsTheBenchShapeOnlyWhenSmall) {
  const auto& op = ops::find_op("rmsnorm_residual");
  const auto model = test::small_model();
  const auto base = op.verify_shapes(model);
  const ops::ShapeCase small{"T=16", {{"T", 16}, {"H", model.hidden}}};
  const ops::ShapeCase huge{"T=65536", {{"T", 65536}, {"H", 4096}}};  // 2 GiB of traffic
  EXPECT_EQ(verification_shapes(op, model, nullptr).size(), base.size());
  EXPECT_EQ(verification_shapes(op, model, &small).size(), base.size() + 1);
  EXPECT_EQ(verification_shapes(op, model, &huge).size(), base.size());
  const ops::ShapeCase dup = base.front();
  EXPECT_EQ(verification_shapes(op, model, &dup).size(), base.size());
  // a shape the user named (`thrive verify --shape`) is verified whole up to 512 MiB of traffic
  const ops::ShapeCase named{"T=4096", {{"T", 4096}, {"H", 2048}}};  // 64 MiB
  ASSERT_GT(op.min_bytes(named.shape), kMaxSmallVerifyBytes);
  EXPECT_EQ(verification_shapes(op, model, &named).size(), base.size());
  const auto whole = verification_shapes(op, model, &named, true);
  ASSERT_EQ(whole.size(), base.size() + 1);
  EXPECT_EQ(whole.back().label, "T=4096");
  EXPECT_EQ(verification_shapes(op, model, &huge, true).size(), base.size()) << "2 GiB: over the whole limit too";
}

TEST(VerificationShapes, ALargeDecodeShapeIsVerifiedAtItsBatchWithAShortContext) {
  const auto& op = ops::find_op("gqa_decode_attention");
  const config::ModelDims model;  // Qwen3-1.7B: B=256, L=1024 is over 1 GiB of traffic
  ops::ShapeCase big;
  for (const auto& s : op.bench_shapes(model))
    if (s.shape.at("B") == 256 && s.shape.at("L") == 1024) big = s;
  ASSERT_FALSE(big.label.empty());
  const auto shapes = verification_shapes(op, model, &big);
  bool found = false;
  for (const auto& s : shapes) found = found || (s.shape.at("B") == 256 && s.shape.at("L") == 33);
  EXPECT_TRUE(found) << "no B=256 case among " << shapes.size() << " shapes";
  EXPECT_EQ(shapes.size(), op.verify_shapes(model).size() + 1);
}

// The embedded eager baselines and templates (written alongside this suite) must be
// correct at small model dims; each is checked only when present in this build.
TEST_F(VerifyTest, EmbeddedCpuKernelsVerifyAtSmallDims) {
  int checked = 0;
  for (const auto& op : ops::registry()) {
    for (const char* file : {"eager.cpp", "template.cpp"}) {
      const std::string path = "cpu/" + op->name() + "/" + file;
      if (!test::has_embedded(path)) continue;
      SCOPED_TRACE(path);
      auto k = backend::KernelSource::parse(backend::embedded_file(path), path);
      if (!k.param_specs.empty()) k = k.instantiate({});
      auto c = backend_->compile(k);
      ASSERT_TRUE(c.module) << c.log;
      const auto model = test::small_model();
      const auto r = verify_kernel(*backend_, *op, *c.module, model, op->verify_shapes(model),
                                   distributions(), 99);
      EXPECT_TRUE(r.passed) << r.failure;
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no cpu kernels embedded yet";
}

}  // namespace
}  // namespace thrive::verify
