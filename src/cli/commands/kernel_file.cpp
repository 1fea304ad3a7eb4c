#include "src/cli/commands/kernel_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

namespace thrive::cli {

void add_kernel_file_flags(CLI::App& cmd, KernelFileFlags& f) {
  // (bench registers its own variant: --kernel is optional there)
  cmd.add_option("--op", f.op, "Op the kernel implements")->required();
  cmd.add_option("--kernel", f.kernel, "Kernel file (docs/kernel-format.md)")->required();
  cmd.add_option("--shape", f.shape, "Shape label (default: the op's largest shape that fits)");
  cmd.add_flag("--json", f.json, "Print the full result as JSON");
}

LoadedKernel load_kernel_file(Context& ctx, const KernelFileFlags& f) {
  const auto& op = ops::find_op(f.op);
  LoadedKernel k;
  k.path = f.kernel;
  k.kernel = backend::KernelSource::parse(read_file(f.kernel), f.kernel);
  if (k.kernel.op != op.name())
    fail(ErrorCategory::kInput, "{}: declares '@thrive op: {}' but --op is {}", f.kernel,
         k.kernel.op, op.name());
  k.shape = ctx.toolbox().shape_or_largest(op, f.shape);
  return k;
}

namespace {

// The compiler names the source as the backend wrote it (the CPU backend's kernel.cpp, NVRTC's
// candidate.cu; the log is cached under the source's hash, so it cannot carry the user's path):
// here that name, where it starts a line (after its indentation) or follows "In file included
// from " or "from " in an include chain, becomes the kernel file's path. Text elsewhere (a message quoting the name) is left.
std::string log_naming(const std::string& log, const std::string& path) {
  std::string out;
  size_t at = 0;
  while (at < log.size()) {
    size_t end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    std::string line = log.substr(at, end - at);
    size_t lead = line.find_first_not_of(" \t");
    for (const std::string chain : {"In file included from ", "from "})
      if (lead != std::string::npos && line.compare(lead, chain.size(), chain) == 0) {
        lead += chain.size();
        break;
      }
    if (lead != std::string::npos)
      for (const std::string own : {"kernel.cpp:", "candidate.cu(", "candidate.cu:"})
        if (line.compare(lead, own.size(), own) == 0) {
          line.replace(lead, own.size() - 1, path);
          break;
        }
    out += line;
    if (end < log.size()) out += '\n';
    at = end + 1;
  }
  return out;
}

}  // namespace

nlohmann::json result_json(const sandbox::EvalResult& r, const std::string& path) {
  nlohmann::json j = r;
  j["compile_log"] = log_naming(r.compile_log, path);
  if (r.verify.cases.empty()) j.erase("verify");
  if (r.device_key.rfind("cpu", 0) == 0)  // compiler and launch statistics that only a CUDA kernel has
    for (const char* cuda_only : {"registers_per_thread", "spilled_bytes", "static_smem_bytes", "dynamic_smem_bytes", "occupancy"})
      j.erase(cuda_only);
  if (r.bench.reps == 0) j.erase("bench");
  if (r.paired.pairs == 0) j.erase("paired");
  if (r.post_verify.cases.empty()) j.erase("post_verify");
  return j;
}

void print_verdict(const LoadedKernel& k, const sandbox::EvalResult& r) {
  // the shape is said only when the kernel was timed there: verification runs its own shapes,
  // listed below, and a large benchmark shape may be none of them
  fmt::print("{} ({}{}): {}\n", k.path, k.kernel.op, r.bench.reps > 0 ? " at " + k.shape.label : std::string(),
             sandbox::status_name(r.status));
  // (a failed case's text is the detail itself: its case line below says it once)
  const bool detail_is_a_case = std::any_of(r.verify.cases.begin(), r.verify.cases.end(),
                                            [&](const auto& c) { return !c.passed && c.failure == r.detail; });
  if (!r.detail.empty() && !detail_is_a_case) fmt::print("  {}\n", r.detail);
  if (r.status == sandbox::Status::kCompileFailed) fmt::print("compiler output:\n{}\n", log_naming(r.compile_log, k.path));
  for (const auto& c : r.verify.cases)
    fmt::print("  case {:<24} {:<12} {}\n", c.shape_label, c.distribution,
               c.passed ? "ok" : "FAIL " + c.failure);
  const bool any_failed = std::any_of(r.verify.cases.begin(), r.verify.cases.end(), [](const auto& c) { return !c.passed; });
  // (a kernel that declined every shape it was given had no output compared: no error figures)
  const bool any_passed = std::any_of(r.verify.cases.begin(), r.verify.cases.end(), [](const auto& c) { return c.passed; });
  if (!r.verify.cases.empty() && (r.status != sandbox::Status::kUnsupported || any_passed))
    fmt::print("  worst max_rel_err {:.3g}, worst nmse {:.3g}{}\n", r.verify.max_rel_err, r.verify.nmse,
               any_failed ? " (over the outputs compared; a failed case's reason is on its line)" : "");
}

}  // namespace thrive::cli
