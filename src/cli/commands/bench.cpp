// thrive bench --op OP --kernel FILE [--shape LABEL]: compile, verify, benchmark a kernel
// file exactly as the agents do, next to the eager baseline; records it in memory.
// thrive bench --op OP|all [--json-out FILE]: re-measure the best kernel in memory for
// every shape next to the eager baseline and the copy ceiling (the README's table).
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "src/cli/commands/kernel_file.hpp"
#include "src/cli/context.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

namespace thrive::cli {
namespace {

void bench_file(Context& ctx, const KernelFileFlags& f) {
  auto loaded = load_kernel_file(ctx, f);
  auto& tb = ctx.toolbox();
  auto sub = tb.submit(loaded.kernel, loaded.shape, ctx.command_line);
  const auto& r = sub.result;
  if (f.json) {
    auto j = result_json(r, loaded.path);
    if (r.status == sandbox::Status::kPassed) {  // what the text's last line says: the eager baseline and memory
      j["eager_us"] = sub.record.eager_us;
      j["speedup"] = sub.record.speedup;
      j["new_best"] = sub.new_best;
    }
    fmt::print("{}\n", j.dump(2));
  } else {
    print_verdict(loaded, r);
  }
  if (r.status != sandbox::Status::kPassed) {
    ctx.exit_code = 1;
    return;
  }
  const auto& b = r.bench;
  const auto& k = sub.record;
  const bool best = sub.new_best;
  if (f.json) return;
  print_busy_cpu_note(tb);
  // CUDA: each launch timed alone, then per call in graph replay. CPU: one call per command to
  // the candidate's executor process (its round trip included), then per call in batches of
  // back-to-back calls, one command each (the round trip paid once a batch)
  const bool cpu = r.device_key.rfind("cpu", 0) == 0;
  fmt::print("  {} median {} (min {}, max {}, {} reps, ±{:.1f}% CI, {} argument sets = {:.0f} MiB{})\n",
             cpu ? "single  " : "launched", format_us(b.median_us), format_us(b.min_us), format_us(b.max_us), b.reps,
             100 * b.rel_ci, b.argument_sets, double(b.working_set_bytes) / (1 << 20),
             cpu ? "; one call per executor command, round trip included" : "");
  if (b.graph_us > 0)
    fmt::print("  {} median {} per call (min {}, max {}; {})\n", cpu ? "batched " : "graph   ", format_us(b.graph_us),
               format_us(b.graph_min_us), format_us(b.graph_max_us),
               cpu ? "batches of back-to-back calls, one executor command each: the figure THRIVE ranks by"
                   : "20 launches per CUDA graph: the figure THRIVE ranks by");
  fmt::print("  traffic {} bytes -> {:.2f} GB/s = {:.1f}% of the {:.1f} GB/s ceiling; {:.4f} TFLOP/s\n",
             b.bytes, b.bandwidth_gbps, b.percent_of_peak, b.peak_bw_gbps, b.tflops);
  fmt::print("  eager  {} -> speedup {:.2f}x{}\n", format_us(k.eager_us), k.speedup,
             !best ? "" : k.speedup >= 1.0 ? " (new best in memory)"
                        : " (the best recorded for this shape so far, though slower than eager)");
}

void bench_memory(Context& ctx, const std::string& which, const std::string& only_shape,
                  const std::string& json_out) {
  auto& tb = ctx.toolbox();
  std::vector<const ops::Op*> targets;
  if (which == "all")
    for (const auto& op : ops::registry()) targets.push_back(op.get());
  else
    targets.push_back(&ops::find_op(which));
  const double peak = tb.peak_bandwidth_gbps();
  nlohmann::json rows = nlohmann::json::array();
  fmt::print("Device {} ({}); copy ceiling {:.1f} GB/s\n", tb.device_key(),
             tb.device().value("driver", ""), peak);
  const double load = print_busy_cpu_note(tb);  // recorded in the JSON too
  fmt::print("{:<21} {:<11} {:>11} {:>11} {:>11} {:>11} {:>8} {:>9} {:>7}\n", "op", "shape",
             "eager", "eager graph", "best", "best graph", "speedup", "GB/s", "%copy");
  // per op: log-sum of the speedups over eager (graph time where measured) and their count
  std::vector<std::tuple<std::string, double, int>> geo;
  for (const auto* op : targets) {
    geo.emplace_back(op->name(), 0.0, 0);
    for (const auto& shape : tb.shapes_for(*op, which == "all" ? "" : only_shape)) {
      auto eager = tb.eager_result(op->name(), shape);
      nlohmann::json row = {{"op", op->name()}, {"shape", shape.label}, {"device", tb.device_key()},
                            {"eager", eager.bench}, {"peak_bw_gbps", peak}};
      if (eager.status != sandbox::Status::kPassed) {
        // No speedup without a baseline; the row says why and the other rows still run.
        row["eager_status"] = sandbox::status_name(eager.status);
        row["eager_detail"] = eager.detail;
        fmt::print("{:<21} {:<11} eager baseline {}: {}\n", op->name(), shape.label,
                   sandbox::status_name(eager.status), eager.detail.substr(0, 300));
        std::fflush(stdout);
        ctx.exit_code = 1;
        rows.push_back(row);
        continue;
      }
      auto rec = tb.store().best(op->name(), shape.label, tb.device_key());
      std::string best_s = "-", best_g = "-", speed = "-", gbps = "-", pct = "-";
      if (rec) {
        auto kernel = backend::KernelSource::parse(rec->source, "memory:" + rec->kernel_id);
        auto r = tb.benchmark(kernel, shape);
        row["kernel_id"] = rec->kernel_id;
        row["status"] = sandbox::status_name(r.status);
        if (r.status == sandbox::Status::kPassed) {
          const auto& b = r.bench;
          row["best"] = b;
          row["speedup_vs_eager"] = eager.bench.time_us() / b.time_us();
          std::get<1>(geo.back()) += std::log(eager.bench.time_us() / b.time_us());
          std::get<2>(geo.back()) += 1;
          row["verify"] = {{"max_rel_err", r.verify.max_rel_err}, {"nmse", r.verify.nmse}};
          best_s = format_us(b.median_us);
          best_g = format_us(b.graph_us);
          speed = fmt::format("{:.2f}x", eager.bench.time_us() / b.time_us());
          gbps = fmt::format("{:.1f}", b.bandwidth_gbps);
          pct = fmt::format("{:.1f}%", b.percent_of_peak);
          tb.store().record_kernel(tb.kernel_record(kernel, shape, r, eager.bench.time_us(), ctx.command_line));
        } else {
          best_s = sandbox::status_name(r.status);
          ctx.exit_code = 1;
        }
      }
      fmt::print("{:<21} {:<11} {:>11} {:>11} {:>11} {:>11} {:>8} {:>9} {:>7}\n", op->name(),
                 shape.label, format_us(eager.bench.median_us), format_us(eager.bench.graph_us),
                 best_s, best_g, speed, gbps, pct);
      std::fflush(stdout);
      rows.push_back(row);
    }
  }
  // Geometric mean over the op's shapes of eager time / best time (graph time per call where
  // the backend has graphs), the figure issue 3 compares with the seed's per-op speedups.
  nlohmann::json geomeans = nlohmann::json::object();
  for (const auto& [name, log_sum, n] : geo) {
    if (n == 0) continue;
    geomeans[name] = {{"geomean_speedup_vs_eager", std::exp(log_sum / n)}, {"shapes", n}};
    fmt::print("geomean speedup over eager, {}: {:.2f}x over {} shape(s)\n", name, std::exp(log_sum / n), n);
  }
  if (!json_out.empty()) {
    nlohmann::json doc = {{"device", tb.device()}, {"peak_bw_gbps", peak},
                          {"load_average_1min", std::isfinite(load) ? nlohmann::json(load) : nlohmann::json(nullptr)},
                          {"command", ctx.command_line}, {"date", memory::now_iso8601()},
                          {"rows", rows}, {"geomean", geomeans}};
    write_file_atomic(json_out, doc.dump(2));
    fmt::print("raw results: {}\n", json_out);
  }
}

}  // namespace

void register_bench(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "bench", "Benchmark a kernel file, or (without --kernel) the best kernels in memory");
  static KernelFileFlags f;
  static std::string json_out;
  cmd->add_option("--op", f.op, "Op name ('all' without --kernel)")->required();
  cmd->add_option("--kernel", f.kernel, "Kernel file (docs/kernel-format.md)");
  cmd->add_option("--shape", f.shape, "Shape label (default: the op's largest shape that fits)");
  cmd->add_flag("--json", f.json, "Print the full result as JSON (with --kernel)");
  cmd->add_option("--json-out", json_out, "Write raw results as JSON (without --kernel)");
  add_common_flags(*cmd, ctx.flags, true);
  cmd->callback([&ctx] {
    if (!f.kernel.empty()) {
      if (f.op == "all") fail(ErrorCategory::kUsage, "--op all: expected one op with --kernel");
      if (!json_out.empty())
        fail(ErrorCategory::kUsage, "--json-out {}: writes the results of the memory's kernels (without "
             "--kernel); with --kernel, --json prints the full result", json_out);
      bench_file(ctx, f);
    } else {
      if (f.json)
        fail(ErrorCategory::kUsage, "--json: prints the full result of a kernel file (with --kernel); without "
             "--kernel, --json-out FILE writes the memory's kernels' results as JSON");
      if (!json_out.empty()) check_results_file(ctx, json_out, "--json-out");
      bench_memory(ctx, f.op, f.shape, json_out);
    }
  });
}

}  // namespace thrive::cli
