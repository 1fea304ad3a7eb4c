#include "thrive/backend/backend.hpp"
#include "thrive/backend/cpu_backend.hpp"
#include "thrive/core/error.hpp"

namespace thrive::backend {

std::string resolve_backend_name(const std::string& name) {
  if (name == "cpu") return "cpu";
  if (name == "cuda")
    fail(ErrorCategory::kBackend,
         "device=cuda: the CUDA backend is not part of this build yet; expected --device cpu or "
         "auto");
  if (name == "auto") return "cpu";  // becomes "cuda when a GPU is present" with the CUDA backend
  fail(ErrorCategory::kUsage, "device={}: expected one of cpu, cuda, auto", name);
}

std::unique_ptr<Backend> make_backend(const std::string& name, const config::Config& cfg) {
  const std::string resolved = resolve_backend_name(name);
  if (resolved == "cpu") return std::make_unique<CpuBackend>(cfg);
  fail(ErrorCategory::kInternal, "no backend for '{}'", resolved);
}

}  // namespace thrive::backend
