// The outer loop's command mode (`thrive optimize --system`): see system.cpp.
#pragma once

#include <string>

#include "src/cli/context.hpp"

namespace thrive::cli {

/// Flags of `thrive optimize --system`.
struct SystemFlags {
  std::string model, metric = "decode";
  int budget = 4, batch = 1, prompt = 16, gen = 16;
  double r_t = 0.3, a_t = 0.3;
  bool json = false;
  /// --autonomous (with `--agent llm`): the kernels specialist's inner loop on CUDA is one
  /// orchestrator model delegating to the role agents
  bool autonomous = false;
};

/// Runs the outer loop on the CPU engine and records it in memory. Error(kUsage) for bad flags,
/// Error(kInput) for a bad checkpoint.
void run_system(Context& ctx, const SystemFlags& f, bool rt_given, bool at_given);

}  // namespace thrive::cli
