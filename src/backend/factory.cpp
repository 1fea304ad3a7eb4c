#include "thrive/backend/backend.hpp"
#include "thrive/backend/cpu_backend.hpp"
#include "thrive/backend/cuda_backend.hpp"
#include "thrive/core/error.hpp"

namespace thrive::backend {

std::string resolve_backend_name(const std::string& name) {
  if (name == "cpu") return "cpu";
  if (name == "cuda") {
    std::string why;
    if (!cuda_probably_available(&why))
      fail(ErrorCategory::kBackend, "device=cuda: no usable GPU: {}; expected a machine with an "
           "NVIDIA GPU and driver, or --device cpu", why);
    return "cuda";
  }
  if (name == "auto") return cuda_probably_available(nullptr) ? "cuda" : "cpu";
  fail(ErrorCategory::kUsage, "device={}: expected one of cpu, cuda, auto", name);
}

std::unique_ptr<Backend> make_backend(const std::string& name, const config::Config& cfg) {
  const std::string resolved = resolve_backend_name(name);
  if (resolved == "cpu") return std::make_unique<CpuBackend>(cfg);
  return make_cuda_backend(cfg);
}

}  // namespace thrive::backend
