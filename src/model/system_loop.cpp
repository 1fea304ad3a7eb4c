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

double metric_t(const SystemProfile& p, const SystemProfile& start, double weight) {
  const double d = start.decode_tps > 0 ? p.decode_tps / start.decode_tps : 0;
  const double f = start.prefill_tps > 0 ? p.prefill_tps / start.prefill_tps : 0;
  return weight * d + (1 - weight) * f;
}

Proposal dispatch_cpu(const std::string& stage, const SystemConfig& cur, const std::set<std::string>& tried,
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
  CpuQwen3Engine engine(cfg, std::move(weights), batch, decode_context(longest, gen));
  engine.set_threads(sc.threads);
  engine.set_fuse_residual_norm(sc.fuse_residual_norm);
  auto t = Clock::now();
  p.prefill_logits = engine.prefill(prompts);
  std::vector<int32_t> next;  // with gen 0 no token is chosen (nor are its logits' NaNs counted)
  if (gen > 0) next = engine.greedy(p.prefill_logits);
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
  p.nonfinite_logits = engine.nonfinite_logits();
  p.first_nonfinite_logit = engine.first_nonfinite_logit();
  return p;
}

double metric_weight(const std::string& metric) {
  if (metric == "decode") return 1.0;
  if (metric == "prefill") return 0.0;
  // W: plain decimal digits and a point ("0.25"), no sign, space, exponent or hex
  if (metric.rfind("mix:", 0) == 0 && metric.size() > 4 &&
      metric.find_first_not_of("0123456789.", 4) == std::string::npos) {
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

std::string metric_name(const std::string& metric) {
  const double w = metric_weight(metric);
  if (w == 1.0) return "decode";
  if (w == 0.0) return "prefill";
  return fmt::format("mix:{}", w);
}

nlohmann::json SystemConfig::to_json() const {
  if (device != "cuda") return {{"threads", threads}, {"fuse_residual_norm", fuse_residual_norm}};
  nlohmann::json j = {{"device", "cuda"},
                      {"graphs", graphs},
                      {"flash_prefill", flash_prefill},
                      {"fuse_qk_rope_kv", fuse_qk_rope_kv},
                      {"gemv", gemv},
                      {"fuse_swiglu_down", fuse_swiglu_down},
                      {"best_ops", best_ops}};
  if (fuse_norm_residual) j["fuse_norm_residual"] = true;
  if (pdl) j["pdl"] = true;
  if (engine_decode_attention) j["engine_decode_attention"] = true;
  if (persistent_decode) j["persistent_decode"] = true;
  return j;
}

SystemConfig SystemConfig::from_json(const nlohmann::json& j, const std::string& device) {
  SystemConfig c;
  c.device = device;
  if (!j.is_object()) return c;
  auto flag = [&](const char* k, bool& v) {
    if (j.contains(k) && j[k].is_boolean()) v = j[k].get<bool>();
  };
  if (j.contains("threads") && j["threads"].is_number_integer()) c.threads = j["threads"].get<int>();
  flag("fuse_residual_norm", c.fuse_residual_norm);
  flag("graphs", c.graphs);
  flag("flash_prefill", c.flash_prefill);
  flag("fuse_qk_rope_kv", c.fuse_qk_rope_kv);
  flag("gemv", c.gemv);
  flag("fuse_swiglu_down", c.fuse_swiglu_down);
  flag("fuse_norm_residual", c.fuse_norm_residual);
  flag("pdl", c.pdl);
  flag("engine_decode_attention", c.engine_decode_attention);
  flag("persistent_decode", c.persistent_decode);
  if (j.contains("best_ops") && j["best_ops"].is_array())
    for (const auto& o : j["best_ops"])
      if (o.is_string()) c.best_ops.insert(o.get<std::string>());
  return c;
}

LoopResult run_outer_loop(const LoopOptions& o, const SystemConfig& start, const SystemDriver& d,
                          const std::function<void(const LoopIteration&)>& sink) {
  const double weight = metric_weight(o.metric);
  if (o.budget < 0 || !(o.r_t >= 0) || !(o.a_t >= 0) || o.batch < 1 || o.prompt < 1 || o.gen < 2)
    fail(ErrorCategory::kUsage, "system loop: budget {}, r_t {}, a_t {}, batch {}, prompt {}, gen {}: expected "
         "budget >= 0, thresholds >= 0, batch >= 1, prompt >= 1, gen >= 2", o.budget, o.r_t, o.a_t, o.batch, o.prompt, o.gen);
  // The best of `repeats` measurements by the metric (timings on a shared machine only err upwards).
  auto measure = [&](const SystemConfig& sc) {
    SystemProfile best;
    double best_score = -1;
    for (int i = 0; i < std::max(1, o.repeats); ++i) {
      auto p = d.profile(sc);
      const double score = weight * p.decode_tps + (1 - weight) * p.prefill_tps;
      if (score > best_score) best_score = score, best = std::move(p);
    }
    return best;
  };
  LoopResult r;
  r.start = r.best = start;
  r.notes = d.notes;
  r.start_profile = measure(start);
  r.best_profile = r.start_profile;
  const auto& ref = r.start_profile;
  std::set<std::string> tried(o.tried.begin(), o.tried.end());
  tried.insert(start.to_json().dump());
  std::set<std::string> wrong;  // changes whose system failed verification: never proposed again
  for (int it = 1; it <= o.budget; ++it) {
    // Attribute: both phases, each stage's headroom weighted by the metric's weight of its phase
    struct Ranked {
      std::string phase;
      StageRank rank;
      double weighted;
    };
    std::vector<Ranked> ranked;
    for (const bool decode : {true, false}) {
      const double w = decode ? weight : 1 - weight;
      if (w <= 0) continue;
      for (const auto& x : d.rank(r.best_profile, decode)) ranked.push_back({decode ? "decode" : "prefill", x, w * x.headroom});
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) { return a.weighted > b.weighted; });
    LoopIteration li;
    li.index = it;
    for (const auto& x : ranked)
      li.ranking.push_back({{"phase", x.phase}, {"stage", x.rank.stage}, {"share", x.rank.share},
                            {"floor_ms", x.rank.floor_ms}, {"headroom", x.weighted}});
    Proposal pick;
    for (const auto& x : ranked) {
      if (x.weighted < 0.001) break;  // ranked by headroom: the rest have less than 0.1%
      std::string why;
      auto p = d.dispatch(x.phase, x.rank.stage, r.best, tried, why);
      if (p.any && wrong.count(p.change)) {
        p.any = false;
        why = "failed verification earlier: " + p.change;
      }
      if (p.any) {
        li.phase = x.phase;
        li.stage = x.rank.stage;
        pick = std::move(p);
        break;
      }
      const std::string note = p.specialist + " (" + x.phase + " " + x.rank.stage + "): " + why;
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
    if (pick.prepare) li.prepared = pick.prepare();
    const auto cand = measure(pick.next);
    li.t_after = metric_t(cand, ref, weight);
    std::string detail;
    li.verified = d.verify(cand, ref, detail);
    const bool rel = li.t_after / li.t_before > 1 + o.r_t, abs = li.t_after - li.t_before > o.a_t;
    const bool gain = rel || abs;
    li.accepted = li.verified && gain;
    const std::string test = fmt::format("{:.2f}x (relative rule: > {:.2f}x) and {:+.3f} (absolute rule: > +{:.2f}){}",
                                         li.t_after / li.t_before, 1 + o.r_t, li.t_after - li.t_before, o.a_t,
                                         rel && abs ? ": both rules hold" : rel ? ": the relative rule holds"
                                                                          : abs ? ": the absolute rule holds"
                                                                                : ": neither rule holds");
    if (!li.verified) wrong.insert(pick.change);
    if (!li.verified)
      li.verdict = "rejected: the changed system does not match the starting one (" + detail + ")";
    else
      li.verdict = fmt::format("{}: T {:.3f} -> {:.3f}, {}; {}", li.accepted ? "accepted" : "reverted", li.t_before,
                               li.t_after, test, detail);
    if (li.accepted) {
      r.best = pick.next;
      r.t_best = li.t_after;
      r.best_profile = cand;
    }
    r.iterations.push_back(li);
    if (sink) sink(li);
  }
  if (r.stop_reason.empty()) r.stop_reason = fmt::format("budget of {} change{} spent", o.budget, o.budget == 1 ? "" : "s");
  return r;
}

LoopResult run_system_loop(const Qwen3Config& cfg, const Qwen3Weights& weights, const LoopOptions& o,
                           const SystemConfig& start, double bandwidth_gbps, double tflops,
                           const std::function<void(const LoopIteration&)>& sink) {
  check_cpu_kv_cache(cfg, o.batch, decode_context(o.prompt, o.gen));  // before any prompt is built
  SystemDriver d;
  d.notes = {"communication: one device, nothing to do"};
  d.profile = [&](const SystemConfig& sc) { return profile_once(cfg, weights, o, sc); };
  d.rank = [&](const SystemProfile& p, bool decode) {
    const int64_t B = o.batch, P = o.prompt;
    const PassShape pass = decode ? PassShape{B, B * (P + o.gen / 2), B * (P + o.gen / 2), B}
                                  : PassShape{B * P, B * P * (P + 1) / 2, 0, B};
    return attribute(decode ? p.decode_stages : p.prefill_stages, decode ? p.decode_ms : p.prefill_ms,
                     decode ? std::max(1, p.decode_steps) : 1, stage_work(cfg, pass, 4, 4), bandwidth_gbps, tflops);
  };
  d.dispatch = [](const std::string&, const std::string& stage, const SystemConfig& cur,
                  const std::set<std::string>& tried, std::string& why) { return dispatch_cpu(stage, cur, tried, why); };
  // The float32 engine's changes reorder nothing numerically that matters: same tokens, logits
  // within o.logits_tol
  d.verify = [&](const SystemProfile& cand, const SystemProfile& ref, std::string& detail) {
    const double err = max_logit_error(cand, ref);
    detail = fmt::format("logit error {:.2e}, tokens {}", err, cand.tokens == ref.tokens ? "identical" : "differ");
    return cand.tokens == ref.tokens && err <= o.logits_tol;
  };
  return run_outer_loop(o, start, d, sink);
}

namespace {
// Row c against row r (same length): the largest |c_i - r_i| over the logits finite in both; 0
// where both hold the same non-finite value (a NaN, or one infinity: an overflow both systems
// make, which greedy skips in both), +inf where only one is finite or they differ; the largest
// finite |r_i|; and r's two largest finite logits (greedy chooses among the finite ones).
struct RowDiff {
  double diff = 0, scale = 0, top = -INFINITY, second = -INFINITY;
  double rel() const { return scale > 0 ? diff / scale : diff; }
};
RowDiff row_diff(const std::vector<float>& c, const std::vector<float>& r) {
  RowDiff d;
  for (size_t i = 0; i < r.size(); ++i) {
    const float a = c[i], b = r[i];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if (!((std::isnan(a) && std::isnan(b)) || a == b)) d.diff = INFINITY;
      continue;
    }
    d.diff = std::max(d.diff, std::abs(double(a) - double(b)));
    d.scale = std::max(d.scale, std::abs(double(b)));
    if (b > d.top) d.second = d.top, d.top = b;
    else if (b > d.second) d.second = b;
  }
  return d;
}
}  // namespace

double max_logit_error(const SystemProfile& cand, const SystemProfile& ref) {
  double err = 0;
  if (cand.prefill_logits.size() != ref.prefill_logits.size()) return INFINITY;
  for (size_t b = 0; b < ref.prefill_logits.size(); ++b) {
    if (cand.prefill_logits[b].size() != ref.prefill_logits[b].size()) return INFINITY;
    err = std::max(err, row_diff(cand.prefill_logits[b], ref.prefill_logits[b]).rel());
  }
  return err;
}

Proposal dispatch_cuda(const std::string& phase, const std::string& stage, const SystemConfig& cur,
                       const std::set<std::string>& tried, int batch, std::string& why) {
  static const std::set<std::string> projections = {"qkv_gemm", "o_gemm", "mlp_gate_up_gemm", "mlp_down_gemm"};
  const bool decode = phase == "decode";
  const bool small = decode && batch <= 4;  // the GEMV path's limit (model/cuda_engine.hpp)
  // The persistent decode kernel needs every small-batch fusion on (model/cuda_engine.hpp)
  const bool persistent_ready = small && cur.gemv && cur.fuse_swiglu_down && cur.fuse_norm_residual &&
                                cur.fuse_qk_rope_kv && cur.engine_decode_attention && !cur.persistent_decode;
  const char* persistent_change =
      "run every decoder layer of a decode step in one persistent kernel (weights streamed through shared memory "
      "by cp.async across stage and layer boundaries, stages synchronized in the kernel)";
  auto set_persistent = [](SystemConfig& c) { c.persistent_decode = true; };
  Proposal p;
  p.next = cur;
  // A change of `cur` by `edit`, unless tried.
  auto propose = [&](const char* specialist, const std::string& change, auto edit) {
    p.specialist = specialist;
    p.next = cur;
    edit(p.next);
    p.change = change;
    p.any = !tried.count(p.next.to_json().dump());
    if (!p.any) why = "tried already: " + change;
    return p;
  };
  auto inner = [&](const std::string& op) {
    p = propose("kernels", fmt::format("inner loop for {} at the engine's {} shape, then memory's best kernel at its "
                                       "call sites", op, phase),
                [&](SystemConfig& c) { c.best_ops.insert(op); });
    p.inner_op = op;
    p.inner_phase = phase;
    return p;
  };
  if (stage == "host_other") {
    p.specialist = "compilation";
    if (decode && !cur.graphs) {
      auto f = propose("compilation", "capture the decode step as one CUDA graph", [](SystemConfig& c) { c.graphs = true; });
      if (f.any) return f;
    }
    if (decode && !cur.pdl) {
      auto f = propose("compilation", "launch the engine's kernels with programmatic dependent launch, each "
                       "starting while the one before drains", [](SystemConfig& c) { c.pdl = true; });
      if (f.any) return f;
    }
    if (persistent_ready) {
      auto f = propose("compilation", persistent_change, set_persistent);
      if (f.any) return f;
    }
    why = !decode     ? "prefill launches large kernels back to back; the host gap is launch latency"
          : cur.graphs ? "the decode step is one CUDA graph already; what is left is the graph's own launch latency"
                       : "CUDA graphs and programmatic dependent launch were tried already";
    return p;
  }
  if (stage == "qk_norm" || stage == "rope" || stage == "kv_cache_write") {
    if (!cur.fuse_qk_rope_kv) {
      auto f = propose("compilation", "fuse q/k RMSNorm, RoPE and the KV-cache write into one kernel",
                       [](SystemConfig& c) { c.fuse_qk_rope_kv = true; });
      if (f.any || stage != "rope") return f;
    }
    if (stage == "rope") return inner("rope");
    p.specialist = stage == "kv_cache_write" ? "memory" : "compilation";
    why = stage == "kv_cache_write" ? "the contiguous per-sequence KV cache is this engine's one layout"
                                    : "the q/k norm is an engine kernel; its fusion was tried";
    return p;
  }
  if (stage == "qk_norm_rope_kv") {
    p.specialist = "compilation";
    why = "q/k norm, RoPE and the KV-cache write are one kernel already";
    return p;
  }
  if (stage == "swiglu") {
    if (small && cur.gemv && !cur.fuse_swiglu_down) {
      auto f = propose("compilation", "compute SwiGLU inside the down projection's GEMV",
                       [](SystemConfig& c) { c.fuse_swiglu_down = true; });
      if (f.any) return f;
    }
    return inner("swiglu_act");
  }
  if (stage == "residual_norm" || stage == "mlp_residual_norm" || stage == "input_norm") {
    if (small && cur.gemv && !cur.fuse_norm_residual) {
      auto f = propose("compilation", "compute the RMSNorms inside the qkv and gate/up GEMVs and the residual adds "
                       "inside the o and down GEMVs", [](SystemConfig& c) { c.fuse_norm_residual = true; });
      if (f.any) return f;
    }
    if (stage != "input_norm") return inner("rmsnorm_residual");
  }
  if (stage == "input_norm" || stage == "final_norm") {
    p.specialist = "compilation";
    why = "one engine RMSNorm launch per pass (the first layer's input norm, or the final norm before lm_head)";
    return p;
  }
  if (stage == "attention") {
    if (small && !cur.engine_decode_attention) {
      auto f = propose("kernels", "decode attention by the engine's one-launch split-KV kernel (parts merged in the "
                       "same launch)", [](SystemConfig& c) { c.engine_decode_attention = true; });
      if (f.any) return f;
    }
    if (decode && !(small && cur.engine_decode_attention)) return inner("gqa_decode_attention");
    if (decode) {
      p.specialist = "kernels";
      why = "decode attention runs the engine's split-KV kernel already";
      return p;
    }
    if (!cur.flash_prefill)
      return propose("kernels", "prefill attention by the FlashAttention-2 kernel (tensor cores, scores in registers)",
                     [](SystemConfig& c) { c.flash_prefill = true; });
    p.specialist = "kernels";
    why = "prefill attention runs the FlashAttention-2 kernel already";
    return p;
  }
  if (projections.count(stage)) {
    p.specialist = "kernels";
    if (small && !cur.gemv)
      return propose("kernels", "projections at <= 4 tokens by the engine's weight-streaming GEMV",
                     [](SystemConfig& c) { c.gemv = true; });
    if (persistent_ready) {
      auto f = propose("kernels", persistent_change, set_persistent);
      if (f.any) return f;
    }
    why = small ? "the GEMV path is on already" : "cuBLASLt's heuristic kernel is the engine's GEMM above 4 tokens";
    return p;
  }
  if (stage == "decoder_layers") {  // the persistent kernel's interval, unsplit (its timestamps were unusable)
    p.specialist = "compilation";
    why = "every decoder layer is one persistent kernel already";
    return p;
  }
  if (stage == "lm_head") {
    p.specialist = "kernels";
    why = "the vocabulary projection is the screened lm_head at decode (an int8 copy bounds every logit, the "
          "candidates' bf16 rows are read exactly) or one cuBLASLt GEMM (f32 logits), with no alternative here";
    return p;
  }
  p.specialist = "data";
  why = "token ids in and greedy tokens out are 4 bytes per sequence, sampling and the embedding run on the GPU";
  return p;
}

namespace {

// Row b's error (row_diff: max |c - r| / max |r| over the finite logits, +inf where the
// non-finite ones differ) and whether the greedy token is decisive in `r` (its top-2 finite
// margin > 2 x the absolute difference).
struct RowCheck {
  double rel = 0;
  bool decisive = false;
};
RowCheck check_row(const std::vector<float>& c, const std::vector<float>& r) {
  if (c.size() != r.size() || r.empty()) return {INFINITY, false};
  const RowDiff d = row_diff(c, r);
  return {d.rel(), d.top - d.second > 2 * d.diff};
}

int32_t token_at(const std::vector<std::vector<int32_t>>& t, size_t b, size_t i) {
  return b < t.size() && i < t[b].size() ? t[b][i] : -1;
}

}  // namespace

bool verify_bf16(const SystemProfile& cand, const SystemProfile& ref, double tol, std::string& detail) {
  const size_t B = ref.prefill_logits.size();
  if (cand.prefill_logits.size() != B || cand.tokens.size() != ref.tokens.size()) {
    detail = "the systems ran different batches";
    return false;
  }
  double prefill_err = 0, decode_err = 0;
  int decisive[2] = {0, 0}, same[2] = {0, 0}, decode_rows = 0;
  for (size_t b = 0; b < B; ++b) {
    const auto pc = check_row(cand.prefill_logits[b], ref.prefill_logits[b]);
    prefill_err = std::max(prefill_err, pc.rel);
    if (pc.decisive) ++decisive[0], same[0] += token_at(cand.tokens, b, 0) == token_at(ref.tokens, b, 0);
    // The decode step saw the same input only where the first token agrees
    if (token_at(cand.tokens, b, 0) != token_at(ref.tokens, b, 0) || b >= ref.decode_logits.size()) continue;
    if (b >= cand.decode_logits.size()) {
      decode_err = INFINITY;
      continue;
    }
    const auto dc = check_row(cand.decode_logits[b], ref.decode_logits[b]);
    ++decode_rows;
    decode_err = std::max(decode_err, dc.rel);
    if (dc.decisive) ++decisive[1], same[1] += token_at(cand.tokens, b, 1) == token_at(ref.tokens, b, 1);
  }
  int64_t tokens = 0, agree = 0;
  for (size_t b = 0; b < ref.tokens.size(); ++b) {
    tokens += int64_t(ref.tokens[b].size());
    for (size_t i = 0; i < ref.tokens[b].size() && token_at(cand.tokens, b, i) == ref.tokens[b][i]; ++i)
      ++agree;  // up to the first divergence: later tokens follow from a different prefix
  }
  detail = fmt::format("prefill logit error {:.2e}, decode {:.2e} over {} sequences (tolerance {:.0e}); decisive "
                       "greedy tokens unchanged: first {}/{}, second {}/{}; {}/{} greedy tokens agree up to the first "
                       "divergence",
                       prefill_err, decode_err, decode_rows, tol, same[0], decisive[0], same[1], decisive[1], agree,
                       tokens);
  return prefill_err <= tol && decode_err <= tol && same[0] == decisive[0] && same[1] == decisive[1];
}

}  // namespace thrive::model
