// gqa_decode_attention: one query token per sequence against its KV cache, with
// grouped-query attention (Ainslie et al. 2023): query head h reads KV head
// h / (NQ / NKV). For sequence b with context length n_b = context_lens[b]:
//   s_j = scale * <q[b,h,:], k_cache[b,j,g,:]>, p = softmax(s_0..s_{n_b-1}),
//   out[b,h,:] = sum_j p_j v_cache[b,j,g,:], scale = 1/sqrt(D) (Vaswani et al. 2017).
#include <cmath>

#include "src/ops/op_impls.hpp"

namespace thrive::ops {
namespace {

class GqaDecodeAttention final : public Op {
 public:
  std::string name() const override { return "gqa_decode_attention"; }
  std::string summary() const override {
    return "out[b,h] = softmax(scale q[b,h] K[b,:n_b,h/(NQ/NKV)]^T) V[b,:n_b,h/(NQ/NKV)]";
  }
  Trait trait() const override { return Trait::kAttention; }
  std::vector<TensorSpec> tensors() const override {
    return {{"q", {"B", "NQ", "D"}, DType::kBF16, Role::kIn},
            {"k_cache", {"B", "L", "NKV", "D"}, DType::kBF16, Role::kIn},
            {"v_cache", {"B", "L", "NKV", "D"}, DType::kBF16, Role::kIn},
            {"context_lens", {"B"}, DType::kI32, Role::kIn},
            {"out", {"B", "NQ", "D"}, DType::kBF16, Role::kOut}};
  }
  std::vector<std::string> dim_symbols() const override { return {"B", "L", "NQ", "NKV", "D"}; }
  std::vector<std::string> scalar_names() const override { return {"scale"}; }
  std::vector<double> scalars(const Shape& s, const config::ModelDims&) const override {
    return {1.0 / std::sqrt(double(s.at("D")))};
  }
  static Shape shape(int64_t b, int64_t l, int64_t nq, int64_t nkv, int64_t d) {
    return {{"B", b}, {"L", l}, {"NQ", nq}, {"NKV", nkv}, {"D", d}};
  }
  std::vector<ShapeCase> bench_shapes(const config::ModelDims& m) const override {
    std::vector<ShapeCase> v;
    for (auto [b, l] : {std::pair<int64_t, int64_t>{1, 512}, {1, 4096}, {16, 1024}, {64, 1024},
                        {256, 1024}, {256, 4096}})
      v.push_back({"B=" + std::to_string(b) + ",L=" + std::to_string(l),
                   shape(b, l, m.num_heads, m.num_kv_heads, m.head_dim)});
    return v;
  }
  std::vector<ShapeCase> verify_shapes(const config::ModelDims& m) const override {
    return {{"B=1,L=1", shape(1, 1, m.num_heads, m.num_kv_heads, m.head_dim)},
            {"B=3,L=37,NQ=4,NKV=2,D=40", shape(3, 37, 4, 2, 40)},
            {"B=2,L=9,NQ=3,NKV=1,D=6", shape(2, 9, 3, 1, 6)},
            {"B=4,L=300", shape(4, 300, m.num_heads, m.num_kv_heads, m.head_dim)}};
  }
  int64_t min_bytes(const Shape& s) const override {
    const int64_t B = s.at("B"), L = s.at("L"), D = s.at("D");
    return 2 * B * s.at("NQ") * D * 2 + 2 * B * L * s.at("NKV") * D * 2 + B * 4;
  }
  double flops(const Shape& s) const override {
    return 4.0 * double(s.at("B") * s.at("NQ") * s.at("L") * s.at("D"));
  }
  int64_t workspace_bytes(const Shape& s) const override {
    const int64_t B = s.at("B"), L = s.at("L"), NQ = s.at("NQ"), D = s.at("D");
    return 2 * B * L * NQ * D * 2 + B * NQ * L * 16 + B * NQ * D * 8 + 4096;
  }
  std::vector<HostTensor> make_tensors(const Shape& s, const config::ModelDims& m, Distribution d,
                                       std::mt19937_64& rng, bool full) const override {
    auto t = Op::make_tensors(s, m, d, rng, full);
    const int64_t B = s.at("B"), L = s.at("L");
    if (d == Distribution::kLargeMagnitude) {
      // q and v stay large (|x| ~ 300), keys shrink to ~0.3: scores are then ~90 in standard
      // deviation (above 180 at the top of 33 keys, past exp's fp32 range of ~88, so a kernel
      // without max-subtraction still fails). Larger scores are ill-conditioned for any fp32
      // kernel: the dot product's rounding (~6e-8 * sum |q_i k_i|) moves near-tied weights, and
      // with v ~ 300 cancelling to small outputs that exceeds the tolerance. Seen on the H200:
      // keys at unit scale (scores ~300) put the eager baseline at max_rel_err 0.0084 (tol 0.008)
      // at B=256, L=33; keys at full scale (scores ~1e5) put 9 of 0.5M outputs off by 22%.
      for (int64_t i = 0; i < t[1].elements(); ++i) t[1].set(i, t[1].get(i) / 1000.0);
    }
    std::uniform_int_distribution<int64_t> len(1, L);
    for (int64_t b = 0; b < B; ++b) t[3].set(b, double(full || b == 0 ? L : len(rng)));
    return t;
  }
  std::vector<std::vector<double>> reference(const std::vector<HostTensor>& t, const Shape& s,
                                             const config::ModelDims&) const override {
    const int64_t B = s.at("B"), L = s.at("L"), NQ = s.at("NQ"), NKV = s.at("NKV"), D = s.at("D");
    const double scale = 1.0 / std::sqrt(double(D));
    std::vector<double> out(size_t(B * NQ * D), 0.0), p;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = int64_t(t[3].get(b));
      for (int64_t h = 0; h < NQ; ++h) {
        const int64_t g = h / (NQ / NKV);
        p.assign(size_t(n), 0.0);
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < D; ++i)
            dot += t[0].get((b * NQ + h) * D + i) * t[1].get(((b * L + j) * NKV + g) * D + i);
          p[size_t(j)] = dot * scale;
          mx = std::max(mx, p[size_t(j)]);
        }
        double sum = 0;
        for (auto& v : p) sum += (v = std::exp(v - mx));
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < D; ++i)
            out[size_t((b * NQ + h) * D + i)] +=
                p[size_t(j)] / sum * t[2].get(((b * L + j) * NKV + g) * D + i);
      }
    }
    return {out};
  }
};

}  // namespace

std::unique_ptr<Op> make_gqa_decode_attention() { return std::make_unique<GqaDecodeAttention>(); }

}  // namespace thrive::ops
