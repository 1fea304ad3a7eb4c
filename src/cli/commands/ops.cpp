// thrive ops [--json] [--spec OP]: the target ops, shapes, byte/flop model, backends.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <vector>

#include "src/cli/context.hpp"
#include "thrive/backend/backend.hpp"
#include "thrive/ops/op.hpp"
#include "thrive/tools/toolbox.hpp"

namespace thrive::cli {

namespace {

/// One op's contract (tools::op_spec's JSON) as text: the op and its backend, the tensors in ABI
/// order, the dims and scalars, the template parameters, the tolerances, the benchmark and verify
/// shapes, and last the ABI header a kernel includes.
void print_spec(const nlohmann::json& c) {
  const auto list = [](const nlohmann::json& a) {
    std::vector<std::string> v;
    for (const auto& x : a) v.push_back(x.get<std::string>());
    return v.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(v, ", "));
  };
  fmt::print("{} ({}; backend {})\n  {}\n\n", c["op"].get<std::string>(), c["trait"].get<std::string>(),
             c["backend"].get<std::string>(), c["summary"].get<std::string>());
  fmt::print("Tensors, in ABI order (args->tensors[i]):\n");
  int i = 0;
  for (const auto& t : c["tensors"])
    fmt::print("  {}  {:<16} {:<6} {:<5} [{}]\n", i++, t["name"].get<std::string>(), t["role"].get<std::string>(),
               t["dtype"].get<std::string>(), fmt::join(t["dims"].get<std::vector<std::string>>(), ", "));
  fmt::print("Dims (args->dims, in order): {}\nScalars (args->scalars, in order): {}\n", list(c["dims"]),
             list(c["scalars"]));
  // a tensor dim that is not passed (swiglu_act's I2 = 2I): its value at the first shape
  const auto& first = c["shapes"].at(0);
  std::vector<std::string> derived;
  for (const auto& t : c["tensors"])
    for (const auto& d : t["dims"]) {
      const auto name = d.get<std::string>();
      const bool passed = std::find(c["dims"].begin(), c["dims"].end(), d) != c["dims"].end();
      if (!passed && std::find(derived.begin(), derived.end(), name) == derived.end()) derived.push_back(name);
    }
  for (const auto& name : derived)
    fmt::print("  {}: not in args->dims, derived from them ({} = {} at {})\n", name, name,
               first["shape"].value(name, int64_t{0}), first["label"].get<std::string>());
  fmt::print("\n");
  if (!c["template_params"].empty()) {
    fmt::print("Template parameters (the default, and the values the search tries):\n");
    for (const auto& p : c["template_params"])
      fmt::print("  {} = {} (of {})\n      {}\n", p["name"].get<std::string>(), p["default"].get<std::string>(),
                 fmt::join(p["values"].get<std::vector<std::string>>(), " | "), p["doc"].get<std::string>());
    fmt::print("\n");
  }
  fmt::print("Tolerance against the float64 reference:\n");
  for (const auto& [dtype, t] : c["tolerance"].items())
    fmt::print("  {:<5} rtol {:g}  nmse {:g}  bias {:g}\n", dtype, t.value("rtol", 0.0), t.value("nmse", 0.0),
               t.value("bias", 0.0));
  // every dim's value (the label names only those that vary), then the scalars' values
  const auto scalar_names = c["scalars"].get<std::vector<std::string>>();
  fmt::print("\nBenchmark shapes:\n  {:<16} {:>14} {:>10} {:>16}  {}{}\n", "shape", "min bytes", "MFLOP",
             "workspace bytes", "dims", scalar_names.empty() ? "" : fmt::format("; {}", fmt::join(scalar_names, ", ")));
  bool any_skipped = false;
  for (const auto& s : c["shapes"]) {
    const bool skipped = !s.value("in_default_set", true);
    any_skipped = any_skipped || skipped;
    std::vector<std::string> dims, values;
    for (const auto& [name, v] : s["shape"].items()) dims.push_back(fmt::format("{}={}", name, v.get<int64_t>()));
    for (const auto& v : s["scalars"]) values.push_back(fmt::format("{:.6g}", v.get<double>()));
    fmt::print("  {:<16} {:>14} {:>10.2f} {:>16}  {}{}{}\n", s["label"].get<std::string>(), s["min_bytes"].get<int64_t>(),
               s["flops"].get<double>() / 1e6, s["workspace_bytes"].get<int64_t>(), fmt::join(dims, " "),
               values.empty() ? "" : fmt::format("; {}", fmt::join(values, ", ")), skipped ? " (*)" : "");
  }
  if (any_skipped) {
    const int64_t cap = c["max_shape_bytes"].get<int64_t>();
    fmt::print("  (*) over the {} a run takes unless --shape names it (THRIVE_MAX_SHAPE_BYTES)\n",
               cap >= (1 << 20) ? fmt::format("{:.0f} MiB", double(cap) / (1 << 20)) : fmt::format("{} bytes", cap));
  }
  fmt::print("Verify shapes (ragged ones included): {}\n\nABI header (what a kernel includes):\n{}",
             list(c["verify_shapes"]), c["abi"].get<std::string>());
}

}  // namespace

void register_ops(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("ops", "List the target ops with shapes, bytes, flops, backends");
  static bool json = false;
  static std::string spec;
  cmd->add_flag("--json", json, "Machine-readable output");
  cmd->add_option("--spec", spec, "Print one op's full contract (tensors in ABI order, params, tolerances, ABI header); JSON with --json");
  add_common_flags(*cmd, ctx.flags, true);  // --device picks --spec's backend template
  cmd->callback([&ctx] {
    auto& cfg = ctx.config();
    if (!spec.empty()) {
      ops::find_op(spec);
      // The spec needs no memory: built from the registry and the backend's template, without the
      // toolbox (which opens, and would create, THRIVE_HOME's memory database)
      const auto contract = tools::op_spec(cfg, backend::resolve_backend_name(cfg.device), spec);
      if (json)
        fmt::print("{}\n", contract.dump(2));
      else
        print_spec(contract);
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
