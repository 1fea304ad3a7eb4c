// thrive verify --op OP --kernel FILE [--shape LABEL]: the agents' compile + verify path
// on a hand-written kernel; prints the verdict with error figures. Exit 1 if it fails.
#include <fmt/format.h>

#include "src/cli/commands/kernel_file.hpp"
#include "src/cli/context.hpp"
#include "thrive/core/error.hpp"

namespace thrive::cli {

void register_verify(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("verify", "Compile and verify a kernel file against the reference");
  static KernelFileFlags f;
  add_kernel_file_flags(*cmd, f);
  add_common_flags(*cmd, ctx.flags, true);
  cmd->callback([&ctx] {
    auto loaded = load_kernel_file(ctx, f);
    auto r = ctx.toolbox().verify(loaded.kernel, loaded.shape);
    if (f.json)
      fmt::print("{}\n", result_json(r, loaded.path).dump(2));
    else
      print_verdict(loaded, r);
    if (r.status != sandbox::Status::kPassed) ctx.exit_code = 1;
  });
}

}  // namespace thrive::cli
