// softmax: probs[t, v] = exp(x[t, v] - max_v x[t, :]) / sum_v exp(x[t, v] - max).
// Rows are the vocabulary (151936 for Qwen3); bf16 logits in, f32 probabilities out.
#include <cmath>

#include "src/ops/op_impls.hpp"

namespace thrive::ops {
namespace {

class Softmax final : public Op {
 public:
  std::string name() const override { return "softmax"; }
  std::string summary() const override {
    return "probs[t,:] = exp(x[t,:] - max) / sum(exp(x[t,:] - max)); bf16 in, f32 out";
  }
  Trait trait() const override { return Trait::kRowReduction; }
  std::vector<TensorSpec> tensors() const override {
    return {{"logits", {"T", "V"}, DType::kBF16, Role::kIn},
            {"probs", {"T", "V"}, DType::kF32, Role::kOut}};
  }
  std::vector<std::string> dim_symbols() const override { return {"T", "V"}; }
  std::vector<std::string> scalar_names() const override { return {}; }
  std::vector<double> scalars(const Shape&, const config::ModelDims&) const override { return {}; }
  std::vector<ShapeCase> bench_shapes(const config::ModelDims& m) const override {
    std::vector<ShapeCase> v;
    for (int64_t t : {1, 16, 256}) v.push_back({"T=" + std::to_string(t), {{"T", t}, {"V", m.vocab}}});
    return v;
  }
  std::vector<ShapeCase> verify_shapes(const config::ModelDims& m) const override {
    return {{"T=1", {{"T", 1}, {"V", m.vocab}}},
            {"T=3,V=1003", {{"T", 3}, {"V", 1003}}},
            {"T=2,V=5", {{"T", 2}, {"V", 5}}},
            {"T=8", {{"T", 8}, {"V", m.vocab}}}};
  }
  double flops(const Shape& s) const override { return 5.0 * double(s.at("T") * s.at("V")); }
  int64_t workspace_bytes(const Shape& s) const override { return s.at("T") * s.at("V") * 12 + s.at("T") * 64 + 4096; }
  std::vector<std::vector<double>> reference(const std::vector<HostTensor>& t, const Shape& s,
                                             const config::ModelDims&) const override {
    const int64_t T = s.at("T"), V = s.at("V");
    std::vector<double> out(size_t(T * V));
    for (int64_t r = 0; r < T; ++r) {
      double mx = -INFINITY;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, t[0].get(r * V + v));
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += (out[size_t(r * V + v)] = std::exp(t[0].get(r * V + v) - mx));
      for (int64_t v = 0; v < V; ++v) out[size_t(r * V + v)] /= sum;
    }
    return {out};
  }
};

}  // namespace

std::unique_ptr<Op> make_softmax() { return std::make_unique<Softmax>(); }

}  // namespace thrive::ops
