// cuBLASLt through dlopen: see cublaslt.hpp. The mapping of a row-major GEMM onto cuBLASLt's
// column-major one: row-major Y[M, N] is column-major Y^T[N, M]; Y^T = op(W)^T-as-stored ·
// X^T, so A = W (transposed when stored [N, K]), B = X (column-major K x M), C = D = Y^T.
#include "src/model/cublaslt.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

#include "thrive/core/error.hpp"

#if THRIVE_HAVE_CUDA
#include <cublasLt.h>
#endif

namespace thrive::model {

#if !THRIVE_HAVE_CUDA

struct CublasLt::Plan {};
CublasLt::CublasLt(void*, void*, int64_t) {
  fail(ErrorCategory::kBackend, "cuBLASLt: this build has no CUDA toolkit");
}
CublasLt::~CublasLt() = default;
void CublasLt::run(const GemmShape&, const void*, const void*, void*, float) {}

#else

namespace {

struct LtApi {
  void* lib = nullptr;
#define THRIVE_LT_FN(name) decltype(&::name) name = nullptr;
  THRIVE_LT_FN(cublasLtCreate)
  THRIVE_LT_FN(cublasLtDestroy)
  THRIVE_LT_FN(cublasLtMatmulDescCreate)
  THRIVE_LT_FN(cublasLtMatmulDescDestroy)
  THRIVE_LT_FN(cublasLtMatmulDescSetAttribute)
  THRIVE_LT_FN(cublasLtMatrixLayoutCreate)
  THRIVE_LT_FN(cublasLtMatrixLayoutDestroy)
  THRIVE_LT_FN(cublasLtMatrixLayoutSetAttribute)
  THRIVE_LT_FN(cublasLtMatmulPreferenceCreate)
  THRIVE_LT_FN(cublasLtMatmulPreferenceDestroy)
  THRIVE_LT_FN(cublasLtMatmulPreferenceSetAttribute)
  THRIVE_LT_FN(cublasLtMatmulAlgoGetHeuristic)
  THRIVE_LT_FN(cublasLtMatmul)
  THRIVE_LT_FN(cublasLtGetStatusString)
#undef THRIVE_LT_FN
};

const LtApi& lt() {
  static LtApi a = [] {
    LtApi x;
    for (const char* name : {"libcublasLt.so.13", "libcublasLt.so", "/usr/local/cuda/lib64/libcublasLt.so.13"})
      if ((x.lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL))) break;
    if (!x.lib)
      fail(ErrorCategory::kBackend, "cuBLASLt: cannot load libcublasLt.so.13 ({}); expected the CUDA 13 toolkit's "
           "libraries on the loader path", dlerror());
#define THRIVE_LT_LOAD(name)                                                                              \
  if (!(x.name = reinterpret_cast<decltype(x.name)>(dlsym(x.lib, #name))))                                 \
    fail(ErrorCategory::kBackend, "cuBLASLt: libcublasLt lacks {}", #name);
    THRIVE_LT_LOAD(cublasLtCreate) THRIVE_LT_LOAD(cublasLtDestroy) THRIVE_LT_LOAD(cublasLtMatmulDescCreate)
    THRIVE_LT_LOAD(cublasLtMatmulDescDestroy) THRIVE_LT_LOAD(cublasLtMatmulDescSetAttribute)
    THRIVE_LT_LOAD(cublasLtMatrixLayoutCreate) THRIVE_LT_LOAD(cublasLtMatrixLayoutDestroy)
    THRIVE_LT_LOAD(cublasLtMatrixLayoutSetAttribute) THRIVE_LT_LOAD(cublasLtMatmulPreferenceCreate)
    THRIVE_LT_LOAD(cublasLtMatmulPreferenceDestroy) THRIVE_LT_LOAD(cublasLtMatmulPreferenceSetAttribute)
    THRIVE_LT_LOAD(cublasLtMatmulAlgoGetHeuristic) THRIVE_LT_LOAD(cublasLtMatmul)
    THRIVE_LT_LOAD(cublasLtGetStatusString)
#undef THRIVE_LT_LOAD
    return x;
  }();
  return a;
}

void check(cublasStatus_t st, const char* what, const std::string& shape) {
  if (st != CUBLAS_STATUS_SUCCESS)
    fail(ErrorCategory::kBackend, "cuBLASLt {} failed for {}: {}", what, shape, lt().cublasLtGetStatusString(st));
}

std::string describe(const GemmShape& s) {
  return fmt::format("Y[{}x{}] = X[{}x{}] . W{} (ld {} {} {}, batch {})", s.m, s.n, s.m, s.k,
                     s.w_is_kn ? fmt::format("[{}x{}]", s.k, s.n) : fmt::format("[{}x{}]^T", s.n, s.k), s.ldx,
                     s.ldw, s.ldy, s.batch);
}

}  // namespace

struct CublasLt::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) lt().cublasLtMatrixLayoutDestroy(a);
    if (b) lt().cublasLtMatrixLayoutDestroy(b);
    if (c) lt().cublasLtMatrixLayoutDestroy(c);
    if (desc) lt().cublasLtMatmulDescDestroy(desc);
  }
};

CublasLt::CublasLt(void* stream, void* workspace, int64_t workspace_bytes)
    : stream_(stream), workspace_(workspace), workspace_bytes_(workspace_bytes) {
  cublasLtHandle_t h = nullptr;
  check(lt().cublasLtCreate(&h), "create", "the handle");
  handle_ = h;
}

CublasLt::~CublasLt() {
  plans_.clear();
  if (handle_) lt().cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

CublasLt::Plan& CublasLt::plan(const GemmShape& s) {
  auto it = plans_.find(s.key());
  if (it != plans_.end()) return *it->second;
  const std::string what = describe(s);
  if (s.m < 1 || s.n < 1 || s.k < 1 || s.batch < 1)
    fail(ErrorCategory::kInternal, "GEMM {}: every dimension must be >= 1", what);
  const LtApi& a = lt();
  auto p = std::make_unique<Plan>();
  check(a.cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor", what);
  const cublasOperation_t ta = s.w_is_kn ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check(a.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa", what);
  check(a.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb", what);
  // A = W as stored: [N, K] row-major is column-major K x N; [K, N] row-major is N x K.
  const uint64_t a_rows = uint64_t(s.w_is_kn ? s.n : s.k), a_cols = uint64_t(s.w_is_kn ? s.k : s.n);
  check(a.cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, a_rows, a_cols, s.ldw), "layout A", what);
  check(a.cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, uint64_t(s.k), uint64_t(s.m), s.ldx), "layout B", what);
  check(a.cublasLtMatrixLayoutCreate(&p->c, s.y_f32 ? CUDA_R_32F : CUDA_R_16BF, uint64_t(s.n), uint64_t(s.m), s.ldy),
        "layout C", what);
  if (s.batch > 1) {
    const int32_t count = s.batch;
    for (auto [layout, stride] : {std::pair{p->a, s.stride_w}, std::pair{p->b, s.stride_x}, std::pair{p->c, s.stride_y}}) {
      check(a.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
            "batch count", what);
      check(a.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                               sizeof stride), "batch stride", what);
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  check(a.cublasLtMatmulPreferenceCreate(&pref), "preference", what);
  const uint64_t ws = uint64_t(workspace_bytes_);
  a.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const auto st = a.cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->a, p->b,
                                                   p->c, p->c, pref, 1, &result, &found);
  a.cublasLtMatmulPreferenceDestroy(pref);
  check(st, "heuristic", what);
  if (found < 1) fail(ErrorCategory::kBackend, "cuBLASLt has no algorithm for {}", what);
  p->algo = result.algo;
  return *plans_.emplace(s.key(), std::move(p)).first->second;
}

void CublasLt::run(const GemmShape& s, const void* x, const void* w, void* y, float alpha) {
  Plan& p = plan(s);
  const float beta = 0.0f;
  check(lt().cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.c,
                            y, p.c, &p.algo, workspace_, size_t(workspace_bytes_), static_cast<cudaStream_t>(stream_)),
        "matmul", describe(s));
}

#endif

}  // namespace thrive::model
