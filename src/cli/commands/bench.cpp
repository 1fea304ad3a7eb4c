// thrive bench --op OP --kernel FILE [--shape LABEL]: compile, verify, benchmark a kernel
// file exactly as the agents do, next to the eager baseline; records it in memory.
#include <fmt/format.h>

#include "src/cli/commands/kernel_file.hpp"
#include "src/cli/context.hpp"

namespace thrive::cli {

void register_bench(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("bench", "Compile, verify and benchmark a kernel file");
  static KernelFileFlags f;
  add_kernel_file_flags(*cmd, f);
  add_common_flags(*cmd, ctx.flags, true);
  cmd->callback([&ctx] {
    auto loaded = load_kernel_file(ctx, f);
    auto& tb = ctx.toolbox();
    auto r = tb.benchmark(loaded.kernel, loaded.shape);
    if (f.json) {
      fmt::print("{}\n", nlohmann::json(r).dump(2));
    } else {
      print_verdict(loaded, r);
    }
    if (r.status != sandbox::Status::kPassed) {
      ctx.exit_code = 1;
      return;
    }
    auto eager = tb.eager(loaded.kernel.op, loaded.shape);
    const auto& b = r.bench;
    memory::KernelRecord k;
    k.kernel_id = tb.kernel_id(loaded.kernel);
    k.op = loaded.kernel.op;
    k.shape_class = loaded.shape.label;
    k.device_key = tb.device_key();
    k.backend = tb.backend_name();
    k.params = backend::params_to_string(loaded.kernel.params);
    k.source = loaded.kernel.source;
    k.time_us = b.median_us;
    k.eager_us = eager.bench.median_us;
    k.speedup = k.eager_us / k.time_us;
    k.bandwidth_gbps = b.bandwidth_gbps;
    k.percent_of_peak = b.percent_of_peak;
    k.max_rel_err = r.verify.max_rel_err;
    k.verified = true;
    k.command = ctx.command_line;
    k.metrics = r;
    const bool best = tb.store().record_kernel(k);
    if (f.json) return;
    fmt::print("  time   median {} (min {}, max {}, {} reps, ±{:.1f}% CI, {} argument sets = {:.0f} MiB)\n",
               format_us(b.median_us), format_us(b.min_us), format_us(b.max_us), b.reps,
               100 * b.rel_ci, b.argument_sets, double(b.working_set_bytes) / (1 << 20));
    fmt::print("  traffic {} bytes -> {:.2f} GB/s = {:.1f}% of the {:.1f} GB/s ceiling; {:.4f} TFLOP/s\n",
               b.bytes, b.bandwidth_gbps, b.percent_of_peak, b.peak_bw_gbps, b.tflops);
    fmt::print("  eager  {} -> speedup {:.2f}x{}\n", format_us(k.eager_us), k.speedup,
               best ? " (new best in memory)" : "");
  });
}

}  // namespace thrive::cli
