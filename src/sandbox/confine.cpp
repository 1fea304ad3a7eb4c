#include "thrive/sandbox/confine.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "thrive/core/error.hpp"

extern char** environ;

namespace thrive::sandbox {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "confine.cpp: add the AUDIT_ARCH_* of this architecture"
#endif

int64_t half_of_ram() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * page / 2 : (int64_t{8} << 30);
}

// Landlock: every handled right is denied everywhere but for one rule per readable path, which
// allows reading (files and directories) and executing there. The write rights have no rule.
// Source: Linux Documentation/userspace-api/landlock.rst (rights per ABI version).
int apply_landlock(const std::vector<std::string>& readable) {
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) return 0;
  constexpr uint64_t kRead = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_EXECUTE;
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = kRead | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                           LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                           LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                           LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                           LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
  size_t size = offsetof(landlock_ruleset_attr, handled_access_fs) + sizeof(attr.handled_access_fs);
#ifdef LANDLOCK_ACCESS_FS_REFER
  if (abi >= 2) attr.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
#endif
  // By number where the build's <linux/landlock.h> predates them (Debian 12's does): a handled
  // right the headers lack would otherwise be left allowed on a kernel that has it (a candidate
  // truncated THRIVE_HOME/memory.db under Landlock v7 that way, 2026-12-07). Source: Linux
  // include/uapi/linux/landlock.h, LANDLOCK_ACCESS_FS_TRUNCATE (ABI 3) and _IOCTL_DEV (ABI 5).
  constexpr uint64_t kTruncate = uint64_t(1) << 14, kIoctlDev = uint64_t(1) << 15;
  if (abi >= 3) attr.handled_access_fs |= kTruncate;
  if (abi >= 5) attr.handled_access_fs |= kIoctlDev;
  const int ruleset = int(syscall(SYS_landlock_create_ruleset, &attr, size, 0));
  if (ruleset < 0) return 0;
  for (const auto& path : readable) {
    const int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) continue;  // absent here (/lib64 on some systems): nothing to allow
    struct stat st{};
    landlock_path_beneath_attr rule{};
    rule.allowed_access = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)
                              ? kRead
                              : (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_EXECUTE);
    rule.parent_fd = fd;
    syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    close(fd);
  }
  const long rc = syscall(SYS_landlock_restrict_self, ruleset, 0);
  close(ruleset);
  return rc == 0 ? int(abi) : 0;
}

}  // namespace

// The credential names (confine.hpp); SSH_AUTH_SOCK matches, and scrub_environment does not hunt
// its value, an existing path.
bool names_a_credential(const std::string& name) {
  std::string upper(name);
  for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "PWD" || upper == "OLDPWD") return false;
  size_t at = 0;
  while (at <= upper.size()) {
    const size_t end = std::min(upper.find('_', at), upper.size());
    const std::string_view word(upper.data() + at, end - at);
    if (word == "PAT") return true;
    for (std::string_view w : {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PWD", "AUTH", "CREDENTIAL", "CREDENTIALS"})
      if (word.size() >= w.size() && word.substr(word.size() - w.size()) == w) return true;
    at = end + 1;
  }
  return false;
}

namespace {

// A credential-named variable's value that is hunted for: one that is an existing path
// (SSH_AUTH_SOCK, MY_TOKEN_FILE=/home/...) names where a secret is, and the process may need it.
bool hunted_credential(const std::string& name, const char* value) {
  struct stat st{};
  return names_a_credential(name) && !(value[0] == '/' && stat(value, &st) == 0);
}

}  // namespace

bool candidate_may_read_variable(const std::string& name) {
  if (name == "PATH" || name == "LANG" || name == "TZ") return !names_a_credential(name);
  for (const char* prefix : {"OMP_", "GOMP_", "KMP_", "LC_"})
    if (name.rfind(prefix, 0) == 0) return !names_a_credential(name);
  return false;
}

std::vector<std::string> candidate_environment(std::vector<std::pair<std::string, std::string>>* credentials) {
  std::vector<std::string> kept;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    const std::string name(*e, size_t(eq - *e));
    if (candidate_may_read_variable(name)) kept.emplace_back(*e);
    else if (credentials != nullptr && hunted_credential(name, eq + 1) && std::strlen(eq + 1) >= kMinWipedSecretBytes)
      credentials->emplace_back(name, eq + 1);
  }
  return kept;
}

namespace {

// Removes every environment variable but those a candidate's runtime may read
// (candidate_may_read_variable): THRIVE's own process holds API keys (ANTHROPIC_API_KEY, ...) that
// a kernel could otherwise getenv() and encode into its outputs. The values of variables named
// like credentials are also wiped wherever else this process's private memory holds them. The
// executor is exec'd with the filtered environment (candidate_environment), so it holds none; the
// wipe stays for a process confined in place (a forked worker: run_isolated's tests).
void scrub_environment() {
  std::vector<std::string> names, secrets;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    char* eq = std::strchr(*e, '=');
    const std::string name(*e, eq != nullptr ? size_t(eq - *e) : std::strlen(*e));
    if (candidate_may_read_variable(name)) continue;
    if (eq != nullptr && hunted_credential(name, eq + 1)) secrets.emplace_back(eq + 1);
    // the value overwritten in place first: in a fork, the process's original environment block
    // (at the top of its stack) would still hold it after unsetenv
    if (eq != nullptr) std::memset(eq + 1, 0, std::strlen(eq + 1));
    names.push_back(name);
  }
  for (const auto& n : names) unsetenv(n.c_str());
  if (wipe_private_copies(secrets) < 0)
    fail(ErrorCategory::kBackend, "sandbox: the process's memory could not be searched for copies of its credentials "
         "(no memory for the scan, /proc/self/maps unreadable or unparsable, or over {} writable mappings)",
         kMaxWipedMappings);
}

// Drops every capability: the bounding set (so none comes back), the ambient set, then the
// effective, permitted and inheritable sets. A THRIVE run as root starts its executor with all of
// them, and a candidate used them (sethostname, acct, fanotify; 2026-12-07). Returns false when
// a step failed (the capabilities are then reported as kept).
bool drop_capabilities() {
  bool ok = true;
  for (int cap = 0; cap < 64; ++cap)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) ok = false;  // EINVAL: past the last
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capset, &header, data) != 0) ok = false;
  return ok;
}

// The first system call number the filter does not know: fchmodat2's (Linux 6.6). Everything
// from it on returns ENOSYS (apply_seccomp).
constexpr uint32_t kFirstUnknownSyscall = 452;

// seccomp-BPF: default allow; the listed calls fail with EPERM (clone3 with ENOSYS so
// the C library falls back to clone, whose flags the filter can read).
void apply_seccomp() {
  const uint32_t self = uint32_t(getpid());
  std::vector<sock_filter> f;
  auto stmt = [&](uint16_t code, uint32_t k) { f.push_back(BPF_STMT(code, k)); };
  auto jump = [&](uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
    f.push_back(BPF_JUMP(code, k, jt, jf));
  };
  const uint32_t eperm = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  const uint32_t enosys = SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  jump(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
  // Denied outright.
  const long denied[] = {
#ifdef __NR_fork
      __NR_fork,
#endif
#ifdef __NR_vfork
      __NR_vfork,
#endif
      __NR_execve,   __NR_execveat,         __NR_socket,          __NR_socketpair,
      __NR_ptrace,   __NR_process_vm_readv, __NR_process_vm_writev, __NR_mount,
      __NR_umount2,  __NR_unshare,          __NR_setns,           __NR_pivot_root,
      __NR_chroot,   __NR_tkill,            __NR_kexec_load,      __NR_init_module,
      __NR_finit_module, __NR_delete_module, __NR_reboot,         __NR_pidfd_open,
      __NR_pidfd_send_signal, __NR_rt_sigqueueinfo, __NR_rt_tgsigqueueinfo,
      // io_uring performs socket/open/... operations without those system calls.
      __NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
      __NR_bpf, __NR_perf_event_open, __NR_userfaultfd, __NR_keyctl, __NR_add_key,
      __NR_request_key, __NR_open_by_handle_at, __NR_name_to_handle_at,
      // leaving the worker's session or process group (the timeout kills the group), memory
      // outside RLIMIT_AS (memfd, SysV shm), and changing how other processes are scheduled
      __NR_setsid, __NR_setpgid, __NR_memfd_create, __NR_shmget, __NR_setpriority,
      __NR_sched_setscheduler, __NR_sched_setparam, __NR_sched_setattr, __NR_ioprio_set,
      __NR_migrate_pages, __NR_move_pages, __NR_kcmp,
#ifdef __NR_process_madvise
      __NR_process_madvise,
#endif
#ifdef __NR_pidfd_getfd
      __NR_pidfd_getfd,
#endif
#ifdef __NR_memfd_secret
      __NR_memfd_secret,
#endif
      // file metadata Landlock does not govern (mode, owner, times, extended attributes) and
      // truncation on kernels before Landlock ABI 3: a candidate changed files it may not write
      // (chmod 000 of memory.db, an xattr on a user's file; 2026-12-07)
      __NR_truncate, __NR_ftruncate, __NR_fchmod, __NR_fchmodat, __NR_fchown, __NR_fchownat, __NR_utimensat,
      __NR_setxattr, __NR_lsetxattr, __NR_fsetxattr, __NR_removexattr, __NR_lremovexattr, __NR_fremovexattr,
      __NR_fallocate, __NR_mknodat,
#ifdef __NR_chmod
      __NR_chmod, __NR_chown, __NR_lchown, __NR_utime, __NR_utimes, __NR_futimesat, __NR_mknod,
#endif
      // the machine's state, other users' identities and file-system watches (root keeps none of
      // its capabilities here, drop_capabilities, but uid 0 still owns root's files): a
      // candidate set the hostname, turned process accounting off and stalled other processes'
      // opens with a fanotify permission mark (2026-12-07)
      __NR_sethostname, __NR_setdomainname, __NR_adjtimex, __NR_clock_adjtime, __NR_settimeofday,
      __NR_clock_settime, __NR_fanotify_init, __NR_fanotify_mark, __NR_inotify_add_watch, __NR_syslog, __NR_acct,
      __NR_swapon, __NR_swapoff, __NR_quotactl, __NR_vhangup, __NR_setuid, __NR_setgid, __NR_setreuid,
      __NR_setregid, __NR_setresuid, __NR_setresgid, __NR_setfsuid, __NR_setfsgid, __NR_setgroups, __NR_capset,
#ifdef __NR_iopl
      __NR_iopl, __NR_ioperm,
#endif
  };
  for (long nr : denied) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, uint32_t(nr), 0, 1);
    stmt(BPF_RET | BPF_K, eperm);
  }
  // `nr` whose argument `arg` (low 32 bits) equals one of `values`: EPERM (deny = true), or
  // allowed only then (deny = false). A matched call always returns here, so the accumulator
  // still holds the syscall number for the rules after it.
  auto arg_rule = [&](long nr, int arg, const std::vector<uint32_t>& values, bool deny) {
    const auto n = uint8_t(values.size());
    jump(BPF_JMP | BPF_JEQ | BPF_K, uint32_t(nr), 0, uint8_t(n + 3));
    stmt(BPF_LD | BPF_W | BPF_ABS, uint32_t(offsetof(seccomp_data, args) + 8 * arg));
    for (uint8_t i = 0; i < n; ++i) jump(BPF_JMP | BPF_JEQ | BPF_K, values[i], uint8_t(n - i), 0);
    stmt(BPF_RET | BPF_K, deny ? SECCOMP_RET_ALLOW : eperm);  // no value matched
    stmt(BPF_RET | BPF_K, deny ? eperm : SECCOMP_RET_ALLOW);  // a value matched
  };
  // Signals by file ownership (F_SETOWN + O_ASYNC delivers any signal, SIGKILL included, to
  // any process of this user): no owner, no signal choice.
  arg_rule(__NR_fcntl, 1, {F_SETOWN, F_SETSIG, F_SETOWN_EX}, true);
  // ...and inode flags and project attributes of any file it may open for reading (Landlock's
  // IOCTL_DEV right covers device files only; a candidate set +nodump on another kernel's .so,
  // 2026-12-07). Numbers: <linux/fs.h> FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR.
  arg_rule(__NR_ioctl, 1, {0x8901u /* FIOSETOWN */, 0x8902u /* SIOCSPGRP */, 0x40086602u, 0x40046602u, 0x401c5820u},
           true);
  // A parent-death signal stays (the worker's exit kills the executor).
  arg_rule(__NR_prctl, 0, {PR_SET_PDEATHSIG}, true);
  // Affinity and limits of this process only (0 = self), never of the worker or THRIVE.
  arg_rule(__NR_sched_setaffinity, 0, {0u, self}, false);
  arg_rule(__NR_prlimit64, 0, {0u, self}, false);
  jump(BPF_JMP | BPF_JEQ | BPF_K, uint32_t(__NR_clone3), 0, 1);
  stmt(BPF_RET | BPF_K, enosys);
  // Every system call numbered from fchmodat2 (452) on, and x32's (bit 30 set, x86-64 only):
  // ENOSYS, as a kernel without them answers (the C library falls back). A denylist cannot name
  // calls newer than the build's headers: fchmodat2, setxattrat and file_setattr changed modes,
  // ACLs and flags past it (2026-12-07). Since Linux 5.1 new calls share one number on every
  // architecture (Linux include/uapi/asm-generic/unistd.h).
  jump(BPF_JMP | BPF_JGE | BPF_K, kFirstUnknownSyscall, 0, 1);
  stmt(BPF_RET | BPF_K, enosys);
  // clone: threads only (flags are argument 0; CLONE_THREAD is in the low 32 bits).
  jump(BPF_JMP | BPF_JEQ | BPF_K, uint32_t(__NR_clone), 0, 4);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));
  jump(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  stmt(BPF_RET | BPF_K, eperm);
  // kill(pid) and tgkill(tgid): only this process. Not pid 0, its process group: that is the
  // worker's, and a candidate's kill(0, SIGKILL) ended the worker (2026-12-07).
  for (long nr : {long(__NR_kill), long(__NR_tgkill)}) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, uint32_t(nr), 0, 4);
    stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));
    jump(BPF_JMP | BPF_JEQ | BPF_K, self, 1, 0);
    stmt(BPF_RET | BPF_K, eperm);
    stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  }
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  sock_fprog prog{uint16_t(f.size()), f.data()};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    fail(ErrorCategory::kBackend, "sandbox: cannot install the seccomp filter ({})", std::strerror(errno));
}

}  // namespace

namespace {
// One 8-byte window of a secret, for the scan's lookup.
struct Window {
  uint64_t bytes;
  uint32_t secret, offset;
};
// One secret inside the scan's own mapping.
struct Needle {
  const char* text;
  size_t size, min_run;  // the shortest run of it that is wiped
};

// Whether a value looks like a generated key (letters, digits and base64/URL-safe punctuation,
// 20-512 bytes): only those are wiped in parts; anything else (a URL, JSON) only as a whole, as
// its 12-byte parts are common text.
bool key_like(const std::string& v) {
  if (v.size() < kMinFragmentedSecretBytes || v.size() > 512) return false;
  for (unsigned char c : v)
    if (!std::isalnum(c) && std::strchr("_+/=.-", c) == nullptr) return false;
  return true;
}

bool has_zero_byte(uint64_t w) { return ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull) != 0; }
}  // namespace

int64_t wipe_private_copies(const std::vector<std::string>& secrets) {
  // Everything the scan uses (the secrets, their 8-byte windows sorted, a filter of the windows'
  // hashes, /proc/self/maps' text and the list of ranges) lives in one mapping of its own between
  // two PROT_NONE guard pages, so that it never merges with a neighbouring anonymous mapping into
  // one line of /proc/self/maps, and nothing is allocated or freed between reading the maps and
  // the scan (a free could trim the heap under it). The scan skips that mapping and wipes every
  // other copy, the caller's strings included.
  size_t text = 0, windows = 0, n_secrets = 0;
  for (const auto& s : secrets)
    if (s.size() >= kMinWipedSecretBytes) {
      text += s.size() + 1;
      windows += s.size() - 7;
      ++n_secrets;
    }
  if (windows == 0) return 0;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t filter_bits = size_t(1) << 20;
  while (filter_bits < windows * 64) filter_bits <<= 1;
  const int filter_shift = 64 - __builtin_ctzll(filter_bits);
  constexpr size_t kMapsBytes = size_t(16) << 20;  // /proc/self/maps at kMaxWipedMappings lines and more
  const size_t body = filter_bits / 8 + windows * sizeof(Window) + n_secrets * sizeof(Needle) +
                      kMaxWipedMappings * 2 * sizeof(uintptr_t) + kMapsBytes + text;
  const size_t body_pages = (body + page - 1) / page * page;
  void* whole = mmap(nullptr, body_pages + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (whole == MAP_FAILED) return -1;
  auto* mem = static_cast<char*>(whole) + page;
  if (mprotect(mem, body_pages, PROT_READ | PROT_WRITE) != 0) {
    munmap(whole, body_pages + 2 * page);
    return -1;
  }
  auto* filter = reinterpret_cast<uint64_t*>(mem);
  auto* table = reinterpret_cast<Window*>(filter + filter_bits / 64);
  auto* needles = reinterpret_cast<Needle*>(table + windows);
  auto* ranges = reinterpret_cast<uintptr_t*>(needles + n_secrets);
  char* maps_text = reinterpret_cast<char*>(ranges + kMaxWipedMappings * 2);
  char* texts = maps_text + kMapsBytes;
  auto hash = [filter_shift](uint64_t w) { return size_t((w * 0x9e3779b97f4a7c15ull) >> filter_shift); };
  size_t n_windows = 0, k = 0, stride = SIZE_MAX;
  for (size_t at = 0; const auto& s : secrets) {
    if (s.size() < kMinWipedSecretBytes) continue;
    std::memcpy(texts + at, s.data(), s.size());
    const size_t min_run = key_like(s) ? kMinWipedFragmentBytes : s.size();
    for (size_t o = 0; o + 8 <= s.size(); ++o) {
      uint64_t w;
      std::memcpy(&w, texts + at + o, 8);
      table[n_windows++] = Window{w, uint32_t(k), uint32_t(o)};
      filter[hash(w) / 64] |= uint64_t(1) << (hash(w) % 64);
    }
    needles[k++] = Needle{texts + at, s.size(), min_run};
    // a run of min_run bytes holds min_run - 7 windows: checking every (min_run - 7)th position
    // meets one of them
    stride = std::min(stride, min_run - 7);
    at += s.size() + 1;
  }
  std::sort(table, table + n_windows, [](const Window& a, const Window& b) { return a.bytes < b.bytes; });
  // /proc/self/maps whole, with read(2): no stdio buffer to allocate or free
  size_t maps_len = 0;
  bool complete = false;
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    for (;;) {
      const ssize_t got = read(fd, maps_text + maps_len, kMapsBytes - maps_len);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) break;
      if (got == 0) {
        complete = true;
        break;
      }
      maps_len += size_t(got);
      if (maps_len == kMapsBytes) break;  // larger than any real maps file: incomplete
    }
    close(fd);
  }
  // The private writable mappings (heap, stacks, .data/.bss, anonymous memory)
  size_t n_ranges = 0;
  const auto own_lo = reinterpret_cast<uintptr_t>(whole), own_hi = own_lo + body_pages + 2 * page;
  for (size_t at = 0; complete && at < maps_len;) {
    const char* line = maps_text + at;
    const char* eol = static_cast<const char*>(std::memchr(line, '\n', maps_len - at));
    const size_t line_len = eol != nullptr ? size_t(eol - line) : maps_len - at;
    at += line_len + 1;
    char* end = nullptr;
    const uintptr_t lo = std::strtoull(line, &end, 16);
    if (end == nullptr || *end != '-') {
      complete = false;
      break;
    }
    const uintptr_t hi = std::strtoull(end + 1, &end, 16);
    if (end == nullptr || *end != ' ' || line + line_len < end + 5) {
      complete = false;
      break;
    }
    const char* perms = end + 1;
    if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p') continue;  // shared maps: the worker's
    const std::string_view rest(perms, size_t(line + line_len - perms));
    if (rest.find("[vvar") != std::string_view::npos || rest.find("[vsyscall]") != std::string_view::npos) continue;
    if (hi - lo > kMaxWipedMappingBytes && rest.find("[heap]") == std::string_view::npos) continue;
    // the scan's own mapping, wherever it sits in a line (it cannot merge: its guard pages)
    const uintptr_t parts[2][2] = {{lo, std::min(hi, own_lo)}, {std::max(lo, own_hi), hi}};
    for (const auto& [a, b] : parts) {
      if (a >= b) continue;
      if (n_ranges == kMaxWipedMappings) {
        complete = false;
        break;
      }
      ranges[2 * n_ranges] = a;
      ranges[2 * n_ranges + 1] = b;
      ++n_ranges;
    }
  }
  // Every run of bytes that equals a part of a secret, min_run bytes long or more. Runs are found
  // on the memory as it is and wiped after, so that a wipe never shortens another secret's run.
  int64_t wiped = 0;
  for (size_t r = 0; complete && r < n_ranges; ++r) {
    auto* base = reinterpret_cast<unsigned char*>(ranges[2 * r]);
    const size_t len = ranges[2 * r + 1] - ranges[2 * r];
    size_t wipe_from = 0, wipe_to = 0;  // the pending union of overlapping runs
    for (size_t p = 0; p + 8 <= len; p += stride) {
      uint64_t w;
      std::memcpy(&w, base + p, 8);
      if (has_zero_byte(w)) continue;  // environment values hold no NUL
      const size_t h = hash(w);
      if ((filter[h / 64] >> (h % 64) & 1) == 0) continue;
      const Window* it = std::lower_bound(table, table + n_windows, w,
                                          [](const Window& a, uint64_t v) { return a.bytes < v; });
      for (; it != table + n_windows && it->bytes == w; ++it) {
        const Needle& nd = needles[it->secret];
        size_t start = p, end = p + 8, so = it->offset, eo = it->offset + 8;
        while (start > 0 && so > 0 && base[start - 1] == static_cast<unsigned char>(nd.text[so - 1])) --start, --so;
        while (end < len && eo < nd.size && base[end] == static_cast<unsigned char>(nd.text[eo])) ++end, ++eo;
        if (end - start < nd.min_run) continue;
        if (start <= wipe_to && wipe_to > wipe_from) {  // overlaps or touches the pending run
          wipe_from = std::min(wipe_from, start);
          wipe_to = std::max(wipe_to, end);
        } else {
          if (wipe_to > wipe_from) std::memset(base + wipe_from, 0, wipe_to - wipe_from);
          wipe_from = start;
          wipe_to = end;
          ++wiped;
        }
      }
    }
    if (wipe_to > wipe_from) std::memset(base + wipe_from, 0, wipe_to - wipe_from);
  }
  std::memset(mem, 0, body_pages);
  munmap(whole, body_pages + 2 * page);
  return complete ? wiped : -1;
}

int close_inherited_fds(int keep_fd) {
  std::vector<int> fds;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long fd = std::strtol(e->d_name, &end, 10);
      if (*end == '\0' && fd > 2 && fd != keep_fd && fd != dirfd(d)) fds.push_back(int(fd));
    }
    closedir(d);
  }
  int closed = 0;
  for (int fd : fds) closed += close(fd) == 0;
  return closed;
}

namespace {
// Sets both limits of `resource` to `bytes`, never above an existing hard limit; returns
// the limit applied.
int64_t cap_rlimit(int resource, int64_t bytes) {
  rlimit cur{};
  if (getrlimit(resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY && int64_t(cur.rlim_max) < bytes)
    bytes = int64_t(cur.rlim_max);
  rlimit lim{rlim_t(bytes), rlim_t(bytes)};
  setrlimit(resource, &lim);
  return bytes;
}
}  // namespace

void limit_file_size(int64_t bytes) { cap_rlimit(RLIMIT_FSIZE, bytes); }

int64_t limit_address_space(int64_t memory_limit_mb) {
  return cap_rlimit(RLIMIT_AS, memory_limit_mb > 0 ? memory_limit_mb << 20 : half_of_ram());
}

std::string Confinement::summary() const {
  std::string s = seccomp ? "seccomp" : "no seccomp";
  s += landlock_abi > 0 ? fmt::format(", landlock v{}", landlock_abi) : ", no landlock";
  s += capabilities_dropped ? ", no capabilities" : ", capabilities kept";
  s += fmt::format(", address space {} MiB", memory_limit_bytes >> 20);
  return s;
}

std::vector<std::string> candidate_readable_paths(const std::string& kernel_dir) {
  return {"/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/sys/devices/system/cpu", "/dev/null", "/dev/zero",
          "/dev/urandom", kernel_dir};
}

Confinement confine_candidate(int64_t memory_limit_mb, const std::vector<std::string>& readable) {
  Confinement c;
  c.memory_limit_bytes = limit_address_space(memory_limit_mb);
  rlimit core{0, 0};
  setrlimit(RLIMIT_CORE, &core);  // a crashing candidate leaves no core file
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    fail(ErrorCategory::kBackend, "sandbox: PR_SET_NO_NEW_PRIVS failed ({})", std::strerror(errno));
  scrub_environment();
  c.landlock_abi = apply_landlock(readable);
  c.capabilities_dropped = drop_capabilities();
  apply_seccomp();
  c.seccomp = true;
  return c;
}

}  // namespace thrive::sandbox
