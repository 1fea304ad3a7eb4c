// thrive env [--markdown]: every THRIVE_* variable with default, unit and meaning.
#include <fmt/format.h>

#include "src/cli/context.hpp"

namespace thrive::cli {

void register_env(CLI::App& app, Context&) {
  auto* cmd = app.add_subcommand("env", "List every THRIVE_* variable (RSI_* aliases accepted)");
  static bool markdown = false;
  cmd->add_flag("--markdown", markdown, "Print the table docs/env.md holds");
  cmd->callback([] {
    auto knobs = config::Config::knobs();
    const auto& other = config::Config::other_variables();
    knobs.insert(knobs.end(), other.begin(), other.end());
    if (markdown) {
      fmt::print("| variable | default | unit | meaning |\n|---|---|---|---|\n");
      for (const auto& k : knobs)
        fmt::print("| `THRIVE_{}` | {} | {} | {} |\n", k.name, k.default_value, k.unit, k.meaning);
      return;
    }
    for (const auto& k : knobs)
      fmt::print("THRIVE_{:<22} default {:<10} [{}] {}\n", k.name, k.default_value, k.unit, k.meaning);
  });
}

}  // namespace thrive::cli
