// rmsnorm_residual: residual <- x + residual; out <- RMSNorm(residual) * weight.
// RMSNorm per Zhang & Sennrich 2019: y = r / sqrt(mean(r^2) + eps) * w.
// The norm reads the residual as stored (bf16), as PyTorch eager and HF Qwen3 do.
#include <cmath>

#include "src/ops/op_impls.hpp"

namespace thrive::ops {
namespace {

class RmsNormResidual final : public Op {
 public:
  std::string name() const override { return "rmsnorm_residual"; }
  std::string summary() const override {
    return "residual <- x + residual; out <- residual / sqrt(mean(residual^2) + eps) * weight";
  }
  Trait trait() const override { return Trait::kRowReduction; }
  std::vector<TensorSpec> tensors() const override {
    return {{"x", {"T", "H"}, DType::kBF16, Role::kIn},
            {"residual", {"T", "H"}, DType::kBF16, Role::kInOut},
            {"weight", {"H"}, DType::kBF16, Role::kIn},
            {"out", {"T", "H"}, DType::kBF16, Role::kOut}};
  }
  std::vector<std::string> dim_symbols() const override { return {"T", "H"}; }
  std::vector<std::string> scalar_names() const override { return {"eps"}; }
  std::vector<double> scalars(const Shape&, const config::ModelDims& m) const override {
    return {m.rms_eps};
  }
  std::vector<ShapeCase> bench_shapes(const config::ModelDims& m) const override {
    std::vector<ShapeCase> v;
    for (int64_t t : {1, 16, 256, 4096}) v.push_back({"T=" + std::to_string(t), {{"T", t}, {"H", m.hidden}}});
    return v;
  }
  std::vector<ShapeCase> verify_shapes(const config::ModelDims& m) const override {
    return {{"T=1", {{"T", 1}, {"H", m.hidden}}},
            {"T=3,H=1003", {{"T", 3}, {"H", 1003}}},
            {"T=17,H=37", {{"T", 17}, {"H", 37}}},
            {"T=64", {{"T", 64}, {"H", m.hidden}}}};
  }
  double flops(const Shape& s) const override { return 5.0 * double(s.at("T") * s.at("H")); }
  int64_t workspace_bytes(const Shape& s) const override {
    return s.at("T") * s.at("H") * 16 + s.at("T") * 16 + 4096;
  }
  std::vector<std::vector<double>> reference(const std::vector<HostTensor>& t, const Shape& s,
                                             const config::ModelDims& m) const override {
    const int64_t T = s.at("T"), H = s.at("H");
    std::vector<double> residual(size_t(T * H)), out(size_t(T * H));
    for (int64_t r = 0; r < T; ++r) {
      double sumsq = 0;
      for (int64_t c = 0; c < H; ++c) {
        double v = t[0].get(r * H + c) + t[1].get(r * H + c);
        residual[size_t(r * H + c)] = v;
        double stored = round_bf16(v);
        sumsq += stored * stored;
      }
      double inv = 1.0 / std::sqrt(sumsq / double(H) + m.rms_eps);
      for (int64_t c = 0; c < H; ++c)
        out[size_t(r * H + c)] = round_bf16(residual[size_t(r * H + c)]) * inv * t[2].get(c);
    }
    return {residual, out};
  }
};

}  // namespace

std::unique_ptr<Op> make_rmsnorm_residual() { return std::make_unique<RmsNormResidual>(); }

}  // namespace thrive::ops
