#include <algorithm>
#include <chrono>

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

namespace thrive::backend {
namespace {

// steady_clock marks: the cpu backend's work is synchronous, so wall time is its time.
class ClockTimeline final : public Backend::Timeline {
 public:
  explicit ClockTimeline(int capacity) { marks_.reserve(size_t(std::max(capacity, 1))); }
  void mark() override { marks_.push_back(std::chrono::steady_clock::now()); }
  std::vector<double> intervals_us() override {
    std::vector<double> out;
    for (size_t i = 1; i < marks_.size(); ++i)
      out.push_back(std::chrono::duration<double, std::micro>(marks_[i] - marks_[i - 1]).count());
    marks_.clear();
    return out;
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace

std::unique_ptr<Backend::Timeline> Backend::make_timeline(int capacity) {
  return std::make_unique<ClockTimeline>(capacity);
}

}  // namespace thrive::backend
