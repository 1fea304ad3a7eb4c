// thrive verify --op OP --kernel FILE [--shape LABEL]: the agents' compile + verify path
// on a hand-written kernel; prints the verdict with error figures. Exit 1 if it fails.
#include <fmt/format.h>

#include <algorithm>

#include "src/cli/commands/kernel_file.hpp"
#include "src/cli/context.hpp"
#include "thrive/core/error.hpp"
#include "thrive/ops/op.hpp"
#include "thrive/verify/verify.hpp"

namespace thrive::cli {

void register_verify(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("verify", "Compile and verify a kernel file against the reference");
  static KernelFileFlags f;
  add_kernel_file_flags(*cmd, f);
  cmd->get_option("--shape")->description(
      "Also verify at this shape label, whole when its traffic is at most 512 MiB (default: the op's "
      "verification shapes, plus its largest shape that fits when that is at most 16 MiB)");
  add_common_flags(*cmd, ctx.flags, true);
  cmd->callback([&ctx] {
    auto loaded = load_kernel_file(ctx, f);
    auto r = ctx.toolbox().verify(loaded.kernel, loaded.shape, !f.shape.empty());
    if (f.json)
      fmt::print("{}\n", result_json(r, loaded.path).dump(2));
    else
      print_verdict(loaded, r);
    // a named shape too large to verify whole is said to be left out, not silently skipped
    const bool ran = std::any_of(r.verify.cases.begin(), r.verify.cases.end(), [&](const auto& c) {
      return c.shape_label.rfind(loaded.shape.label, 0) == 0;
    });
    if (!f.shape.empty() && !ran && !r.verify.cases.empty())
      fmt::print(stderr, "--shape {}: not verified whole: its traffic, {:.0f} MiB, is over the {} MiB limit of a whole "
                 "verification (the cases above are what ran)\n", loaded.shape.label,
                 double(ops::find_op(f.op).min_bytes(loaded.shape.shape)) / (1 << 20), verify::kMaxWholeVerifyBytes >> 20);
    if (r.status != sandbox::Status::kPassed) ctx.exit_code = 1;
  });
}

}  // namespace thrive::cli
