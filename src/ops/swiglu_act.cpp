// swiglu_act: out[t, i] = silu(in[t, i]) * in[t, I + i], silu(a) = a / (1 + exp(-a)).
// SwiGLU per Shazeer 2020 ("GLU Variants Improve Transformer"); the gate and up
// projections arrive concatenated as [T, 2I] (vLLM's SiluAndMul layout).
#include <cmath>

#include "src/ops/op_impls.hpp"

namespace thrive::ops {
namespace {

class SwiGluAct final : public Op {
 public:
  std::string name() const override { return "swiglu_act"; }
  std::string summary() const override {
    return "out[t,i] = silu(in[t,i]) * in[t,I+i], in = [gate | up] of shape [T, 2I]";
  }
  Trait trait() const override { return Trait::kElementwise; }
  std::vector<TensorSpec> tensors() const override {
    return {{"in", {"T", "I2"}, DType::kBF16, Role::kIn},
            {"out", {"T", "I"}, DType::kBF16, Role::kOut}};
  }
  std::vector<std::string> dim_symbols() const override { return {"T", "I"}; }
  std::vector<std::string> scalar_names() const override { return {}; }
  std::vector<double> scalars(const Shape&, const config::ModelDims&) const override { return {}; }
  static Shape shape(int64_t t, int64_t i) { return {{"T", t}, {"I", i}, {"I2", 2 * i}}; }
  std::vector<ShapeCase> bench_shapes(const config::ModelDims& m) const override {
    std::vector<ShapeCase> v;
    for (int64_t t : {1, 16, 256, 4096}) v.push_back({"T=" + std::to_string(t), shape(t, m.intermediate)});
    return v;
  }
  std::vector<ShapeCase> verify_shapes(const config::ModelDims& m) const override {
    return {{"T=1", shape(1, m.intermediate)},
            {"T=5,I=777", shape(5, 777)},
            {"T=3,I=13", shape(3, 13)},
            {"T=33", shape(33, m.intermediate)}};
  }
  double flops(const Shape& s) const override { return 5.0 * double(s.at("T") * s.at("I")); }
  int64_t workspace_bytes(const Shape& s) const override { return s.at("T") * s.at("I") * 8 + 4096; }
  std::vector<std::vector<double>> reference(const std::vector<HostTensor>& t, const Shape& s,
                                             const config::ModelDims&) const override {
    const int64_t T = s.at("T"), I = s.at("I");
    std::vector<double> out(size_t(T * I));
    for (int64_t r = 0; r < T; ++r)
      for (int64_t i = 0; i < I; ++i) {
        double a = t[0].get(r * 2 * I + i), b = t[0].get(r * 2 * I + I + i);
        out[size_t(r * I + i)] = a / (1.0 + std::exp(-a)) * b;
      }
    return {out};
  }
};

}  // namespace

std::unique_ptr<Op> make_swiglu_act() { return std::make_unique<SwiGluAct>(); }

}  // namespace thrive::ops
