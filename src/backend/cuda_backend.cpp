#include "thrive/backend/cuda_backend.hpp"

#include "thrive/core/error.hpp"

#if THRIVE_HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "thrive/backend/embedded.hpp"
#include "thrive/backend/launch_expr.hpp"
#include "thrive/core/files.hpp"
#endif

namespace thrive::backend {

#if !THRIVE_HAVE_CUDA

bool cuda_compiled_in() { return false; }
bool cuda_probably_available(std::string* why) {
  if (why) *why = "this thrive was built without the CUDA toolkit";
  return false;
}
std::unique_ptr<Backend> make_cuda_backend(const config::Config&) {
  fail(ErrorCategory::kBackend, "device=cuda: this thrive was built without the CUDA toolkit "
       "(cuda.h, nvrtc.h); expected --device cpu");
}
NvrtcOutput nvrtc_compile(const std::string&, const std::string&) {
  fail(ErrorCategory::kBackend, "NVRTC: this thrive was built without the CUDA toolkit");
}

#else

namespace {

// Host mirror of ThriveCudaArgs in kernels/cuda/thrive_cuda.cuh (same layout).
struct ThriveCudaArgs {
  void* tensors[8];
  long long dims[8];
  double scalars[4];
  void* workspace;
  long long workspace_bytes;
};

// Driver and NVRTC entry points, resolved at run time.
struct Api {
  void* cuda_lib = nullptr;
#define THRIVE_CU_FN(name) decltype(&::name) name = nullptr;
  THRIVE_CU_FN(cuInit)
  THRIVE_CU_FN(cuDeviceGet)
  THRIVE_CU_FN(cuDeviceGetCount)
  THRIVE_CU_FN(cuDeviceGetName)
  THRIVE_CU_FN(cuDeviceGetAttribute)
  THRIVE_CU_FN(cuDriverGetVersion)
  THRIVE_CU_FN(cuDevicePrimaryCtxRetain)
  THRIVE_CU_FN(cuCtxSetCurrent)
  THRIVE_CU_FN(cuCtxSynchronize)
  THRIVE_CU_FN(cuModuleLoadData)
  THRIVE_CU_FN(cuModuleGetFunction)
  THRIVE_CU_FN(cuFuncGetAttribute)
  THRIVE_CU_FN(cuFuncSetAttribute)
  THRIVE_CU_FN(cuLaunchKernel)
  THRIVE_CU_FN(cuLaunchKernelEx)
  THRIVE_CU_FN(cuMemAlloc)
  THRIVE_CU_FN(cuMemFree)
  THRIVE_CU_FN(cuMemcpyHtoDAsync)
  THRIVE_CU_FN(cuMemcpyDtoHAsync)
  THRIVE_CU_FN(cuMemsetD8Async)
  THRIVE_CU_FN(cuMemcpyDtoDAsync)
  THRIVE_CU_FN(cuStreamCreate)
  THRIVE_CU_FN(cuStreamSynchronize)
  THRIVE_CU_FN(cuEventCreate)
  THRIVE_CU_FN(cuEventRecord)
  THRIVE_CU_FN(cuEventSynchronize)
  THRIVE_CU_FN(cuEventElapsedTime)
  THRIVE_CU_FN(cuGetErrorName)
  THRIVE_CU_FN(cuGetErrorString)
  THRIVE_CU_FN(cuOccupancyMaxActiveBlocksPerMultiprocessor)
  THRIVE_CU_FN(cuStreamBeginCapture)
  THRIVE_CU_FN(cuStreamEndCapture)
  THRIVE_CU_FN(cuGraphInstantiate)
  THRIVE_CU_FN(cuGraphLaunch)
  THRIVE_CU_FN(cuGraphUpload)
  THRIVE_CU_FN(cuGraphExecDestroy)
  THRIVE_CU_FN(cuGraphDestroy)
  THRIVE_CU_FN(cuMemGetInfo)
  THRIVE_CU_FN(cuEventDestroy)
#undef THRIVE_CU_FN
};

// NVRTC entry points, resolved at run time; needs no driver or GPU.
struct NvrtcApi {
  void* nvrtc_lib = nullptr;
#define THRIVE_CU_FN(name) decltype(&::name) name = nullptr;
  THRIVE_CU_FN(nvrtcCreateProgram)
  THRIVE_CU_FN(nvrtcCompileProgram)
  THRIVE_CU_FN(nvrtcGetProgramLogSize)
  THRIVE_CU_FN(nvrtcGetProgramLog)
  THRIVE_CU_FN(nvrtcGetCUBINSize)
  THRIVE_CU_FN(nvrtcGetCUBIN)
  THRIVE_CU_FN(nvrtcDestroyProgram)
  THRIVE_CU_FN(nvrtcGetErrorString)
  THRIVE_CU_FN(nvrtcVersion)
#undef THRIVE_CU_FN
};

const Api& api() {
  static Api a = [] {
    Api x;
    x.cuda_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!x.cuda_lib)
      fail(ErrorCategory::kBackend, "device=cuda: cannot load the NVIDIA driver library libcuda.so.1 "
           "({}); expected a machine with an NVIDIA GPU and driver", dlerror());
    using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
    auto get_proc = reinterpret_cast<GetProc>(dlsym(x.cuda_lib, "cuGetProcAddress_v2"));
    if (!get_proc)
      fail(ErrorCategory::kBackend, "device=cuda: libcuda.so.1 lacks cuGetProcAddress_v2; expected "
           "a driver for CUDA 12 or newer");
    auto load = [&](const char* name, void** slot) {
      CUdriverProcAddressQueryResult status;
      if (get_proc(name, slot, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
          *slot == nullptr)
        fail(ErrorCategory::kBackend, "device=cuda: the driver does not provide {} for CUDA {}", name,
             CUDA_VERSION);
    };
#define THRIVE_CU_LOAD(name) load(#name, reinterpret_cast<void**>(&x.name));
    THRIVE_CU_LOAD(cuInit) THRIVE_CU_LOAD(cuDeviceGet) THRIVE_CU_LOAD(cuDeviceGetCount)
    THRIVE_CU_LOAD(cuDeviceGetName) THRIVE_CU_LOAD(cuDeviceGetAttribute)
    THRIVE_CU_LOAD(cuDriverGetVersion) THRIVE_CU_LOAD(cuDevicePrimaryCtxRetain)
    THRIVE_CU_LOAD(cuCtxSetCurrent) THRIVE_CU_LOAD(cuCtxSynchronize) THRIVE_CU_LOAD(cuModuleLoadData)
    THRIVE_CU_LOAD(cuModuleGetFunction) THRIVE_CU_LOAD(cuFuncGetAttribute)
    THRIVE_CU_LOAD(cuFuncSetAttribute) THRIVE_CU_LOAD(cuLaunchKernel) THRIVE_CU_LOAD(cuLaunchKernelEx) THRIVE_CU_LOAD(cuMemAlloc)
    THRIVE_CU_LOAD(cuMemFree) THRIVE_CU_LOAD(cuMemcpyHtoDAsync) THRIVE_CU_LOAD(cuMemcpyDtoHAsync)
    THRIVE_CU_LOAD(cuMemsetD8Async) THRIVE_CU_LOAD(cuMemcpyDtoDAsync) THRIVE_CU_LOAD(cuStreamCreate) THRIVE_CU_LOAD(cuStreamSynchronize)
    THRIVE_CU_LOAD(cuEventCreate) THRIVE_CU_LOAD(cuEventRecord) THRIVE_CU_LOAD(cuEventSynchronize)
    THRIVE_CU_LOAD(cuEventElapsedTime) THRIVE_CU_LOAD(cuGetErrorName) THRIVE_CU_LOAD(cuGetErrorString)
    THRIVE_CU_LOAD(cuOccupancyMaxActiveBlocksPerMultiprocessor) THRIVE_CU_LOAD(cuStreamBeginCapture)
    THRIVE_CU_LOAD(cuStreamEndCapture) THRIVE_CU_LOAD(cuGraphLaunch) THRIVE_CU_LOAD(cuGraphUpload)
    // By its CUDA 12+ name: the proc-address table may map the bare name to the
    // five-argument CUDA 11 signature.
    load("cuGraphInstantiateWithFlags", reinterpret_cast<void**>(&x.cuGraphInstantiate));
    THRIVE_CU_LOAD(cuGraphExecDestroy) THRIVE_CU_LOAD(cuGraphDestroy)
    THRIVE_CU_LOAD(cuMemGetInfo) THRIVE_CU_LOAD(cuEventDestroy)
#undef THRIVE_CU_LOAD
    return x;
  }();
  return a;
}

const NvrtcApi& nvrtc_api() {
  static NvrtcApi a = [] {
    NvrtcApi x;
    for (const char* lib : {"libnvrtc.so.13", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"})
      if ((x.nvrtc_lib = dlopen(lib, RTLD_NOW | RTLD_GLOBAL))) break;
    if (!x.nvrtc_lib)
      fail(ErrorCategory::kBackend, "device=cuda: cannot load NVRTC (libnvrtc.so.13): {}", dlerror());
#define THRIVE_NVRTC_LOAD(name)                                                          \
  x.name = reinterpret_cast<decltype(x.name)>(dlsym(x.nvrtc_lib, #name));                \
  if (!x.name) fail(ErrorCategory::kBackend, "device=cuda: NVRTC lacks {}", #name);
    THRIVE_NVRTC_LOAD(nvrtcCreateProgram) THRIVE_NVRTC_LOAD(nvrtcCompileProgram)
    THRIVE_NVRTC_LOAD(nvrtcGetProgramLogSize) THRIVE_NVRTC_LOAD(nvrtcGetProgramLog)
    THRIVE_NVRTC_LOAD(nvrtcGetCUBINSize) THRIVE_NVRTC_LOAD(nvrtcGetCUBIN)
    THRIVE_NVRTC_LOAD(nvrtcDestroyProgram) THRIVE_NVRTC_LOAD(nvrtcGetErrorString)
    THRIVE_NVRTC_LOAD(nvrtcVersion)
#undef THRIVE_NVRTC_LOAD
    return x;
  }();
  return a;
}

// Every embedded kernels/cuda/*.cuh, by file name: the ABI header and the eager helpers.
const std::vector<std::pair<std::string, std::string>>& nvrtc_headers() {
  static const auto headers = [] {
    std::vector<std::pair<std::string, std::string>> h;
    for (const auto& path : embedded_paths("cuda/"))
      if (path.size() > 4 && path.compare(path.size() - 4, 4, ".cuh") == 0 &&
          path.find('/', 5) == std::string::npos)
        h.emplace_back(path.substr(5), embedded_file(path));
    return h;
  }();
  return headers;
}

std::vector<std::string> nvrtc_options(const std::string& arch) {
  return {"--gpu-architecture=" + arch, "-std=c++17", "-lineinfo", "--ptxas-options=-v"};
}

std::string cu_error(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  api().cuGetErrorName(r, &name);
  api().cuGetErrorString(r, &text);
  return fmt::format("{} ({})", name ? name : "?", text ? text : "?");
}

// Driver calls outside a candidate's control: failure is an infrastructure error.
#define THRIVE_CU_CHECK(call)                                                                  \
  do {                                                                                        \
    CUresult thrive_rc_ = (call);                                                             \
    if (thrive_rc_ != CUDA_SUCCESS)                                                           \
      ::thrive::fail(::thrive::ErrorCategory::kBackend, "{}:{}: {} failed: {}", __FILE__,     \
                     __LINE__, #call, cu_error(thrive_rc_));                                  \
  } while (0)

// Calls that report a candidate's asynchronous fault (sticky context errors).
#define THRIVE_CU_CHECK_DEVICE(call)                                                           \
  do {                                                                                        \
    CUresult thrive_rc_ = (call);                                                             \
    if (thrive_rc_ != CUDA_SUCCESS)                                                           \
      ::thrive::fail(::thrive::ErrorCategory::kDevice, "device fault: {} (in {})",            \
                     cu_error(thrive_rc_), #call);                                            \
  } while (0)

class CudaModule final : public Module {
 public:
  CUmodule module = nullptr;
  std::vector<CUfunction> functions;      // one per launch, in launch order
  std::vector<LaunchSpec> launches;
  std::map<std::string, int64_t> params;  // numeric template params for launch exprs
  std::vector<int> max_threads;           // per launch function
  std::vector<int64_t> static_smem;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const config::Config& cfg) : cfg_(cfg) {
    const Api& a = api();
    THRIVE_CU_CHECK(a.cuInit(0));
    int count = 0;
    THRIVE_CU_CHECK(a.cuDeviceGetCount(&count));
    if (count == 0) fail(ErrorCategory::kBackend, "device=cuda: no CUDA device found");
    THRIVE_CU_CHECK(a.cuDeviceGet(&device_, 0));
    THRIVE_CU_CHECK(a.cuDevicePrimaryCtxRetain(&context_, device_));
    THRIVE_CU_CHECK(a.cuCtxSetCurrent(context_));
    THRIVE_CU_CHECK(a.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    THRIVE_CU_CHECK(a.cuEventCreate(&start_, CU_EVENT_DEFAULT));
    THRIVE_CU_CHECK(a.cuEventCreate(&stop_, CU_EVENT_DEFAULT));
    char name[256] = {};
    THRIVE_CU_CHECK(a.cuDeviceGetName(name, sizeof name, device_));
    auto attr = [&](CUdevice_attribute at) {
      int v = 0;
      THRIVE_CU_CHECK(a.cuDeviceGetAttribute(&v, at, device_));
      return v;
    };
    const int major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    cc_major_ = major;
    const int minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    sms_ = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    max_threads_per_block_ = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    max_threads_per_sm_ = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    max_smem_optin_ = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    max_grid_[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
    max_grid_[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
    max_grid_[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
    int driver = 0, nv_major = 0, nv_minor = 0;
    THRIVE_CU_CHECK(a.cuDriverGetVersion(&driver));
    nvrtc_api().nvrtcVersion(&nv_major, &nv_minor);
    arch_ = fmt::format("sm_{}{}", major, minor);
    nvrtc_version_ = fmt::format("{}.{}", nv_major, nv_minor);
    device_info_.backend = "cuda";
    device_info_.name = name;
    device_info_.arch = arch_;
    device_info_.driver = fmt::format("driver {}.{}, nvrtc {}, sm clock {} MHz, mem clock {} MHz",
                                      driver / 1000, (driver % 1000) / 10, nvrtc_version_,
                                      attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000,
                                      attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) / 1000);
    device_info_.compute_units = sms_;
    device_info_.smem_per_block_optin = max_smem_optin_;
    device_info_.cache_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    cache_dir_ = cfg.home + "/cache/cuda";
    ensure_writable_dir(cache_dir_, "THRIVE_HOME");
  }

  const DeviceInfo& device() const override { return device_info_; }

  CompileResult compile(const KernelSource& kernel) override {
    CompileResult result;
    if (kernel.backend != "cuda") {
      result.log = "kernel backend is '" + kernel.backend + "': the cuda backend compiles cuda kernels";
      return result;
    }
    // NVRTC would read any file an #include names and quote it in the log (untrusted source)
    if (std::string why = include_policy_violation(kernel.source, false); !why.empty()) {
      result.log = "refused before compiling: " + why;
      return result;
    }
    const Api& a = api();
    const std::vector<std::string> options = nvrtc_options(arch_);
    std::string key_material = kernel.source + "|" + arch_ + "|nvrtc " + nvrtc_version_;
    for (const auto& o : options) key_material += " " + o;
    for (const auto& [name, text] : nvrtc_headers()) key_material += name + text;
    const std::string key = fnv1a_hex(key_material);
    const std::string cubin_path = cache_dir_ + "/" + key + ".cubin";
    const std::string log_path = cache_dir_ + "/" + key + ".log";
    std::string cubin;
    if (std::filesystem::exists(cubin_path)) {
      result.cached = true;
      cubin = read_file(cubin_path);
      if (std::filesystem::exists(log_path)) result.log = read_file(log_path);
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      auto nv = nvrtc_compile(kernel.source, arch_);
      result.log = nv.log;
      result.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!nv.ok) return result;
      cubin = std::move(nv.cubin);
      const std::string& log = nv.log;
      write_file_atomic(log_path, log);
      write_file_atomic(cubin_path, cubin);
    }
    auto m = std::make_shared<CudaModule>();
    CUresult rc = a.cuModuleLoadData(&m->module, cubin.data());
    if (rc != CUDA_SUCCESS) {
      result.log += "\ncuModuleLoadData failed: " + cu_error(rc);
      return result;
    }
    for (const auto& [k, v] : kernel.params) {
      char* end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (end && *end == '\0' && !v.empty()) m->params[k] = n;
    }
    m->launches = kernel.launches;
    for (const auto& l : kernel.launches) {
      CUfunction f = nullptr;
      rc = a.cuModuleGetFunction(&f, m->module, l.entry.c_str());
      if (rc != CUDA_SUCCESS) {
        result.log += "\nentry '" + l.entry + "' not found in the module (declare it extern \"C\" "
                      "__global__): " + cu_error(rc);
        return result;
      }
      int regs = 0, local = 0, smem = 0, max_threads = 0;
      a.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
      a.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f);
      a.cuFuncGetAttribute(&smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f);
      a.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
      m->functions.push_back(f);
      m->max_threads.push_back(max_threads);
      m->static_smem.push_back(smem);
      m->stats.registers_per_thread = std::max(m->stats.registers_per_thread, regs);
      m->stats.static_smem_bytes = std::max<int64_t>(m->stats.static_smem_bytes, smem);
      m->stats.spilled_bytes = std::max<int64_t>(m->stats.spilled_bytes, local);
    }
    // Spill stores as ptxas reports them (-v), summed over entries.
    static const std::regex spill(R"((\d+) bytes spill stores)");
    int64_t spills = 0;
    for (auto it = std::sregex_iterator(result.log.begin(), result.log.end(), spill);
         it != std::sregex_iterator(); ++it)
      spills += std::stoll((*it)[1]);
    m->stats.spilled_bytes = std::max(m->stats.spilled_bytes, spills);
    // Shape-free facts now (a plan whose block or smem needs shape symbols gets them from
    // shape_stats once the shape is known).
    plan_stats(*m, m->params, m->stats);
    result.module = m;
    return result;
  }

  void shape_stats(const Module& module, const std::map<std::string, int64_t>& symbols,
                   KernelStats& stats) override {
    const auto& m = static_cast<const CudaModule&>(module);
    auto vars = m.params;
    for (const auto& [k, v] : symbols) vars[k] = v;
    plan_stats(m, vars, stats);
  }

  // Dynamic shared memory (most over the launches) and the first launch's occupancy
  // (cuOccupancyMaxActiveBlocksPerMultiprocessor x block / threads per SM) with `vars`;
  // figures whose expressions need names `vars` lacks stay as they were.
  void plan_stats(const CudaModule& m, std::map<std::string, int64_t> vars, KernelStats& stats) {
    vars["SMS"] = sms_;
    int64_t dyn_max = -1;
    for (const auto& l : m.launches) {
      try {
        dyn_max = std::max(dyn_max, eval_launch_expr(l.smem, vars));
      } catch (const Error&) {
        dyn_max = -1;
        break;
      }
    }
    if (dyn_max >= 0) stats.dynamic_smem_bytes = dyn_max;
    try {
      const int64_t block = eval_launch_expr(m.launches[0].block, vars);
      const int64_t dyn = eval_launch_expr(m.launches[0].smem, vars);
      int blocks = 0;
      if (block > 0 && block <= max_threads_per_block_ && dyn >= 0 &&
          api().cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, m.functions[0], int(block),
                                                            size_t(dyn)) == CUDA_SUCCESS)
        stats.occupancy = double(blocks * block) / double(max_threads_per_sm_);
    } catch (const Error&) {
    }
  }

  void* allocate(int64_t bytes) override {
    CUdeviceptr p = 0;
    CUresult rc = api().cuMemAlloc(&p, size_t(std::max<int64_t>(bytes, 1)));
    if (rc != CUDA_SUCCESS)
      fail(rc == CUDA_ERROR_OUT_OF_MEMORY ? ErrorCategory::kBackend : ErrorCategory::kDevice,
           "cuMemAlloc({} bytes) failed: {}", bytes, cu_error(rc));
    return reinterpret_cast<void*>(p);
  }
  void release(void* ptr) override { api().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr)); }
  void upload(void* dst, const void* src, int64_t bytes) override {
    THRIVE_CU_CHECK_DEVICE(api().cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, size_t(bytes), stream_));
    synchronize();
  }
  void download(void* dst, const void* src, int64_t bytes) override {
    synchronize();
    THRIVE_CU_CHECK_DEVICE(api().cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), size_t(bytes), stream_));
    synchronize();
  }
  void copy_device(void* dst, const void* src, int64_t bytes) override {
    THRIVE_CU_CHECK_DEVICE(api().cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst),
                                                   reinterpret_cast<CUdeviceptr>(src), size_t(bytes), stream_));
  }
  void memset(void* dst, uint8_t value, int64_t bytes) override {
    THRIVE_CU_CHECK_DEVICE(api().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(dst), value, size_t(bytes), stream_));
    synchronize();
  }

  int launch(const Module& module, const LaunchArgs& args) override {
    const auto& m = static_cast<const CudaModule&>(module);
    last_error_.clear();
    ThriveCudaArgs packed{};
    if (args.tensors.size() > 8 || args.dims.size() > 8 || args.scalars.size() > 4) {
      last_error_ = "too many tensors/dims/scalars for ThriveCudaArgs (8/8/4)";
      return 2;
    }
    for (size_t i = 0; i < args.tensors.size(); ++i) packed.tensors[i] = args.tensors[i];
    for (size_t i = 0; i < args.dims.size(); ++i) packed.dims[i] = args.dims[i];
    for (size_t i = 0; i < args.scalars.size(); ++i) packed.scalars[i] = args.scalars[i];
    packed.workspace = args.workspace;
    packed.workspace_bytes = args.workspace_bytes;
    auto vars = m.params;
    for (const auto& [k, v] : args.symbols) vars[k] = v;
    vars["SMS"] = sms_;
    void* params[] = {&packed};
    for (size_t i = 0; i < m.launches.size(); ++i) {
      const auto& l = m.launches[i];
      int64_t block = 0, smem = 0, grid[3] = {0, 0, 0};
      try {
        block = eval_launch_expr(l.block, vars);
        smem = eval_launch_expr(l.smem, vars);
        for (int d = 0; d < 3; ++d) grid[d] = eval_launch_expr(l.grid[d], vars);
      } catch (const Error& e) {
        last_error_ = e.what();
        return 3;
      }
      const int64_t max_block = std::min<int64_t>(max_threads_per_block_, m.max_threads[i]);
      if (block < 1 || block > max_block) {
        last_error_ = fmt::format("launch {} ({}): block {} threads outside [1, {}] (device and "
                                  "kernel limit)", i, l.entry, block, max_block);
        return 4;
      }
      const int64_t max_dyn = max_smem_optin_ - m.static_smem[i];
      if (smem < 0 || smem > max_dyn) {
        last_error_ = fmt::format("launch {} ({}): {} bytes of dynamic shared memory exceed the "
                                  "device limit of {} bytes ({} opt-in minus {} static)",
                                  i, l.entry, smem, max_dyn, max_smem_optin_, m.static_smem[i]);
        return 4;
      }
      bool empty = false;
      for (int d = 0; d < 3; ++d) {
        if (grid[d] > max_grid_[d] || grid[d] < 0) {
          last_error_ = fmt::format("launch {} ({}): grid dimension {} = {} outside [0, {}]", i,
                                    l.entry, d, grid[d], max_grid_[d]);
          return 4;
        }
        empty = empty || grid[d] == 0;
      }
      if (empty) continue;  // nothing to do at this shape (e.g. a zero-size split)
      if (smem + m.static_smem[i] > 48 * 1024)  // past the default limit: opt in (static counts too)
        api().cuFuncSetAttribute(m.functions[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem));
      CUresult rc;
      if (args.programmatic && cc_major_ >= 9) {
        CUlaunchAttribute attr{};
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig cfg{};
        cfg.gridDimX = unsigned(grid[0]);
        cfg.gridDimY = unsigned(grid[1]);
        cfg.gridDimZ = unsigned(grid[2]);
        cfg.blockDimX = unsigned(block);
        cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.sharedMemBytes = unsigned(smem);
        cfg.hStream = stream_;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        rc = api().cuLaunchKernelEx(&cfg, m.functions[i], params, nullptr);
      } else {
        rc = api().cuLaunchKernel(m.functions[i], unsigned(grid[0]), unsigned(grid[1]), unsigned(grid[2]),
                                  unsigned(block), 1, 1, unsigned(smem), stream_, params, nullptr);
      }
      if (rc != CUDA_SUCCESS) {
        last_error_ = fmt::format("launch {} ({}) failed: {}", i, l.entry, cu_error(rc));
        return 5;
      }
    }
    return 0;
  }

  void synchronize() override { THRIVE_CU_CHECK_DEVICE(api().cuStreamSynchronize(stream_)); }

  double time_us(const std::function<void()>& body) override {
    THRIVE_CU_CHECK_DEVICE(api().cuEventRecord(start_, stream_));
    body();
    THRIVE_CU_CHECK_DEVICE(api().cuEventRecord(stop_, stream_));
    THRIVE_CU_CHECK_DEVICE(api().cuEventSynchronize(stop_));
    float ms = 0;
    THRIVE_CU_CHECK_DEVICE(api().cuEventElapsedTime(&ms, start_, stop_));
    return double(ms) * 1000.0;
  }

  double time_graph_us(const std::function<void()>& body, int calls) override {
    const Api& a = api();
    synchronize();
    if (a.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS) return 0;
    body();
    CUgraph graph = nullptr;
    if (a.cuStreamEndCapture(stream_, &graph) != CUDA_SUCCESS || graph == nullptr) return 0;
    CUgraphExec exec = nullptr;
    if (a.cuGraphInstantiate(&exec, graph, 0) != CUDA_SUCCESS) {
      a.cuGraphDestroy(graph);
      return 0;
    }
    THRIVE_CU_CHECK_DEVICE(a.cuGraphLaunch(exec, stream_));  // warm: upload the graph
    synchronize();
    double us = time_us([&] { THRIVE_CU_CHECK_DEVICE(a.cuGraphLaunch(exec, stream_)); });
    a.cuGraphExecDestroy(exec);
    a.cuGraphDestroy(graph);
    return us / calls;
  }

  std::string last_error() const override { return last_error_; }

  void* native_stream() override { return stream_; }

  class CudaGraph final : public Graph {
   public:
    CudaGraph(CUgraph g, CUgraphExec e, CUstream s) : graph_(g), exec_(e), stream_(s) {}
    ~CudaGraph() override {
      api().cuGraphExecDestroy(exec_);
      api().cuGraphDestroy(graph_);
    }
    void replay() override { THRIVE_CU_CHECK_DEVICE(api().cuGraphLaunch(exec_, stream_)); }
    void upload() override { THRIVE_CU_CHECK_DEVICE(api().cuGraphUpload(exec_, stream_)); }

   private:
    CUgraph graph_;
    CUgraphExec exec_;
    CUstream stream_;
  };

  std::unique_ptr<Graph> capture_graph(const std::function<void()>& body) override {
    const Api& a = api();
    synchronize();
    if (a.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) != CUDA_SUCCESS) return nullptr;
    try {
      body();
    } catch (...) {
      CUgraph g = nullptr;
      a.cuStreamEndCapture(stream_, &g);
      if (g) a.cuGraphDestroy(g);
      throw;
    }
    CUgraph graph = nullptr;
    if (a.cuStreamEndCapture(stream_, &graph) != CUDA_SUCCESS || graph == nullptr) return nullptr;
    CUgraphExec exec = nullptr;
    if (a.cuGraphInstantiate(&exec, graph, 0) != CUDA_SUCCESS) {
      a.cuGraphDestroy(graph);
      return nullptr;
    }
    return std::make_unique<CudaGraph>(graph, exec, stream_);
  }

  class EventTimeline final : public Timeline {
   public:
    EventTimeline(int capacity, CUstream stream) : stream_(stream) {
      events_.resize(size_t(std::max(capacity, 2)));
      for (auto& e : events_) THRIVE_CU_CHECK(api().cuEventCreate(&e, CU_EVENT_DEFAULT));
    }
    ~EventTimeline() override {
      for (auto e : events_) api().cuEventDestroy(e);
    }
    void mark() override {
      if (used_ >= events_.size())
        fail(ErrorCategory::kInternal, "timeline: more than {} marks before intervals_us()", events_.size());
      THRIVE_CU_CHECK_DEVICE(api().cuEventRecord(events_[used_++], stream_));
    }
    std::vector<double> intervals_us() override {
      std::vector<double> out;
      if (used_ > 0) THRIVE_CU_CHECK_DEVICE(api().cuEventSynchronize(events_[used_ - 1]));
      for (size_t i = 1; i < used_; ++i) {
        float ms = 0;
        THRIVE_CU_CHECK_DEVICE(api().cuEventElapsedTime(&ms, events_[i - 1], events_[i]));
        out.push_back(double(ms) * 1000.0);
      }
      used_ = 0;
      return out;
    }

   private:
    CUstream stream_;
    std::vector<CUevent> events_;
    size_t used_ = 0;
  };

  std::unique_ptr<Timeline> make_timeline(int capacity) override {
    return std::make_unique<EventTimeline>(capacity, stream_);
  }

  int64_t device_memory_used() const override {
    size_t free_b = 0, total_b = 0;
    if (api().cuMemGetInfo(&free_b, &total_b) != CUDA_SUCCESS) return -1;
    return int64_t(total_b - free_b);
  }

 private:
  config::Config cfg_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr, stop_ = nullptr;
  DeviceInfo device_info_;
  std::string arch_, nvrtc_version_, cache_dir_, last_error_;
  int cc_major_ = 0;  // compute capability major (programmatic launches need 9)
  int sms_ = 0, max_threads_per_block_ = 1024, max_threads_per_sm_ = 2048, max_smem_optin_ = 0;
  int max_grid_[3] = {0, 0, 0};
};

}  // namespace

bool cuda_compiled_in() { return true; }

bool cuda_probably_available(std::string* why) {
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!lib) {
    if (why) *why = std::string("cannot load libcuda.so.1 (") + dlerror() + ")";
    return false;
  }
  dlclose(lib);
  if (!std::filesystem::exists("/dev/nvidiactl") && !std::filesystem::exists("/dev/nvidia0")) {
    if (why) *why = "no NVIDIA device node (/dev/nvidiactl)";
    return false;
  }
  return true;
}

std::unique_ptr<Backend> make_cuda_backend(const config::Config& cfg) {
  return std::make_unique<CudaBackend>(cfg);
}

NvrtcOutput nvrtc_compile(const std::string& source, const std::string& arch) {
  const NvrtcApi& a = nvrtc_api();
  NvrtcOutput out;
  nvrtcProgram prog = nullptr;
  std::vector<const char*> header_src, header_name;
  for (const auto& [name, text] : nvrtc_headers()) {
    header_name.push_back(name.c_str());
    header_src.push_back(text.c_str());
  }
  if (a.nvrtcCreateProgram(&prog, source.c_str(), "candidate.cu", int(header_src.size()),
                           header_src.data(), header_name.data()) != NVRTC_SUCCESS) {
    out.log = "nvrtcCreateProgram failed";
    return out;
  }
  std::vector<std::string> options = nvrtc_options(arch);
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  const nvrtcResult rc = a.nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  size_t log_size = 0;
  a.nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) a.nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && log.back() == '\0') log.pop_back();
  out.log = log;
  if (rc != NVRTC_SUCCESS) {
    out.log = std::string("NVRTC: ") + a.nvrtcGetErrorString(rc) + "\n" + log;
    a.nvrtcDestroyProgram(&prog);
    return out;
  }
  size_t size = 0;
  a.nvrtcGetCUBINSize(prog, &size);
  out.cubin.resize(size);
  a.nvrtcGetCUBIN(prog, out.cubin.data());
  a.nvrtcDestroyProgram(&prog);
  out.ok = true;
  return out;
}

#endif

}  // namespace thrive::backend
