// The outer loop: see include/thrive/model/system_loop.hpp.
#include "thrive/model/system_loop.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <set>
#include <thread>

#include "thrive/core/error.hpp"
#include "thrive/model/attribution.hpp"

namespace thrive::model {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// One run of the harness on a fresh engine (the weights copied in).
SystemProfile profile_once(const Qwen3Config& cfg, const Qwen3Weights& w, const LoopOptions& o, const SystemConfig& sc) {
  return profile_cpu(cfg, w, random_prompts(o.batch, o.prompt, cfg.vocab, o.seed), o.gen, sc);
}

// The fastest of `repeats` runs by the metric (timings on a shared machine only err upwards).
SystemProfile profile(const Qwen3Config& cfg, const Qwen3Weights& w, const LoopOptions& o, const SystemConfig& sc,
                      double weight) {
  SystemProfile best;
  double best_score = -1;
  for (int i = 0; i < std::max(1, o.repeats); ++i) {
    auto p = profile_once(cfg, w, o, sc);
    const double score = weight * p.decode_tps + (1 - weight) * p.prefill_tps;
    if (score > best_score) best_score = score, best = std::move(p);
  }
  return best;
}

double metric_t(const SystemProfile& p, const SystemProfile& start, double weight) {
  const double d = start.decode_tps > 0 ? p.decode_tps / start.decode_tps : 0;
  const double f = start.prefill_tps > 0 ? p.prefill_tps / start.prefill_tps : 0;
  return weight * d + (1 - weight) * f;
}

// A specialist's proposal for a stage, or nothing (with the reason in `why`).
struct Proposal {
  std::string specialist, change;
  SystemConfig next;
  bool any = false;
};

Proposal dispatch(const std::string& stage, const SystemConfig& cur, const std::set<std::string>& tried,
                  std::string& why) {
  static const std::set<std::string> gemms = {"qkv_gemm", "o_gemm", "mlp_gate_up_gemm", "mlp_down_gemm", "lm_head"};
  static const std::set<std::string> norms = {"input_norm", "residual", "residual_norm", "mlp_residual_norm",
                                              "final_norm"};
  static const std::set<std::string> kernels = {"attention", "rope", "swiglu", "qk_norm"};
  Proposal p;
  if (gemms.count(stage)) {
    p.specialist = "kernels";
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    p.next = cur;
    p.next.threads = cur.threads == 1 ? 0 : 1;
    p.change = p.next.threads == 1 ? "GEMMs on one thread (no thread start-up per projection)"
                                   : fmt::format("GEMMs on all {} cores", cores);
    p.any = cores > 1 && !tried.count(p.next.to_json().dump());
    if (!p.any) why = cores > 1 ? "both GEMM thread settings were tried" : "one core: no other thread setting";
  } else if (norms.count(stage)) {
    p.specialist = "compilation";
    p.next = cur;
    p.next.fuse_residual_norm = !cur.fuse_residual_norm;
    p.change = p.next.fuse_residual_norm ? "fuse the residual add with the next RMSNorm (one pass)"
                                         : "unfuse the residual add and the next RMSNorm";
    p.any = !tried.count(p.next.to_json().dump());
    if (!p.any) why = "the fusion was tried both ways";
  } else if (kernels.count(stage)) {
    p.specialist = "kernels";
    why = "the float32 CPU engine runs no registry kernels for this stage (the CUDA engine does)";
  } else if (stage == "kv_cache_write") {
    p.specialist = "memory";
    why = "the CPU engine's KV cache has one layout";
  } else {
    p.specialist = "data";
    why = "host copies and sampling have no alternative on the CPU engine";
  }
  return p;
}

}  // namespace

std::vector<std::vector<int32_t>> random_prompts(int batch, int prompt, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(vocab - 1));
  std::vector<std::vector<int32_t>> prompts(size_t(std::max(batch, 0)));
  for (auto& p : prompts)
    for (int i = 0; i < prompt; ++i) p.push_back(tok(rng));
  return prompts;
}

SystemProfile profile_cpu(const Qwen3Config& cfg, Qwen3Weights weights, const std::vector<std::vector<int32_t>>& prompts,
                          int gen, const SystemConfig& sc) {
  int64_t longest = 0;
  SystemProfile p;
  for (const auto& pr : prompts) {
    longest = std::max<int64_t>(longest, int64_t(pr.size()));
    p.prompt_tokens += int64_t(pr.size());
  }
  const int batch = int(prompts.size());
  CpuQwen3Engine engine(cfg, std::move(weights), batch, longest + std::max(gen, 0));
  engine.set_threads(sc.threads);
  engine.set_fuse_residual_norm(sc.fuse_residual_norm);
  auto t = Clock::now();
  p.prefill_logits = engine.prefill(prompts);
  auto next = engine.greedy(p.prefill_logits);
  p.prefill_ms = ms_since(t);
  p.prefill_stages = engine.stages();
  engine.reset_stages();
  p.tokens.assign(size_t(batch), {});
  t = Clock::now();
  for (int s = 0; s < gen; ++s) {
    for (int b = 0; b < batch; ++b) p.tokens[size_t(b)].push_back(next[size_t(b)]);
    if (s + 1 == gen) break;  // the last token needs no forward pass
    next = engine.greedy(engine.decode(next));
  }
  p.decode_ms = ms_since(t);
  p.decode_steps = std::max(0, gen - 1);
  p.decode_stages = engine.stages();
  p.prefill_tps = p.prefill_ms > 0 ? 1e3 * double(p.prompt_tokens) / p.prefill_ms : 0;
  p.decode_tps = p.decode_ms > 0 ? 1e3 * batch * p.decode_steps / p.decode_ms : 0;
  p.kv_cache_bytes = engine.cache_bytes();
  return p;
}

double metric_weight(const std::string& metric) {
  if (metric == "decode") return 1.0;
  if (metric == "prefill") return 0.0;
  if (metric.rfind("mix:", 0) == 0) {
    try {
      size_t used = 0;
      const double w = std::stod(metric.substr(4), &used);
      if (used == metric.size() - 4 && w >= 0 && w <= 1) return w;
    } catch (const std::exception&) {
    }
  }
  fail(ErrorCategory::kUsage, "--metric {}: expected decode, prefill or mix:W with W in [0, 1] (the decode weight)",
       metric);
}

LoopResult run_system_loop(const Qwen3Config& cfg, const Qwen3Weights& weights, const LoopOptions& o,
                           const SystemConfig& start, double bandwidth_gbps, double tflops,
                           const std::function<void(const LoopIteration&)>& sink) {
  const double weight = metric_weight(o.metric);
  if (o.budget < 0 || !(o.r_t >= 0) || !(o.a_t >= 0) || o.batch < 1 || o.prompt < 1 || o.gen < 2)
    fail(ErrorCategory::kUsage, "system loop: budget {}, r_t {}, a_t {}, batch {}, prompt {}, gen {}: expected "
         "budget >= 0, thresholds >= 0, batch >= 1, prompt >= 1, gen >= 2", o.budget, o.r_t, o.a_t, o.batch, o.prompt, o.gen);
  LoopResult r;
  r.start = r.best = start;
  r.notes.push_back("communication: one device, nothing to do");
  r.start_profile = profile(cfg, weights, o, start, weight);
  r.best_profile = r.start_profile;
  const auto& ref = r.start_profile;
  std::set<std::string> tried(o.tried.begin(), o.tried.end());
  tried.insert(start.to_json().dump());
  for (int it = 1; it <= o.budget; ++it) {
    // Attribute the phase the metric weighs most
    const bool decode = weight >= 0.5;
    const auto& bp = r.best_profile;
    const int64_t B = o.batch, P = o.prompt;
    const PassShape pass = decode ? PassShape{B, B * (P + o.gen / 2), B * (P + o.gen / 2), B}
                                  : PassShape{B * P, B * P * (P + 1) / 2, 0, B};
    const auto ranking = attribute(decode ? bp.decode_stages : bp.prefill_stages, decode ? bp.decode_ms : bp.prefill_ms,
                                   decode ? std::max(1, bp.decode_steps) : 1, stage_work(cfg, pass, 4, 4),
                                   bandwidth_gbps, tflops);
    LoopIteration li;
    li.index = it;
    for (const auto& x : ranking)
      li.ranking.push_back({{"stage", x.stage}, {"share", x.share}, {"floor_ms", x.floor_ms}, {"headroom", x.headroom}});
    Proposal pick;
    for (const auto& x : ranking) {
      if (x.headroom < 0.001) break;  // ranked by headroom: the rest have less than 0.1%
      std::string why;
      auto p = dispatch(x.stage, r.best, tried, why);
      if (p.any) {
        li.stage = x.stage;
        pick = p;
        break;
      }
      const std::string note = p.specialist + " (" + x.stage + "): " + why;
      if (std::find(r.notes.begin(), r.notes.end(), note) == r.notes.end()) r.notes.push_back(note);
    }
    if (!pick.any) {
      r.stop_reason = "no stage with 0.1% headroom or more has a change its specialist can still try";
      break;
    }
    tried.insert(pick.next.to_json().dump());
    li.specialist = pick.specialist;
    li.change = pick.change;
    li.before = r.best;
    li.after = pick.next;
    li.t_before = r.t_best;
    const auto cand = profile(cfg, weights, o, pick.next, weight);
    li.t_after = metric_t(cand, ref, weight);
    // Verify end to end against the starting system: same greedy tokens, logits within tolerance
    double err = 0;
    for (size_t b = 0; b < ref.prefill_logits.size(); ++b) {
      double num = 0, den = 0;
      for (size_t i = 0; i < ref.prefill_logits[b].size(); ++i) {
        num = std::max(num, double(std::abs(cand.prefill_logits[b][i] - ref.prefill_logits[b][i])));
        den = std::max(den, double(std::abs(ref.prefill_logits[b][i])));
      }
      err = std::max(err, den > 0 ? num / den : num);
    }
    li.verified = cand.tokens == ref.tokens && err <= o.logits_tol;
    const bool gain = li.t_after / li.t_before > 1 + o.r_t || li.t_after - li.t_before > o.a_t;
    li.accepted = li.verified && gain;
    if (!li.verified)
      li.verdict = fmt::format("rejected: the changed system's tokens or logits differ (logit error {:.2e})", err);
    else if (li.accepted)
      li.verdict = fmt::format("accepted: T {:.3f} -> {:.3f} ({:.2f}x; needs > {:.2f}x or +{:.2f})", li.t_before,
                               li.t_after, li.t_after / li.t_before, 1 + o.r_t, o.a_t);
    else
      li.verdict = fmt::format("reverted: T {:.3f} -> {:.3f} ({:.2f}x; needs > {:.2f}x or +{:.2f})", li.t_before,
                               li.t_after, li.t_after / li.t_before, 1 + o.r_t, o.a_t);
    if (li.accepted) {
      r.best = pick.next;
      r.t_best = li.t_after;
      r.best_profile = cand;
    }
    r.iterations.push_back(li);
    if (sink) sink(li);
  }
  if (r.stop_reason.empty()) r.stop_reason = fmt::format("budget of {} changes spent", o.budget);
  return r;
}

}  // namespace thrive::model
