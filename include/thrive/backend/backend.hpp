// Backend: the one interface between THRIVE and a device.
//
// It compiles a KernelSource into a Module, allocates device memory, copies,
// launches a module by its launch plan, times a region, and describes the device.
// `cpu` compiles C++ with the host compiler into a shared object and dlopens it;
// `cuda` (next issue) compiles with NVRTC and launches through the driver API.
// Verification and benchmarking are written against this interface only, so both
// backends share one correctness and timing protocol.
//
// A faulting candidate can corrupt the process (CPU) or the context (CUDA), so a
// Backend is meant to live inside a sandbox worker process (see sandbox/).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "thrive/backend/kernel.hpp"
#include "thrive/config/config.hpp"

namespace thrive::backend {

/// What a device is; `key()` identifies it in memory (peak bandwidth, best kernels).
struct DeviceInfo {
  std::string backend;        ///< "cpu" or "cuda"
  std::string name;           ///< CPU model name or GPU name
  std::string arch;           ///< e.g. "x86_64-avx2" or "sm_90"
  std::string driver;         ///< compiler version (cpu) or driver version (cuda)
  int compute_units = 0;      ///< cores granted (cpu) or SMs (cuda)
  int64_t cache_bytes = 0;    ///< last-level cache (cpu L3, cuda L2), bytes
  /// cuda: shared memory one block may use after opting in (the driver's
  /// MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: 232,448 bytes on the H100/H200), bytes; cpu: 0.
  int64_t smem_per_block_optin = 0;
  /// What the backend's allocations can hold in all, bytes: cpu the shared arena's capacity
  /// (half of the worker's memory limit, THRIVE_WORKER_MEMORY_MB or half of RAM); cuda 0 (not
  /// tracked: the device's memory is far above what the benchmarks allocate).
  int64_t memory_bytes = 0;
  /// "<backend>:<name>:<arch>" with spaces replaced, e.g. "cpu:AMD_EPYC:x86_64-avx2".
  std::string key() const;
};

/// Compiler and launch facts the analyst reads (CUDA fills them; the CPU backend leaves
/// zeros). Registers and spills are the most over the plan's entries; shared memory in bytes.
struct KernelStats {
  int registers_per_thread = 0;
  int64_t spilled_bytes = 0;
  int64_t static_smem_bytes = 0;
  int64_t dynamic_smem_bytes = 0;  ///< most over the launches at the benchmark shape (0: none/unknown)
  double occupancy = 0.0;     ///< first launch: resident threads per SM / the SM's maximum, 0 when unknown
};

/// A loaded, launchable kernel. Owned by the backend that made it.
class Module {
 public:
  virtual ~Module() = default;
  KernelStats stats;
};

/// Result of compiling: `module` is null when compilation failed; `log` always holds
/// the compiler's output (the full error text on failure).
struct CompileResult {
  std::shared_ptr<Module> module;
  std::string log;
  bool cached = false;
  double compile_s = 0.0;     ///< seconds spent compiling (0 on a cache hit)
  /// What confines the candidate's code ("" when nothing does): see isolate_candidates().
  std::string confinement;
};

/// Arguments of one call of a kernel: device pointers in the op's ABI order,
/// dims[] and scalars[] in the op's order, a scratch workspace.
struct LaunchArgs {
  std::map<std::string, int64_t> symbols;  ///< shape symbol values (launch-plan grids)
  std::vector<void*> tensors;
  std::vector<int64_t> dims;
  std::vector<double> scalars;
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  /// cuda: launch with programmatic dependent launch (the driver's
  /// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; sm_90, CUDA Programming Guide
  /// "Programmatic Dependent Launch"): the kernel may start before the previous kernel on the
  /// stream finishes. Only for kernels that execute `griddepcontrol.wait` before they read or
  /// write anything an earlier kernel touches (the engine's own kernels); never for candidate
  /// kernels. Ignored by the cpu backend and on devices below sm_90.
  bool programmatic = false;
};

/// How candidate host code is kept apart from THRIVE (Backend::isolate_candidates).
struct CandidateIsolation {
  /// Confine the candidate's process (sandbox::confine_candidate: seccomp, Landlock, address-space
  /// limit, inherited descriptors closed). Off only in tests of the process split itself.
  bool confine = true;
  int64_t memory_limit_mb = 0;         ///< its address-space limit, MiB; 0 = half of physical memory
  std::vector<std::string> readable;   ///< what Landlock lets it read (sandbox::candidate_readable_paths)
  std::string program;                 ///< the executor program; "" = CpuExecutor::find_program's search
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& device() const = 0;
  /// Compiles (or fetches from the compile cache) `kernel`. Never throws for a
  /// kernel's own errors: those come back as a null module with the log.
  virtual CompileResult compile(const KernelSource& kernel) = 0;
  /// Device memory, 64-byte aligned at least. Throws Error(kBackend) on failure.
  virtual void* allocate(int64_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  virtual void upload(void* device_dst, const void* host_src, int64_t bytes) = 0;
  virtual void download(void* host_dst, const void* device_src, int64_t bytes) = 0;
  virtual void memset(void* device_dst, uint8_t value, int64_t bytes) = 0;
  /// Device-to-device copy of `bytes` with the platform's own routine (cuda: the driver's
  /// cuMemcpyDtoDAsync on the launch stream, asynchronous like a launch; cpu: std::memcpy).
  /// Used as a second bandwidth ceiling next to THRIVE's copy kernel. Throws Error(kDevice).
  virtual void copy_device(void* device_dst, const void* device_src, int64_t bytes) = 0;
  /// Runs the kernel's launch plan once (asynchronously on cuda). Returns 0 or the
  /// kernel's non-zero status (cpu: the entry's return value).
  virtual int launch(const Module& module, const LaunchArgs& args) = 0;
  /// Waits for all work issued so far.
  virtual void synchronize() = 0;
  /// Time of `body` on the device in microseconds (cpu: steady_clock around the
  /// synchronous body; cuda: events recorded on the launch stream).
  virtual double time_us(const std::function<void()>& body) = 0;
  /// Per-call time in microseconds when `body` (which issues `calls` launches) is
  /// captured once into a CUDA graph and replayed, so launch overhead is excluded.
  /// Backends without graphs time the body directly. Returns 0 when capture fails.
  virtual double time_graph_us(const std::function<void()>& body, int calls) {
    return time_us(body) / calls;
  }
  /// Fills the shape-dependent facts of `stats` (dynamic shared memory, occupancy) for a
  /// launch plan evaluated at `symbols` (an op shape). Leaves `stats` alone where the
  /// backend has no such facts or the plan does not evaluate there. Never throws.
  virtual void shape_stats(const Module& module, const std::map<std::string, int64_t>& symbols,
                           KernelStats& stats) {
    (void)module;
    (void)symbols;
    (void)stats;
  }
  /// From now on, candidate host code runs in a process of its own, never in this one (cpu:
  /// each compiled module gets an executor process, exec'd from the thrive-cpu-executor program
  /// with none of this process's memory, that confines itself as `isolation` says before the
  /// candidate is loaded: see cpu_executor.hpp; CompileResult::confinement says what applied).
  /// The sandbox's workers turn this on. Backends whose candidates are device code (cuda) never
  /// run a candidate's host code and ignore it. Throws Error(kBackend) (cpu) when the executor
  /// program cannot be found (CpuExecutor::find_program).
  virtual void isolate_candidates(const CandidateIsolation& isolation) { (void)isolation; }
  /// The native stream every launch, copy and timer of this backend uses (cuda: a CUstream),
  /// so host libraries (cuBLASLt) can queue work in the same order; nullptr on the cpu.
  virtual void* native_stream() { return nullptr; }

  /// A captured sequence of stream work (a CUDA graph), replayed as one launch.
  class Graph {
   public:
    virtual ~Graph() = default;
    /// Queues one replay on the backend's stream. Throws Error(kDevice) on a fault.
    virtual void replay() = 0;
    /// Queues the upload of the graph's work to the device (CUDA: cuGraphUpload), which the first
    /// replay does otherwise, so that a timed replay costs what later ones do. Throws
    /// Error(kDevice) on a fault; a no-op where the backend has nothing to upload.
    virtual void upload() {}
  };
  /// Captures everything `body` queues on the stream (launches, copies, cuBLASLt calls) into a
  /// graph, without running it. nullptr when the backend has no graphs (cpu) or capture failed.
  virtual std::unique_ptr<Graph> capture_graph(const std::function<void()>& body) {
    (void)body;
    return nullptr;
  }

  /// Events recorded on the stream between pieces of work, read after they complete: the
  /// per-stage GPU time of a step without synchronizing between stages.
  class Timeline {
   public:
    virtual ~Timeline() = default;
    /// Records a point on the stream (cpu: now). At most the capacity given at creation.
    virtual void mark() = 0;
    /// Waits for the last mark, then returns the µs between consecutive marks (marks - 1
    /// values), and forgets the marks.
    virtual std::vector<double> intervals_us() = 0;
  };
  /// A timeline for up to `capacity` marks per interval read (cpu: steady_clock).
  virtual std::unique_ptr<Timeline> make_timeline(int capacity);

  /// Device memory in use on the whole device, bytes (cuda: total - free from the driver), or
  /// -1 when unknown (cpu).
  virtual int64_t device_memory_used() const { return -1; }

  /// Why the last launch returned non-zero (e.g. "block 2048 > 1024 threads"), "" if
  /// it did not.
  virtual std::string last_error() const { return ""; }
};

/// Builds the backend `name` ("cpu", "cuda", or "auto": cuda when a GPU is present,
/// else cpu). Throws Error(kUsage) for unknown names and Error(kBackend) when cuda is
/// requested but unavailable in this build or on this machine.
std::unique_ptr<Backend> make_backend(const std::string& name, const config::Config& cfg);

/// Resolves "auto" to the backend make_backend would pick, without creating one
/// (safe to call in a parent process before forking workers).
std::string resolve_backend_name(const std::string& name);

}  // namespace thrive::backend
