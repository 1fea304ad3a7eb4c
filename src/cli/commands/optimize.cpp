// thrive optimize --op <name>|all [--rounds N] [--passes P] [--device ...] [--agent search]
// Runs the inner loop (seed -> repair -> optimize x N) per op and shape, with live
// progress, and ends with a table. Pass 2+ re-attacks every task from memory.
#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "src/cli/commands/system.hpp"
#include "src/cli/context.hpp"
#include "thrive/agents/llm_agent.hpp"
#include "thrive/agents/search_agent.hpp"
#include "thrive/core/error.hpp"

namespace thrive::cli {
namespace {

struct OptimizeFlags {
  std::string op;
  std::string shape;
  int rounds = -1;
  int passes = -1;
  std::string agent;
  double target = 0;
  bool json = false;
  bool autonomous = false;
};

}  // namespace

void register_optimize(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("optimize", "Generate, repair and optimize kernels per op and shape");
  static OptimizeFlags f;
  static SystemFlags sf;
  cmd->add_option("--op", f.op, "Op name or 'all' (the kernel loop)");
  static bool system_mode = false;
  cmd->add_flag("--system", system_mode, "The outer loop over a Qwen3 engine instead (needs --model)");
  cmd->add_option("--model", sf.model, "--system: Qwen3 checkpoint directory");
  cmd->add_option("--budget", sf.budget, "--system: most changes tried (default 4)");
  cmd->add_option("--metric", sf.metric, "--system: decode (default) | prefill | mix:W (W = decode weight in [0,1])");
  cmd->add_option("--r-t", sf.r_t, "--system: keep a change if T'/T_best > 1 + r_t (default 0.3; THRIVE_ACCEPT_RT)");
  cmd->add_option("--a-t", sf.a_t, "--system: or if T' - T_best > a_t, T in multiples of the start (default 0.3; THRIVE_ACCEPT_AT)");
  cmd->add_option("--batch", sf.batch, "--system: sequences (default 1)");
  cmd->add_option("--prompt", sf.prompt, "--system: prompt tokens (default 16)");
  cmd->add_option("--gen", sf.gen, "--system: generated tokens, >= 2 (default 16)");
  cmd->add_option("--shape", f.shape, "Only this shape label (e.g. T=4096); default: all that fit");
  cmd->add_option("--rounds", f.rounds, "Optimizer rounds per op and shape, per pass (THRIVE_ROUNDS)");
  cmd->add_option("--passes", f.passes, "Passes over all ops (THRIVE_PASSES)");
  cmd->add_option("--agent", f.agent, "search (default, no network) | llm (THRIVE_AGENT; see the README's LLM agents)");
  cmd->add_flag("--autonomous", f.autonomous, "--agent llm: one orchestrator model delegates to the role agents");
  cmd->add_option("--target-speedup", f.target, "Speedup over eager that counts as reached (THRIVE_TARGET_SPEEDUP)");
  cmd->add_flag("--json", f.json, "Print the results as JSON on stdout (progress and tables go to stderr)");
  add_common_flags(*cmd, ctx.flags, true);
  cmd->callback([&ctx, cmd] {
    const bool system = cmd->count("--system") > 0;
    if (system && !f.op.empty())
      fail(ErrorCategory::kUsage, "--system with --op {}: the outer loop picks its own stages", f.op);
    if (!system) {
      for (const char* flag : {"--model", "--budget", "--metric", "--r-t", "--a-t", "--batch", "--prompt", "--gen"})
        if (cmd->count(flag) > 0) fail(ErrorCategory::kUsage, "{} belongs to optimize --system", flag);
      if (f.op.empty()) fail(ErrorCategory::kUsage, "optimize: expected --op NAME|all (or --system --model DIR)");
    }
    // the inner loop's settings, also for --system's kernel specialist (its rounds and target)
    auto& cfg = ctx.config();
    if (cmd->count("--rounds") > 0) {
      if (f.rounds < 0) fail(ErrorCategory::kUsage, "--rounds={}: expected an integer >= 0", f.rounds);
      cfg.rounds = f.rounds;
    }
    if (cmd->count("--passes") > 0) {
      if (f.passes < 1) fail(ErrorCategory::kUsage, "--passes={}: expected an integer >= 1", f.passes);
      cfg.passes = f.passes;
    }
    if (!f.agent.empty()) cfg.agent = f.agent;
    if (cmd->count("--target-speedup") > 0) {
      if (!(f.target > 0) || !std::isfinite(f.target))
        fail(ErrorCategory::kUsage, "--target-speedup={}: expected a finite number > 0", f.target);
      cfg.target_speedup = f.target;
    }
    cfg.validate();
    if (system) {
      sf.json = f.json, sf.autonomous = f.autonomous;
      run_system(ctx, sf, cmd->count("--r-t") > 0, cmd->count("--a-t") > 0);
      return;
    }
    std::vector<const ops::Op*> targets;
    if (f.op == "all")
      for (const auto& op : ops::registry()) targets.push_back(op.get());
    else
      targets.push_back(&ops::find_op(f.op));
    if (!f.shape.empty() && f.op == "all")
      fail(ErrorCategory::kUsage, "--shape={}: expected a single --op (shape labels differ per op)", f.shape);

    std::FILE* json_out = f.json ? take_stdout("optimize --json") : nullptr;
    auto& tb = ctx.toolbox();
    auto agent_ptr = agents::make_agent(cfg.agent, tb, f.autonomous);  // LLM settings checked before any work
    auto& agent = *agent_ptr;
    auto& store = ctx.store();
    for (const auto* op : targets) (void)tb.shapes_for(*op, f.shape);  // a bad --shape fails before any measuring
    const double peak = tb.peak_bandwidth_gbps();
    // "1 round", "2 rounds": a count with its noun
    const auto counted = [](int64_t n, const char* one, const char* many) { return fmt::format("{} {}", n, n == 1 ? one : many); };
    fmt::print("THRIVE optimize: device {} ({} cores, LLC {} MiB), agent {}, {} x {}\n",
               tb.device_key(), tb.device().value("compute_units", 0),
               tb.device().value("cache_bytes", int64_t{0}) >> 20, cfg.agent, counted(cfg.rounds, "round", "rounds"),
               counted(cfg.passes, "pass", "passes"));
    fmt::print("Bandwidth ceiling: {:.1f} GB/s ({}; copy kernel, reads + writes, DRAM-sized buffers)\n",
               peak, cfg.peak_bw_gbps > 0 ? "THRIVE_PEAK_BW_GBPS" : "measured, cached in memory");
    print_busy_cpu_note(tb);
    fmt::print("Memory: {} ({}, {})\n\n", store.path(),
               counted(store.summary()["best_entries"].get<int64_t>(), "best kernel", "best kernels"),
               counted(int64_t(store.cards(tb.backend_name()).size()), "card", "cards"));

    const int64_t run_id = store.begin_run(ctx.command_line, tb.device_key(), agent.name());
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::vector<agents::TaskResult>> per_pass;
    for (int pass = 1; pass <= cfg.passes; ++pass) {
      per_pass.emplace_back();
      for (const auto* op : targets) {
        for (const auto& shape : tb.shapes_for(*op, f.shape)) {
          agents::Task task{op->name(), shape, cfg.rounds, pass, run_id, ctx.command_line,
                            cfg.target_speedup};
          per_pass.back().push_back(
              agent.run(task, [pass](const agents::Progress& p) { print_progress(fmt::format("pass {}", pass), p); }));
        }
      }
    }
    store.end_run(run_id);
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    nlohmann::json out = nlohmann::json::array();
    for (size_t p = 0; p < per_pass.size(); ++p) {
      fmt::print("\nPass {} results ({}):\n", p + 1, tb.device_key());
      fmt::print("{:<21} {:<11} {:>11} {:>11} {:>8} {:>9} {:>7} {:>6} {:>6}  {}\n", "op", "shape",
                 "eager", "best", "speedup", "GB/s", "%peak", "start", "r→best", "best params");
      for (const auto& r : per_pass[p]) {
        fmt::print("{:<21} {:<11} {:>11} {:>11} {:>7.2f}x {:>9.2f} {:>6.1f}% {:>6} {:>6}  {}\n",
                   r.op, r.shape, format_us(r.eager_us), format_us(r.best_us), r.speedup,
                   r.bandwidth_gbps, r.percent_of_peak, r.recalled ? "memory" : "cold",
                   r.verified ? std::to_string(r.rounds_to_best) : "-",
                   r.verified ? r.best_params : "no correct kernel");
        out.push_back({{"pass", p + 1}, {"op", r.op}, {"shape", r.shape}, {"eager_us", r.eager_us},
                       {"time_us", r.best_us}, {"speedup_vs_eager", r.speedup},
                       {"bandwidth_gbps", r.bandwidth_gbps}, {"percent_of_peak", r.percent_of_peak},
                       {"recalled", r.recalled}, {"rounds_used", r.rounds_used},
                       {"rounds_to_best", r.rounds_to_best}, {"round_reached_target", r.round_reached_target},
                       {"attempts", r.attempts}, {"kernel_id", r.best_kernel_id},
                       {"verified", r.verified}, {"wall_s", r.wall_s}});
      }
    }
    fmt::print("\n{} evaluations in {:.1f} s (compile {:.1f} s, verify+bench {:.1f} s); run {} in {}\n",
               tb.evaluations(), wall_s, tb.compile_seconds(), tb.bench_seconds(), run_id, store.path());
    if (const auto* llm = dynamic_cast<const agents::LlmAgent*>(&agent)) {
      fmt::print("LLM spend: ${:.4f}", llm->total_usd());
      for (const auto& [role, sp] : llm->spend())
        fmt::print("; {} ${:.4f} ({} calls, {} in / {} out tokens)", role, sp.usd, sp.calls, sp.input_tokens,
                   sp.output_tokens);
      fmt::print("{}\n", llm->stop_reason().empty() ? "" : "; stopped: " + llm->stop_reason());
    }
    if (json_out != nullptr) {
      fmt::print(json_out, "{}\n", out.dump(2));
      std::fclose(json_out);
    }
    for (const auto& pass : per_pass)
      for (const auto& r : pass)
        if (!r.verified) ctx.exit_code = 1;
    // the agent could not do what was asked: a script must see it (exit 5, a backend failure)
    if (const auto* llm = dynamic_cast<const agents::LlmAgent*>(&agent); llm != nullptr && !llm->api_failure().empty()) {
      fmt::print(stderr, "thrive: the LLM agent's tasks ended early: {}\n", llm->api_failure());
      ctx.exit_code = exit_code(ErrorCategory::kBackend);
    }
  });
}

}  // namespace thrive::cli
