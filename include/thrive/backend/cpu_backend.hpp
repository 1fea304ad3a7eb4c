// The CPU backend: candidate C++ compiled by the host compiler (-O3 -march=native,
// OpenMP) into a shared object, dlopen'ed, and called through the ABI in
// kernels/cpu/thrive_cpu.h. Compiled objects are cached under $THRIVE_HOME/cache/cpu
// by a hash of source, flags and compiler version.
#pragma once

#include "thrive/backend/backend.hpp"

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
  double time_us(const std::function<void()>& body) override;
  void set_before_load(std::function<void()> hook) override { before_load_ = std::move(hook); }

  /// Compiler flags every candidate is built with (part of the cache key).
  static std::vector<std::string> compile_flags();

 private:
  config::Config cfg_;
  DeviceInfo device_;
  std::string cache_dir_;
  std::string compiler_id_;
  int threads_ = 1;
  std::function<void()> before_load_;
};

}  // namespace thrive::backend
