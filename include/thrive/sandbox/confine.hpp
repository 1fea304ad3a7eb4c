// Confinement of untrusted CPU candidate code inside its sandbox worker.
//
// Applied in the worker after the candidate is compiled and before any of its code
// runs; irreversible for the worker (and only the worker: each evaluation forks a
// fresh one). What it takes away:
//   - files: Landlock (Linux >= 5.13) denies creating, writing, truncating, renaming and
//     removing files anywhere (inherited descriptors, the parent's memory.db, its stdout
//     or an MCP client's pipe, were already closed by run_isolated: close_inherited_fds), and
//     reading or executing any file outside the `readable` paths (the system's libraries, the
//     compiled kernels, the CPU topology in /sys): a kernel cannot read a user's files and encode
//     them into its outputs;
//   - the environment: every variable but OpenMP's, the locale's, TZ and PATH is removed (THRIVE's
//     process holds API keys), and the values of those named like credentials (names_a_credential)
//     are wiped from the rest of the process's private memory too (wipe_private_copies). The CPU
//     candidate executor is exec'd with that environment (candidate_environment), so it starts
//     with none of THRIVE's memory; the wipe matters for a process confined in place;
//   - processes and network: a seccomp filter makes fork/vfork/clone without
//     CLONE_THREAD, execve, socket, ptrace, process_vm_*, mount/unshare/setns and
//     signals to any other process or to its process group fail with EPERM (threads, OpenMP,
//     are still allowed);
//   - file metadata and the machine: the same filter denies truncate, chmod, chown, times and
//     extended attributes (Landlock governs none of these but truncation from ABI 3), and the
//     calls that change the machine or identities (hostname, clocks, accounting, fanotify,
//     inotify watches, set*uid/gid, capset), ioctls setting inode flags, and returns ENOSYS
//     for every call numbered from 452 (fchmodat2) on: newer than a denylist could name;
//   - privileges: every capability is dropped, the bounding set's too (THRIVE run as root);
//   - memory: RLIMIT_AS caps the worker's address space.
// CUDA candidates need none of this: they are device code and make no system calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace thrive::sandbox {

/// What was applied. `landlock_abi` is 0 when the kernel has no Landlock.
struct Confinement {
  bool seccomp = false;
  int landlock_abi = 0;
  bool capabilities_dropped = false;  ///< every capability, the bounding set's too (a THRIVE run as root)
  int64_t memory_limit_bytes = 0;
  std::string summary() const;  ///< e.g. "seccomp, landlock v7, no capabilities, address space 12288 MiB"
};

/// Confines the calling process; `memory_limit_mb` 0 means half of physical memory.
/// Best effort for Landlock (absent on older kernels); throws Error(kBackend) if the
/// seccomp filter cannot be installed.
Confinement confine_candidate(int64_t memory_limit_mb, const std::vector<std::string>& readable);

/// What a CPU candidate's executor may read under Landlock: /usr, /lib, /lib64, /etc/ld.so.cache
/// (the dynamic loader's), /sys/devices/system/cpu (the CPU count OpenMP reads), /dev/null,
/// /dev/zero, /dev/urandom, and `kernel_dir` (the compiled kernels, THRIVE_HOME/cache/cpu).
std::vector<std::string> candidate_readable_paths(const std::string& kernel_dir);

/// Caps this process's address space (RLIMIT_AS, inherited by the compiler it spawns) at
/// `memory_limit_mb` MiB, 0 = half of physical memory, never above an existing hard
/// limit; returns the limit in bytes.
int64_t limit_address_space(int64_t memory_limit_mb);

/// Caps the size of any file this process or the compiler it spawns writes (RLIMIT_FSIZE):
/// a hostile source cannot fill the compile cache with a huge object.
void limit_file_size(int64_t bytes);

/// Secrets shorter than this are not searched for (a short value would match unrelated bytes).
constexpr size_t kMinWipedSecretBytes = 8;
/// The shortest run of bytes equal to part of a key-like secret that is wiped: the allocator
/// overwrites a freed buffer's first 16 bytes, and the rest of a key in it must go too. A secret
/// is key-like at kMinFragmentedSecretBytes to 512 bytes of letters, digits and `_+/=.-` (API keys
/// are 40-110 such characters); any other (a URL, JSON) is wiped only as a whole, since its
/// 12-byte parts are common text.
constexpr size_t kMinWipedFragmentBytes = 12;
constexpr size_t kMinFragmentedSecretBytes = 20;
/// Mappings larger than this (reservations, not data; the address-space limit bounds them
/// anyway) are not scanned, the [heap] excepted.
constexpr size_t kMaxWipedMappingBytes = size_t(1) << 30;
/// The most private writable mappings a scan takes; more makes it incomplete.
constexpr size_t kMaxWipedMappings = 65536;

/// Whether an environment variable's name says its value is a credential: an underscore-separated
/// word of it is or ends with KEY, TOKEN, SECRET, PASSWORD, PASSWD, PWD, AUTH or CREDENTIAL(S), or
/// is PAT; PWD and OLDPWD themselves are not (ANTHROPIC_API_KEY, GITHUB_TOKEN, PGPASSWORD,
/// NGROK_AUTHTOKEN, MYSQL_PWD: yes; HOME, XAUTHORITY: no).
bool names_a_credential(const std::string& name);

/// Whether a candidate's process may see an environment variable: PATH, LANG, TZ, and names
/// starting OMP_, GOMP_, KMP_ (OpenMP runtimes) or LC_ (the locale), unless names_a_credential.
bool candidate_may_read_variable(const std::string& name);

/// This process's environment as "NAME=value" entries a candidate may read
/// (candidate_may_read_variable): what an exec'd executor gets (CpuExecutor). When `credentials`
/// is given, the (name, value) of each credential-named variable left out whose value has at
/// least kMinWipedSecretBytes bytes is appended to it, but not values that are existing paths
/// (SSH_AUTH_SOCK's kind).
std::vector<std::string> candidate_environment(std::vector<std::pair<std::string, std::string>>* credentials = nullptr);

/// Overwrites with zeros every copy of each value in `secrets` (of at least kMinWipedSecretBytes
/// bytes), and every run of at least kMinWipedFragmentBytes bytes equal to a part of a key-like
/// one, in this process's private writable memory (/proc/self/maps: heap, stacks, .data/.bss,
/// anonymous mappings up to kMaxWipedMappingBytes; shared mappings are left alone), the caller's
/// own strings included. Returns the number of runs overwritten, or -1 when the scan could not be
/// complete (no memory for its tables, /proc/self/maps unreadable or a line of it unparsable, over
/// kMaxWipedMappings mappings). Called by the confinement of a forked candidate executor, whose
/// memory is a copy of its parent's: the parent's copies are untouched. Copies in another form
/// (encoded) or split across two mappings into parts under 12 bytes are not found.
int64_t wipe_private_copies(const std::vector<std::string>& secrets);

/// Closes every descriptor above 2 except `keep_fd`; returns how many. A worker calls
/// it first thing, so nothing of its parent (memory.db, the protocol stream of `thrive
/// mcp`, other workers' pipes) is reachable from a candidate.
int close_inherited_fds(int keep_fd);

}  // namespace thrive::sandbox
