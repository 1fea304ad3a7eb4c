// Every CUDA kernel THRIVE ships compiles with NVRTC for sm_90 (the H200's arch) on any
// machine with the CUDA toolkit, GPU or not: each op's eager baseline, the copy kernel,
// and each template at its defaults and at every declared value of every parameter
// (one parameter moved at a time). Skips visibly where NVRTC cannot be loaded.
#include <gtest/gtest.h>

#include <chrono>

#include "thrive/backend/cuda_backend.hpp"
#include "thrive/backend/embedded.hpp"
#include "thrive/backend/kernel.hpp"
#include "thrive/core/error.hpp"
#include "thrive/ops/op.hpp"

namespace thrive::backend {
namespace {

constexpr const char* kArch = "sm_90";

// Compiles `k`; fails the test with NVRTC's log when it does not compile.
void expect_compiles(const KernelSource& k, const std::string& what) {
  const auto out = nvrtc_compile(k.source, kArch);
  EXPECT_TRUE(out.ok) << what << " does not compile for " << kArch << ":\n" << out.log.substr(0, 4000);
  if (out.ok) {
    EXPECT_GT(out.cubin.size(), 0u) << what;
  }
}

bool nvrtc_available(std::string& why) {
  if (!cuda_compiled_in()) {
    why = "built without the CUDA toolkit";
    return false;
  }
  try {
    nvrtc_compile("extern \"C\" __global__ void k() {}", kArch);
    return true;
  } catch (const Error& e) {
    why = e.what();
    return false;
  }
}

class NvrtcTemplates : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (!nvrtc_available(why)) GTEST_SKIP() << "NVRTC unavailable: " << why;
  }
};

TEST_P(NvrtcTemplates, EagerAndEveryParameterValueCompileForSm90) {
  const std::string op = GetParam();
  const auto eager = KernelSource::parse(embedded_file("cuda/" + op + "/eager.cu"), op + "/eager.cu");
  expect_compiles(eager, op + " eager");
  const auto tmpl = KernelSource::parse(embedded_file("cuda/" + op + "/template.cu"), op + "/template.cu");
  ASSERT_FALSE(tmpl.param_specs.empty()) << op;
  expect_compiles(tmpl.instantiate({}), op + " template defaults");
  int points = 1;
  for (const auto& spec : tmpl.param_specs)
    for (const auto& v : spec.values) {
      if (v == spec.default_value) continue;
      expect_compiles(tmpl.instantiate({{spec.name, v}}), op + " " + spec.name + "=" + v);
      ++points;
    }
  RecordProperty("points", points);
}

INSTANTIATE_TEST_SUITE_P(Ops, NvrtcTemplates,
                         ::testing::Values("rmsnorm_residual", "swiglu_act", "rope", "softmax",
                                           "gqa_decode_attention"));

TEST(NvrtcCopy, TheCeilingKernelCompilesForSm90) {
  std::string why;
  if (!nvrtc_available(why)) GTEST_SKIP() << "NVRTC unavailable: " << why;
  expect_compiles(KernelSource::parse(embedded_file("cuda/copy.cu"), "copy.cu"), "copy");
}

TEST(NvrtcEngine, TheQwen3EngineKernelsCompileForSm90) {
  std::string why;
  if (!nvrtc_available(why)) GTEST_SKIP() << "NVRTC unavailable: " << why;
  expect_compiles(KernelSource::parse(embedded_file("cuda/engine/qwen3_engine.cu"), "qwen3_engine.cu"), "engine");
}

TEST(NvrtcCopy, ACompileErrorComesBackWithTheLog) {
  std::string why;
  if (!nvrtc_available(why)) GTEST_SKIP() << "NVRTC unavailable: " << why;
  const auto out = nvrtc_compile("extern \"C\" __global__ void k() { undeclared_name = 1; }", kArch);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.log.find("undeclared_name"), std::string::npos) << out.log;
}

}  // namespace
}  // namespace thrive::backend
