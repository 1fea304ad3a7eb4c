// thrive model init --preset qwen3-1.7b|tiny --out DIR [--seed S] [--dtype bf16|f32] [--force]: a
// random-weight Hugging Face checkpoint (config.json + model.safetensors); a DIR that already holds
// a checkpoint is replaced only with --force.
// thrive e2e --model DIR --batch B --prompt P --gen G [--device cpu|cuda|auto] [--graphs on|off]
// [--kernels baseline|best] [--attention flash|gemm] [--fusions on|off|LIST] [--gemv on|off] [--pdl on|off]
// [--gemv-rows 1|2] [--decode-attention engine|op] [--persistent auto|on|off] [--persistent-stages N] [--persistent-splits N] [--persistent-blocks N] [--persistent-kv-prefetch on|off] [--persistent-attention tc|cores] [--persistent-softmax unified|merge] [--persistent-weights auto|ec12|bf16] [--lm-head screened|exact] [--json]: the Qwen3 engine's throughput harness: prefill and decode
// tokens/s, ms per decode step, peak memory, per-stage breakdown (the outer loop's Profile input).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "src/cli/context.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/json.hpp"
#include "thrive/core/files.hpp"
#include "thrive/backend/backend.hpp"
#include "thrive/model/attribution.hpp"
#include "thrive/model/cuda_engine.hpp"
#include "thrive/model/qwen3.hpp"
#include "thrive/model/system_loop.hpp"
#include "thrive/model/weight_coding.hpp"
#include "thrive/ops/op.hpp"
#include "thrive/tools/toolbox.hpp"

namespace thrive::cli {
namespace {

struct InitFlags {
  std::string preset, out, dtype = "bf16";
  std::string seed = "0";
  bool force = false;
};

struct E2eFlags {
  // device_from: what set `device`: "--device", the variable (THRIVE_DEVICE or RSI_DEVICE), or "" (the default)
  std::string device_from = "--device";
  std::string model, device = "auto", graphs = "on", kernels = "best", prompts_file, dump;
  std::string attention = "flash", fusions = "on", gemv = "on", pdl = "on", persistent = "auto";
  int batch = 1, prompt = 16, gen = 16;
  std::string gemv_rows = "1";
  std::string decode_attention = "engine";
  std::string persistent_stages = "0";
  std::string persistent_splits = "0";
  std::string persistent_blocks = "0";
  std::string persistent_kv_prefetch = "off";
  std::string persistent_attention = "tc";
  std::string persistent_softmax = "merge";
  std::string persistent_weights = "auto";
  std::string lm_head = "screened";
  std::string seed = "1";
  bool json = false;
};

// A seed flag: a decimal integer 0 .. 2^64-1 (CLI11 would wrap "-1" to 2^64-1 silently).
uint64_t parse_seed(const std::string& text, const char* flag) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    fail(ErrorCategory::kUsage, "{} {}: expected an integer 0 to 18446744073709551615", flag, text.substr(0, 40));
  return v;
}

// The checkpoint files in `dir` (config.json, *.safetensors, *.safetensors.index.json), sorted;
// none where `dir` does not exist. Error(kStorage) when it exists and cannot be listed.
std::vector<std::string> checkpoint_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == "config.json" || name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json"))
      names.push_back(name);
  }
  if (ec) fail(ErrorCategory::kStorage, "--out {}: cannot list the directory ({})", dir, ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

// `text` with control characters as '?': a file name must not break a one-line message.
std::string printable(std::string text) {
  std::replace_if(text.begin(), text.end(), [](char c) { return (unsigned char)c < 0x20 || c == 0x7f; }, '?');
  return text;
}

// Refuses an --out that already holds a checkpoint unless `force`, and even then one with files
// model init would not replace (shards, an index): the directory would mix two checkpoints.
void check_init_target(const std::string& dir, bool force) {
  const auto have = checkpoint_files(dir);
  if (have.empty()) return;
  const auto listed = [](const std::vector<std::string>& v) {
    std::vector<std::string> shown;
    for (size_t i = 0; i < v.size() && i < 4; ++i) shown.push_back(printable(v[i]));
    return fmt::format("{}{}", fmt::join(shown, ", "), v.size() > 4 ? fmt::format(" and {} more", v.size() - 4) : "");
  };
  if (!force)
    fail(ErrorCategory::kUsage, "--out {}: already holds a checkpoint ({}); expected a directory without one, or "
         "--force to replace its config.json and model.safetensors", printable(dir), listed(have));
  std::vector<std::string> others;
  for (const auto& n : have)
    if (n != "config.json" && n != "model.safetensors") others.push_back(n);
  if (!others.empty())
    fail(ErrorCategory::kUsage, "--out {}: holds checkpoint files that model init does not replace ({}); the "
         "directory would mix two checkpoints: expected another --out, or those files removed", printable(dir),
         listed(others));
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// What either engine reports; printed as a table or JSON by report().
struct E2eResult {
  std::string device, precision;
  double load_ms = 0, prefill_ms = 0, decode_ms = 0;
  int decode_steps = 0;                     // steps in decode_ms
  model::StageTimes prefill_stages, decode_stages;
  double prefill_profiled_ms = 0, decode_profiled_ms = 0;  // wall time the stage timers cover
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<float>> prefill_logits;  // [B][vocab], each sequence's last prompt token
  std::vector<std::vector<float>> decode_logits;   // [B][vocab], the first decode step (CUDA, --dump)
  int64_t prompt_tokens = 0;  // real prompt tokens (padding not counted)
  // Attribute: the measured ceilings and the shape of the profiled passes
  double bandwidth_gbps = 0, tflops = 0;
  int act_bytes = 4, weight_bytes = 4;
  model::PassShape prefill_pass, decode_pass;  // decode: one step at the profiled steps' mean context
  int decode_profiled_steps = 0;
  nlohmann::json extra = nlohmann::json::object();
};

// The pass shapes of a run, from the prompts as they ran (a --prompts-file's may be shorter than
// --prompt; padding is not work a pass must do): prefill over each prompt's tokens (causal), and
// decode steps at each sequence's prompt plus `generated` positions on average.
void set_passes(E2eResult& r, const std::vector<std::vector<int32_t>>& prompts, double generated, int decode_steps) {
  const int64_t B = int64_t(prompts.size());
  int64_t tokens = 0, attended = 0;
  for (const auto& p : prompts) {
    const int64_t P = int64_t(p.size());
    tokens += P;
    attended += P * (P + 1) / 2;
  }
  r.prefill_pass = {tokens, attended, 0, B};
  const int64_t ctx = tokens + int64_t(double(B) * generated + 0.5);
  r.decode_pass = {B, ctx, ctx, B};
  r.decode_profiled_steps = decode_steps;
}

// Headroom ranking of one phase (model/attribution.hpp) as JSON rows.
nlohmann::json ranking(const E2eResult& r, const model::StageTimes& st, double wall_ms,
                       const std::map<std::string, model::StageWork>& work, int passes) {
  nlohmann::json rows = nlohmann::json::array();
  if (passes < 1 || r.bandwidth_gbps <= 0 || r.tflops <= 0) return rows;
  for (const auto& x : model::attribute(st, wall_ms, passes, work, r.bandwidth_gbps, r.tflops))
    rows.push_back({{"stage", x.stage}, {"ms", x.ms}, {"share", x.share}, {"floor_ms", x.floor_ms},
                    {"bound", x.bound}, {"headroom", x.headroom}});
  return rows;
}

// Stage rows with their share of `wall_ms`; "host_other" is the wall time no stage timer
// covered (host work, launch gaps before the first and after the last event), so the rows add
// up to the measured wall time.
nlohmann::json breakdown(const model::StageTimes& st, double wall_ms) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [name, us] : st.us)
    rows.push_back({{"stage", name}, {"ms", us / 1e3}, {"share", wall_ms > 0 ? us / 1e3 / wall_ms : 0.0},
                    {"calls", st.calls.at(name)}});
  const double other = std::max(0.0, wall_ms - st.total_us() / 1e3);
  rows.push_back({{"stage", "host_other"}, {"ms", other}, {"share", wall_ms > 0 ? other / wall_ms : 0.0}, {"calls", 0}});
  return rows;
}

// --prompts-file (a JSON array of token-id arrays, one per sequence) or --prompt random ids.
std::vector<std::vector<int32_t>> random_prompts(const E2eFlags& f, int64_t vocab) {
  if (!f.prompts_file.empty()) {
    std::string why;
    // at most 16 bytes an id ("151935, " with room for indentation) and 64 a sequence: a file of
    // --batch x --prompt ids is far smaller, and a huge one is refused before its parse (about 20
    // times its size in memory)
    const double most = 16.0 * double(f.batch) * double(f.prompt) + 64.0 * double(f.batch) + 4096.0;
    const nlohmann::json j = parse_json_bounded(read_file(f.prompts_file, uintmax_t(std::min(most, 1e15))), 64, &why);
    if (j.is_discarded()) fail(ErrorCategory::kInput, "--prompts-file {}: {}", f.prompts_file, json_kind(j, why));
    if (!j.is_array() || int64_t(j.size()) != f.batch)
      fail(ErrorCategory::kInput, "--prompts-file {}: {}; expected a JSON array of {} token-id array{} (one per "
           "sequence: --batch {})", f.prompts_file,
           j.is_array() ? fmt::format("an array of {} element{}", j.size(), j.size() == 1 ? "" : "s")
                        : std::string("not a JSON array"),
           f.batch, f.batch == 1 ? "" : "s", f.batch);
    std::vector<std::vector<int32_t>> prompts;
    for (size_t index = 0; index < j.size(); ++index) {
      const auto& p = j[index];
      if (!p.is_array() || p.empty() || int64_t(p.size()) > f.prompt)
        fail(ErrorCategory::kInput, "--prompts-file {}: prompt {} is {}; expected a non-empty array of at most --prompt {} ids",
             f.prompts_file, index,
             !p.is_array() ? "not an array: " + json_excerpt(p)
             : p.empty()   ? std::string("empty")
                           : fmt::format("{} ids long", p.size()),
             f.prompt);
      std::vector<int32_t> ids;
      for (const auto& id : p) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
          fail(ErrorCategory::kInput, "--prompts-file {}: token {} is not an id in [0, {})", f.prompts_file,
               json_excerpt(id), vocab);
        ids.push_back(id.get<int32_t>());
      }
      prompts.push_back(std::move(ids));
    }
    return prompts;
  }
  return model::random_prompts(f.batch, f.prompt, vocab, parse_seed(f.seed, "--seed"));
}

// The positions a run uses per sequence (model::decode_context): P + G - 1.
int64_t e2e_context(const E2eFlags& f) { return model::decode_context(f.prompt, f.gen); }

// The harness's warning when greedy skipped NaN or infinite logits (`first`: where the first
// was, "" when the engine does not say: the CUDA engine counts on the device).
void warn_nonfinite_logits(int64_t count, const std::string& first) {
  if (count <= 0) return;
  fmt::print(stderr, "warning: {} logits were NaN or infinite{}; greedy chose among each row's finite ones "
             "(transformers' argmax would pick a NaN): finite but huge weights overflow float32\n",
             count, first.empty() ? std::string() : " (the first: " + first + ")");
}

E2eResult run_cpu(Context& ctx, const E2eFlags& f, const model::Qwen3Config& cfg) {
  E2eResult r;
  ctx.config().device = "cpu";
  r.bandwidth_gbps = ctx.toolbox().peak_bandwidth_gbps();  // the copy ceiling, measured once per device
  r.device = "cpu";
  r.precision = "float32";
  // The checkpoint's headers against config.json, then the KV cache's limit, before the weights
  // load and the random prompts are built (batch x prompt ids: a huge batch would take minutes and
  // gigabytes before the engine refused it); a config.json that disagrees with the tensors is named
  // as such, not as a batch too large for the cache its numbers imply
  const int64_t context = e2e_context(f);
  double weight_gb = 0;  // float32 weights, for the out-of-memory message
  model::Qwen3Weights weights;
  std::vector<std::vector<int32_t>> prompts;  // a --prompts-file's, read before the weights load
  {  // the checkpoint's files close with the load, before the engine runs
    const model::Checkpoint ck(f.model);
    model::check_checkpoint_fits(ck, cfg, f.model);
    weight_gb = double(cfg.parameters()) * 4 / 1e9;
    if (f.prompts_file.empty()) model::check_cpu_kv_cache(cfg, f.batch, context);
    model::check_cpu_host_memory(cfg, f.batch, f.prompt, f.gen, model::host_available_bytes());
    if (!f.prompts_file.empty()) prompts = random_prompts(f, cfg.vocab);
    const auto t = std::chrono::steady_clock::now();
    try {
      weights = model::load_weights(cfg, ck);
    } catch (const std::bad_alloc&) {
      fail(ErrorCategory::kBackend, "{}: out of host memory reading the weights as float32 ({:.3g} GB for {} "
           "parameters; the CPU engine is the float32 reference, for tiny models)", f.model, weight_gb, cfg.parameters());
    }
    r.load_ms = ms_since(t);
  }
  if (prompts.empty()) prompts = random_prompts(f, cfg.vocab);
  model::SystemProfile p;
  try {
    p = model::profile_cpu(cfg, std::move(weights), prompts, f.gen, {});
  } catch (const std::bad_alloc&) {
    fail(ErrorCategory::kBackend, "out of host memory running the CPU engine at batch {} x context {} (float32 KV cache "
         "{:.3g} GB, weights {:.3g} GB, and activations)", f.batch, context,
         model::cpu_kv_cache_bytes(cfg, f.batch, context) / 1e9, weight_gb);
  }
  r.prompt_tokens = p.prompt_tokens;
  r.prefill_ms = r.prefill_profiled_ms = p.prefill_ms;
  r.prefill_logits = std::move(p.prefill_logits);
  r.prefill_stages = p.prefill_stages;
  r.tokens = std::move(p.tokens);
  r.decode_ms = r.decode_profiled_ms = p.decode_ms;
  r.decode_steps = p.decode_steps;
  r.decode_stages = p.decode_stages;
  set_passes(r, prompts, double(r.decode_steps) / 2.0, r.decode_steps);
  r.tflops = model::cpu_gemm_gflops() / 1e3;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.extra["peak_rss_mb"] = double(ru.ru_maxrss) / 1024.0;
  r.extra["kv_cache_bytes"] = p.kv_cache_bytes;
  r.extra["nonfinite_logits"] = p.nonfinite_logits;
  warn_nonfinite_logits(p.nonfinite_logits, p.first_nonfinite_logit);
  return r;
}

// --kernels: "best" (every op), "baseline" (none) or "best:OP,OP" -> the ops whose call sites
// take memory's best kernel.
std::set<std::string> parse_kernels(const std::string& v) {
  std::set<std::string> ops_best;
  if (v == "baseline") return ops_best;
  if (v == "best") {
    for (const auto& op : ops::registry()) ops_best.insert(op->name());
    return ops_best;
  }
  if (v.rfind("best:", 0) == 0) {
    std::stringstream ss(v.substr(5));
    for (std::string op; std::getline(ss, op, ',');) {
      if (op.empty()) fail(ErrorCategory::kUsage, "--kernels {}: an empty op name in the list", v);
      (void)ops::find_op(op);  // a clear error naming the op and the known ones
      ops_best.insert(op);
    }
    if (ops_best.empty() || v.back() == ',') fail(ErrorCategory::kUsage, "--kernels {}: expected best:OP[,OP...]", v);
    return ops_best;
  }
  fail(ErrorCategory::kUsage, "--kernels {}: expected best, baseline or best:OP[,OP...]", v);
}

// --fusions: "on" (all three), "off", or a comma list of qk_rope_kv, swiglu_down, norm_residual.
std::set<std::string> parse_fusions(const std::string& v) {
  if (v == "on") return {"qk_rope_kv", "swiglu_down", "norm_residual"};
  if (v == "off") return {};
  std::set<std::string> out;
  std::stringstream ss(v);
  if (!v.empty() && v.back() == ',')
    fail(ErrorCategory::kUsage, "--fusions {}: expected on, off or a comma list of qk_rope_kv, swiglu_down, norm_residual", v);
  for (std::string x; std::getline(ss, x, ',');) {
    if (x != "qk_rope_kv" && x != "swiglu_down" && x != "norm_residual")
      fail(ErrorCategory::kUsage, "--fusions {}: expected on, off or a comma list of qk_rope_kv, swiglu_down, norm_residual", v);
    out.insert(x);
  }
  if (out.empty()) fail(ErrorCategory::kUsage, "--fusions \"\": expected on, off or a comma list of qk_rope_kv, swiglu_down, norm_residual");
  return out;
}

// The registry of the CUDA engine: per call site, the template's simplest variant (baseline),
// or the best verified kernel in memory for that shape (else the nearest shape's), re-verified
// in the sandbox before it is trusted, falling back to the template's defaults. Runs before the
// engine creates its CUDA context: verification forks sandbox workers.
model::KernelRegistry resolve_registry(Context& ctx, const std::vector<model::OpCallSite>& sites,
                                       const std::set<std::string>& best_ops) {
  ctx.config().device = "cuda";  // the toolbox verifies on the engine's device
  auto& tb = ctx.toolbox();
  model::KernelRegistry reg;
  for (const auto& site : sites) {
    const auto& op = ops::find_op(site.op);
    const auto tmpl = tb.op_template(site.op);
    model::OpKernel k;
    if (!best_ops.count(site.op)) {
      k.kernel = tmpl.instantiate(tmpl.simplest());
      k.origin = "baseline: template, simplest variant";
    } else if (auto rec = tb.best_or_nearest(op, site.shape)) {
      auto cand = backend::KernelSource::parse(rec->source, "memory:" + rec->kernel_id);
      const auto v = tb.verify(cand, site.shape);
      if (v.status == sandbox::Status::kPassed) {
        k.kernel = cand;
        k.origin = fmt::format("memory: best of {} (re-verified)", rec->shape_class);
      } else {
        k.kernel = tmpl.instantiate({});
        k.origin = fmt::format("template defaults (memory's {} failed re-verification: {})", rec->kernel_id,
                               sandbox::status_name(v.status));
      }
    } else {
      k.kernel = tmpl.instantiate({});
      k.origin = "template defaults (no kernel in memory for this op on this device)";
    }
    k.kernel_id = tb.kernel_id(k.kernel);
    reg[site.key()] = k;
  }
  return reg;
}

E2eResult run_cuda(Context& ctx, const E2eFlags& f, const model::Qwen3Config& cfg) {
  model::CudaEngineOptions o;
  o.batch = f.batch;
  o.max_prompt = f.prompt;
  o.max_context = e2e_context(f);
  o.graphs = f.graphs == "on";
  o.flash_prefill = f.attention == "flash";
  const auto fusions = parse_fusions(f.fusions);
  o.fuse_qk_rope_kv = fusions.count("qk_rope_kv") > 0;
  o.fuse_swiglu_down = fusions.count("swiglu_down") > 0;
  o.fuse_norm_residual = fusions.count("norm_residual") > 0;
  o.gemv = f.gemv == "on";
  o.pdl = f.pdl == "on";
  o.gemv_rows = f.gemv_rows == "2" ? 2 : 1;
  o.engine_decode_attention = f.decode_attention == "engine";
  // auto: the persistent decode kernel wherever the engine can run it (batch <= 4, sm_90, the
  // fusions it needs), where it measured faster on the H200 (batch 1: 1.58 against 1.67 ms/step;
  // batch 4: 1.99 against 3.27; README, 2026-12-01); on: the same, but an error where it cannot
  o.persistent_decode = f.persistent == "on" || f.persistent == "auto";
  o.persistent_stages = std::stoi(f.persistent_stages);
  o.persistent_splits = std::stoi(f.persistent_splits);
  o.persistent_blocks = std::stoi(f.persistent_blocks);
  o.persistent_kv_prefetch = f.persistent_kv_prefetch == "on";
  o.persistent_tc_attention = f.persistent_attention == "tc";
  o.persistent_unified_max = f.persistent_softmax == "unified";
  // auto: EC12 at batch 1, where it measured faster, bf16 at 2-4, where it measured slower (on an
  // H100, 2026-12-07: batch 1 1.435-1.451 ms/step against 1.559-1.563, batch 4 2.075 against
  // 1.988, batches 2 and 3 not measured; bench/results/ec12-2026-12-07/)
  o.persistent_ec12 = f.persistent_weights == "ec12" || (f.persistent_weights == "auto" && f.batch == 1);
  o.lm_head_screen = f.lm_head == "screened";
  const auto reg = resolve_registry(ctx, model::CudaQwen3Engine::call_sites(cfg, o), parse_kernels(f.kernels));
  auto run_cfg = ctx.config();
  E2eResult r;
  r.bandwidth_gbps = ctx.toolbox().peak_bandwidth_gbps();  // before the engine's CUDA context
  r.act_bytes = r.weight_bytes = 2;
  r.precision = "bf16 (f32 accumulation)";
  // a --prompts-file is read before the weights load (random prompts after the engine has checked
  // that batch x context fits)
  auto prompts = f.prompts_file.empty() ? std::vector<std::vector<int32_t>>() : random_prompts(f, cfg.vocab);
  auto t = std::chrono::steady_clock::now();
  model::CudaQwen3Engine engine(cfg, f.model, run_cfg, o, reg);
  if (f.persistent == "on" && !engine.options().persistent_decode)
    fail(ErrorCategory::kUsage,
         "--persistent on: the persistent decode kernel cannot run for this model on this device (it needs sm_90 or "
         "newer, head_dim >= 16, GQA group 1/2/4/8, two 32 KiB ring stages of shared memory and the GEMV fusions' "
         "staging limits at batch {}); use --persistent auto or off",
         f.batch);
  r.load_ms = ms_since(t);
  r.device = "cuda:" + engine.device().name;
  if (prompts.empty()) prompts = random_prompts(f, cfg.vocab);
  for (const auto& p : prompts) r.prompt_tokens += int64_t(p.size());
  engine.prefill(prompts);  // warm-up: cuBLASLt plans, first-touch of every buffer
  // the skipped logits of the greedy calls whose tokens are not the run's (the engine counts every
  // argmax): the warm-up's, the --dump prefill's, and with --gen 0 the measured prefill's
  int64_t uncounted = engine.nonfinite_logits();
  engine.set_stage_timing(true);
  engine.reset_stages();
  t = std::chrono::steady_clock::now();
  auto next = engine.prefill(prompts);
  r.prefill_ms = r.prefill_profiled_ms = ms_since(t);
  r.prefill_stages = engine.stages();
  engine.reset_stages();
  if (!f.dump.empty()) {  // the logits of an untimed prefill: their download is not prefill time
    engine.set_stage_timing(false);
    const int64_t before = engine.nonfinite_logits();
    next = engine.prefill(prompts, &r.prefill_logits);
    uncounted += engine.nonfinite_logits() - before;
  }
  // Decode: one eager step warms up (cuBLASLt plans for the decode shapes), the next steps run
  // eagerly with stage timing (the breakdown), one more captures the graph, the rest are the
  // throughput measurement.
  const int steps = std::max(0, f.gen - 1);
  const int first = std::min(steps, 1);
  const int profiled = std::min(steps - first, 2);
  const int warm = o.graphs && steps - first - profiled > 1 ? 1 : 0;
  r.tokens.assign(size_t(f.batch), {});
  auto keep = [&] {
    for (int b = 0; b < f.batch; ++b) r.tokens[size_t(b)].push_back(next[size_t(b)]);
  };
  if (f.gen > 0) keep();  // prefill's token is the first generated one (none with --gen 0, as on the CPU)
  engine.set_stage_timing(false);
  for (int s = 0; s < first; ++s) {
    next = engine.decode(next, f.dump.empty() ? nullptr : &r.decode_logits);
    keep();
  }
  engine.set_stage_timing(true);
  engine.reset_stages();
  const int64_t screened_at_profile = engine.screened_exact_rows();
  for (int s = 0; s < profiled; ++s) {
    t = std::chrono::steady_clock::now();
    next = engine.decode(next);
    r.decode_profiled_ms += ms_since(t);
    keep();
  }
  r.decode_stages = engine.stages();
  const int64_t screened_profiled = engine.screened_exact_rows() - screened_at_profile;
  engine.set_stage_timing(false);
  for (int s = 0; s < warm; ++s) {
    next = engine.decode(next);
    keep();
  }
  // The measured steps: one greedy loop on the device (decode_greedy: each step's token is the
  // next one's input there; the host enqueues the steps and reads the tokens back at the end)
  r.decode_steps = steps - first - profiled - warm;
  engine.prepare_decode_greedy(r.decode_steps);  // its graphs' capture is not decode time
  const int64_t screened_before = engine.screened_exact_rows();
  t = std::chrono::steady_clock::now();
  const auto rest = engine.decode_greedy(next, r.decode_steps);
  r.decode_ms = ms_since(t);
  int64_t screened_rows = engine.screened_exact_rows() - screened_before;
  for (const auto& row : rest) {
    next = row;
    keep();
  }
  set_passes(r, prompts, first + (profiled + 1) / 2.0, profiled);
  r.tflops = engine.measure_gemm_tflops();
  if (r.decode_steps == 0) {  // too few steps for a separate measurement: the profiled ones
    r.decode_steps = profiled;
    r.decode_ms = r.decode_profiled_ms;
    screened_rows = screened_profiled;
  }
  nlohmann::json sites = nlohmann::json::array();
  for (const auto& [key, k] : engine.registry())
    sites.push_back({{"call_site", key}, {"origin", k.origin}, {"kernel_id", k.kernel_id}});
  const auto& eo = engine.options();  // as run: a knob the model's dims do not allow is off
  r.decode_pass.screened_lm_head = eo.lm_head_screen;
  // the persistent kernel's EC12 tiles: kEc12TileBytes a 16 x 1024 tile (model/weight_coding.hpp)
  if (eo.persistent_ec12) r.decode_pass.projection_weight_bytes = double(model::kEc12TileBytes) / (16.0 * 1024.0);
  r.extra = {{"graphs", f.graphs},
             {"prefill_attention", eo.flash_prefill ? "flash" : "gemm"},
             {"fusions",
              {{"qk_norm_rope_kv", eo.fuse_qk_rope_kv},
               {"swiglu_into_down_gemv", eo.fuse_swiglu_down},
               {"norm_and_residual_into_gemv", eo.fuse_norm_residual}}},
             {"gemv", eo.gemv},
             {"pdl", eo.pdl},
             {"gemv_rows_per_warp", eo.gemv_rows},
             {"decode_attention", eo.engine_decode_attention ? "engine" : "op"},
             {"persistent_decode", eo.persistent_decode},
             {"persistent_stages", eo.persistent_stages},
             {"persistent_splits", eo.persistent_splits},
             {"persistent_blocks", eo.persistent_blocks},
             {"persistent_kv_prefetch", eo.persistent_kv_prefetch},
             {"persistent_attention", eo.persistent_tc_attention ? "tc" : eo.persistent_decode ? "cores" : "off"},
             {"persistent_softmax", eo.persistent_unified_max ? "unified" : eo.persistent_decode ? "merge" : "off"},
             // the persistent kernel's weight stream: EC12 copies (weight_coding.hpp) or the bf16 weights
             {"persistent_weights", eo.persistent_ec12 ? "ec12" : eo.persistent_decode ? "bf16" : "off"},
             {"ec12_bytes", engine.ec12_bytes()},
             {"ec12_patches", engine.ec12_patches()},
             {"ec12_fallback", engine.ec12_fallback()},
             {"lm_head", eo.lm_head_screen ? "screened" : "exact"},
             // the bf16 rows the screened lm_head's exact pass read per token of the measured steps
             {"lm_head_exact_rows_per_token",
              eo.lm_head_screen && r.decode_steps > 0 ? double(screened_rows) / double(r.decode_steps * f.batch) : 0.0},
             {"kernels", f.kernels},
             {"registry", sites},
             {"decode_eager_ms_per_step", profiled > 0 ? r.decode_profiled_ms / profiled : 0.0},
             // how the measured decode steps ran (CudaQwen3Engine::decode_greedy)
             {"decode_loop", o.graphs ? fmt::format("device (graphs of {} steps)", model::CudaQwen3Engine::kGreedyChunk)
                                      : std::string("device (eager launches)")},
             {"gpu_memory_allocated_bytes", engine.allocated_bytes()},
             {"gpu_memory_used_bytes", engine.device_memory_used()},
             {"nonfinite_logits", f.gen > 0 ? engine.nonfinite_logits() - uncounted : int64_t{0}}};
  warn_nonfinite_logits(r.extra["nonfinite_logits"].get<int64_t>(), "");
  return r;
}

// The directory --dump writes into, made now (as the dump would) and probed with a file of its own:
// a prefix under a regular file, or on a read-only or pseudo file system (/proc, /sys), is then a
// usage error before the weights load, not a storage error after the whole run.
void check_dump_directory(const std::string& prefix) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(prefix).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    fail(ErrorCategory::kUsage, "--dump {}: cannot make its directory {} ({}); expected a path prefix in a writable "
         "directory", prefix, dir.string(), ec ? ec.message() : "not a directory");
  std::string probe = (dir / ".thrive-dump-probe-XXXXXX").string();
  const int fd = mkstemp(probe.data());
  if (fd < 0)
    fail(ErrorCategory::kUsage, "--dump {}: cannot write in {} ({}); expected a path prefix in a writable directory",
         prefix, dir.string(), std::strerror(errno));
  close(fd);
  unlink(probe.c_str());
}

// --dump PREFIX: PREFIX.logits.f32 (raw little-endian float32 [B, vocab], each sequence's last
// prompt token), PREFIX.tokens.json (the greedy tokens), for scripts/hf_compare.py, and on CUDA
// with --gen >= 2 PREFIX.decode_logits.f32 (the same layout, the first decode step: the outer
// loop's check of the decode path).
void dump(const E2eFlags& f, const E2eResult& r) {
  auto raw = [](const std::vector<std::vector<float>>& rows) {
    std::string bytes;
    for (const auto& row : rows) bytes.append(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float));
    return bytes;
  };
  write_file_atomic(f.dump + ".logits.f32", raw(r.prefill_logits));
  if (!r.decode_logits.empty()) write_file_atomic(f.dump + ".decode_logits.f32", raw(r.decode_logits));
  write_file_atomic(f.dump + ".tokens.json", nlohmann::json(r.tokens).dump());
}

void report(const E2eFlags& f, const model::Qwen3Config& cfg, E2eResult r) {
  if (!f.dump.empty()) dump(f, r);
  // Each phase's minimum work, for its headroom ranking; the matrix rate floors are computed at is
  // the measured one, or the fastest rate a stage of either phase achieved where that is higher
  // (model::achieved_tflops: a ceiling a stage beats is none), one rate for the whole run.
  const auto prefill_work = model::stage_work(cfg, r.prefill_pass, r.act_bytes, r.weight_bytes);
  const auto decode_work = model::stage_work(cfg, r.decode_pass, r.act_bytes, r.weight_bytes);
  const double probe_tflops = r.tflops;
  if (r.bandwidth_gbps > 0 && r.tflops > 0) {
    r.tflops = std::max(r.tflops, model::achieved_tflops(r.prefill_stages, 1, prefill_work));
    if (r.decode_profiled_steps > 0)
      r.tflops = std::max(r.tflops, model::achieved_tflops(r.decode_stages, r.decode_profiled_steps, decode_work));
  }
  const double steps = r.decode_steps;
  nlohmann::json doc = {
      {"model", f.model}, {"device", r.device}, {"precision", r.precision}, {"parameters", cfg.parameters()},
      {"batch", f.batch}, {"prompt", f.prompt}, {"gen", f.gen}, {"load_ms", r.load_ms},
      {"prefill_ms", r.prefill_ms},
      {"prompt_tokens", r.prompt_tokens},
      {"prefill_tokens_per_s", r.prefill_ms > 0 ? 1e3 * double(r.prompt_tokens) / r.prefill_ms : 0.0},
      {"decode_ms", r.decode_ms}, {"decode_steps", r.decode_steps},
      {"decode_ms_per_step", steps > 0 ? r.decode_ms / steps : 0.0},
      {"decode_tokens_per_s", r.decode_ms > 0 ? 1e3 * f.batch * steps / r.decode_ms : 0.0},
      {"prefill_stages", breakdown(r.prefill_stages, r.prefill_profiled_ms)},
      {"decode_stages", breakdown(r.decode_stages, r.decode_profiled_ms)},
      {"ceilings", {{"copy_bandwidth_gbps", r.bandwidth_gbps}, {"matrix_tflops", r.tflops},
                    {"matrix_tflops_measured", probe_tflops}}},
      {"prefill_headroom", ranking(r, r.prefill_stages, r.prefill_profiled_ms, prefill_work, 1)},
      {"decode_headroom", ranking(r, r.decode_stages, r.decode_profiled_ms, decode_work, r.decode_profiled_steps)},
      {"tokens", r.tokens}};
  doc.update(r.extra);
  if (f.json) {
    fmt::print("{}\n", doc.dump(2));
    return;
  }
  // with --prompts-file, --prompt is only the longest prompt allowed: say what ran
  const std::string prompt_said =
      f.prompts_file.empty() ? fmt::format("prompt {}", f.prompt)
                             : fmt::format("prompts from {} ({} tokens in all)", f.prompts_file, r.prompt_tokens);
  fmt::print("Qwen3 engine on {} ({}): {} ({:.1f} M parameters), batch {}, {}, gen {}\n", r.device, r.precision,
             f.model, double(cfg.parameters()) / 1e6, f.batch, prompt_said, f.gen);
  if (r.decode_steps > 0)
    fmt::print("prefill {:.1f} tokens/s ({:.1f} ms); decode {:.1f} tokens/s, {:.3f} ms per step over {} step{}; "
               "weights loaded in {:.0f} ms\n",
               doc["prefill_tokens_per_s"].get<double>(), r.prefill_ms, doc["decode_tokens_per_s"].get<double>(),
               doc["decode_ms_per_step"].get<double>(), r.decode_steps, r.decode_steps == 1 ? "" : "s", r.load_ms);
  else  // --gen 0 or 1: the one token (if any) comes from prefill
    fmt::print("prefill {:.1f} tokens/s ({:.1f} ms); no decode step ran ({}); weights loaded in {:.0f} ms\n",
               doc["prefill_tokens_per_s"].get<double>(), r.prefill_ms,
               f.gen == 0 ? "--gen 0: prefill only, no token kept"
                          : "--gen 1: the token comes from prefill; decode runs gen - 1 steps",
               r.load_ms);
  if (doc.contains("peak_rss_mb")) fmt::print("peak RSS {:.0f} MB\n", doc["peak_rss_mb"].get<double>());
  if (doc.contains("gpu_memory_allocated_bytes"))
    fmt::print("GPU memory: {:.2f} GiB allocated by the engine, {:.2f} GiB in use on the device; graphs {}, kernels "
               "{}, prefill attention {}, fusions {}, gemv {}; eager decode step with stage timing: {:.3f} ms\n",
               double(doc["gpu_memory_allocated_bytes"].get<int64_t>()) / (1 << 30),
               double(doc["gpu_memory_used_bytes"].get<int64_t>()) / (1 << 30), f.graphs, f.kernels,
               doc["prefill_attention"].get<std::string>(), f.fusions, doc["gemv"].get<bool>() ? "on" : "off",
               doc["decode_eager_ms_per_step"].get<double>());
  if (doc.contains("persistent_decode")) {  // the CUDA engine's persistent decode kernel, as it ran
    if (doc["persistent_decode"].get<bool>()) {
      fmt::print("persistent decode kernel: on ({} blocks, ring stages {}, attention splits {}, {} attention parts, {} softmax, KV prefetch {}, "
                 "weights {})\n",
                 doc.value("persistent_blocks", 0), doc["persistent_stages"].get<int>(), doc["persistent_splits"].get<int>(),
                 doc["persistent_attention"].get<std::string>() == "tc" ? "tensor-core" : "CUDA-core",
                 doc.value("persistent_softmax", std::string("merge")) == "unified" ? "unified-max" : "merged",
                 doc["persistent_kv_prefetch"].get<bool>() ? "on" : "off",
                 doc.value("persistent_weights", std::string("bf16")) == "ec12"
                     ? fmt::format("EC12, {:.2f} GB packed, {} patch words", double(doc.value("ec12_bytes", int64_t{0})) / 1e9,
                                   doc.value("ec12_patches", int64_t{0}))
                     : std::string("bf16"));
    } else {
      fmt::print("persistent decode kernel: off (decode runs a launch per stage)\n");
    }
    if (!doc.value("ec12_fallback", std::string()).empty())
      fmt::print("EC12 weights were asked for and are off: {}\n", doc["ec12_fallback"].get<std::string>());
  }
  if (doc.contains("lm_head")) {
    if (doc["lm_head"].get<std::string>() == "screened")
      fmt::print("lm_head: screened (int8 copy, then the exact bf16 rows of {:.1f} candidates a token)\n",
                 doc.value("lm_head_exact_rows_per_token", 0.0));
    else
      fmt::print("lm_head: exact (cuBLASLt, every bf16 row)\n");
  }
  if (doc.contains("registry"))
    for (const auto& s : doc["registry"])
      fmt::print("  kernel {:<34} {}\n", s["call_site"].get<std::string>(), s["origin"].get<std::string>());
  fmt::print("ceilings: copy {:.1f} GB/s, matrix {:.3g} TFLOP/s{}; headroom = share x (1 - floor / measured)\n",
             r.bandwidth_gbps, r.tflops,
             r.tflops > probe_tflops ? fmt::format(" (a stage's own rate: the measured {:.3g} was below it)", probe_tflops)
                                     : std::string());
  for (const char* phase : {"prefill_headroom", "decode_headroom"}) {
    if (r.decode_steps == 0 && std::string_view(phase) == "decode_headroom") continue;  // no step ran: nothing to rank
    // decode's times are the profiled steps' sum, the floors those steps' too
    const std::string sums = std::string_view(phase) == "decode_headroom" && r.decode_profiled_steps > 1
                                 ? fmt::format("  (ms: sums over the {} profiled steps)", r.decode_profiled_steps)
                                 : std::string();
    fmt::print("{:<18} {:>10} {:>7} {:>10} {:>8} {:>9}{}\n", phase, "ms", "share", "floor ms", "bound", "headroom", sums);
    for (const auto& row : doc[phase])
      fmt::print("  {:<16} {:>10.3f} {:>6.1f}% {:>10.3f} {:>8} {:>8.1f}%\n", row["stage"].get<std::string>(),
                 row["ms"].get<double>(), 100.0 * row["share"].get<double>(), row["floor_ms"].get<double>(),
                 row["bound"].get<std::string>(), 100.0 * row["headroom"].get<double>());
  }
  // every sequence's tokens, the first 8 sequences at most (--json has them all)
  const size_t shown = std::min<size_t>(r.tokens.size(), 8);
  for (size_t b = 0; b < shown; ++b)
    fmt::print("greedy tokens of sequence {}: {}\n", b, nlohmann::json(r.tokens[b]).dump());
  if (shown < r.tokens.size())
    fmt::print("({} more sequence{}: --json lists every sequence's tokens)\n", r.tokens.size() - shown,
               r.tokens.size() - shown == 1 ? "" : "s");
}

void run_e2e(Context& ctx, const E2eFlags& f, const std::vector<std::string>& engine_flags_given) {
  // each named alone: a default the user never typed is not part of the complaint
  if (f.batch < 1) fail(ErrorCategory::kUsage, "--batch {}: expected at least 1 sequence", f.batch);
  if (f.prompt < 1) fail(ErrorCategory::kUsage, "--prompt {}: expected at least 1 prompt token", f.prompt);
  if (f.gen < 0) fail(ErrorCategory::kUsage, "--gen {}: expected 0 or more generated tokens", f.gen);
  for (const auto& [flag, v] : {std::pair{"--graphs", f.graphs}, {"--gemv", f.gemv}, {"--pdl", f.pdl},
                                {"--persistent-kv-prefetch", f.persistent_kv_prefetch}})
    if (v != "on" && v != "off") fail(ErrorCategory::kUsage, "{} {}: expected on or off", flag, v);
  if (f.persistent != "auto" && f.persistent != "on" && f.persistent != "off")
    fail(ErrorCategory::kUsage, "--persistent {}: expected auto, on or off", f.persistent.substr(0, 40));
  const auto fusions = parse_fusions(f.fusions);
  if (f.persistent == "on" && (f.batch > 4 || f.gemv != "on" || f.decode_attention != "engine" || fusions.size() < 3))
    fail(ErrorCategory::kUsage,
         "--persistent on with --batch {} --gemv {} --decode-attention {} --fusions {}: the persistent decode kernel "
         "needs batch <= 4, --gemv on, --decode-attention engine and every fusion (use --persistent auto or off)",
         f.batch, f.gemv, f.decode_attention, f.fusions.substr(0, 80));
  if (f.persistent_weights == "ec12" && f.batch > 4)
    fail(ErrorCategory::kUsage,
         "--persistent-weights ec12 with --batch {}: it sets the persistent decode kernel's weight stream, and that "
         "kernel runs at batch <= 4 (use --persistent-weights auto or bf16)",
         f.batch);
  if (f.gemv_rows != "1" && f.gemv_rows != "2")
    fail(ErrorCategory::kUsage, "--gemv-rows {}: expected 1 or 2", f.gemv_rows.substr(0, 40));
  // a whole number of one to `digits` digits, no leading zero: its value, else -1
  const auto small_count = [](const std::string& s, size_t digits = 2) {
    if (s.empty() || s.size() > digits || s.find_first_not_of("0123456789") != std::string::npos ||
        (s.size() > 1 && s[0] == '0'))
      return -1;
    return std::stoi(s);
  };
  const int stages = small_count(f.persistent_stages), most = model::CudaEngineOptions::kMaxPersistentStages;
  if (stages < 0 || stages == 1 || stages > most)
    fail(ErrorCategory::kUsage, "--persistent-stages {}: expected 0 (automatic: at most {}) or 2 to {}",
         f.persistent_stages.substr(0, 40), model::CudaEngineOptions::kAutoPersistentStages, most);
  const int splits = small_count(f.persistent_splits);
  if (splits < 0 || splits > 64)
    fail(ErrorCategory::kUsage, "--persistent-splits {}: expected 0 (automatic) or a whole number of splits, 1 to 64",
         f.persistent_splits.substr(0, 40));
  const int blocks = small_count(f.persistent_blocks, 4);
  if (blocks < 0)
    fail(ErrorCategory::kUsage, "--persistent-blocks {}: expected 0 (automatic) or a whole number of blocks, 1 to the SM count",
         f.persistent_blocks.substr(0, 40));
  if (f.persistent_attention != "tc" && f.persistent_attention != "cores")
    fail(ErrorCategory::kUsage, "--persistent-attention {}: expected tc or cores", f.persistent_attention.substr(0, 40));
  if (f.persistent_softmax != "unified" && f.persistent_softmax != "merge")
    fail(ErrorCategory::kUsage, "--persistent-softmax {}: expected unified or merge", f.persistent_softmax.substr(0, 40));
  if (f.lm_head != "screened" && f.lm_head != "exact")
    fail(ErrorCategory::kUsage, "--lm-head {}: expected screened or exact", f.lm_head.substr(0, 40));
  if (f.persistent_weights != "auto" && f.persistent_weights != "ec12" && f.persistent_weights != "bf16")
    fail(ErrorCategory::kUsage, "--persistent-weights {}: expected auto, ec12 or bf16", f.persistent_weights.substr(0, 40));
  for (const char* knob : {"--persistent-stages", "--persistent-splits", "--persistent-blocks", "--persistent-kv-prefetch", "--persistent-attention",
                           "--persistent-softmax", "--persistent-weights"})
    if (f.persistent == "off" && std::find(engine_flags_given.begin(), engine_flags_given.end(), knob) != engine_flags_given.end() &&
        !(knob == std::string("--persistent-kv-prefetch") && f.persistent_kv_prefetch == "off") &&  // off asks for nothing
        !(knob == std::string("--persistent-weights") && f.persistent_weights != "ec12"))  // nor do bf16 and auto
      fail(ErrorCategory::kUsage, "{} with --persistent off: it sets the persistent decode kernel, which is off", knob);
  if (f.decode_attention != "engine" && f.decode_attention != "op")
    fail(ErrorCategory::kUsage, "--decode-attention {}: expected engine or op", f.decode_attention);
  if (f.attention != "flash" && f.attention != "gemm")
    fail(ErrorCategory::kUsage, "--attention {}: expected flash or gemm", f.attention);
  parse_seed(f.seed, "--seed");
  parse_kernels(f.kernels);
  config::require_choice(f.device, config::kDevices, "--device " + f.device);
  // config.json, read once: by the check below (before the GPU is probed) or for the run
  std::optional<model::Qwen3Config> loaded;
  const auto model_config = [&]() -> const model::Qwen3Config& {
    if (!loaded) loaded = model::Qwen3Config::load(f.model);
    return *loaded;
  };
  // asked for by name, the tensor-core parts are an error where they cannot run (the default
  // falls back to the CUDA-core parts, as the JSON's persistent_attention shows); before the GPU
  // is probed
  // the tensor-core attention parts take head_dim 64 or 128
  const auto tc_parts_fit = [&] { return model_config().head_dim == 64 || model_config().head_dim == 128; };
  if (f.device != "cpu" && f.persistent_attention == "tc" &&
      std::find(engine_flags_given.begin(), engine_flags_given.end(), "--persistent-attention") != engine_flags_given.end()) {
    if (!tc_parts_fit())
      fail(ErrorCategory::kUsage,
           "--persistent-attention tc: the tensor-core attention parts take head_dim 64 or 128, and {} has {} (use "
           "cores, or leave the flag out: the default then takes the CUDA-core parts)",
           f.model, model_config().head_dim);
  }
  // the unified max is a way of the tensor-core parts: asked for where they cannot run, an error
  // (where the checkpoint's norm weights allow too large a bound the engine merges, with a warning)
  if (f.device != "cpu" && f.persistent_softmax == "unified") {
    if (f.persistent_attention == "cores")
      fail(ErrorCategory::kUsage, "--persistent-softmax unified: it combines the tensor-core attention parts, and "
           "--persistent-attention cores asks for the CUDA-core parts (use tc, or --persistent-softmax merge)");
    if (!tc_parts_fit())
      fail(ErrorCategory::kUsage,
           "--persistent-softmax unified: it combines the tensor-core attention parts, which take head_dim 64 or 128, "
           "and {} has {} (use --persistent-softmax merge)",
           f.model, model_config().head_dim);
  }
  const std::string device = backend::resolve_backend_name(f.device);
  if (device == "cpu" && !engine_flags_given.empty())
    fail(ErrorCategory::kUsage, "{}: the CPU engine is the float32 reference with none of the CUDA engine's options; "
         "they apply to --device cuda{}", fmt::join(engine_flags_given, " "),
         f.device_from == "--device" ? (f.device == "auto" ? " (--device auto chose cpu: no CUDA device here)" : "")
         : f.device_from.empty()     ? " (the default device, auto, chose cpu: no CUDA device here)"
         : f.device == "auto"        ? fmt::format(" ({}=auto chose cpu: no CUDA device here)", f.device_from)
                                     : fmt::format(" ({}={})", f.device_from, f.device));
  const auto& cfg = model_config();
  model::check_decode_context(cfg, f.prompt, f.gen);
  report(f, cfg, device == "cpu" ? run_cpu(ctx, f, cfg) : run_cuda(ctx, f, cfg));
}

}  // namespace

void register_model(CLI::App& app, Context&) {
  auto* cmd = app.add_subcommand("model", "Model checkpoints for the inference engine");
  cmd->require_subcommand(1);
  auto* init = cmd->add_subcommand("init", "Write a random-weight Qwen3 checkpoint (config.json + model.safetensors)");
  static InitFlags f;
  init->add_option("--preset", f.preset, "qwen3-1.7b | tiny")->required();
  init->add_option("--out", f.out, "Checkpoint directory to write")->required();
  init->add_option("--seed", f.seed, "Random seed (default 0)");
  init->add_option("--dtype", f.dtype, "bf16 (default) | f32");
  init->add_flag("--force", f.force, "Replace the config.json and model.safetensors of a checkpoint already in --out");
  init->callback([] {
    if (f.dtype != "bf16" && f.dtype != "f32") fail(ErrorCategory::kUsage, "--dtype {}: expected bf16 or f32", f.dtype);
    const auto cfg = model::Qwen3Config::preset(f.preset);
    const uint64_t seed = parse_seed(f.seed, "--seed");
    // One model init at a time in a directory (an exclusive flock on it, held to the end): the
    // check and the write cannot interleave with another's.
    ensure_writable_dir(f.out, "--out");
    FileLock lock(f.out, true);
    if (!lock.is_open())
      fail(ErrorCategory::kStorage, "--out {}: cannot open the directory to lock it ({})", f.out, std::strerror(lock.error()));
    const auto got = lock.acquire(FileLock::Mode::kExclusive, true, [&] {
      fmt::print(stderr, "--out {}: another thrive model init is writing there; waiting for it to finish\n", f.out);
      std::fflush(stderr);
    });
    if (got == FileLock::Outcome::kFailed)
      fail(ErrorCategory::kStorage, "--out {}: cannot lock the directory ({})", f.out,
           std::strerror(lock.error()));
    check_init_target(f.out, f.force);
    // what an init killed here before left (the lock keeps any other from writing them now)
    for (const char* name : {"/config.json", "/model.safetensors"}) remove_stale_staged_files(f.out + name);
    const auto t = std::chrono::steady_clock::now();
    model::init_checkpoint(cfg, f.out, seed, f.dtype == "bf16" ? model::StDtype::kBF16 : model::StDtype::kF32, f.force);
    fmt::print("wrote {}/config.json and {}/model.safetensors: {} preset, {:.1f} M parameters, {}, seed {} ({:.1f} s)\n",
               f.out, f.out, f.preset, double(cfg.parameters()) / 1e6, f.dtype, f.seed, ms_since(t) / 1e3);
  });
}

void register_e2e(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("e2e", "Run the Qwen3 engine's prefill/decode throughput harness on a checkpoint");
  static E2eFlags f;
  cmd->add_option("--model", f.model, "Checkpoint directory (config.json + *.safetensors)")->required();
  cmd->add_option("--batch", f.batch, "Sequences decoded together (default 1)");
  cmd->add_option("--prompt", f.prompt, "Prompt tokens per sequence, random ids (default 16)");
  cmd->add_option("--gen", f.gen, "Tokens generated per sequence, greedy (default 16; the first comes from prefill, "
                  "so decode runs gen - 1 steps; 0 = prefill only)");
  cmd->add_option("--seed", f.seed, "Seed of the random prompt ids (default 1)");
  cmd->add_option("--device", f.device, "cpu (the float32 reference engine) | cuda | auto: cuda when present (default: THRIVE_DEVICE, else auto)");
  cmd->add_option("--graphs", f.graphs, fmt::format("on (default): decode steps replayed as CUDA graphs of {} steps | off", model::CudaQwen3Engine::kGreedyChunk));
  cmd->add_option("--kernels", f.kernels,
                  "best (default): the best verified kernel in memory per op and shape, re-verified | baseline: "
                  "each op template's simplest variant | best:OP[,OP...]: best for those ops, baseline for the rest");
  cmd->add_option("--attention", f.attention,
                  "Prefill attention: flash (default; FlashAttention-2 kernel on tensor cores) | gemm (cuBLASLt "
                  "S=QK^T, causal softmax, PV per query head)");
  cmd->add_option("--fusions", f.fusions,
                  "on (default): q/k norm + RoPE + KV-cache write as one kernel (qk_rope_kv); at batch <= 4 SwiGLU "
                  "inside the down GEMV (swiglu_down), and the RMSNorms inside the qkv and gate/up GEMVs with the "
                  "residual adds in the o and down GEMVs (norm_residual) | off | a comma list of those names");
  cmd->add_option("--gemv", f.gemv, "on (default): projections at <= 4 tokens through the engine's GEMV | off: cuBLASLt");
  cmd->add_option("--pdl", f.pdl,
                  "on (default): the engine's own kernels use programmatic dependent launch (sm_90+): each may "
                  "start while the one before drains | off");
  cmd->add_option("--gemv-rows", f.gemv_rows, "Output rows per warp of the GEMV path: 1 (default) | 2");
  cmd->add_option("--decode-attention", f.decode_attention,
                  "Decode attention at batch <= 4: engine (default; one-launch split-KV kernel) | op (the "
                  "gqa_decode_attention op's registry kernel)");
  cmd->add_option("--persistent", f.persistent,
                  "on: decode at batch <= 4 runs every decoder layer in one persistent kernel (weights streamed "
                  "through shared memory by cp.async, stages synchronized in the kernel; needs sm_90, every "
                  "fusion, --gemv on and --decode-attention engine; an error where it cannot run) | off: a launch per "
                  "stage | auto (default): on wherever it can run (it measured faster on the H200 at batch 1 and 4), "
                  "else off");
  cmd->add_option("--persistent-stages", f.persistent_stages,
                  fmt::format("Weight-ring stages (32 KiB each per SM) of the persistent decode kernel: 0 (default) = "
                              "{}, or as many as fit in shared memory if fewer (the fastest depth on the H200) | "
                              "2..{}: at most that many (fewer where they do not fit)",
                              model::CudaEngineOptions::kAutoPersistentStages,
                              model::CudaEngineOptions::kMaxPersistentStages));
  cmd->add_option("--persistent-splits", f.persistent_splits,
                  "Attention splits (parts per sequence and KV head) of the persistent decode kernel: 0 (default) = "
                  "automatic, about 64 keys a tensor-core part and 32 a CUDA-core part | 1..64: that many, capped at "
                  "2 x blocks / (batch x kv_heads); the JSON's persistent_splits is the count used");
  cmd->add_option("--persistent-blocks", f.persistent_blocks,
                  "Blocks (one a SM) of the persistent decode kernel: 0 (default) = automatic, the fewest that give no "
                  "block a larger share of any GEMV's rows than one a SM would and that keep the split count (128 for "
                  "Qwen3-1.7B on 132 SMs at prompt 512) | 1..SMs: that many; the JSON's persistent_blocks is the count used");
  cmd->add_option("--persistent-kv-prefetch", f.persistent_kv_prefetch,
                  "Prefetch each layer's KV cache into L2 as the persistent kernel's qkv stage starts: on | off "
                  "(the default; on the H200 the prefetch made a batch-1 step 1.421 ms against 1.384)");
  cmd->add_option("--persistent-attention", f.persistent_attention,
                  "The persistent decode kernel's attention parts: tc (default; on tensor cores, 8 warps a part and "
                  "8 keys a warp's tile, where head_dim is 64 or 128; the default takes the CUDA-core parts at other "
                  "head dims, and tc given on the command line is then an error) | cores (16 lanes a key on the CUDA "
                  "cores)");
  cmd->add_option("--persistent-softmax", f.persistent_softmax,
                  "How the tensor-core attention parts combine: merge (default; a running max a part, then a parallel "
                  "merge of the parts in a fixed order: runs repeat bit for bit) | unified (one score bound M a query "
                  "head from the q/k norm weights, the parts' sums added by float atomics at L2, no merge: about 1% "
                  "faster at batch 1 on the H200, but the logits vary in their last bits from run to run; where the "
                  "checkpoint's norm weights allow a bound above 40 the engine merges instead, with a warning, as the "
                  "JSON's persistent_softmax shows; an error with --persistent-attention cores or a head_dim other "
                  "than 64 or 128)");
  cmd->add_option("--persistent-weights", f.persistent_weights,
                  "How the persistent decode kernel streams the qkv, o, gate|up and down weights: auto (default: ec12 at "
                  "batch 1, where it measured 7-8% faster on an H100, bf16 at batch 2-4: 4% slower at batch 4, batches 2 "
                  "and 3 not measured) | ec12 (a "
                  "lossless 12-bit coding of the bf16 weights, 77% of their bytes, decoded to the same bf16 values "
                  "in the kernel (the patched weights' products are added in another order, so greedy tokens can part "
                  "at near-ties), packed on the host at load (about 2 s) and kept beside the bf16 weights: about 2.2 GB more GPU "
                  "memory at Qwen3-1.7B; a matrix with a 1024-weight slice of more than 7 weights outside its "
                  "14-exponent window makes the engine stream bf16, with a warning and the JSON's ec12_fallback; "
                  "include/thrive/model/weight_coding.hpp) | bf16 (the weights as they are)");
  cmd->add_option("--lm-head", f.lm_head,
                  "The greedy lm_head of decode steps at batch <= 8: screened (default; an int8 copy of the lm_head "
                  "bounds every logit, then only the rows that could still be the argmax are read in bf16: the same "
                  "token as exact up to ties within float32 rounding or a sum that overflows float32, about vocab x "
                  "hidden bytes more GPU memory (cdiv(vocab, 16) x 16 x hidden rounded up to 32, plus 12 a row); "
                  "it needs hidden a multiple of 8 and its shared memory within the device's, and takes exact "
                  "otherwise, as the JSON's lm_head says; the first decode step with --dump is exact, its logits "
                  "being written; include/thrive/model/lm_head_screen.hpp) | exact (cuBLASLt's logits of every row, "
                  "then the argmax)");
  cmd->add_option("--prompts-file", f.prompts_file,
                  "JSON array of token-id arrays, one per sequence, lengths 1..--prompt (default: random ids)");
  cmd->add_option("--dump", f.dump, "Write PREFIX.logits.f32 (prefill logits, float32 [B, vocab]), PREFIX.tokens.json and on CUDA "
                  "PREFIX.decode_logits.f32 (the first decode step's logits); PREFIX's directory is created");
  cmd->add_flag("--json", f.json, "Print the full result as JSON");
  add_common_flags(*cmd, ctx.flags, false);  // --home, --log-level (--device is the engine's, above)
  cmd->callback([&ctx, cmd] {
    if (!f.dump.empty() && (f.dump.back() == '/' || std::filesystem::is_directory(f.dump)))
      fail(ErrorCategory::kUsage, "--dump {}: is a folder; expected a path prefix such as DIR/run (PREFIX.logits.f32 and "
           "PREFIX.tokens.json are written)", f.dump);
    // Every file the dump writes, checked before the run (through links: never onto memory)
    if (!f.dump.empty())
      for (const char* ext : {".logits.f32", ".decode_logits.f32", ".tokens.json"}) {
        check_output_path(ctx, f.dump + ext, "--dump");
        if (std::filesystem::is_directory(f.dump + ext))
          fail(ErrorCategory::kUsage, "--dump {}: {}{} is a folder", f.dump, f.dump, ext);
      }
    if (!f.dump.empty()) check_dump_directory(f.dump);
    std::vector<std::string> engine_flags;  // the CUDA engine's own options given on the command line
    for (const char* flag : {"--graphs", "--kernels", "--attention", "--fusions", "--gemv", "--pdl", "--gemv-rows",
                             "--decode-attention", "--persistent", "--persistent-stages", "--persistent-splits",
                             "--persistent-blocks", "--persistent-kv-prefetch",
                             "--persistent-attention", "--persistent-softmax", "--persistent-weights", "--lm-head"})
      if (cmd->count(flag) > 0) engine_flags.emplace_back(flag);
    // no --device: THRIVE_DEVICE's (checked when read), else auto, as every other command
    if (cmd->count("--device") == 0) {
      f.device = ctx.config().device;
      f.device_from = config::Config::variable("DEVICE").first;
    }
    run_e2e(ctx, f, engine_flags);
  });
}

}  // namespace thrive::cli
