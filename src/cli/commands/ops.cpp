// thrive ops [--json] [--spec OP]: the target ops, shapes, byte/flop model, backends.
#include <fmt/format.h>

#include "src/cli/context.hpp"
#include "thrive/backend/backend.hpp"
#include "thrive/ops/op.hpp"
#include "thrive/tools/toolbox.hpp"

namespace thrive::cli {

void register_ops(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("ops", "List the target ops with shapes, bytes, flops, backends");
  static bool json = false;
  static std::string spec;
  cmd->add_flag("--json", json, "Machine-readable output");
  cmd->add_option("--spec", spec, "Print one op's full contract (tensors in ABI order, params)");
  add_common_flags(*cmd, ctx.flags, true);  // --device picks --spec's backend template
  cmd->callback([&ctx] {
    auto& cfg = ctx.config();
    if (!spec.empty()) {
      ops::find_op(spec);
      // The spec needs no memory: built from the registry and the backend's template, without the
      // toolbox (which opens, and would create, THRIVE_HOME's memory database)
      fmt::print("{}\n", tools::op_spec(cfg, backend::resolve_backend_name(cfg.device), spec).dump(2));
      return;
    }
    const nlohmann::json out = tools::ops_catalog(cfg.model);
    if (json) {
      fmt::print("{}\n", out.dump(2));
      return;
    }
    fmt::print("Model dims: hidden {} intermediate {} heads {}/{} head_dim {} vocab {} "
               "(THRIVE_* to change)\n\n",
               cfg.model.hidden, cfg.model.intermediate, cfg.model.num_heads,
               cfg.model.num_kv_heads, cfg.model.head_dim, cfg.model.vocab);
    for (const auto& o : out) {
      fmt::print("{} ({}; backends: {})\n  {}\n", o["op"].get<std::string>(),
                 o["trait"].get<std::string>(), fmt::join(o["backends"].get<std::vector<std::string>>(), ", "),
                 o["summary"].get<std::string>());
      fmt::print("  {:<16} {:>14} {:>14} {:>10}\n", "shape", "min bytes", "MiB", "MFLOP");
      for (const auto& s : o["shapes"])
        fmt::print("  {:<16} {:>14} {:>14.2f} {:>10.2f}\n", s["label"].get<std::string>(),
                   s["min_bytes"].get<int64_t>(), double(s["min_bytes"].get<int64_t>()) / (1 << 20),
                   s["flops"].get<double>() / 1e6);
      fmt::print("\n");
    }
  });
}

}  // namespace thrive::cli
