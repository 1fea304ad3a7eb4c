// rope: neox-style rotary position embedding (Su et al. 2021, RoFormer), applied in
// place to q [T, NQ, D] and k [T, NKV, D]. For i < D/2, with c = cache[pos][i] and
// s = cache[pos][D/2 + i]: x'[i] = x[i] c - x[i + D/2] s; x'[i + D/2] = x[i + D/2] c + x[i] s.
// The cos/sin cache [P, D] (f32) holds cos(p * theta^(-2i/D)) then sin(...), the layout
// vLLM's rotary_embedding takes; rows are gathered by position.
#include <cmath>

#include "src/ops/op_impls.hpp"

namespace thrive::ops {
namespace {

class Rope final : public Op {
 public:
  std::string name() const override { return "rope"; }
  std::string summary() const override {
    return "neox RoPE in place on q [T,NQ,D] and k [T,NKV,D] at positions [T] from a cos|sin "
           "cache [P,D]";
  }
  Trait trait() const override { return Trait::kElementwise; }
  std::vector<TensorSpec> tensors() const override {
    return {{"positions", {"T"}, DType::kI64, Role::kIn},
            {"q", {"T", "NQ", "D"}, DType::kBF16, Role::kInOut},
            {"k", {"T", "NKV", "D"}, DType::kBF16, Role::kInOut},
            {"cos_sin_cache", {"P", "D"}, DType::kF32, Role::kIn, true}};
  }
  std::vector<std::string> dim_symbols() const override { return {"T", "NQ", "NKV", "D", "P"}; }
  std::vector<std::string> scalar_names() const override { return {}; }
  std::vector<double> scalars(const Shape&, const config::ModelDims&) const override { return {}; }
  static Shape shape(int64_t t, int64_t nq, int64_t nkv, int64_t d, int64_t p) {
    return {{"T", t}, {"NQ", nq}, {"NKV", nkv}, {"D", d}, {"P", p}};
  }
  std::vector<ShapeCase> bench_shapes(const config::ModelDims& m) const override {
    std::vector<ShapeCase> v;
    for (int64_t t : {1, 16, 256, 4096})
      v.push_back({"T=" + std::to_string(t),
                   shape(t, m.num_heads, m.num_kv_heads, m.head_dim, m.max_position)});
    return v;
  }
  std::vector<ShapeCase> verify_shapes(const config::ModelDims& m) const override {
    return {{"T=1", shape(1, m.num_heads, m.num_kv_heads, m.head_dim, m.max_position)},
            {"T=7,NQ=3,NKV=1,D=40", shape(7, 3, 1, 40, 4096)},
            {"T=5,NQ=2,NKV=2,D=6", shape(5, 2, 2, 6, 64)},
            {"T=64", shape(64, m.num_heads, m.num_kv_heads, m.head_dim, m.max_position)}};
  }
  int64_t min_bytes(const Shape& s) const override {
    const int64_t T = s.at("T"), D = s.at("D");
    return T * 8 + 2 * 2 * T * (s.at("NQ") + s.at("NKV")) * D + T * D * 4;
  }
  double flops(const Shape& s) const override {
    return 3.0 * double(s.at("T") * (s.at("NQ") + s.at("NKV")) * s.at("D"));
  }
  int64_t workspace_bytes(const Shape& s) const override {
    return s.at("T") * (s.at("NQ") + s.at("NKV") + 2) * s.at("D") * 16 + 4096;
  }
  std::vector<HostTensor> make_tensors(const Shape& s, const config::ModelDims& m, Distribution d,
                                       std::mt19937_64& rng, bool full) const override {
    auto t = Op::make_tensors(s, m, d, rng, full);
    const int64_t T = s.at("T"), D = s.at("D"), P = s.at("P");
    std::uniform_int_distribution<int64_t> pos(0, P - 1);
    for (int64_t i = 0; i < T; ++i) t[0].set(i, double(pos(rng)));
    const int64_t half = D / 2;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t i = 0; i < half; ++i) {
        double angle = double(p) * std::pow(m.rope_theta, -2.0 * double(i) / double(D));
        t[3].set(p * D + i, std::cos(angle));
        t[3].set(p * D + half + i, std::sin(angle));
      }
    return t;
  }
  std::vector<std::vector<double>> reference(const std::vector<HostTensor>& t, const Shape& s,
                                             const config::ModelDims&) const override {
    const int64_t T = s.at("T"), D = s.at("D"), half = D / 2;
    std::vector<std::vector<double>> outs;
    for (int which : {1, 2}) {
      const int64_t heads = s.at(which == 1 ? "NQ" : "NKV");
      std::vector<double> o(size_t(T * heads * D));
      for (int64_t r = 0; r < T; ++r) {
        const int64_t p = int64_t(t[0].get(r));
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t base = (r * heads + h) * D;
          for (int64_t i = 0; i < half; ++i) {
            double c = t[3].get(p * D + i), sn = t[3].get(p * D + half + i);
            double x1 = t[size_t(which)].get(base + i), x2 = t[size_t(which)].get(base + half + i);
            o[size_t(base + i)] = x1 * c - x2 * sn;
            o[size_t(base + half + i)] = x2 * c + x1 * sn;
          }
        }
      }
      outs.push_back(std::move(o));
    }
    return outs;
  }
};

}  // namespace

std::unique_ptr<Op> make_rope() { return std::make_unique<Rope>(); }

}  // namespace thrive::ops
