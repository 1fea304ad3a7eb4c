// Every shipped CUDA launch plan evaluates, on the CPU, to a launch the H200 accepts at every
// verification and benchmark shape: at the template defaults and at every declared value of
// every parameter (one moved at a time), with the H200's 132 SMs (NVIDIA H200 datasheet /
// cuDeviceGetAttribute MULTIPROCESSOR_COUNT on the lent device). Also pins the split rules the
// templates document (GQA's automatic split-KV, softmax's cluster mode), so a plan that drifts
// from its kernel's own arithmetic fails here, not on the GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "thrive/backend/embedded.hpp"
#include "thrive/backend/kernel.hpp"
#include "thrive/backend/launch_expr.hpp"
#include "thrive/config/config.hpp"
#include "thrive/ops/op.hpp"

namespace thrive::backend {
namespace {

constexpr int64_t kSms = 132;
constexpr int64_t kMaxSmemOptin = 227 * 1024;  // sm_90 opt-in dynamic shared memory per block
constexpr int64_t kMaxGridX = (int64_t(1) << 31) - 1, kMaxGridYZ = 65535;

// The variables the CUDA backend gives a plan: integer-valued params, shape symbols, SMS.
std::map<std::string, int64_t> plan_vars(const KernelSource& k, const ops::Shape& shape) {
  std::map<std::string, int64_t> vars;
  for (const auto& [name, value] : k.params) {
    char* end = nullptr;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    if (end && *end == '\0' && !value.empty()) vars[name] = n;
  }
  for (const auto& [sym, v] : shape) vars[sym] = v;
  vars["SMS"] = kSms;
  return vars;
}

struct Launch {
  int64_t block, grid[3], smem;
};
std::vector<Launch> evaluate(const KernelSource& k, const ops::Shape& shape) {
  const auto vars = plan_vars(k, shape);
  std::vector<Launch> out;
  for (const auto& l : k.launches) {
    Launch e{};
    e.block = eval_launch_expr(l.block, vars);
    e.smem = eval_launch_expr(l.smem, vars);
    for (int d = 0; d < 3; ++d) e.grid[d] = eval_launch_expr(l.grid[d], vars);
    out.push_back(e);
  }
  return out;
}

std::vector<ops::ShapeCase> all_shapes(const ops::Op& op) {
  const config::ModelDims m;
  auto v = op.verify_shapes(m);
  for (auto& s : op.bench_shapes(m)) v.push_back(s);
  return v;
}

class LaunchPlans : public ::testing::TestWithParam<std::string> {};

TEST_P(LaunchPlans, EveryParameterValueGivesALegalLaunchAtEveryShape) {
  const auto& op = ops::find_op(GetParam());
  const auto tmpl = KernelSource::parse(embedded_file("cuda/" + op.name() + "/template.cu"), "template.cu");
  std::vector<Params> points = {{}};
  for (const auto& spec : tmpl.param_specs)
    for (const auto& v : spec.values)
      if (v != spec.default_value) points.push_back({{spec.name, v}});
  for (const auto& p : points) {
    const auto k = tmpl.instantiate(p);
    for (const auto& sc : all_shapes(op)) {
      const std::string what = op.name() + " " + params_to_string(k.params) + " at " + sc.label;
      std::vector<Launch> ls;
      ASSERT_NO_THROW(ls = evaluate(k, sc.shape)) << what;
      bool any_work = false;
      for (const auto& l : ls) {
        EXPECT_GE(l.block, 1) << what;
        EXPECT_LE(l.block, 1024) << what;
        EXPECT_GE(l.smem, 0) << what;
        EXPECT_LE(l.smem, kMaxSmemOptin) << what;
        EXPECT_GE(l.grid[0], 0) << what;
        EXPECT_LE(l.grid[0], kMaxGridX) << what;
        for (int d = 1; d < 3; ++d) {
          EXPECT_GE(l.grid[d], 1) << what;
          EXPECT_LE(l.grid[d], kMaxGridYZ) << what;
        }
        any_work = any_work || l.grid[0] > 0;
      }
      EXPECT_TRUE(any_work) << what << ": every launch has an empty grid";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, LaunchPlans,
                         ::testing::Values("rmsnorm_residual", "swiglu_act", "rope", "softmax",
                                           "gqa_decode_attention"));

ops::Shape gqa_shape(int64_t b, int64_t l) {
  return {{"B", b}, {"L", l}, {"NQ", 16}, {"NKV", 8}, {"D", 128}};
}

// The automatic split-KV rule in the GQA template's doc: S = clamp(cdiv(16*SMS, B*units), 1,
// min(64, cdiv(L, 64))), units = NKV with the query heads of a group packed.
TEST(LaunchPlans, GqaAutoSplitFollowsBatchHeadsAndContext) {
  const auto tmpl = KernelSource::parse(embedded_file("cuda/gqa_decode_attention/template.cu"), "t.cu");
  const auto k = tmpl.instantiate({{"SPLIT_KV", "0"}, {"GROUP_PACK", "1"}});
  struct Case {
    int64_t b, l, split;
  };
  for (const auto& c : {Case{1, 4096, 64}, Case{1, 512, 8}, Case{16, 1024, 16}, Case{64, 1024, 5},
                        Case{256, 1024, 2}, Case{256, 4096, 2}, Case{1, 1, 1}}) {
    const auto ls = evaluate(k, gqa_shape(c.b, c.l));
    ASSERT_EQ(ls.size(), 2u);
    EXPECT_EQ(ls[0].grid[0], c.b * 8) << "one block per (sequence, KV group)";
    EXPECT_EQ(ls[0].grid[1], c.split) << "B=" << c.b << " L=" << c.l;
    EXPECT_EQ(ls[1].grid[0], c.split > 1 ? c.b * 16 : 0) << "combine only when split";
  }
  // a fixed split is taken as written; unpacked heads get one block per query head
  const auto fixed = tmpl.instantiate({{"SPLIT_KV", "8"}, {"GROUP_PACK", "0"}});
  const auto ls = evaluate(fixed, gqa_shape(4, 300));
  EXPECT_EQ(ls[0].grid[0], 4 * 16);
  EXPECT_EQ(ls[0].grid[1], 8);
  EXPECT_EQ(ls[1].grid[0], 4 * 16);
}

// Softmax cluster mode: one launch of T * CLUSTER blocks (a multiple of the cluster, as
// __cluster_dims__ requires), the stats launch skipped, the chunk cached in shared memory.
TEST(LaunchPlans, SoftmaxClusterModeIsOneLaunchWithTheChunkInSharedMemory) {
  const auto tmpl = KernelSource::parse(embedded_file("cuda/softmax/template.cu"), "t.cu");
  for (int64_t c : {2, 4, 8}) {
    const auto k = tmpl.instantiate({{"CLUSTER", std::to_string(c)}, {"SPLIT", "16"}});
    const auto ls = evaluate(k, {{"T", 256}, {"V", 151936}});
    ASSERT_EQ(ls.size(), 2u);
    EXPECT_EQ(ls[0].grid[0], 0) << "no stats launch in cluster mode";
    EXPECT_EQ(ls[1].grid[0], 256 * c);
    EXPECT_EQ(ls[1].grid[0] % c, 0);
    const int64_t chunk = (151936 / c + 7) / 8 * 8;  // V / CLUSTER rounded up to 8 logits
    EXPECT_EQ(ls[1].smem, 2 * chunk) << "CLUSTER=" << c;
  }
  // a row too small for the cluster still gets every block (they must all reach the barriers)
  const auto k = tmpl.instantiate({{"CLUSTER", "8"}});
  EXPECT_EQ(evaluate(k, {{"T", 3}, {"V", 9}})[1].grid[0], 3 * 8);
}

}  // namespace
}  // namespace thrive::backend
