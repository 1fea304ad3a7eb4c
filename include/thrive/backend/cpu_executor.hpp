// Out-of-process execution of CPU candidates (issue 4: "the harness that verifies and times is
// not something a candidate can reach or change").
//
// A CPU candidate is native code. Loaded into the worker that verifies and times it, it could
// write a forged verdict into the worker's result pipe or patch the harness in memory. With
// isolation on, the worker starts an *executor* for each compiled module: a fork that at once
// execs the thrive-cpu-executor program, so it starts with none of THRIVE's memory (API keys, an
// LLM client's headers, the memory database's pages) and only the environment a candidate may
// read (sandbox::candidate_environment). The executor maps the tensor arena (a memfd the worker
// hands it as descriptor 4), confines itself (seccomp, Landlock, rlimits:
// sandbox::confine_candidate), closes every descriptor but its command socket (3), loads the
// candidate's shared object and runs one call per command it reads from the socket. Verification,
// timing and the result pipe stay in the worker, whose memory the executor cannot reach.
//
// Protocol (a socketpair, native byte order): every command carries a fresh 64-bit nonce from
// getrandom(2) that the reply must echo, so replies sent ahead of time (to make calls look
// instant) never match. A reply that is short, late-bound to another nonce, or missing because
// the executor died is a protocol violation: the worker re-raises the executor's fatal signal
// (or exits with status 3 when it exited or lied), so the sandbox reports the candidate crashed.
// Tensor pointers in a command are the worker's; the executor maps the arena at an address of its
// own and moves every pointer that falls inside the arena by the difference.
// One executor of a process runs at a time: talking to one stops (SIGSTOP, waited for) the one
// that ran before and continues it, so threads an idle candidate left running cannot take the
// cores while another executor is timed. Commands come from one thread at a time (the worker's).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "thrive/backend/backend.hpp"

namespace thrive::backend {

/// First-fit allocator over one shared mapping of a memfd (pages are committed on first touch),
/// which an executor maps too (fd()). Blocks are 256-byte aligned; freed blocks are coalesced, and
/// their pages stay committed for the next allocation (resident memory is bounded by the capacity
/// and returned at destruction). Thread-safe.
class SharedArena {
 public:
  /// Maps `bytes` (rounded up to 2 MiB). Throws Error(kBackend) when memfd_create, ftruncate or
  /// mmap fails.
  explicit SharedArena(int64_t bytes);
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  /// A block of at least `bytes` (>= 1) bytes, 256-byte aligned. Throws Error(kBackend) naming
  /// the request and the arena's free space when no free block is large enough.
  void* allocate(int64_t bytes);
  /// Returns a block from allocate(); nullptr is ignored; a pointer the arena did not hand out
  /// throws Error(kInternal).
  void release(void* p);
  int64_t capacity() const { return capacity_; }
  /// The memfd behind the mapping (close-on-exec; an executor gets a copy as descriptor 4).
  int fd() const { return fd_; }
  /// The mapping's first byte in this process.
  const void* base() const { return base_; }

 private:
  uint8_t* base_ = nullptr;
  int fd_ = -1;
  int64_t capacity_ = 0;
  std::mutex mu_;
  std::map<int64_t, int64_t> free_;  // offset -> size
  std::map<int64_t, int64_t> used_;  // offset -> size
};

/// The candidate's executor process, seen from the worker. Created by CpuBackend::compile when
/// isolation is on; destroyed (socket closed, process killed and reaped) with its module.
class CpuExecutor {
 public:
  /// Starts `program` (thrive-cpu-executor: find_program) as the executor of the shared object
  /// `so`, sharing `arena`, confined as `isolation` says, then has it load `so` and resolve
  /// `entry`. Calibrates the round-trip overhead of one command (the fastest of 64 no-op commands,
  /// answered by THRIVE's code before the candidate is loaded: a lower bound on what every call
  /// pays). On success `error` is empty; otherwise it holds the loader's message (dlopen's, or a
  /// missing entry: the candidate's fault; the executor is gone). Throws, THRIVE's setup being at
  /// fault and not the candidate: Error(kUsage) when confinement is on and a credential-named
  /// environment variable's value is part of `so` or `entry` (the candidate could read its own
  /// path; nothing is started), naming the variable; Error(kBackend) when the socket or fork
  /// fails, or the program cannot be executed, exits without a reply (it is not the executor),
  /// gives none within 30 s, or reports that it could not confine itself.
  CpuExecutor(const std::string& program, const SharedArena& arena, const std::string& so, const std::string& entry,
              const CandidateIsolation& isolation, std::string& error);
  ~CpuExecutor();

  /// The executor program's path: `configured` (THRIVE_CPU_EXECUTOR) when not empty, which must
  /// be an executable file (Error(kUsage) naming it otherwise); else thrive-cpu-executor beside
  /// this process's executable, else in the build directory THRIVE was built in. Throws
  /// Error(kBackend) naming the places looked at when none holds it.
  static std::string find_program(const std::string& configured);

  /// The executor program's main (src/executor/main.cpp): argv[1] is the JSON the worker passes,
  /// descriptor 3 the command socket and 4 the arena's memfd. Returns 2, with a line on stderr,
  /// when started otherwise (by hand); else it serves commands until the socket closes and
  /// never returns.
  static int serve(int argc, char** argv);

  /// How the executor's two load failures begin ("dlopen failed: " + dlerror(), "entry '" + name
  /// + "' is not exported ...").
  static constexpr const char* kDlopenFailed = "dlopen failed: ";
  static constexpr const char* kEntryMissing = "entry '";
  /// The most of a load failure's text passed on (dlerror()'s messages are a line or two).
  static constexpr size_t kMaxLoadErrorBytes = 1024;
  /// The constructor's `error` for a failed load's reply text: one of the executor's two
  /// messages, every byte outside printable ASCII as a space, cut at kMaxLoadErrorBytes with the count of bytes
  /// cut; any other text (written by the candidate's static constructors, which run in the
  /// executor's dlopen) becomes a fixed message naming only its size.
  static std::string load_error(const std::string& reply);
  CpuExecutor(const CpuExecutor&) = delete;
  CpuExecutor& operator=(const CpuExecutor&) = delete;

  /// Runs the entry point once on the given arguments (pointers into the SharedArena) and returns
  /// its status. A protocol violation or a dead executor does not return: see the file comment.
  int call(void* const* tensors, int32_t num_tensors, const int64_t* dims, int32_t num_dims,
           const double* scalars, int32_t num_scalars, void* workspace, int64_t workspace_bytes,
           int32_t num_threads);

  /// One call's payload for call_batch(): the same arguments as call().
  static std::string encode_call(void* const* tensors, int32_t num_tensors, const int64_t* dims, int32_t num_dims,
                                 const double* scalars, int32_t num_scalars, void* workspace,
                                 int64_t workspace_bytes, int32_t num_threads);
  /// Runs the encoded calls (encode_call()) back to back in one command, stopping at the first
  /// non-zero status, which it returns (0 when all returned 0): the executor's round trip is
  /// paid once for the batch, so a batch's wall time divided by its calls times the candidate
  /// without the IPC cost and its jitter (CpuBackend::time_graph_us). Same protocol guarantees
  /// and violations as call(); last_call_overhead_us() then covers the one round trip. Throws
  /// Error(kUsage) for an empty batch or one over 1 MiB of arguments (about 4,000 calls).
  int call_batch(const std::vector<std::string>& calls);
  /// What the executor reported about its confinement ("own process" when it confined nothing).
  const std::string& confinement() const { return confinement_; }
  /// Round-trip overhead of one command, µs: the fastest of the 64 no-op commands timed before
  /// the candidate was loaded, lowered by the fastest of kRecalibratePings more whenever a whole
  /// call came back faster than the estimate (the start-up pings ran on a loaded machine) and
  /// every kRecalibrateEvery calls. A no-op command carries less than a call, so the estimate is
  /// a lower bound on every call's IPC cost: subtracting it can leave IPC jitter in a call's time
  /// but never removes candidate time.
  double overhead_us() const { return overhead_us_; }
  /// What to subtract from the wall time of the last call(), µs: overhead_us() as it stands after
  /// the call, plus the time of any re-calibration pings the call made.
  double last_call_overhead_us() const { return last_call_overhead_us_; }
  /// Replaces the estimate (µs, >= 0), as a start-up calibration on a loaded machine would
  /// have set it; a call that comes back faster than it re-calibrates. Tests use it; throws
  /// Error(kUsage) when negative.
  void assume_overhead_us(double us);

  static constexpr int kRecalibrateEvery = 64;  ///< calls between re-calibrations
  static constexpr int kRecalibratePings = 8;   ///< no-op commands a re-calibration times

 private:
  [[noreturn]] void violation(const std::string& what);
  void send_command(uint32_t kind, uint64_t nonce, const std::string& payload);
  int32_t read_reply(uint64_t nonce, std::string* text);
  double fastest_ping_us(int n);
  int round_trip(uint32_t kind, const std::string& payload);  // one command, timed and calibrated as call()

  void start(const std::string& program, const SharedArena& arena, const std::string& so,
             const std::string& entry, const CandidateIsolation& isolation);
  void stop();  // closes the socket, kills and reaps the executor
  // One executor of this process runs at a time: make_running() stops the one that ran (SIGSTOP,
  // waited for) and continues this one; the others stay stopped, so a candidate's own threads
  // cannot take the cores while another executor is timed.
  void make_running();
  void pause();
  void forget_running();
  static std::mutex& running_mutex();
  static inline CpuExecutor* running_ = nullptr;
  bool paused_ = false;
  bool reaped_ = false;  // pause() reaped it (it had ended); reaped_status_ is its wait status
  int reaped_status_ = 0;

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string confinement_;
  double overhead_us_ = 0;
  double last_call_overhead_us_ = 0;
  int calls_since_calibration_ = 0;
};

}  // namespace thrive::backend
