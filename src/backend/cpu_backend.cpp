#include "thrive/backend/cpu_backend.hpp"

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "kernels/cpu/thrive_cpu.h"
#include "thrive/backend/embedded.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"
#include "thrive/core/process.hpp"

namespace thrive::backend {
namespace {

using EntryFn = int (*)(const ThriveArgs*);

class CpuModule final : public Module {
 public:
  CpuModule(void* handle, EntryFn entry) : handle_(handle), entry_(entry) {}
  explicit CpuModule(std::unique_ptr<CpuExecutor> executor) : executor_(std::move(executor)) {}
  // dlclose is skipped on purpose: a candidate may leave OpenMP threads or atexit
  // handlers that reference its code; the worker process exits soon anyway.
  EntryFn entry() const { return entry_; }
  CpuExecutor* executor() const { return executor_.get(); }

 private:
  void* handle_ = nullptr;
  EntryFn entry_ = nullptr;
  std::unique_ptr<CpuExecutor> executor_;  // isolated: the candidate lives in this process
};

// Half of the worker's address-space limit: THRIVE_WORKER_MEMORY_MB, else half of RAM, and
// never more than half of an RLIMIT_AS already in force.
int64_t arena_bytes(const config::Config& cfg) {
  int64_t limit = cfg.worker_memory_mb > 0 ? cfg.worker_memory_mb << 20
                                           : int64_t(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / 2;
  rlimit cur{};
  if (getrlimit(RLIMIT_AS, &cur) == 0 && cur.rlim_cur != RLIM_INFINITY) limit = std::min(limit, int64_t(cur.rlim_cur));
  return std::max<int64_t>(limit / 2, 64 << 20);
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(line.find_first_not_of(' ', pos + 1));
    }
  return "unknown-cpu";
}

std::string cpu_arch() {
  std::string arch =
#if defined(__x86_64__)
      "x86_64";
#elif defined(__aarch64__)
      "aarch64";
#else
      "unknown";
#endif
  __builtin_cpu_init();
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return arch + "-avx512";
  if (__builtin_cpu_supports("avx2")) return arch + "-avx2";
#endif
  return arch;
}

int64_t llc_bytes() {
  for (int index = 4; index >= 0; --index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string s;
    if (in >> s && !s.empty()) {
      int64_t v = std::atoll(s.c_str());
      char unit = s.back();
      if (unit == 'K') v <<= 10;
      if (unit == 'M') v <<= 20;
      if (v > 0) return v;
    }
  }
  return 32ll << 20;
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// `dir` with links, "." and ".." resolved, and a trailing "/" (a prefix that matches only inside it)
std::string resolved_dir(const std::string& dir) {
  std::error_code ec;
  const auto r = std::filesystem::weakly_canonical(dir, ec);
  std::string s = (ec ? std::filesystem::path(dir) : r).string();
  return s.empty() || s.back() != '/' ? s + "/" : s;
}

// The files a make-style dependency list (`-M -MF`) names: its words after the target, with
// escaped spaces joined back.
std::vector<std::string> dependency_files(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  bool target = true;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ' ';
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == ' ') {
      word += ' ';
      ++i;
    } else if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      continue;
    } else if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      if (!word.empty() && !target) out.push_back(word);
      if (!word.empty() && word.back() == ':') target = false;
      word.clear();
    } else {
      word += c;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> CpuBackend::compile_flags() {
  // -fno-diagnostics-show-caret: a diagnostic never quotes a source line, which GCC reads from
  // whatever file a `#line N "FILE"` names (an untrusted kernel could name any file)
  return {"-std=c++20", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared",
          "-fvisibility=hidden", "-Wall", "-fno-diagnostics-show-caret"};
}

CpuBackend::CpuBackend(const config::Config& cfg) : cfg_(cfg) {
  threads_ = cfg.threads > 0 ? cfg.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  cache_dir_ = cfg.home + "/cache/cpu";
  ensure_writable_dir(cache_dir_, "THRIVE_HOME");
  write_file_atomic(cache_dir_ + "/include/thrive_cpu.h", embedded_file("cpu/thrive_cpu.h"));
  ProcessResult version = run_process({cfg.cxx, "--version"}, 30.0);
  if (version.exit_code != 0) {
    std::string why = version.output.substr(0, 200);
    std::replace(why.begin(), why.end(), '\n', ' ');  // Error messages are one line
    fail(ErrorCategory::kBackend, "THRIVE_CXX={}: expected a working C++ compiler ({})", cfg.cxx,
         why);
  }
  compiler_id_ = version.output.substr(0, version.output.find('\n'));
  // its #include <...> search list, between these two lines of `c++ -x c++ -E -v /dev/null`
  const ProcessResult search = run_process({cfg.cxx, "-x", "c++", "-E", "-v", "/dev/null"}, 30.0);
  std::istringstream lines(search.output);
  bool listing = false;
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("#include <...> search starts here:", 0) == 0) listing = true;
    else if (l.rfind("End of search list.", 0) == 0) listing = false;
    else if (listing && !l.empty() && l[0] == ' ') system_include_dirs_.push_back(resolved_dir(trimmed(l)));
  }
  if (search.exit_code != 0 || system_include_dirs_.empty())
    fail(ErrorCategory::kBackend, "THRIVE_CXX={}: cannot list its include directories (`{} -x c++ -E -v /dev/null` "
         "exited {}); expected a GCC- or Clang-compatible compiler", cfg.cxx, cfg.cxx, search.exit_code);
  system_include_dirs_.push_back(resolved_dir(cache_dir_ + "/include"));
  device_.backend = "cpu";
  device_.name = cpu_model_name();
  device_.arch = cpu_arch();
  device_.driver = compiler_id_;
  device_.compute_units = threads_;
  device_.cache_bytes = llc_bytes();
  arena_ = std::make_unique<SharedArena>(arena_bytes(cfg));
  device_.memory_bytes = arena_->capacity();
}

CompileResult CpuBackend::compile(const KernelSource& kernel) {
  CompileResult result;
  if (kernel.backend != "cpu") {
    result.log = "kernel backend is '" + kernel.backend + "': the cpu backend compiles cpu kernels";
    return result;
  }
  // the compiler would read any file an #include names and quote it in the log (untrusted source)
  if (std::string why = include_policy_violation(kernel.source, true); !why.empty()) {
    result.log = "refused before compiling: " + why;
    return result;
  }
  std::string key_material = kernel.source + "\n" + compiler_id_;
  for (const auto& f : compile_flags()) key_material += " " + f;
  const std::string key = fnv1a_hex(key_material);
  const std::string so = cache_dir_ + "/" + key + ".so";
  const std::string log_path = cache_dir_ + "/" + key + ".log";
  if (std::filesystem::exists(so)) {
    result.cached = true;
    std::ifstream log(log_path);
    if (log) result.log.assign(std::istreambuf_iterator<char>(log), {});
  } else {
    // The compile reads the source from a directory of its own, empty but for it: a quoted
    // #include searches the source's directory first, and the cache directory holds other
    // kernels' sources and logs.
    std::string work = cache_dir_ + "/.build-XXXXXX";
    if (mkdtemp(work.data()) == nullptr)
      fail(ErrorCategory::kStorage, "{}: cannot create a build directory ({})", cache_dir_, std::strerror(errno));
    struct RemoveDir {
      std::string dir;
      ~RemoveDir() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    } remove_work{work};
    const std::string own_src = work + "/kernel.cpp";
    write_file_atomic(own_src, kernel.source);
    // First the preprocessor alone, for the list of files it reads: each must be the source, a
    // header of the compiler's own or thrive_cpu.h. Its log is never shown whole (it could
    // quote a file the source had no business reading): on failure only the lines about the
    // source itself, which carry no other file's text.
    std::vector<std::string> cxx = {cfg_.cxx};  // the compiler and its flags, for each of the three steps
    for (const auto& f : compile_flags()) cxx.push_back(f);
    std::vector<std::string> deps_argv = cxx;
    deps_argv.insert(deps_argv.end(), {"-I", cache_dir_ + "/include", "-M", "-MF", work + "/deps.d", own_src});
    const ProcessResult pre = run_process(deps_argv, cfg_.candidate_timeout_s);
    if (pre.exit_code != 0) {
      result.log = pre.timed_out ? "the preprocessor timed out" : "the preprocessor failed";
      std::istringstream lines(pre.output);
      for (std::string l; std::getline(lines, l);)
        if (l.rfind(own_src + ":", 0) == 0) result.log += "\n" + l.replace(0, own_src.size(), "kernel.cpp");
      return result;
    }
    const std::string own_resolved = resolved_dir(own_src);
    for (const auto& dep : dependency_files(read_file(work + "/deps.d"))) {
      const std::string file = resolved_dir(dep);  // (a file's path, with "/" added for the prefix test)
      bool ok = file == own_resolved;
      for (const auto& d : system_include_dirs_) ok = ok || file.rfind(d, 0) == 0;
      if (!ok) {
        result.log = fmt::format("refused before compiling: the source reads {}, which is neither a header of the "
                                 "compiler's nor thrive_cpu.h (a kernel may include only those)", dep);
        return result;
      }
    }
    // the compiler's output under a name of its own (two threads compiling one kernel once shared
    // so + ".tmp." + pid), renamed into place when it succeeds, removed when it fails
    StagedFile staged_so(so);
    staged_so.close(false);
    const std::string& tmp_so = staged_so.temp_path();
    // Two steps: the source to assembly, checked, then assembled and linked. The assembler would
    // read any file an .incbin or .include names, and a source can put those in the assembly
    // without any asm statement (a section or symbol name is written there as it is spelled).
    StagedFile staged_s(cache_dir_ + "/" + key + ".s");
    staged_s.close(false);
    const std::string& tmp_s = staged_s.temp_path();
    std::vector<std::string> argv = cxx, link = cxx;
    argv.insert(argv.end(), {"-I", cache_dir_ + "/include", "-S", "-o", tmp_s, own_src});
    // the log names the files as the kernel knows them, not where THRIVE_HOME keeps them
    const auto as_known = [&](std::string log) {
      for (const auto& [path, name] : {std::pair{own_src, "kernel.cpp"}, {tmp_s, "kernel.s"}, {tmp_so, "kernel.so"},
                                       {work + "/", ""}, {cache_dir_ + "/", ""}}) {
        for (size_t at = log.find(path); at != std::string::npos; at = log.find(path, at + std::strlen(name)))
          log.replace(at, path.size(), name);
      }
      return log;
    };
    ProcessResult p = run_process(argv, cfg_.candidate_timeout_s);
    result.compile_s = p.wall_s;
    result.log = as_known(p.output);
    const auto failed = [&](const ProcessResult& q, const char* what) {
      if (q.timed_out) result.log += fmt::format("\n{} timed out after {} s", what, q.wall_s);
      if (q.exit_code != 0 && result.log.empty()) result.log = fmt::format("{} exited with status {}", what, q.exit_code);
      return q.exit_code != 0;
    };
    if (failed(p, "compiler")) return result;  // the staged files' destructors remove them
    if (std::string why = assembly_policy_violation(read_file(tmp_s)); !why.empty()) {
      result.log += (result.log.empty() ? "" : "\n") + std::string("refused after compiling: ") + why;
      return result;
    }
    link.insert(link.end(), {"-o", tmp_so, "-x", "assembler", tmp_s});  // (the staged name has no .s suffix)
    ProcessResult q = run_process(link, cfg_.candidate_timeout_s);
    result.compile_s += q.wall_s;
    result.log += as_known(q.output);
    if (failed(q, "assembler and linker")) return result;
    write_file_atomic(log_path, result.log);  // (its paths already as_known's)
    staged_so.commit(true, false);
  }
  if (isolated_) {  // the candidate is loaded (and runs) only in its executor
    std::string error;
    auto executor = std::make_unique<CpuExecutor>(isolation_.program, *arena_, so, kernel.entries.at(0), isolation_,
                                                  error);
    result.confinement = executor->confinement();
    if (!error.empty()) {
      result.log += "\n" + error;
      return result;
    }
    result.module = std::make_shared<CpuModule>(std::move(executor));
    return result;
  }
  void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    result.log += std::string("\ndlopen failed: ") + dlerror();
    return result;
  }
  void* sym = dlsym(handle, kernel.entries.at(0).c_str());
  if (sym == nullptr) {
    result.log += "\nentry '" + kernel.entries[0] +
                  "' is not exported (declare it THRIVE_EXPORT int " + kernel.entries[0] +
                  "(const ThriveArgs*))";
    return result;
  }
  result.module = std::make_shared<CpuModule>(handle, reinterpret_cast<EntryFn>(sym));
  return result;
}

void CpuBackend::isolate_candidates(const CandidateIsolation& isolation) {
  isolation_ = isolation;
  isolation_.program = CpuExecutor::find_program(isolation.program);
  isolated_ = true;
}

void* CpuBackend::allocate(int64_t bytes) { return arena_->allocate(bytes); }

void CpuBackend::release(void* ptr) { arena_->release(ptr); }

void CpuBackend::upload(void* dst, const void* src, int64_t bytes) {
  std::memcpy(dst, src, size_t(bytes));
}

void CpuBackend::download(void* dst, const void* src, int64_t bytes) {
  std::memcpy(dst, src, size_t(bytes));
}

void CpuBackend::copy_device(void* dst, const void* src, int64_t bytes) {
  std::memcpy(dst, src, size_t(bytes));
}

void CpuBackend::memset(void* dst, uint8_t value, int64_t bytes) {
  std::memset(dst, value, size_t(bytes));
}

int CpuBackend::launch(const Module& module, const LaunchArgs& args) {
  const auto& m = static_cast<const CpuModule&>(module);
  if (CpuExecutor* x = m.executor()) {
    if (capturing_) {
      if (capture_executor_ != nullptr && capture_executor_ != x) capture_mixed_ = true;
      capture_executor_ = x;
      captured_.push_back(CpuExecutor::encode_call(args.tensors.data(), int32_t(args.tensors.size()),
                                                   args.dims.data(), int32_t(args.dims.size()), args.scalars.data(),
                                                   int32_t(args.scalars.size()), args.workspace,
                                                   args.workspace_bytes, threads_));
      return 0;
    }
    const int status = x->call(args.tensors.data(), int32_t(args.tensors.size()), args.dims.data(),
                               int32_t(args.dims.size()), args.scalars.data(), int32_t(args.scalars.size()),
                               args.workspace, args.workspace_bytes, threads_);
    pending_overhead_us_ += x->last_call_overhead_us();  // after the call: it may re-calibrate
    return status;
  }
  ThriveArgs a{args.tensors.data(),  int32_t(args.tensors.size()), args.dims.data(),
               int32_t(args.dims.size()), args.scalars.data(), int32_t(args.scalars.size()),
               args.workspace,           args.workspace_bytes,         threads_};
  return m.entry()(&a);
}

double CpuBackend::time_us(const std::function<void()>& body) {
  pending_overhead_us_ = 0;
  auto start = std::chrono::steady_clock::now();
  body();
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  return std::max(0.0, us - pending_overhead_us_);
}

double CpuBackend::time_graph_us(const std::function<void()>& body, int calls) {
  if (calls < 1) fail(ErrorCategory::kUsage, "CpuBackend::time_graph_us: {} calls; expected >= 1", calls);
  captured_.clear();
  capture_executor_ = nullptr;
  capture_mixed_ = false;
  capturing_ = true;
  double direct_us = 0;
  try {
    direct_us = time_us(body);  // in-process modules run (and are timed) here
  } catch (...) {
    capturing_ = false;
    throw;
  }
  capturing_ = false;
  if (captured_.empty()) return direct_us / calls;
  if (capture_mixed_) return 0;
  CpuExecutor* x = capture_executor_;
  const std::vector<std::string> batch = std::move(captured_);
  captured_.clear();
  const auto start = std::chrono::steady_clock::now();
  const int status = x->call_batch(batch);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  if (status != 0) return 0;
  return std::max(0.0, us - x->last_call_overhead_us()) / double(batch.size());
}

std::string DeviceInfo::key() const {
  std::string k = backend + ":" + name + ":" + arch;
  for (auto& c : k)
    if (c == ' ' || c == '/') c = '_';
  return k;
}

}  // namespace thrive::backend
