// cuBLASLt GEMMs for the CUDA engine, with libcublasLt opened at run time (dlopen), so the
// binary still starts on machines without CUDA. Row-major conventions throughout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

namespace thrive::model {

/// One GEMM, row-major: Y[M, N] = X[M, K] · op(W), op(W) = W^T for W stored [N, K] (a
/// projection's HF layout [out, in]) or W for W stored [K, N] (`w_is_kn`). Leading dimensions
/// and batch strides are in elements; `batch` > 1 repeats it with the given strides. X and W
/// are bf16; Y is bf16 or f32 (`y_f32`); accumulation is f32 (CUBLAS_COMPUTE_32F).
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t ldx = 0, ldw = 0, ldy = 0;
  bool w_is_kn = false, y_f32 = false;
  int batch = 1;
  int64_t stride_x = 0, stride_w = 0, stride_y = 0;
  auto key() const {
    return std::make_tuple(m, n, k, ldx, ldw, ldy, w_is_kn, y_f32, batch, stride_x, stride_w, stride_y);
  }
};

/// cuBLASLt on one stream with one workspace. Plans (descriptors, layouts and the heuristic's
/// first algorithm) are cached per GemmShape. Not thread-safe. Calls are capturable into a
/// CUDA graph (no allocation happens inside run()).
class CublasLt {
 public:
  /// `stream`: a CUstream (the CUDA backend's native_stream()); `workspace`: device memory of
  /// `workspace_bytes` (32 MiB is what cuBLASLt's heuristics use on Hopper). Throws
  /// Error(kBackend) when libcublasLt.so.13 cannot be loaded or the handle not created.
  CublasLt(void* stream, void* workspace, int64_t workspace_bytes);
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  /// Queues Y = alpha · X · op(W) on the stream. Throws Error(kBackend) naming the shape when
  /// cuBLASLt has no algorithm for it or the call fails.
  void run(const GemmShape& s, const void* x, const void* w, void* y, float alpha = 1.0f);

 private:
  struct Plan;
  Plan& plan(const GemmShape& s);
  void* stream_;
  void* workspace_;
  int64_t workspace_bytes_;
  void* handle_ = nullptr;
  std::map<decltype(GemmShape{}.key()), std::unique_ptr<Plan>> plans_;
};

}  // namespace thrive::model
