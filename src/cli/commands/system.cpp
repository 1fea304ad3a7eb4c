// thrive optimize --system --model DIR [--device cpu|cuda] [--budget N] [--metric
// decode|prefill|mix:W] [--r-t X] [--a-t Y] [--batch B] [--prompt P] [--gen G] [--json]: the
// outer loop over the Qwen3 engine (model/system_loop.hpp), recorded in memory so the next run
// starts from the best system. On CUDA each profile is `thrive e2e --device cuda` in a child
// process, so this process never creates a CUDA context and the kernels specialist's inner loop
// (whose sandbox workers fork) runs here.
#include "src/cli/commands/system.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "thrive/agents/llm_agent.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"
#include "thrive/core/json.hpp"
#include "thrive/model/cuda_engine.hpp"
#include "thrive/model/system_loop.hpp"
#include "thrive/tools/toolbox.hpp"

extern char** environ;

namespace thrive::cli {
namespace {

// Each bf16 system's prefill logits sit up to about 3.7% of the largest logit from a float32 run
// on random Qwen3-1.7B weights (ours: 2.3-3.4%, transformers bf16: 2.2-3.7%,
// bench/results/h200-hf-compare-2026-11-30b.json), so two correct ones can differ by their sum
// (the flash and cuBLASLt attention paths differed by 4.98% on the H200, 2026-11-30); 10% keeps
// that apart from a wrong kernel, which moves logits by the logits' own scale.
constexpr double kBf16LogitTol = 1e-1;

// The engine options a CUDA system configuration runs with.
model::CudaEngineOptions engine_options(const model::SystemConfig& sc, const model::LoopOptions& o) {
  model::CudaEngineOptions e;
  e.batch = o.batch;
  e.max_prompt = o.prompt;
  e.max_context = model::decode_context(o.prompt, o.gen);  // as the e2e child's engine (model.cpp)
  e.graphs = sc.graphs;
  e.flash_prefill = sc.flash_prefill;
  e.fuse_qk_rope_kv = sc.fuse_qk_rope_kv;
  e.gemv = sc.gemv;
  e.fuse_swiglu_down = sc.fuse_swiglu_down;
  e.fuse_norm_residual = sc.fuse_norm_residual;
  e.pdl = sc.pdl;
  e.engine_decode_attention = sc.engine_decode_attention;
  e.persistent_decode = sc.persistent_decode;
  return e;
}

// The e2e command line that measures configuration `sc`.
std::vector<std::string> e2e_args(const std::string& self, const std::string& home, const std::string& model,
                                  const model::LoopOptions& o, const model::SystemConfig& sc, const std::string& dump) {
  std::string kernels = "baseline";
  if (!sc.best_ops.empty()) {
    kernels = "best:";
    for (const auto& op : sc.best_ops) kernels += (kernels.back() == ':' ? "" : ",") + op;
  }
  std::vector<std::string> fused;
  if (sc.fuse_qk_rope_kv) fused.push_back("qk_rope_kv");
  if (sc.fuse_swiglu_down) fused.push_back("swiglu_down");
  if (sc.fuse_norm_residual) fused.push_back("norm_residual");
  const std::string fusions = fmt::format("{}", fmt::join(fused, ","));
  // absolute: a relative home or model spelt like an option ("--x") is not read as one by the child
  return {self, "e2e", "--device", "cuda", "--home", std::filesystem::absolute(home).string(), "--log-level", "warn",
          "--model", std::filesystem::absolute(model).string(),
          "--batch", std::to_string(o.batch), "--prompt", std::to_string(o.prompt), "--gen", std::to_string(o.gen),
          "--seed", std::to_string(o.seed), "--graphs", sc.graphs ? "on" : "off", "--kernels", kernels,
          "--attention", sc.flash_prefill ? "flash" : "gemm", "--fusions", fusions.empty() ? "off" : fusions,
          "--gemv", sc.gemv ? "on" : "off", "--pdl", sc.pdl ? "on" : "off",
          "--decode-attention", sc.engine_decode_attention ? "engine" : "op", "--persistent",
          // auto, not on: a stored system applied to another model or device runs the layered path
          // where the persistent kernel cannot run, instead of failing
          sc.persistent_decode ? "auto" : "off", "--json", "--dump", dump};
}

// Runs argv with stdout into `out_path` and stderr into `err_path`; returns the exit status
// (128 + signal when killed). Error(kInternal) when it cannot start.
int run_child(const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) fail(ErrorCategory::kInternal, "cannot start {}: {}", argv[0], std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) fail(ErrorCategory::kInternal, "waitpid for {}: {}", argv[0], std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

model::StageTimes stage_times(const nlohmann::json& rows) {
  model::StageTimes st;
  for (const auto& r : rows) {
    const std::string name = r.value("stage", "");
    if (name.empty() || name == "host_other") continue;
    st.us[name] = r.value("ms", 0.0) * 1e3;
    st.calls[name] = r.value("calls", int64_t{1});
  }
  return st;
}

// [B][vocab] float32 rows from raw little-endian bytes (the size is checked by the caller).
std::vector<std::vector<float>> logit_rows(const std::string& bytes, int batch, int64_t vocab) {
  std::vector<std::vector<float>> rows(static_cast<size_t>(batch), std::vector<float>(static_cast<size_t>(vocab)));
  for (int b = 0; b < batch; ++b)
    std::memcpy(rows[size_t(b)].data(), bytes.data() + size_t(b) * size_t(vocab) * 4, size_t(vocab) * 4);
  return rows;
}

// One CUDA profile: the e2e harness in a child process, its JSON and dumped prefill logits.
model::SystemProfile profile_cuda(const std::string& home, const std::string& model_dir, const model::LoopOptions& o,
                                  const model::SystemConfig& sc, const std::string& work, int64_t vocab) {
  const std::string dump = work + "/profile";
  const auto argv = e2e_args(std::filesystem::read_symlink("/proc/self/exe").string(), home, model_dir, o, sc, dump);
  const int rc = run_child(argv, work + "/e2e.json", work + "/e2e.log");
  if (rc != 0) {
    std::string log = read_file(work + "/e2e.log");
    if (log.size() > 2000) log = "..." + log.substr(log.size() - 2000);
    fail(ErrorCategory::kBackend, "profiling {} failed (exit {}): {}", sc.to_json().dump(), rc, log);
  }
  const auto doc = parse_json_bounded(read_file(work + "/e2e.json"));
  if (!doc.is_object()) fail(ErrorCategory::kInternal, "e2e --json printed no JSON object ({}/e2e.json)", work);
  model::SystemProfile p;
  p.prefill_ms = doc.at("prefill_ms").get<double>();
  p.decode_ms = doc.at("decode_ms").get<double>();
  p.decode_steps = doc.at("decode_steps").get<int>();
  p.prefill_tps = doc.at("prefill_tokens_per_s").get<double>();
  p.decode_tps = doc.at("decode_tokens_per_s").get<double>();
  p.prompt_tokens = doc.value("prompt_tokens", int64_t{0});
  p.prefill_stages = stage_times(doc.at("prefill_stages"));
  p.decode_stages = stage_times(doc.at("decode_stages"));
  p.prefill_ranking = doc.value("prefill_headroom", nlohmann::json::array());
  p.decode_ranking = doc.value("decode_headroom", nlohmann::json::array());
  p.tokens = doc.at("tokens").get<std::vector<std::vector<int32_t>>>();
  p.nonfinite_logits = doc.value("nonfinite_logits", int64_t{0});
  const std::string bytes = read_file(dump + ".logits.f32");
  if (bytes.size() != size_t(o.batch) * size_t(vocab) * 4)
    fail(ErrorCategory::kInternal, "{}.logits.f32: {} bytes, expected {} x {} float32", dump, bytes.size(), o.batch, vocab);
  p.prefill_logits = logit_rows(bytes, o.batch, vocab);
  if (std::filesystem::exists(dump + ".decode_logits.f32")) {
    const std::string d = read_file(dump + ".decode_logits.f32");
    if (d.size() != bytes.size())
      fail(ErrorCategory::kInternal, "{}.decode_logits.f32: {} bytes, expected {}", dump, d.size(), bytes.size());
    p.decode_logits = logit_rows(d, o.batch, vocab);
  }
  return p;
}

// A fresh private directory under $TMPDIR (else /tmp). Error(kStorage) when none can be made.
std::string make_temp_dir(const char* prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr)
    fail(ErrorCategory::kStorage, "cannot create a temporary directory {}: {}", tmpl, std::strerror(errno));
  return tmpl;
}

std::vector<model::StageRank> ranks_of(const nlohmann::json& rows) {
  std::vector<model::StageRank> out;
  for (const auto& r : rows) {
    model::StageRank x;
    x.stage = r.value("stage", "");
    x.ms = r.value("ms", 0.0);
    x.share = r.value("share", 0.0);
    x.floor_ms = r.value("floor_ms", 0.0);
    x.bound = r.value("bound", "none");
    x.headroom = r.value("headroom", 0.0);
    out.push_back(x);
  }
  return out;
}

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

// The loop on the CUDA engine: profiles through `thrive e2e` children, the CUDA specialists
// (model::dispatch_cuda), the kernels specialist's inner loop run here by `agent` (--agent: the
// search agent or an LLM agent) at the engine's call-site shape, and bf16 end-to-end verification
// (model::verify_bf16).
model::LoopResult run_cuda_loop(Context& ctx, const SystemFlags& f, const model::Qwen3Config& qcfg,
                                const model::LoopOptions& o, const model::SystemConfig& start, std::FILE* out,
                                const std::function<void(const model::LoopIteration&)>& sink, agents::Agent& agent) {
  auto& cfg = ctx.config();
  auto& tb = ctx.toolbox();
  (void)tb.peak_bandwidth_gbps();  // measured once here and cached, so each child reuses it
  const std::string work = make_temp_dir("thrive-system");
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{work};
  model::SystemDriver d;
  d.notes = {"communication: one device, nothing to do",
             "data: token ids in and greedy tokens out are 4 bytes per sequence per step, and sampling runs on the GPU"};
  int profiles = 0;
  d.profile = [&](const model::SystemConfig& sc) {
    fmt::print(out, "  profiling {} ...\n", sc.to_json().dump());
    std::fflush(out);
    auto p = profile_cuda(cfg.home, f.model, o, sc, work, qcfg.vocab);
    ++profiles;
    fmt::print(out, "  prefill {:.0f} tokens/s, decode {:.0f} tokens/s ({:.3f} ms per step)\n", p.prefill_tps, p.decode_tps,
               p.decode_steps > 0 ? p.decode_ms / p.decode_steps : 0.0);
    return p;
  };
  d.rank = [](const model::SystemProfile& p, bool decode) {
    return ranks_of(decode ? p.decode_ranking : p.prefill_ranking);
  };
  const int64_t run_id = ctx.store().begin_run(ctx.command_line, tb.device_key(), agent.name());
  d.dispatch = [&](const std::string& phase, const std::string& stage, const model::SystemConfig& cur,
                   const std::set<std::string>& tried, std::string& why) {
    auto p = model::dispatch_cuda(phase, stage, cur, tried, o.batch, why);
    if (!p.any || p.inner_op.empty()) return p;
    // The inner loop at the call site's exact shape: decode T = batch (attention: B, L), prefill
    // T = batch x prompt.
    const int64_t t = p.inner_phase == "decode" ? o.batch : int64_t(o.batch) * o.prompt;
    std::optional<ops::ShapeCase> shape;
    for (const auto& site : model::CudaQwen3Engine::call_sites(qcfg, engine_options(p.next, o)))
      if (site.op == p.inner_op && (site.op == "gqa_decode_attention" || site.shape.shape.at("T") == t)) shape = site.shape;
    if (!shape) {
      p.any = false;
      why = fmt::format("the engine has no {} call site at T={} in this configuration", p.inner_op, t);
      return p;
    }
    p.change += " (" + shape->label + ")";
    p.prepare = [&, op = p.inner_op, sc = *shape] {
      agents::Task task{op, sc, cfg.rounds, 1, run_id, ctx.command_line, cfg.target_speedup};
      const auto r = agent.run(task, [](const agents::Progress& pr) { print_progress("inner loop", pr); });
      return r.verified ? fmt::format("inner loop {} at {}: {} at {} ({:.2f}x over eager, {} rounds, {})", op, sc.label,
                                      r.best_kernel_id, format_us(r.best_us), r.speedup, r.rounds_used,
                                      r.recalled ? "started from memory" : "cold")
                        : fmt::format("inner loop {} at {}: no verified kernel; the call sites keep the template's "
                                      "defaults", op, sc.label);
    };
    return p;
  };
  d.verify = [](const model::SystemProfile& cand, const model::SystemProfile& ref, std::string& detail) {
    return model::verify_bf16(cand, ref, kBf16LogitTol, detail);
  };
  auto lo = o;
  lo.repeats = 1;  // GPU timings repeat within a run (CUDA events); a child costs a weight load
  auto r = model::run_outer_loop(lo, start, d, sink);
  ctx.store().end_run(run_id);
  fmt::print(out, "{} profiles of the CUDA engine\n", profiles);
  return r;
}

}  // namespace

void run_system(Context& ctx, const SystemFlags& f, bool rt_given, bool at_given) {
  if (f.model.empty()) fail(ErrorCategory::kUsage, "--system needs --model DIR (a Qwen3 checkpoint directory)");
  if (f.budget < 0) fail(ErrorCategory::kUsage, "--budget {}: expected an integer >= 0", f.budget);
  model::LoopOptions o;
  o.metric = model::metric_name(f.metric);  // validates; one spelling per metric in memory
  o.r_t = threshold("THRIVE_ACCEPT_RT", f.r_t, rt_given);
  o.a_t = threshold("THRIVE_ACCEPT_AT", f.a_t, at_given);
  if (!(o.r_t >= 0) || !(o.a_t >= 0) || !std::isfinite(o.r_t) || !std::isfinite(o.a_t))
    fail(ErrorCategory::kUsage, "--r-t {} --a-t {}: expected finite numbers >= 0", o.r_t, o.a_t);
  o.budget = f.budget;
  o.batch = f.batch, o.prompt = f.prompt, o.gen = f.gen;
  if (o.batch < 1) fail(ErrorCategory::kUsage, "--batch {}: expected at least 1 sequence", o.batch);
  if (o.prompt < 1) fail(ErrorCategory::kUsage, "--prompt {}: expected at least 1 prompt token", o.prompt);
  if (o.gen < 2) fail(ErrorCategory::kUsage, "--gen {}: expected at least 2 generated tokens (one decode step)", o.gen);
  auto& cfg = ctx.config();
  const std::string device = backend::resolve_backend_name(cfg.device);
  cfg.device = device;
  const auto qcfg = model::Qwen3Config::load(f.model);
  model::check_decode_context(qcfg, o.prompt, o.gen);
  if (device == "cuda") cfg.model = model::CudaQwen3Engine::op_dims(qcfg);  // the inner loop verifies at the engine's dims
  auto& tb = ctx.toolbox();
  // The kernels specialist's agent, made (and its LLM settings checked) before any work. Only the
  // CUDA loop runs one: the CPU engine's specialists change its configuration (GEMM threads, fusion).
  std::unique_ptr<agents::Agent> agent;
  if (device != "cpu")
    agent = agents::make_agent(cfg.agent, tb, f.autonomous);
  else if (cfg.agent != "search" || f.autonomous)
    spdlog::warn("--agent {}{}: the CPU outer loop runs no agent (its kernels specialist only sets the GEMMs' thread "
                 "count, its compilation specialist the residual + RMSNorm fusion)", cfg.agent,
                 f.autonomous ? " --autonomous" : "");
  const std::string system_key = fmt::format("qwen3-{}:b{}:p{}:g{}", fnv1a_hex(read_file(f.model + "/config.json")),
                                             o.batch, o.prompt, o.gen);
  auto& store = ctx.store();
  // The start: the best system memory holds for this model, shape, device and metric, else the
  // engine as it comes (CPU: all cores, unfused; CUDA: baseline kernels, no graphs, no flash
  // attention, fusions or GEMV).
  const std::string stored = store.best_system(system_key, tb.device_key(), o.metric);
  const auto stored_json = parse_json_bounded(stored.empty() ? "{}" : stored);
  auto start = model::SystemConfig::from_json(stored_json, device);
  bool from_memory = !stored.empty();
  if (from_memory && !stored_json.is_object()) {
    spdlog::warn("memory's best system for {} is not a JSON object ({}); starting from the engine's defaults",
                 system_key, stored.substr(0, 80));
    from_memory = false;
  }
  // A stored configuration is data: values this machine cannot run are reset, with a warning
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  if (start.threads < 0 || start.threads > cores) {
    spdlog::warn("memory's best system has threads {}: expected 0 (all cores) to {}; using 0", start.threads, cores);
    start.threads = 0;
  }
  for (auto it = start.best_ops.begin(); it != start.best_ops.end();) {
    if (std::none_of(ops::registry().begin(), ops::registry().end(), [&](const auto& op) { return op->name() == *it; })) {
      spdlog::warn("memory's best system names an unknown op '{}'; dropped", it->substr(0, 80));
      it = start.best_ops.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& c : store.system_changes(system_key))  // never re-try what an earlier run tried
    if (c.device_key == tb.device_key() && c.metric == o.metric) o.tried.push_back(c.config_after);
  // --json: only the document reaches stdout; the iterations, the inner loop's progress and any
  // child's chatter go to stderr
  std::FILE* json_out = f.json ? take_stdout("optimize --system --json") : nullptr;
  std::FILE* out = f.json ? stderr : stdout;
  fmt::print(out, "THRIVE outer loop on {} ({}), metric {} (T: multiples of the starting throughput), r_t {} a_t {}, "
             "budget {}; start {}{}\n", f.model, tb.device_key(), o.metric, o.r_t, o.a_t, o.budget,
             start.to_json().dump(), from_memory ? " (the best system memory holds)" : "");
  auto sink = [&](const model::LoopIteration& it) {
    // headroom: the weighted share of the step (decode) or pass (prefill) time a stage spends above
    // its roofline floor (model/attribution.hpp)
    fmt::print(out, "\n[{}] ranking by headroom (% of the phase's time above the stage's roofline floor, phase-weighted):",
               it.index);
    int shown = 0;
    for (const auto& r : it.ranking) {
      if (shown++ == 5) break;
      fmt::print(out, " {} {:.1f}%", r["stage"].get<std::string>(), 100 * r["headroom"].get<double>());
    }
    fmt::print(out, "\n[{}] {} stage {} -> {} specialist: {}\n", it.index, it.phase, it.stage, it.specialist,
               it.change);
    if (!it.prepared.empty()) fmt::print(out, "[{}] {}\n", it.index, it.prepared);
    fmt::print(out, "[{}] {}\n", it.index, it.verdict);
    std::fflush(out);
    store.record_system_change({system_key, tb.device_key(), o.metric, it.stage, it.specialist, it.change,
                                it.before.to_json().dump(), it.after.to_json().dump(), it.t_before, it.t_after,
                                it.accepted, it.verdict, ""});
  };
  model::LoopResult r;
  if (device == "cpu") {
    const auto weights = model::load_weights(qcfg, f.model);
    r = model::run_system_loop(qcfg, weights, o, start, tb.peak_bandwidth_gbps(), model::cpu_gemm_gflops() / 1e3, sink);
  } else {
    r = run_cuda_loop(ctx, f, qcfg, o, start, out, sink, *agent);
  }
  store.set_best_system(system_key, tb.device_key(), o.metric, r.best.to_json().dump());
  const auto& s0 = r.start_profile;
  const auto& s1 = r.best_profile;
  // Where decode time goes now: the harness's own shares when it ranked them (CUDA: stage times of
  // the profiled steps over those steps' wall time), else the stage times over the decode wall time
  nlohmann::json remaining = nlohmann::json::array();
  if (s1.decode_ranking.is_array() && !s1.decode_ranking.empty()) {
    for (const auto& row : s1.decode_ranking)
      remaining.push_back({{"stage", row.value("stage", "")}, {"share", row.value("share", 0.0)}});
  } else {
    for (const auto& [stage, us] : s1.decode_stages.us)
      remaining.push_back({{"stage", stage}, {"share", s1.decode_ms > 0 ? us / 1e3 / s1.decode_ms : 0.0}});
  }
  std::sort(remaining.begin(), remaining.end(),
            [](const auto& a, const auto& b) { return a["share"].template get<double>() > b["share"].template get<double>(); });
  nlohmann::json its = nlohmann::json::array();
  for (const auto& it : r.iterations)
    its.push_back({{"iteration", it.index}, {"phase", it.phase}, {"prepared", it.prepared}, {"stage", it.stage}, {"specialist", it.specialist}, {"change", it.change},
                   {"before", it.before.to_json()}, {"after", it.after.to_json()}, {"t_before", it.t_before},
                   {"t_after", it.t_after}, {"verified", it.verified}, {"accepted", it.accepted},
                   {"verdict", it.verdict}, {"ranking", it.ranking}});
  const nlohmann::json doc = {
      {"model", f.model}, {"system_key", system_key}, {"device_key", tb.device_key()}, {"metric", o.metric},
      {"r_t", o.r_t}, {"a_t", o.a_t}, {"start", r.start.to_json()}, {"best", r.best.to_json()}, {"t_best", r.t_best},
      {"decode_tokens_per_s", {{"start", s0.decode_tps}, {"best", s1.decode_tps}}},
      {"prefill_tokens_per_s", {{"start", s0.prefill_tps}, {"best", s1.prefill_tps}}},
      {"iterations", its}, {"notes", r.notes}, {"stop_reason", r.stop_reason}, {"decode_time_now", remaining},
      {"nonfinite_logits", {{"start", s0.nonfinite_logits}, {"best", s1.nonfinite_logits}}}};
  if (s0.nonfinite_logits > 0)
    fmt::print(stderr, "warning: the starting system's greedy skipped {} NaN or infinite logits{} (finite but huge "
               "weights overflow float32); verification compares the finite ones, and a non-finite logit must be "
               "the same in a changed system\n",
               s0.nonfinite_logits, s0.first_nonfinite_logit.empty() ? "" : " (the first: " + s0.first_nonfinite_logit + ")");
  fmt::print(out, "\nstopped: {}\nbest system {}: decode {:.1f} -> {:.1f} tokens/s ({:+.1f}%), prefill {:.1f} -> {:.1f} "
             "tokens/s ({:+.1f}%)\n", r.stop_reason, r.best.to_json().dump(), s0.decode_tps, s1.decode_tps,
             s0.decode_tps > 0 ? 100 * (s1.decode_tps / s0.decode_tps - 1) : 0.0, s0.prefill_tps, s1.prefill_tps,
             s0.prefill_tps > 0 ? 100 * (s1.prefill_tps / s0.prefill_tps - 1) : 0.0);
  fmt::print(out, "decode time now goes to:");
  for (size_t i = 0; i < remaining.size() && i < 5; ++i)
    fmt::print(out, " {} {:.1f}%", remaining[i]["stage"].get<std::string>(), 100 * remaining[i]["share"].get<double>());
  fmt::print(out, "\n");
  for (const auto& n : r.notes) fmt::print(out, "specialist report: {}\n", n);
  if (json_out != nullptr) {
    fmt::print(json_out, "{}\n", doc.dump(2));
    std::fclose(json_out);
  }
}

}  // namespace thrive::cli
