// The CPU backend: candidate C++ compiled by the host compiler (-O3 -march=native,
// OpenMP) into a shared object and called through the ABI in kernels/cpu/thrive_cpu.h:
// in this process (dlopen), or, after isolate_candidates(), in an executor process of its
// own (cpu_executor.hpp). Tensors live in a SharedArena either way. Compiled objects are
// cached under $THRIVE_HOME/cache/cpu by a hash of source, flags and compiler version.
#pragma once

#include <memory>

#include "thrive/backend/backend.hpp"
#include "thrive/backend/cpu_executor.hpp"

namespace thrive::backend {

class CpuBackend final : public Backend {
 public:
  /// Throws Error(kBackend) when the compiler (THRIVE_CXX) cannot be run, and
  /// Error(kStorage) when the cache directory is not writable.
  explicit CpuBackend(const config::Config& cfg);
  const DeviceInfo& device() const override { return device_; }
  CompileResult compile(const KernelSource& kernel) override;
  void* allocate(int64_t bytes) override;
  void release(void* ptr) override;
  void upload(void* dst, const void* src, int64_t bytes) override;
  void download(void* dst, const void* src, int64_t bytes) override;
  void memset(void* dst, uint8_t value, int64_t bytes) override;
  void copy_device(void* dst, const void* src, int64_t bytes) override;
  int launch(const Module& module, const LaunchArgs& args) override;
  void synchronize() override {}
  /// steady_clock around `body`, µs; with isolation, less the calibrated lower bound of the
  /// round-trip overhead of the executor calls `body` made (CpuExecutor::last_call_overhead_us
  /// of each), never below 0 (conservative: a call's IPC jitter stays in its time).
  double time_us(const std::function<void()>& body) override;
  /// Per-call time, µs, of the `calls` launches `body` issues, run back to back: with isolation
  /// they are recorded (not run) while `body` runs and then sent to the module's executor as one
  /// batch (CpuExecutor::call_batch), so the IPC round trip is paid once and subtracted once,
  /// instead of leaving its jitter (tens of µs of wake-up latency on a loaded or idle CPU) in
  /// every call; the CPU's counterpart of a CUDA graph. Without isolation, steady_clock around
  /// `body` / calls. Returns 0 (the caller keeps the launched figure) when `body` launches
  /// modules of more than one executor or the batch returns non-zero; `calls` must be >= 1
  /// (Error(kUsage) otherwise).
  double time_graph_us(const std::function<void()>& body, int calls) override;
  void isolate_candidates(const CandidateIsolation& isolation) override;

  /// Compiler flags every candidate is built with (part of the cache key).
  static std::vector<std::string> compile_flags();

 private:
  config::Config cfg_;
  DeviceInfo device_;
  std::string cache_dir_;
  std::string compiler_id_;
  /// The compiler's own #include <...> directories (`c++ -E -v`), resolved: with the directory
  /// of thrive_cpu.h, the only places a kernel's headers may come from (compile()).
  std::vector<std::string> system_include_dirs_;
  int threads_ = 1;
  bool isolated_ = false;
  CandidateIsolation isolation_;  // with its program resolved (CpuExecutor::find_program)
  // Tensor memory: half of the worker's address-space limit (THRIVE_WORKER_MEMORY_MB, default
  // half of RAM), a memfd mapped shared that every executor maps too.
  std::unique_ptr<SharedArena> arena_;
  double pending_overhead_us_ = 0;  // executor round trips made inside the current time_us
  // time_graph_us's capture: while capturing_, launch() on an isolated module appends its call
  // here instead of running it
  bool capturing_ = false, capture_mixed_ = false;
  CpuExecutor* capture_executor_ = nullptr;
  std::vector<std::string> captured_;
};

}  // namespace thrive::backend
