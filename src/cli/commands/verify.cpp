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
    // a named shape too large to verify whole is said to be left out (or reduced), not silently skipped
    const auto& op = ops::find_op(f.op);
    const int64_t traffic = op.min_bytes(loaded.shape.shape);
    if (!f.shape.empty() && traffic > verify::kMaxWholeVerifyBytes) {
      const auto planned = verify::verification_shapes(op, ctx.config().model, &loaded.shape, true);
      const auto reduced = std::find_if(planned.begin(), planned.end(), [&](const ops::ShapeCase& s) {
        return s.label.rfind(loaded.shape.label + " with ", 0) == 0;
      });
      fmt::print(stderr, "--shape {}: not verified whole: its traffic, {:.0f} MiB, is over the {} MiB limit of a whole "
                 "verification; {}\n", loaded.shape.label, double(traffic) / (1 << 20), verify::kMaxWholeVerifyBytes >> 20,
                 reduced != planned.end() ? "verified as " + reduced->label + " instead"
                                          : std::string("only the op's verification shapes are checked"));
    }
    if (r.status != sandbox::Status::kPassed) ctx.exit_code = 1;
  });
}

}  // namespace thrive::cli
