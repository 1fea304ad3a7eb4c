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
/// `r` as --json prints it: sandbox::EvalResult's JSON without the sections of steps that did not
/// run (`bench` when it timed no repetition, `paired` with no pairs, `post_verify` with no case),
/// so an absent key means "not measured" rather than a measured zero.
nlohmann::json result_json(const sandbox::EvalResult& r);

}  // namespace thrive::cli
