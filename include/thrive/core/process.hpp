// Child processes: run a command with a time limit and capture its output.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace thrive {

/// Outcome of run_process. exit_code is -1 when killed by a signal or on timeout.
struct ProcessResult {
  int exit_code = -1;
  bool timed_out = false;
  int signal = 0;            ///< terminating signal, 0 if it exited
  std::string output;        ///< stdout and stderr interleaved, truncated to 64 KiB
  double wall_s = 0.0;       ///< seconds
};

/// Runs argv[0] (searched in PATH) with argv, stdin from /dev/null, in its own
/// process group; after `timeout_s` seconds the whole group is killed (SIGKILL).
/// Throws Error(kBackend) only when the process cannot be started at all.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s);

/// Writes all `n` bytes to `fd`, retrying on EINTR and short writes. A socket whose peer is gone
/// gives false (send with MSG_NOSIGNAL), never SIGPIPE; other descriptors use write(2).
bool write_all(int fd, const void* data, size_t n);
/// Reads exactly `n` bytes from `fd`, retrying on EINTR; false on end of file or error.
bool read_exact(int fd, void* data, size_t n);

}  // namespace thrive
