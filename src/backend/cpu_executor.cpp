#include "thrive/backend/cpu_executor.hpp"

#include <dlfcn.h>
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <vector>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/cpu/thrive_cpu.h"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"
#include "thrive/core/process.hpp"
#include "thrive/sandbox/confine.hpp"

namespace thrive::backend {
namespace {

constexpr int64_t kAlign = 256;
constexpr uint32_t kPing = 1, kLoad = 2, kCall = 3, kBatch = 4;
constexpr uint32_t kMaxPayload = 1u << 20;  // a call's arguments are a few hundred bytes

struct CommandHeader {
  uint32_t kind;
  uint32_t payload_bytes;
  uint64_t nonce;
};
struct ReplyHeader {
  uint64_t nonce;
  int32_t status;
  uint32_t text_bytes;
};
struct CallHeader {
  uint32_t num_tensors, num_dims, num_scalars;
  int32_t num_threads;
  uint64_t workspace;
  int64_t workspace_bytes;
};

bool send_reply(int fd, uint64_t nonce, int32_t status, const std::string& text) {
  const ReplyHeader h{nonce, status, uint32_t(std::min<size_t>(text.size(), 65536))};
  return write_all(fd, &h, sizeof h) && write_all(fd, text.data(), h.text_bytes);
}

uint64_t fresh_nonce() {
  uint64_t n = 0;
  while (getrandom(&n, sizeof n, 0) != ssize_t(sizeof n))
    if (errno != EINTR) fail(ErrorCategory::kBackend, "getrandom: {}", std::strerror(errno));
  return n;
}

using EntryFn = int (*)(const ThriveArgs*);

// The executor's descriptors: the command socket and the arena's memfd (closed once mapped).
constexpr int kSocketFd = 3, kArenaFd = 4;
// How long an executor may take to map the arena, confine itself and say so (milliseconds): the
// credential wipe's scan of a small process takes a few; a loaded machine can take a second.
constexpr int kStartTimeoutMs = 30000;

// The worker's arena [worker, worker + bytes) as the executor maps it at `local`: a pointer the
// worker sends is moved by the difference when it falls inside, and passed on as it is otherwise
// (nullptr; anything else is no memory of the executor's, as it would be no matter what).
struct ArenaView {
  uint64_t worker = 0;
  uint64_t bytes = 0;
  uint8_t* local = nullptr;
  void* to_local(uint64_t p) const {
    return p - worker < bytes ? static_cast<void*>(local + (p - worker)) : reinterpret_cast<void*>(p);
  }
};

// One call's payload (CallHeader, then the tensor pointers, dims and scalars, 8 bytes each) run
// through the entry point; a malformed payload ends the executor (a worker bug, not a result).
int run_call(EntryFn fn, const ArenaView& arena, const uint8_t* data, size_t bytes) {
  CallHeader c;
  if (bytes < sizeof c) _exit(0);
  std::memcpy(&c, data, sizeof c);
  const size_t need = sizeof c + 8 * (size_t(c.num_tensors) + c.num_dims + c.num_scalars);
  if (bytes != need) _exit(0);
  std::vector<void*> tensors(c.num_tensors);
  std::vector<int64_t> dims(c.num_dims);
  std::vector<double> scalars(c.num_scalars);
  const uint8_t* p = data + sizeof c;
  for (auto& t : tensors) {
    uint64_t w = 0;
    std::memcpy(&w, p, 8);
    t = arena.to_local(w);
    p += 8;
  }
  std::memcpy(dims.data(), p, 8 * dims.size());
  p += 8 * dims.size();
  std::memcpy(scalars.data(), p, 8 * scalars.size());
  const ThriveArgs a{tensors.data(), int32_t(c.num_tensors), dims.data(), int32_t(c.num_dims),
                     scalars.data(), int32_t(c.num_scalars), arena.to_local(c.workspace),
                     c.workspace_bytes, c.num_threads};
  return fn(&a);
}

// The executor's command loop: THRIVE's code up to the load, the candidate's from then on.
// Never returns.
[[noreturn]] void serve_commands(int fd, const ArenaView& arena, const std::string& so, const std::string& entry) {
  EntryFn fn = nullptr;
  std::vector<uint8_t> payload;
  for (;;) {
    CommandHeader h{};
    if (!read_exact(fd, &h, sizeof h) || h.payload_bytes > kMaxPayload) _exit(0);
    payload.resize(h.payload_bytes);
    if (!read_exact(fd, payload.data(), payload.size())) _exit(0);
    if (h.kind == kPing) {
      if (!send_reply(fd, h.nonce, 0, "")) _exit(0);
    } else if (h.kind == kLoad) {
      // An OpenMP pool spins after each parallel region before it sleeps (libgomp: 300,000 spins
      // by default) and, in a paired comparison, the idle executor's spinning threads took the
      // cores from the one being timed (an eager baseline read 232 us paired against 22 us alone
      // on a 2-core machine, 2026-12-04). 10,000 spins keep a pool warm across back-to-back calls
      // but let it sleep soon after a batch. A value the user set stands (libgomp reads it when
      // the candidate's dlopen loads it).
      setenv("GOMP_SPINCOUNT", "10000", 0);
      // candidate code (static constructors) runs from here on
      void* handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
      std::string why;
      if (handle == nullptr) why = std::string(CpuExecutor::kDlopenFailed) + dlerror();
      else if ((fn = reinterpret_cast<EntryFn>(dlsym(handle, entry.c_str()))) == nullptr)
        why = std::string(CpuExecutor::kEntryMissing) + entry + "' is not exported (declare it THRIVE_EXPORT int " +
              entry + "(const ThriveArgs*))";
      if (!send_reply(fd, h.nonce, why.empty() ? 0 : 1, why)) _exit(0);
    } else if (h.kind == kCall && fn != nullptr) {
      const int status = run_call(fn, arena, payload.data(), payload.size());
      if (!send_reply(fd, h.nonce, status, "")) _exit(0);
    } else if (h.kind == kBatch && fn != nullptr && payload.size() >= 4) {
      // [u32 n][n x (u32 bytes, call payload)]: the calls back to back, stopping at the first
      // non-zero status, which the reply carries
      uint32_t n = 0;
      std::memcpy(&n, payload.data(), 4);
      size_t at = 4;
      int status = 0;
      for (uint32_t i = 0; i < n && status == 0; ++i) {
        uint32_t len = 0;
        if (payload.size() - at < 4) _exit(0);
        std::memcpy(&len, payload.data() + at, 4);
        at += 4;
        if (payload.size() - at < len) _exit(0);
        status = run_call(fn, arena, payload.data() + at, len);
        at += len;
      }
      if (!send_reply(fd, h.nonce, status, "")) _exit(0);
    } else {
      _exit(0);
    }
  }
}

}  // namespace

// ---- SharedArena ----------------------------------------------------------------------------

SharedArena::SharedArena(int64_t bytes) {
  capacity_ = (std::max<int64_t>(bytes, 1) + (2 << 20) - 1) / (2 << 20) * (2 << 20);
  fd_ = memfd_create("thrive-cpu-tensors", MFD_CLOEXEC);
  if (fd_ < 0) fail(ErrorCategory::kBackend, "memfd_create for the CPU tensor arena: {}", std::strerror(errno));
  if (ftruncate(fd_, off_t(capacity_)) != 0) {
    const int err = errno;
    close(fd_);
    fail(ErrorCategory::kBackend, "cannot size the CPU tensor arena to {} MiB: {}", capacity_ >> 20, std::strerror(err));
  }
  void* p = mmap(nullptr, size_t(capacity_), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd_);
    fail(ErrorCategory::kBackend, "cannot map {} MiB of shared memory for CPU tensors: {}", capacity_ >> 20,
         std::strerror(err));
  }
  base_ = static_cast<uint8_t*>(p);
  free_[0] = capacity_;
}

SharedArena::~SharedArena() {
  if (base_ != nullptr) munmap(base_, size_t(capacity_));
  if (fd_ >= 0) close(fd_);
}

void* SharedArena::allocate(int64_t bytes) {
  const int64_t size = (std::max<int64_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const int64_t off = it->first, left = it->second - size;
    free_.erase(it);
    if (left > 0) free_[off + size] = left;
    used_[off] = size;
    return base_ + off;
  }
  int64_t largest = 0;
  for (const auto& [off, len] : free_) largest = std::max(largest, len);
  fail(ErrorCategory::kBackend,
       "cannot allocate {} bytes of CPU tensor memory: the shared arena ({} MiB, half of the "
       "worker's THRIVE_WORKER_MEMORY_MB, default half of RAM) has no free block that large "
       "(largest {} bytes)",
       bytes, capacity_ >> 20, largest);
}

void SharedArena::release(void* p) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t off = static_cast<uint8_t*>(p) - base_;
  auto it = used_.find(off);
  if (off < 0 || off >= capacity_ || it == used_.end())
    fail(ErrorCategory::kInternal, "SharedArena::release: {} was not allocated here", p);
  int64_t start = off, size = it->second;
  used_.erase(it);
  // The pages stay mapped for the next allocation: every benchmark allocates and frees its
  // argument rotation (1 GiB on the CPU, bench::kDramWorkingSetBytes), and giving the pages back
  // (MADV_REMOVE) made the next one fault and zero them again: on the 2-core VM a 5-round rope
  // search took 7.7 s of wall and 3.7 s of system time an evaluation that way, 6.6 and 2.6 without.
  // What stays resident is bounded by the capacity, and munmap returns it all.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

// ---- CpuExecutor ----------------------------------------------------------------------------

CpuExecutor::CpuExecutor(const std::string& program, const SharedArena& arena, const std::string& so,
                         const std::string& entry, const CandidateIsolation& isolation, std::string& error) {
  try {
    start(program, arena, so, entry, isolation);
  } catch (...) {
    stop();  // no destructor runs for a constructor that throws
    throw;
  }
  // the executor runs only THRIVE's code until kLoad: its round trips are the overhead
  overhead_us_ = fastest_ping_us(64);
  const uint64_t nonce = fresh_nonce();
  send_command(kLoad, nonce, "");
  std::string text;
  if (read_reply(nonce, &text) != 0) error = load_error(text);
}

void CpuExecutor::start(const std::string& program, const SharedArena& arena, const std::string& so,
                        const std::string& entry, const CandidateIsolation& isolation) {
  // Everything the child needs is built here: between fork and exec it only moves descriptors.
  std::vector<std::pair<std::string, std::string>> credentials;
  std::vector<std::string> env = sandbox::candidate_environment(&credentials);
  if (isolation.confine)
    for (const auto& [name, value] : credentials)
      if (so.find(value) != std::string::npos || entry.find(value) != std::string::npos)
        fail(ErrorCategory::kUsage, "the environment variable {} is named like a credential, and its value is part of "
             "the kernel's path or entry name ({}), where a candidate could read it: move THRIVE_HOME or unset {}",
             name, entry.find(value) != std::string::npos ? "entry" : "path", name);
  // the spec travels as JSON, which holds only UTF-8: a path of other bytes (THRIVE_HOME's, say) is
  // refused by name, never mangled into another path
  const auto require_utf8 = [](const std::string& path, const char* why) {
    if (const auto valid = utf8_prefix(path, path.size()); valid != path)
      fail(ErrorCategory::kUsage, "{}: not valid UTF-8; {}", valid, why);
  };
  for (const std::string* path : {&so, &program})
    require_utf8(*path, "the CPU executor takes UTF-8 paths (move THRIVE_HOME or THRIVE_CPU_EXECUTOR to one)");
  for (const auto& r : isolation.readable) require_utf8(r, "a path the candidate may read must be UTF-8");
  const nlohmann::json spec = {{"so", so},
                               {"entry", entry},
                               {"worker", int64_t(getpid())},
                               {"arena_base", reinterpret_cast<uint64_t>(arena.base())},
                               {"arena_bytes", arena.capacity()},
                               {"confine", isolation.confine},
                               {"memory_limit_mb", isolation.memory_limit_mb},
                               {"readable", isolation.readable}};
  const std::string spec_text = spec.dump();
  std::vector<char*> argv = {const_cast<char*>(program.c_str()), const_cast<char*>(spec_text.c_str()), nullptr};
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string exec_failed = "the CPU candidate executor could not be started: execve " + program + ": ";
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    fail(ErrorCategory::kBackend, "socketpair: {}", std::strerror(errno));
  std::fflush(nullptr);
  const pid_t worker = getpid();
  pid_ = fork();
  if (pid_ < 0) {
    close(sv[0]);
    close(sv[1]);
    fail(ErrorCategory::kBackend, "fork: {}", std::strerror(errno));
  }
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // kept across execve (the program is not set-user-ID)
    if (getppid() != worker) _exit(0);  // the worker died before the line above
    // the socket and the memfd to 3 and 4 (above both first, so neither overwrites the other),
    // without close-on-exec; every other descriptor but 0-2 closed
    const int sock = fcntl(sv[1], F_DUPFD, 10), mem = fcntl(arena.fd(), F_DUPFD, 10);
    if (sock < 0 || mem < 0 || dup2(sock, kSocketFd) < 0 || dup2(mem, kArenaFd) < 0) _exit(127);
    if (syscall(SYS_close_range, 5u, ~0u, 0u) != 0)
      for (int fd = 5; fd < 4096; ++fd) close(fd);
    execve(program.c_str(), argv.data(), envp.data());
    const char* reason = strerror(errno);  // exec_failed was built before the fork: no allocation here
    const ReplyHeader h{0, 1, uint32_t(exec_failed.size() + std::strlen(reason))};
    if (write_all(kSocketFd, &h, sizeof h) && write_all(kSocketFd, exec_failed.data(), exec_failed.size()))
      write_all(kSocketFd, reason, std::strlen(reason));
    _exit(127);
  }
  close(sv[1]);
  fd_ = sv[0];
  // The first reply (nonce 0) says whether it started. No reply (a program that is not the
  // executor), a late one or a refusal is THRIVE's setup at fault, not the candidate's: an error
  // for the command, not a verdict, and not a protocol violation that ends the worker.
  const std::string which = fmt::format("the CPU candidate executor {} (THRIVE_CPU_EXECUTOR, else thrive-cpu-executor "
                                        "beside thrive)", program);
  pollfd p{fd_, POLLIN, 0};
  int ready = 0;
  while ((ready = poll(&p, 1, kStartTimeoutMs)) < 0 && errno == EINTR) {
  }
  if (ready == 0) fail(ErrorCategory::kBackend, "{} did not answer within {} s of its start", which, kStartTimeoutMs / 1000);
  ReplyHeader h{};
  std::string text;
  if (read_exact(fd_, &h, sizeof h) && h.nonce == 0 && h.text_bytes <= 65536) {
    text.resize(h.text_bytes);
    if (!read_exact(fd_, text.data(), text.size())) text.clear();
  } else {
    fail(ErrorCategory::kBackend, "{} did not start: it closed its socket or sent no valid first reply (is it "
         "THRIVE's executor?)", which);
  }
  if (h.status != 0) fail(ErrorCategory::kBackend, "{}: {}", which, utf8_prefix(text, 2000));
  confinement_ = text;
}

void CpuExecutor::forget_running() {
  std::lock_guard<std::mutex> lock(running_mutex());
  if (running_ == this) running_ = nullptr;
}

void CpuExecutor::stop() {
  forget_running();
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  if (pid_ > 0 && !reaped_) {  // SIGKILL ends a stopped process too
    kill(pid_, SIGKILL);
    int st = 0;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

std::string CpuExecutor::find_program(const std::string& configured) {
  if (!configured.empty()) {
    if (!is_executable_file(configured))
      fail(ErrorCategory::kUsage, "THRIVE_CPU_EXECUTOR={}: expected the thrive-cpu-executor program (an executable file)",
           configured);
    return configured;
  }
  std::vector<std::filesystem::path> places;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) places.push_back(self.parent_path() / "thrive-cpu-executor");
  places.push_back(std::filesystem::path(THRIVE_BUILD_DIR) / "thrive-cpu-executor");
  for (const auto& p : places)
    if (is_executable_file(p.string())) return p.string();
  std::string looked;
  for (const auto& p : places) looked += (looked.empty() ? "" : ", ") + p.string();
  fail(ErrorCategory::kBackend,
       "the CPU candidate executor program is missing (looked at {}): build it with THRIVE "
       "(cmake --build build --target thrive-cpu-executor) or set THRIVE_CPU_EXECUTOR to its path",
       looked);
}

int CpuExecutor::serve(int argc, char** argv) {
  struct stat st{};
  if (argc != 2 || fstat(kSocketFd, &st) != 0 || !S_ISSOCK(st.st_mode) || fstat(kArenaFd, &st) != 0) {
    std::fprintf(stderr, "thrive-cpu-executor: runs one CPU candidate kernel for thrive, which starts it with "
                         "its command socket and tensor memory; it is not run by hand\n");
    return 2;
  }
  const auto refuse = [](const std::string& why) {
    send_reply(kSocketFd, 0, 1, "the CPU candidate executor did not start: " + why);
    _exit(1);
  };
  std::string so, entry;
  ArenaView arena;
  bool confine = true;
  int64_t memory_limit_mb = 0;
  std::vector<std::string> readable;
  try {
    const auto spec = nlohmann::json::parse(argv[1]);
    so = spec.at("so").get<std::string>();
    entry = spec.at("entry").get<std::string>();
    if (getppid() != pid_t(spec.at("worker").get<int64_t>())) _exit(0);  // the worker is gone
    arena.worker = spec.at("arena_base").get<uint64_t>();
    arena.bytes = spec.at("arena_bytes").get<uint64_t>();
    confine = spec.at("confine").get<bool>();
    memory_limit_mb = spec.at("memory_limit_mb").get<int64_t>();
    readable = spec.at("readable").get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    refuse(std::string("its arguments are not what the worker sends: ") + e.what());
  }
  void* p = mmap(nullptr, size_t(arena.bytes), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, kArenaFd, 0);
  if (p == MAP_FAILED) refuse(fmt::format("cannot map the {} MiB tensor arena: {}", arena.bytes >> 20, std::strerror(errno)));
  arena.local = static_cast<uint8_t*>(p);
  close(kArenaFd);
  std::string summary = "own process";
  if (confine) {
    try {
      sandbox::close_inherited_fds(kSocketFd);
      summary = sandbox::confine_candidate(memory_limit_mb, readable).summary() + ", own process";
    } catch (const std::exception& e) {
      send_reply(kSocketFd, 0, 1, std::string("confinement failed: ") + e.what());
      _exit(1);
    }
  }
  if (!send_reply(kSocketFd, 0, 0, summary)) _exit(1);
  serve_commands(kSocketFd, arena, so, entry);
}

// The candidate's static constructors run inside the executor's dlopen, so they can write the
// load reply themselves: only the two messages the executor sends pass, on one line and at most
// kMaxLoadErrorBytes, so candidate code cannot put pages of text of its choosing before a user or
// an agent as THRIVE's verdict.
std::string CpuExecutor::load_error(const std::string& reply) {
  if (reply.rfind(kDlopenFailed, 0) != 0 && reply.rfind(kEntryMissing, 0) != 0)
    return fmt::format("the candidate could not be loaded (the load reply, {} bytes, is not one the executor "
                       "sends: the candidate's static constructors may have written it)", reply.size());
  std::string line = reply.substr(0, kMaxLoadErrorBytes);
  // printable ASCII only: UTF-8 line separators (U+2028, U+0085), bidi overrides and C1 controls
  // would make "one line" several, or reorder what a reader sees
  for (char& c : line)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = ' ';
  if (reply.size() > kMaxLoadErrorBytes) line += fmt::format(" ... ({} bytes cut)", reply.size() - kMaxLoadErrorBytes);
  return line;
}

CpuExecutor::~CpuExecutor() { stop(); }

// The fastest of n no-op round trips, µs (timed as call() is: nonce, send, reply). A lower bound
// on every call's IPC cost: subtracting it can remove IPC time but never candidate time (the
// median would, on calls that happen to be quick). After kLoad the candidate shares the process
// and could only slow these replies, so a later measurement is used only to lower the estimate.
double CpuExecutor::fastest_ping_us(int n) {
  double best = std::numeric_limits<double>::infinity();
  make_running();  // outside the timed round trips
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t nonce = fresh_nonce();
    send_command(kPing, nonce, "");
    read_reply(nonce, nullptr);
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// ---- one executor running at a time --------------------------------------------------------
//
// An idle executor's candidate can keep threads of its own running (a static constructor can
// start them) and take the cores from the executor being timed: a kernel 2x slower than eager
// was paired as 5.9x faster that way on a 2-core machine (an adversarial helper, 2026-12-07).
// So every executor but the one THRIVE is talking to is stopped (SIGSTOP stops all its threads
// and cannot be caught or ignored), and waited for until it has stopped.

std::mutex& CpuExecutor::running_mutex() {
  static std::mutex mu;
  return mu;
}

void CpuExecutor::make_running() {
  std::lock_guard<std::mutex> lock(running_mutex());
  if (running_ == this) return;
  if (running_ != nullptr) running_->pause();
  if (paused_ && pid_ > 0 && !reaped_) kill(pid_, SIGCONT);
  paused_ = false;
  running_ = this;
}

void CpuExecutor::pause() {
  if (paused_ || pid_ <= 0 || reaped_) return;
  paused_ = true;
  if (kill(pid_, SIGSTOP) != 0) return;
  int st = 0;
  pid_t got = 0;
  while ((got = waitpid(pid_, &st, WUNTRACED)) < 0 && errno == EINTR) {
  }
  if (got == pid_ && !WIFSTOPPED(st)) {  // it had ended: its status is kept for violation()
    reaped_ = true;
    reaped_status_ = st;
  }
}

void CpuExecutor::send_command(uint32_t kind, uint64_t nonce, const std::string& payload) {
  make_running();  // (a no-op when the caller already made it so)
  const CommandHeader h{kind, uint32_t(payload.size()), nonce};
  if (!write_all(fd_, &h, sizeof h) || !write_all(fd_, payload.data(), payload.size()))
    violation("the executor stopped reading commands");
}

int32_t CpuExecutor::read_reply(uint64_t nonce, std::string* text) {
  ReplyHeader h{};
  if (!read_exact(fd_, &h, sizeof h)) violation("no reply (the executor exited or died)");
  if (h.nonce != nonce) violation("a reply for a command it was never sent (forged or out of order)");
  if (h.text_bytes > 65536) violation("an oversized reply");
  std::string t(h.text_bytes, '\0');
  if (!read_exact(fd_, t.data(), t.size())) violation("a truncated reply");
  if (text != nullptr) *text = std::move(t);
  return h.status;
}

void CpuExecutor::violation(const std::string& what) {
  // The executor's own fatal signal when it died of one (a segfault in the candidate stays a
  // segfault), raised in the worker; otherwise (it exited, or broke the protocol) the worker
  // exits with status 3 and no result. The sandbox reports either as `crashed`.
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  // A dying executor closes its socket a moment before it can be reaped: wait up to 2 s for
  // it to end by itself; one still alive then lied, or closed its socket and lives on.
  int st = reaped_ ? reaped_status_ : 0, sig = 0;
  pid_t got = reaped_ ? pid_ : 0;
  for (int i = 0; i < 200 && got == 0; ++i) {
    got = waitpid(pid_, &st, WNOHANG);
    if (got == 0) usleep(10000);
  }
  if (got == 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &st, 0);
  } else if (got == pid_ && WIFSIGNALED(st)) {
    sig = WTERMSIG(st);
  }
  forget_running();
  pid_ = -1;
  std::fprintf(stderr, "thrive: candidate executor: %s (%s)\n", what.c_str(),
               sig != 0 ? strsignal(sig) : "the worker exits with status 3");
  std::fflush(stderr);
  if (sig != 0) {
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    raise(sig);
  }
  _exit(3);
}

std::string CpuExecutor::encode_call(void* const* tensors, int32_t num_tensors, const int64_t* dims,
                                     int32_t num_dims, const double* scalars, int32_t num_scalars, void* workspace,
                                     int64_t workspace_bytes, int32_t num_threads) {
  const CallHeader c{uint32_t(num_tensors), uint32_t(num_dims), uint32_t(num_scalars), num_threads,
                     reinterpret_cast<uint64_t>(workspace), workspace_bytes};
  std::string payload(sizeof c + 8 * (size_t(num_tensors) + num_dims + num_scalars), '\0');
  char* p = payload.data();
  std::memcpy(p, &c, sizeof c);
  p += sizeof c;
  std::memcpy(p, tensors, 8 * size_t(num_tensors));
  p += 8 * size_t(num_tensors);
  std::memcpy(p, dims, 8 * size_t(num_dims));
  p += 8 * size_t(num_dims);
  std::memcpy(p, scalars, 8 * size_t(num_scalars));
  return payload;
}

int CpuExecutor::call(void* const* tensors, int32_t num_tensors, const int64_t* dims, int32_t num_dims,
                      const double* scalars, int32_t num_scalars, void* workspace, int64_t workspace_bytes,
                      int32_t num_threads) {
  return round_trip(kCall, encode_call(tensors, num_tensors, dims, num_dims, scalars, num_scalars, workspace,
                                       workspace_bytes, num_threads));
}

int CpuExecutor::call_batch(const std::vector<std::string>& calls) {
  if (calls.empty()) fail(ErrorCategory::kUsage, "CpuExecutor::call_batch: no calls; expected at least one");
  size_t bytes = 4;
  for (const auto& c : calls) bytes += 4 + c.size();
  if (bytes > kMaxPayload)
    fail(ErrorCategory::kUsage, "CpuExecutor::call_batch: {} calls take {} bytes; expected at most {}",
         calls.size(), bytes, kMaxPayload);
  std::string payload;
  payload.reserve(bytes);
  const uint32_t n = uint32_t(calls.size());
  payload.append(reinterpret_cast<const char*>(&n), 4);
  for (const auto& c : calls) {
    const uint32_t len = uint32_t(c.size());
    payload.append(reinterpret_cast<const char*>(&len), 4);
    payload += c;
  }
  return round_trip(kBatch, payload);
}

int CpuExecutor::round_trip(uint32_t kind, const std::string& payload) {
  make_running();  // before the clock: switching executors is not the call's time
  const auto t0 = std::chrono::steady_clock::now();  // as the calibration's pings
  const uint64_t nonce = fresh_nonce();
  send_command(kind, nonce, payload);
  const int32_t status = read_reply(nonce, nullptr);
  const auto t1 = std::chrono::steady_clock::now();
  // Re-calibrate with pings when a whole call (IPC + candidate) came back faster than the
  // estimate (proof that the start-up pings ran slow: a loaded machine) and every kRecalibrateEvery
  // calls; the estimate only ever goes down. Never to the call's own round trip: that includes
  // the candidate's time, which every later call would then lose. The pings' own time is part of
  // this call's overhead.
  const double rt = std::chrono::duration<double, std::micro>(t1 - t0).count();
  last_call_overhead_us_ = 0;
  if (rt < overhead_us_ || ++calls_since_calibration_ >= kRecalibrateEvery) {
    calls_since_calibration_ = 0;
    overhead_us_ = std::min(overhead_us_, fastest_ping_us(kRecalibratePings));
    last_call_overhead_us_ = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count();
  }
  last_call_overhead_us_ += overhead_us_;
  return status;
}

void CpuExecutor::assume_overhead_us(double us) {
  if (!(us >= 0)) fail(ErrorCategory::kUsage, "CpuExecutor::assume_overhead_us: {} us; expected >= 0", us);
  overhead_us_ = us;
}

}  // namespace thrive::backend
