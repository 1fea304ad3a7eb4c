// Helpers shared by `thrive verify` and `thrive bench`: read a kernel file, check it
// against --op, pick the shape, print a verdict.
#pragma once

#include <string>

#include "src/cli/context.hpp"
#include "thrive/backend/kernel.hpp"
#include "thrive/ops/op.hpp"
#include "thrive/sandbox/sandbox.hpp"

namespace thrive::cli {

struct KernelFileFlags {
  std::string op, kernel, shape;
  bool json = false;
};

struct LoadedKernel {
  backend::KernelSource kernel;
  ops::ShapeCase shape;
  std::string path;
};

void add_kernel_file_flags(CLI::App& cmd, KernelFileFlags& f);
/// Throws Error(kUsage) for an unknown op or shape, Error(kInput) for an unreadable
/// or malformed file or one whose `@thrive op` differs from --op.
LoadedKernel load_kernel_file(Context& ctx, const KernelFileFlags& f);
void print_verdict(const LoadedKernel& k, const sandbox::EvalResult& r);
/// `r` as --json prints it: sandbox::EvalResult's JSON without the sections of steps that gave no
/// result (`verify` or `post_verify` with no case, `bench` with no timed repetition, `paired` with
/// no pair), so an absent key means "no figure" (the step did not run, or failed: `status` and
/// `detail` say which) rather than a measured zero; `compile_log` names the kernel file `path`.
/// `bench --kernel` never pairs, so its JSON has no `paired`. On the CPU the CUDA-only statistics
/// (registers_per_thread, spilled_bytes, static/dynamic_smem_bytes, occupancy) are left out.
nlohmann::json result_json(const sandbox::EvalResult& r, const std::string& path);

}  // namespace thrive::cli
