// thrive leaderboard [--json] [--device-key K]: best verified kernel per op, shape, device.
#include <fmt/format.h>

#include <algorithm>

#include "src/cli/context.hpp"
#include "thrive/core/error.hpp"

namespace thrive::cli {

void register_leaderboard(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("leaderboard", "Best verified kernel per op, shape and device");
  static bool json = false;
  static std::string device_key;
  cmd->add_flag("--json", json, "A JSON array with one object per entry");
  cmd->add_option("--device-key", device_key, "Only this device (its key as `thrive leaderboard` prints it)");
  add_common_flags(*cmd, ctx.flags, false);
  cmd->callback([&ctx, cmd] {
    // CLI11 takes the next argument as the value even when it is an option name
    // (`--device-key --json`); no device key starts with '-'
    if (!device_key.empty() && device_key[0] == '-')
      fail(ErrorCategory::kUsage, "--device-key {}: expected a device key as `thrive leaderboard` prints it, "
           "not an option (give the key right after --device-key)", device_key);
    if (json) {
      fmt::print("{}\n", tools::leaderboard_json(ctx.read_store(), device_key).dump(2));
      return;
    }
    auto rows = ctx.read_store().leaderboard(device_key);
    if (rows.empty()) {
      if (!device_key.empty())
        fmt::print("No verified kernels for device key '{}' in {} (`thrive leaderboard` without "
                   "--device-key lists every device).\n", device_key, ctx.store_path());
      else
        fmt::print("No verified kernels in {} yet: run `thrive optimize --op all`.\n", ctx.store_path());
      return;
    }
    // the whole device key, so that it can be pasted into --device-key
    size_t dev_w = 6;
    for (const auto& k : rows) dev_w = std::max(dev_w, k.device_key.size());
    fmt::print("{:<21} {:<11} {:<{}} {:>11} {:>11} {:>8} {:>9} {:>7}  {}\n", "op", "shape", "device", dev_w,
               "time", "eager est.", "speedup", "GB/s", "%peak", "kernel");
    for (const auto& k : rows)
      fmt::print("{:<21} {:<11} {:<{}} {:>11} {:>11} {:>7.2f}x {:>9.2f} {:>6.1f}%  {}\n", k.op,
                 k.shape_class, k.device_key, dev_w, format_us(k.time_us),
                 format_us(k.eager_us), k.speedup, k.bandwidth_gbps, k.percent_of_peak, k.kernel_id);
    // optimize's own table prints the paired medians, which this table does not keep
    fmt::print("time: the kernel's own benchmark, by which kernels are ranked; speedup: paired with the eager baseline "
               "(interleaved, where optimize confirmed it); eager est. = time x speedup, the eager time the speedup implies, "
               "not a measurement of its own. optimize's table prints the paired "
               "medians themselves, so its figures can differ from these by the run-to-run noise.\n");
  });
}

}  // namespace thrive::cli
