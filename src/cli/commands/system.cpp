// thrive optimize --system --model DIR [--budget N] [--metric decode|prefill|mix:W] [--r-t X]
// [--a-t Y] [--batch B] [--prompt P] [--gen G] [--json]: the outer loop over the Qwen3 engine
// (model/system_loop.hpp), recorded in memory so the next run starts from the best system.
#include "src/cli/commands/system.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"
#include "thrive/model/system_loop.hpp"
#include "thrive/tools/toolbox.hpp"

namespace thrive::cli {
namespace {

// THRIVE_ACCEPT_RT / THRIVE_ACCEPT_AT when the flag was not given.
double threshold(const char* env, double flag_value, bool flag_given) {
  if (flag_given) return flag_value;
  const char* v = std::getenv(env);
  if (!v || !*v) return flag_value;
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(x >= 0) || !std::isfinite(x))
    fail(ErrorCategory::kUsage, "{}={}: expected a number >= 0", env, v);
  return x;
}

}  // namespace

void run_system(Context& ctx, const SystemFlags& f, bool rt_given, bool at_given) {
  if (f.model.empty()) fail(ErrorCategory::kUsage, "--system needs --model DIR (a Qwen3 checkpoint directory)");
  if (f.budget < 0) fail(ErrorCategory::kUsage, "--budget {}: expected an integer >= 0", f.budget);
  model::LoopOptions o;
  o.metric = f.metric;
  model::metric_weight(o.metric);  // validates
  o.r_t = threshold("THRIVE_ACCEPT_RT", f.r_t, rt_given);
  o.a_t = threshold("THRIVE_ACCEPT_AT", f.a_t, at_given);
  if (!(o.r_t >= 0) || !(o.a_t >= 0)) fail(ErrorCategory::kUsage, "--r-t {} --a-t {}: expected numbers >= 0", o.r_t, o.a_t);
  o.budget = f.budget;
  o.batch = f.batch, o.prompt = f.prompt, o.gen = f.gen;
  if (o.batch < 1 || o.prompt < 1 || o.gen < 2)
    fail(ErrorCategory::kUsage, "--batch {} --prompt {} --gen {}: expected batch >= 1, prompt >= 1, gen >= 2", o.batch,
         o.prompt, o.gen);
  auto& cfg = ctx.config();
  if (backend::resolve_backend_name(cfg.device) != "cpu")
    fail(ErrorCategory::kUsage, "optimize --system --device {}: this release drives the CPU engine; the CUDA engine's "
         "knobs (graphs, the kernel registry) are the loop's next step", cfg.device);
  cfg.device = "cpu";
  const auto qcfg = model::Qwen3Config::load(f.model);
  if (int64_t(o.prompt) + o.gen > qcfg.max_position)
    fail(ErrorCategory::kUsage, "--prompt {} + --gen {} exceeds max_position_embeddings {}", o.prompt, o.gen, qcfg.max_position);
  const auto weights = model::load_weights(qcfg, f.model);
  auto& tb = ctx.toolbox();
  const double bw = tb.peak_bandwidth_gbps();
  const double tflops = model::cpu_gemm_gflops() / 1e3;
  const std::string system_key = fmt::format("qwen3-{}:b{}:p{}:g{}", fnv1a_hex(read_file(f.model + "/config.json")),
                                             o.batch, o.prompt, o.gen);
  auto& store = ctx.store();
  model::SystemConfig start;
  const std::string stored = store.best_system(system_key, tb.device_key(), o.metric);
  if (!stored.empty()) {
    const auto j = nlohmann::json::parse(stored, nullptr, false);
    if (j.is_object()) {
      start.threads = j.value("threads", 0);
      start.fuse_residual_norm = j.value("fuse_residual_norm", false);
    }
  }
  for (const auto& c : store.system_changes(system_key))  // never re-try what an earlier run tried
    if (c.device_key == tb.device_key() && c.metric == o.metric) o.tried.push_back(c.config_after);
  std::FILE* out = f.json ? stderr : stdout;
  fmt::print(out, "THRIVE outer loop on {} ({}), metric {} (T: multiples of the starting throughput), r_t {} a_t {}, "
             "budget {}; start {}{}\n", f.model, tb.device_key(), o.metric, o.r_t, o.a_t, o.budget,
             start.to_json().dump(), stored.empty() ? "" : " (the best system memory holds)");
  auto sink = [&](const model::LoopIteration& it) {
    fmt::print(out, "\n[{}] ranking:", it.index);
    int shown = 0;
    for (const auto& r : it.ranking) {
      if (shown++ == 5) break;
      fmt::print(out, " {} {:.1f}%", r["stage"].get<std::string>(), 100 * r["headroom"].get<double>());
    }
    fmt::print(out, "\n[{}] stage {} -> {} specialist: {}\n[{}] {}\n", it.index, it.stage, it.specialist, it.change,
               it.index, it.verdict);
    std::fflush(out);
    store.record_system_change({system_key, tb.device_key(), o.metric, it.stage, it.specialist, it.change,
                                it.before.to_json().dump(), it.after.to_json().dump(), it.t_before, it.t_after,
                                it.accepted, it.verdict, ""});
  };
  const auto r = model::run_system_loop(qcfg, weights, o, start, bw, tflops, sink);
  store.set_best_system(system_key, tb.device_key(), o.metric, r.best.to_json().dump());
  const auto& s0 = r.start_profile;
  const auto& s1 = r.best_profile;
  nlohmann::json remaining = nlohmann::json::array();
  for (const auto& [stage, us] : s1.decode_stages.us)
    remaining.push_back({{"stage", stage}, {"share", s1.decode_ms > 0 ? us / 1e3 / s1.decode_ms : 0.0}});
  std::sort(remaining.begin(), remaining.end(),
            [](const auto& a, const auto& b) { return a["share"].template get<double>() > b["share"].template get<double>(); });
  nlohmann::json its = nlohmann::json::array();
  for (const auto& it : r.iterations)
    its.push_back({{"iteration", it.index}, {"stage", it.stage}, {"specialist", it.specialist}, {"change", it.change},
                   {"before", it.before.to_json()}, {"after", it.after.to_json()}, {"t_before", it.t_before},
                   {"t_after", it.t_after}, {"verified", it.verified}, {"accepted", it.accepted},
                   {"verdict", it.verdict}, {"ranking", it.ranking}});
  const nlohmann::json doc = {
      {"model", f.model}, {"system_key", system_key}, {"device_key", tb.device_key()}, {"metric", o.metric},
      {"r_t", o.r_t}, {"a_t", o.a_t}, {"start", r.start.to_json()}, {"best", r.best.to_json()}, {"t_best", r.t_best},
      {"decode_tokens_per_s", {{"start", s0.decode_tps}, {"best", s1.decode_tps}}},
      {"prefill_tokens_per_s", {{"start", s0.prefill_tps}, {"best", s1.prefill_tps}}},
      {"iterations", its}, {"notes", r.notes}, {"stop_reason", r.stop_reason}, {"decode_time_now", remaining}};
  fmt::print(out, "\nstopped: {}\nbest system {}: decode {:.1f} -> {:.1f} tokens/s ({:+.1f}%), prefill {:.1f} -> {:.1f} "
             "tokens/s ({:+.1f}%)\n", r.stop_reason, r.best.to_json().dump(), s0.decode_tps, s1.decode_tps,
             s0.decode_tps > 0 ? 100 * (s1.decode_tps / s0.decode_tps - 1) : 0.0, s0.prefill_tps, s1.prefill_tps,
             s0.prefill_tps > 0 ? 100 * (s1.prefill_tps / s0.prefill_tps - 1) : 0.0);
  fmt::print(out, "decode time now goes to:");
  for (size_t i = 0; i < remaining.size() && i < 5; ++i)
    fmt::print(out, " {} {:.1f}%", remaining[i]["stage"].get<std::string>(), 100 * remaining[i]["share"].get<double>());
  fmt::print(out, "\n");
  for (const auto& n : r.notes) fmt::print(out, "specialist report: {}\n", n);
  if (f.json) fmt::print("{}\n", doc.dump(2));
}

}  // namespace thrive::cli
