// Stage floors and headroom: see include/thrive/model/attribution.hpp.
#include "thrive/model/attribution.hpp"

#include <algorithm>

#include "thrive/core/error.hpp"

namespace thrive::model {

std::map<std::string, StageWork> stage_work(const Qwen3Config& c, const PassShape& p, int act_bytes, int weight_bytes) {
  const double T = double(p.tokens), H = double(c.hidden), I = double(c.intermediate), L = double(c.layers);
  const double NQ = double(c.heads), NKV = double(c.kv_heads), D = double(c.head_dim), V = double(c.vocab);
  const double a = act_bytes, w = weight_bytes, R = double(p.logit_rows);
  const double qkv = (NQ + 2 * NKV) * D, nqd = NQ * D;
  // y[T, n] = x[T, k] . W^T: weights once, input and output once
  const double pw = p.projection_weight_bytes > 0 ? p.projection_weight_bytes : w;
  auto gemm = [&](double n, double k) { return StageWork{L * (n * k * pw + T * (n + k) * a), L * 2 * T * n * k}; };
  std::map<std::string, StageWork> m;
  m["embedding"] = {T * H * (w + a), 0};
  m["input_norm"] = {2 * T * H * a + H * w, 0};
  m["qkv_gemm"] = gemm(qkv, H);
  m["qk_norm"] = {L * 2 * T * qkv * a, 0};  // the fused projection read, q/k/v written
  m["rope"] = {L * 2 * T * (NQ + NKV) * D * a, 0};
  m["kv_cache_write"] = {L * 2 * T * 2 * NKV * D * a, 0};
  m["qk_norm_rope_kv"] = {L * 2 * T * qkv * a, 0};  // the fused projection read once, q/k/v written once
  m["attention"] = {L * (double(p.kv_read) * 2 * NKV * D * a + 2 * T * nqd * a + (p.kv_read ? 0 : 2 * T * NKV * D * a)),
                    L * 4 * double(p.attended) * NQ * D};
  m["o_gemm"] = gemm(H, nqd);
  m["residual_norm"] = {L * 4 * T * H * a, 0};  // x and residual read, residual and out written
  m["mlp_gate_up_gemm"] = gemm(2 * I, H);
  m["swiglu"] = {L * 3 * T * I * a, 0};
  m["mlp_down_gemm"] = gemm(H, I);
  m["mlp_residual_norm"] = {L * 4 * T * H * a, 0};
  m["residual"] = {L * 3 * T * H * a, 0};
  m["final_norm"] = {2 * R * H * a, 0};
  // the screened lm_head reads its int8 copy (a byte a weight, 12 a row), then sampling reads the
  // approximations, 8 bytes a row of coefficients and h
  m["lm_head"] = {(p.screened_lm_head ? V * H + V * 12 : V * H * w) + R * (H * a + V * 4), 2 * R * H * V};
  m["sampling"] = {R * V * 4 + (p.screened_lm_head ? V * 8 + R * H * a : 0), 0};
  return m;
}

double achieved_tflops(const StageTimes& st, int passes, const std::map<std::string, StageWork>& work) {
  double best = 0;
  for (const auto& [name, us] : st.us)
    if (auto it = work.find(name); it != work.end() && it->second.flops > 0 && us > 0)
      best = std::max(best, passes * it->second.flops / (us * 1e-6) / 1e12);
  return best;
}

std::vector<StageRank> attribute(const StageTimes& st, double wall_ms, int passes,
                                 const std::map<std::string, StageWork>& work, double bandwidth_gbps,
                                 double tflops) {
  if (!(bandwidth_gbps > 0) || !(tflops > 0) || passes < 1)
    fail(ErrorCategory::kUsage, "attribute: bandwidth {} GB/s, {} TFLOP/s, {} passes: expected positive values",
         bandwidth_gbps, tflops, passes);
  tflops = std::max(tflops, achieved_tflops(st, passes, work));
  std::vector<StageRank> out;
  double covered = 0;
  for (const auto& [name, us] : st.us) {
    StageRank r;
    r.stage = name;
    r.ms = us / 1e3;
    covered += r.ms;
    r.share = wall_ms > 0 ? r.ms / wall_ms : 0.0;
    r.bound = "none";
    if (auto it = work.find(name); it != work.end()) {
      const double mem_ms = passes * it->second.bytes / (bandwidth_gbps * 1e9) * 1e3;
      const double cmp_ms = passes * it->second.flops / (tflops * 1e12) * 1e3;
      r.floor_ms = std::max(mem_ms, cmp_ms);
      if (r.floor_ms > 0) r.bound = cmp_ms > mem_ms ? "compute" : "memory";
    }
    const double ratio = r.ms > 0 ? std::min(1.0, r.floor_ms / r.ms) : 1.0;
    r.headroom = r.share * (1.0 - ratio);
    out.push_back(r);
  }
  StageRank gap;
  gap.stage = "host_other";
  gap.ms = std::max(0.0, wall_ms - covered);
  gap.share = wall_ms > 0 ? gap.ms / wall_ms : 0.0;
  gap.bound = "none";
  gap.headroom = gap.share;
  out.push_back(gap);
  std::stable_sort(out.begin(), out.end(), [](const StageRank& x, const StageRank& y) { return x.headroom > y.headroom; });
  return out;
}

}  // namespace thrive::model
