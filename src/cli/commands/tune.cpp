// thrive tune --op OP [--shape LABEL] --grid "NAME=v1,v2 NAME=v3,v4" [--base best|defaults]:
// exhaustive search over a small part of an op template's parameter space at one
// shape. Every point goes through the same sandbox as the agents' candidates
// (compile -> verify -> benchmark); passing kernels are recorded in memory (the
// best per shape is kept) and the points are printed ranked by time. This is the
// autotuner that maps a region of the strategy space, next to the agents' one-change
// search; its results feed the same leaderboard and `thrive bench`.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "src/cli/context.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

namespace thrive::cli {
namespace {

struct TuneFlags {
  std::string op, shape, grid, base = "best", json_out;
  int top = 10, max_points = 256;
};

using Axis = std::pair<std::string, std::vector<std::string>>;

/// Parses "NAME=v1,v2 NAME2=v3" (axes separated by spaces or ';'). Every name must be a
/// parameter of `tmpl` and every value one of its declared values; throws Error(kUsage)
/// naming the offending token and listing what is allowed.
std::vector<Axis> parse_grid(const std::string& grid, const backend::KernelSource& tmpl) {
  std::string text = grid;
  std::replace(text.begin(), text.end(), ';', ' ');
  std::istringstream in(text);
  std::vector<Axis> axes;
  for (std::string tok; in >> tok;) {
    const auto eq = tok.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == tok.size())
      fail(ErrorCategory::kUsage, "--grid: '{}' is not NAME=v1,v2,...", tok);
    const std::string name = tok.substr(0, eq);
    auto spec = std::find_if(tmpl.param_specs.begin(), tmpl.param_specs.end(),
                             [&](const backend::ParamSpec& p) { return p.name == name; });
    if (spec == tmpl.param_specs.end()) {
      std::string names;
      for (const auto& p : tmpl.param_specs) names += (names.empty() ? "" : ", ") + p.name;
      fail(ErrorCategory::kUsage, "--grid: {} is not a parameter of the {} template; expected one of: {}",
           name, tmpl.op, names);
    }
    if (std::any_of(axes.begin(), axes.end(), [&](const Axis& a) { return a.first == name; }))
      fail(ErrorCategory::kUsage, "--grid: {} appears twice", name);
    Axis axis{name, {}};
    std::istringstream vs(tok.substr(eq + 1));
    for (std::string v; std::getline(vs, v, ',');) {
      if (std::find(spec->values.begin(), spec->values.end(), v) == spec->values.end()) {
        std::string allowed;
        for (const auto& a : spec->values) allowed += (allowed.empty() ? "" : ",") + a;
        fail(ErrorCategory::kUsage, "--grid: {}={} is not a declared value; expected one of {}", name,
             v, allowed);
      }
      if (std::find(axis.second.begin(), axis.second.end(), v) == axis.second.end())
        axis.second.push_back(v);
    }
    if (axis.second.empty()) fail(ErrorCategory::kUsage, "--grid: {} has no values", name);
    axes.push_back(std::move(axis));
  }
  if (axes.empty())
    fail(ErrorCategory::kUsage, "--grid: expected at least one NAME=v1,v2 (parameters of {}: see "
         "`thrive ops --spec`)", tmpl.op);
  return axes;
}

/// The cartesian product of `axes` applied on top of `base`.
std::vector<backend::Params> expand(const std::vector<Axis>& axes, const backend::Params& base) {
  std::vector<backend::Params> points{base};
  for (const auto& [name, values] : axes) {
    std::vector<backend::Params> next;
    for (const auto& p : points)
      for (const auto& v : values) {
        auto q = p;
        q[name] = v;
        next.push_back(std::move(q));
      }
    points = std::move(next);
  }
  return points;
}

struct Point {
  backend::Params params;
  sandbox::EvalResult result;
  double wall_s = 0;
};

void run_tune(Context& ctx, const TuneFlags& f) {
  if (f.top < 1) fail(ErrorCategory::kUsage, "--top {}: expected at least 1", f.top);
  if (f.max_points < 1) fail(ErrorCategory::kUsage, "--max-points {}: expected at least 1", f.max_points);
  if (f.base != "best" && f.base != "defaults")
    fail(ErrorCategory::kUsage, "--base {}: expected best or defaults", f.base);
  const auto& op = ops::find_op(f.op);
  auto& tb = ctx.toolbox();
  const auto tmpl = tb.op_template(op.name());
  const auto axes = parse_grid(f.grid, tmpl);
  const auto shape = tb.shape_or_largest(op, f.shape);

  backend::Params base = tmpl.defaults();
  std::string base_note = "template defaults";
  if (f.base == "best") {
    if (auto rec = tb.store().best(op.name(), shape.label, tb.device_key())) {
      try {
        auto k = backend::KernelSource::parse(rec->source, "memory:" + rec->kernel_id);
        // Only the template's own parameters carry over; a hand-written best keeps defaults.
        bool same_template = !k.params.empty();
        for (const auto& [name, v] : k.params)
          same_template = same_template && std::any_of(tmpl.param_specs.begin(), tmpl.param_specs.end(),
                                                        [&](const auto& p) { return p.name == name; });
        if (same_template) {
          for (const auto& [name, v] : k.params) base[name] = v;
          base_note = "best in memory (" + rec->kernel_id + ")";
        }
      } catch (const Error&) {
        // an unparsable stored source: tune from the defaults
      }
    }
  }
  const auto points = expand(axes, base);
  if (int(points.size()) > f.max_points)
    fail(ErrorCategory::kUsage, "--grid spans {} points; at most {} (raise --max-points)", points.size(),
         f.max_points);

  auto eager = tb.eager(op.name(), shape);
  const double eager_us = eager.bench.time_us();
  fmt::print("Tuning {} at {} on {}: {} points over {} from {}; eager {}\n", op.name(), shape.label,
             tb.device_key(), points.size(), f.grid, base_note, format_us(eager_us));
  std::vector<Point> done;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto k = tmpl.instantiate(points[i]);
    auto r = tb.benchmark(k, shape);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool ok = r.status == sandbox::Status::kPassed;
    const auto a = tb.attempt_record(k, shape.label, "tune", r, eager_us);
    tb.store().record_attempt(a);
    if (ok) tb.store().record_kernel(tb.kernel_record(k, shape, r, eager_us, ctx.command_line));
    fmt::print("[{:>3}/{}] {:<60} {:<14} {:>10} {:>10} {:>6.1f}% ({:.1f} s: compile {:.1f}, verify "
               "{:.1f}, bench {:.1f})\n",
               i + 1, points.size(), a.change, sandbox::status_name(r.status),
               ok ? format_us(r.bench.median_us) : "-", ok ? format_us(r.bench.graph_us) : "-",
               ok ? r.bench.percent_of_peak : 0.0, wall, r.compile_s, r.verify_s, r.bench_s);
    std::fflush(stdout);
    done.push_back({points[i], std::move(r), wall});
  }
  std::vector<const Point*> ranked;
  for (const auto& p : done)
    if (p.result.status == sandbox::Status::kPassed) ranked.push_back(&p);
  std::stable_sort(ranked.begin(), ranked.end(), [](const Point* a, const Point* b) {
    return a->result.bench.time_us() < b->result.bench.time_us();
  });
  fmt::print("\nTop {} of {} passing points (time = graph per call where measured, else launched):\n",
             std::min<size_t>(f.top, ranked.size()), ranked.size());
  fmt::print("{:>4} {:>10} {:>8} {:>9} {:>7}  {}\n", "rank", "time", "speedup", "GB/s", "%copy",
             "params");
  for (size_t i = 0; i < ranked.size() && int(i) < f.top; ++i) {
    const auto& b = ranked[i]->result.bench;
    fmt::print("{:>4} {:>10} {:>7.2f}x {:>9.1f} {:>6.1f}%  {}\n", i + 1, format_us(b.time_us()),
               eager_us / b.time_us(), b.bandwidth_gbps, b.percent_of_peak,
               backend::params_to_string(ranked[i]->params));
  }
  if (ranked.empty()) ctx.exit_code = 1;
  if (!f.json_out.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& p : done) {
      nlohmann::json row = {{"params", backend::params_to_string(p.params)},
                            {"status", sandbox::status_name(p.result.status)},
                            {"wall_s", p.wall_s}, {"detail", p.result.detail}};
      if (p.result.status == sandbox::Status::kPassed) row["bench"] = p.result.bench;
      rows.push_back(std::move(row));
    }
    nlohmann::json doc = {{"op", op.name()}, {"shape", shape.label}, {"device", tb.device()},
                          {"eager", eager.bench}, {"grid", f.grid}, {"base", base_note},
                          {"command", ctx.command_line}, {"date", memory::now_iso8601()},
                          {"points", rows}};
    write_file_atomic(f.json_out, doc.dump(2));
    fmt::print("raw results: {}\n", f.json_out);
  }
}

}  // namespace

void register_tune(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "tune", "Exhaustively evaluate a grid of template parameters at one shape (autotune)");
  static TuneFlags f;
  cmd->add_option("--op", f.op, "Op name")->required();
  cmd->add_option("--grid", f.grid, "Axes 'NAME=v1,v2 NAME2=v3,...' over the template's parameters")
      ->required();
  cmd->add_option("--shape", f.shape, "Shape label (default: the op's largest shape that fits)");
  cmd->add_option("--base", f.base, "Parameters not on the grid: best (in memory, default) | defaults");
  cmd->add_option("--top", f.top, "Rows of the ranked table (default 10)");
  cmd->add_option("--max-points", f.max_points, "Refuse a grid larger than this (default 256)");
  cmd->add_option("--json-out", f.json_out, "Write every point's raw result as JSON");
  add_common_flags(*cmd, ctx.flags, true);
  cmd->callback([&ctx, cmd] {
    if (cmd->count("--json-out") > 0) check_results_file(ctx, f.json_out, "--json-out");
    run_tune(ctx, f);
  });
}

}  // namespace thrive::cli
