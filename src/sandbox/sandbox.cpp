#include "thrive/sandbox/sandbox.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "thrive/core/error.hpp"
#include "thrive/core/process.hpp"
#include "thrive/core/files.hpp"
#include "thrive/ops/op.hpp"
#include "thrive/sandbox/confine.hpp"

namespace thrive::sandbox {
namespace {

constexpr const char* kStatusNames[] = {"passed",  "compile_failed", "launch_failed", "incorrect",
                                        "timeout", "crashed",        "unsupported"};

// A worker's verdict is a few KiB to a few MiB of JSON; more is a candidate flooding the pipe.
constexpr size_t kMaxResultBytes = size_t(64) << 20;

// What a worker (a candidate's prints, its compiler's and executor's messages, THRIVE's own
// warnings) may put on our stderr: the first kMaxRelayedOutputBytes pass through, then the rest is
// read and counted, and only its last kRelayedTailBytes are shown after a note of what was cut, so a
// candidate printing in a loop neither floods the user's terminal or log (a 40 MB flood was seen)
// nor stalls on a full pipe, and a message the worker writes last (the executor's protocol
// violation) survives a flood before it.
constexpr size_t kMaxRelayedOutputBytes = size_t(64) << 10;
constexpr size_t kRelayedTailBytes = 4096;

// Writes to our stderr only what it takes without blocking: a stderr nobody drains (a paused
// terminal, an MCP client that does not read it) must never stall the loop that enforces the
// candidate's time limit. A pipe or terminal is written through a descriptor of its own opened
// O_NONBLOCK (/proc/self/fd/2: fd 2's own flags stay as they are), a socket with MSG_DONTWAIT, a
// file as it is; a reader that is gone (POLLERR, POLLHUP) gets nothing, so no SIGPIPE.
class StderrWriter {
 public:
  StderrWriter() {
    struct stat st{};
    if (fstat(2, &st) != 0) return;  // closed: nothing is written
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
      fd_ = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      own_ = fd_ >= 0;
    } else {
      fd_ = 2;
      socket_ = S_ISSOCK(st.st_mode);
    }
  }
  ~StderrWriter() {
    if (own_) close(fd_);
  }
  StderrWriter(const StderrWriter&) = delete;
  StderrWriter& operator=(const StderrWriter&) = delete;
  // Returns the bytes written.
  size_t write(const char* data, size_t n) {
    size_t done = 0;
    while (fd_ >= 0 && done < n) {
      pollfd p{fd_, POLLOUT, 0};
      if (poll(&p, 1, 0) <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0 || (p.revents & POLLOUT) == 0) break;
      const ssize_t w = socket_ ? send(fd_, data + done, n - done, MSG_DONTWAIT | MSG_NOSIGNAL)
                                : ::write(fd_, data + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // EAGAIN: full
      done += size_t(w);
    }
    return done;
  }

 private:
  int fd_ = -1;
  bool own_ = false, socket_ = false;
};

// Relays a worker's stdout and stderr (one pipe) to ours, up to kMaxRelayedOutputBytes and a tail
// of kRelayedTailBytes, through a StderrWriter. Candidate text is untrusted: control characters
// become '?', so it cannot move the cursor, hide text or recolour the terminal (ANSI escapes).
struct OutputRelay {
  int fd = -1;
  size_t relayed = 0;   // shown at once
  size_t held = 0;      // read after the first kMaxRelayedOutputBytes (the tail is their last part)
  size_t unwritten = 0; // bytes our stderr would not take without blocking
  std::string tail;     // the last kRelayedTailBytes of what was held
  StderrWriter out;
  // C0 controls but newline and tab, DEL, and the C1 controls in UTF-8 (C2 80..C2 9F: U+009B is a
  // CSI to xterm) become '?'
  static void neutralize(char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const auto c = static_cast<unsigned char>(p[i]);
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) p[i] = '?';
      if (c == 0xc2 && i + 1 < n && (static_cast<unsigned char>(p[i + 1]) & 0xe0) == 0x80) p[i] = p[i + 1] = '?';
    }
  }
  // Reads what is there now; false at end of file or on an error.
  bool pump() {
    char buf[65536];
    const ssize_t got = read(fd, buf, sizeof buf);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (got <= 0) return false;
    neutralize(buf, size_t(got));
    const size_t keep = std::min(size_t(got), kMaxRelayedOutputBytes - relayed);
    if (keep > 0) unwritten += keep - out.write(buf, keep);
    relayed += keep;
    const size_t rest = size_t(got) - keep;
    if (rest > 0) {
      held += rest;
      const size_t take = std::min(rest, kRelayedTailBytes);
      tail.append(buf + size_t(got) - take, take);
      if (tail.size() > kRelayedTailBytes) tail.erase(0, tail.size() - kRelayedTailBytes);
    }
    return true;
  }
  // Takes what is left without waiting (the writers are dead or dying), then says what was cut and
  // shows the tail.
  void finish() {
    if (fd >= 0) {
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
      for (int i = 0; i < 4096; ++i) {
        const size_t before = relayed + held;
        if (!pump() || relayed + held == before) break;
      }
      close(fd);
      fd = -1;
    }
    std::string note;
    if (held > tail.size())
      note = fmt::format("\nthrive: the candidate worker's output was cut after {} bytes ({} more bytes dropped; "
                         "its last {} bytes follow)\n{}", relayed, held - tail.size(), tail.size(), tail);
    else
      note = tail;  // nothing dropped: the tail is simply the rest
    if (unwritten > 0)
      note += fmt::format("\nthrive: {} bytes of the candidate worker's output were dropped: stderr was not "
                          "taking more\n", unwritten);
    out.write(note.data(), note.size());
  }
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

uint64_t fresh_seed(const config::Config& cfg) {
  if (cfg.seed != 0) return cfg.seed;
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

EvalResult evaluate_here(const config::Config& cfg, const std::string& backend_name,
                         const EvalRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  EvalResult r;
  // A failed timed-call check (the benchmark's or the paired loop's) rejects the candidate.
  auto wrong_outputs = [&](const std::string& check) {
    if (!bench::timed_call_check_failed(check)) return false;
    r.status = Status::kIncorrect;
    r.detail = "a checked call's outputs are wrong: " + check;
    r.wall_s = seconds_since(start);
    return true;
  };
  auto backend = backend::make_backend(backend_name, cfg);
  r.device_key = backend->device().key();
  const auto& op = ops::find_op(request.kernel.op);
  // A CPU candidate's code never runs in this process: each module gets an executor process,
  // exec'd with none of THRIVE's memory, that keeps only its socket, confines itself
  // (confine.hpp) and then loads the candidate;
  // verification, timing and the result pipe stay here, out of its reach (cpu_executor.hpp).
  // The host compiler (a hostile #include can make it grow without bound) and the executor
  // live under the worker's address-space limit.
  if (backend_name == "cpu" && cfg.confine) {
    limit_address_space(cfg.worker_memory_mb);
    limit_file_size(int64_t(512) << 20);
    backend::CandidateIsolation isolation;
    isolation.memory_limit_mb = cfg.worker_memory_mb;
    isolation.readable = candidate_readable_paths(cfg.home + "/cache/cpu");
    isolation.program = cfg.cpu_executor;
    backend->isolate_candidates(isolation);
  }
  auto compiled = backend->compile(request.kernel);
  if (!compiled.confinement.empty()) r.confinement = compiled.confinement;
  r.compile_log = utf8_prefix(compiled.log, 16384);
  r.compile_cached = compiled.cached;
  r.compile_s = compiled.compile_s;
  if (!compiled.module) {
    r.status = Status::kCompileFailed;
    // One line for people: the first line naming an error, else the first non-blank line.
    auto first = compiled.log.find("error");
    if (first == std::string::npos) first = compiled.log.find_first_not_of(" \t\r\n");
    r.detail = first == std::string::npos ? "compiler gave no output" : compiled.log.substr(first, 300);
    auto nl = r.detail.find('\n');
    if (nl != std::string::npos) r.detail.resize(nl);
    return r;
  }
  r.stats = compiled.module->stats;
  backend->shape_stats(*compiled.module, request.bench_shape.shape, r.stats);
  const uint64_t seed = fresh_seed(cfg);
  const auto shapes = verify::verification_shapes(op, cfg.model, &request.bench_shape, request.verify_bench_shape);
  if (request.verify) {
    auto t = std::chrono::steady_clock::now();
    const std::vector<ops::Distribution> dists = {
        ops::Distribution::kNormal, ops::Distribution::kMixedSigns,
        ops::Distribution::kLargeMagnitude, ops::Distribution::kNearZero};
    r.verify = verify::verify_kernel(*backend, op, *compiled.module, cfg.model, shapes, dists, seed);
    r.verify_s = seconds_since(t);
    if (!r.verify.passed) {
      r.status = r.verify.unsupported ? Status::kUnsupported : Status::kIncorrect;
      r.detail = r.verify.failure;
      r.wall_s = seconds_since(start);
      return r;
    }
  }
  if (request.bench) {
    auto t = std::chrono::steady_clock::now();
    bench::BenchOptions opts{cfg.bench_max_s, cfg.bench_min_reps, cfg.bench_noise};
    if (request.verify)
      opts.check_timed_call = [&](const ops::Shape& shape, const std::vector<ops::HostTensor>& before,
                                  const std::vector<ops::HostTensor>& after) {
        return verify::check_call(op, shape, cfg.model, before, after);
      };
    r.bench = bench::benchmark_kernel(*backend, op, *compiled.module, request.bench_shape,
                                      cfg.model, opts, request.peak_bw_gbps, seed + 1);
    r.bench_s = seconds_since(t);
    if (r.bench.reps == 0) {
      r.status = Status::kLaunchFailed;
      r.detail = "kernel returned non-zero at the benchmark shape " + request.bench_shape.label;
      r.wall_s = seconds_since(start);
      return r;
    }
    if (wrong_outputs(r.bench.timed_call_check)) return r;
    // Verify again on fresh inputs after the many benchmark calls: catches kernels that
    // go wrong after N calls or keep state between calls.
    if (request.verify) {
      auto t2 = std::chrono::steady_clock::now();
      std::vector<ops::ShapeCase> again = {shapes.front()};
      if (shapes.back().label != shapes.front().label) again.push_back(shapes.back());
      r.post_verify = verify::verify_kernel(*backend, op, *compiled.module, cfg.model, again,
                                            {ops::Distribution::kMixedSigns}, seed + 2);
      r.verify_s += seconds_since(t2);
      if (!r.post_verify.passed) {
        r.status = r.post_verify.unsupported ? Status::kUnsupported : Status::kIncorrect;
        r.detail = "after benchmarking: " + r.post_verify.failure;
        r.wall_s = seconds_since(start);
        return r;
      }
    }
    if (request.paired_baseline && !r.bench.below_floor) {
      // The baseline was benchmarked before, so its build is usually cached; on the CPU it
      // gets an executor of its own, like the candidate.
      auto base = backend->compile(*request.paired_baseline);
      if (base.module) {
        auto t3 = std::chrono::steady_clock::now();
        bench::BenchOptions popts{cfg.bench_max_s, cfg.bench_min_reps, cfg.bench_noise};
        popts.check_timed_call = opts.check_timed_call;
        r.paired = bench::paired_benchmark(*backend, op, *base.module, *compiled.module,
                                           request.bench_shape, cfg.model, popts, seed + 3);
        r.bench_s += seconds_since(t3);
        if (wrong_outputs(r.paired.timed_call_check)) return r;
        // The candidate returned non-zero in the paired loop (or the baseline did: either way
        // there is no comparison): a kernel that fails when paired is not accepted on its
        // unpaired figures. (Its outputs there are checked too: checked_batch.)
        if (r.paired.pairs == 0) {
          r.status = Status::kIncorrect;
          r.detail = "paired timing against the baseline failed: a call returned non-zero";
          r.wall_s = seconds_since(start);
          return r;
        }
      }
    }
    if (r.bench.below_floor) {
      r.status = Status::kIncorrect;
      r.detail = fmt::format("suspect timing: {:.1f} GB/s is above the measured ceiling {:.1f} GB/s",
                             r.bench.bandwidth_gbps, r.bench.peak_bw_gbps);
      r.wall_s = seconds_since(start);
      return r;
    }
  }
  r.status = Status::kPassed;
  r.detail = request.verify ? fmt::format("verified: max_rel_err {:.3g}, nmse {:.3g}",
                                          r.verify.max_rel_err, r.verify.nmse)
                            : "compiled";
  r.wall_s = seconds_since(start);
  return r;
}

// SIGKILLs every process of session `sid` (a worker's compilers and their children,
// which outlive the worker in process groups of their own).
void kill_session(pid_t sid) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    // read(2), not a stream: a process that exits between open and read fails the read with
    // ESRCH, which libstdc++'s filebuf turns into an exception
    std::string stat;
    const int fd = open((std::string("/proc/") + e->d_name + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[1024];
    const ssize_t got = read(fd, buf, sizeof buf);
    close(fd);
    if (got <= 0) continue;
    stat.assign(buf, size_t(got));
    const auto paren = stat.rfind(')');  // the command name may hold spaces and ')'
    if (paren == std::string::npos) continue;
    char state = 0;
    long ppid = 0, pgrp = 0, session = 0;
    if (std::sscanf(stat.c_str() + paren + 1, " %c %ld %ld %ld", &state, &ppid, &pgrp, &session) == 4 &&
        session == sid)
      kill(pid_t(pid), SIGKILL);
  }
  closedir(proc);
}

}  // namespace

const char* status_name(Status s) { return kStatusNames[int(s)]; }

Status status_from_name(const std::string& name) {
  for (int i = 0; i < 7; ++i)
    if (name == kStatusNames[i]) return Status(i);
  fail(ErrorCategory::kInput, "status '{}': expected one of passed, compile_failed, "
       "launch_failed, incorrect, timeout, crashed, unsupported", name);
}

std::optional<nlohmann::json> run_isolated(const std::function<nlohmann::json()>& work,
                                           double timeout_s, Status& status, std::string& detail) {
  int fds[2], out_fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) fail(ErrorCategory::kBackend, "pipe: {}", std::strerror(errno));
  if (pipe2(out_fds, O_CLOEXEC) != 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    fail(ErrorCategory::kBackend, "pipe: {}", std::strerror(err));
  }
  std::fflush(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {fds[0], fds[1], out_fds[0], out_fds[1]}) close(fd);
    fail(ErrorCategory::kBackend, "fork: {}", std::strerror(err));
  }
  if (pid == 0) {
    // The worker dies with the process that waits for it (killed, say, by SIGKILL): an orphan
    // would keep a candidate, or a bandwidth measurement whose lock its parent held, running
    // until its own end. The check after it covers a parent gone before the prctl.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(3);
    close(fds[0]);
    close(out_fds[0]);
    // A session of its own: run_process puts each compiler in a process group of its
    // own, so only the session id ties everything the worker spawned to it.
    setsid();
    // A candidate's prints must never reach our stdout (tables, JSON, MCP): both go to the
    // parent's relay, which passes the first kMaxRelayedOutputBytes on to its stderr.
    dup2(out_fds[1], 1);
    dup2(out_fds[1], 2);
    close(out_fds[1]);
    const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0) dup2(null_fd, 0);  // nor read our stdin (an MCP client's requests)
    close_inherited_fds(fds[1]);
    std::string out;
    // (an error's text may quote a path that is not UTF-8, such as THRIVE_HOME's)
    constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
    try {
      // A compiler log cut mid-character must not turn a verdict into a dump error.
      out = work().dump(-1, ' ', false, kReplace);
    } catch (const Error& e) {
      out = nlohmann::json{{"__error", e.what()}, {"__category", int(e.category())}}.dump(-1, ' ', false, kReplace);
    } catch (const std::bad_alloc&) {
      out = nlohmann::json{{"__error", "out of memory in the worker (are the THRIVE_* model "
                                       "dimensions or shapes larger than this machine can hold?)"},
                           {"__category", int(ErrorCategory::kBackend)}}.dump(-1, ' ', false, kReplace);
    } catch (const std::exception& e) {
      out = nlohmann::json{{"__error", e.what()}, {"__category", int(ErrorCategory::kInternal)}}.dump(-1, ' ', false, kReplace);
    }
    bool ok = write_all(fds[1], out.data(), out.size());
    _exit(ok ? 0 : 3);
  }
  close(fds[1]);
  close(out_fds[1]);
  OutputRelay relay{out_fds[0]};
  std::string data;
  char buf[65536];
  const auto start = std::chrono::steady_clock::now();
  bool timed_out = false;
  auto kill_worker = [pid] {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
  };
  for (;;) {
    double left = timeout_s - seconds_since(start);
    if (left <= 0) {
      timed_out = true;
      kill_worker();
      break;
    }
    pollfd p[2] = {{fds[0], POLLIN, 0}, {relay.fd, short(relay.fd >= 0 ? POLLIN : 0), 0}};
    int n = poll(p, 2, int(std::min(left, 0.25) * 1000) + 1);
    if (n < 0 && errno != EINTR) break;
    if (n > 0 && p[1].revents != 0 && !relay.pump()) {  // the worker closed its output
      close(relay.fd);
      relay.fd = -1;
    }
    if (n > 0 && p[0].revents != 0) {
      ssize_t got = read(fds[0], buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      if (data.size() + size_t(got) > kMaxResultBytes) {  // a flood, not a verdict
        kill_worker();
        data = "flood";
        break;
      }
      data.append(buf, size_t(got));
    }
  }
  close(fds[0]);
  // The pipe closed (the worker finished, or a candidate closed it): the worker still
  // gets only what is left of its time limit to exit.
  int wstatus = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &wstatus, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (seconds_since(start) > timeout_s) {
      timed_out = true;
      kill_worker();
      while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    usleep(2000);
  }
  kill(-pid, SIGKILL);  // anything the worker spawned (a compiler) goes too
  kill_session(pid);
  relay.finish();
  if (timed_out) {
    status = Status::kTimeout;
    detail = fmt::format("no result within {:.1f} s; worker killed", timeout_s);
    return std::nullopt;
  }
  if (WIFSIGNALED(wstatus)) {
    status = Status::kCrashed;
    detail = fmt::format("worker killed by signal {} ({})", WTERMSIG(wstatus),
                         strsignal(WTERMSIG(wstatus)));
    return std::nullopt;
  }
  auto parsed = nlohmann::json::parse(data, nullptr, false);
  if (parsed.is_discarded() || (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0)) {
    status = Status::kCrashed;
    detail = fmt::format("worker exited with status {} and {} bytes of unreadable result",
                         WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, data.size());
    return std::nullopt;
  }
  if (parsed.contains("__error"))
    throw Error(ErrorCategory(parsed.value("__category", int(ErrorCategory::kInternal))),
                parsed.value("__error", std::string("worker failed")));
  return parsed;
}

EvalResult evaluate(const config::Config& cfg, const std::string& backend_name,
                    const EvalRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  Status status = Status::kCrashed;
  std::string detail;
  auto json = run_isolated(
      [&] {
        try {
          nlohmann::json j = evaluate_here(cfg, backend_name, request);
          return j;
        } catch (const Error& e) {
          // A sticky device fault (illegal address, ...) raised while the candidate ran:
          // the context is gone with this worker; the candidate crashed, the loop goes on.
          if (e.category() != ErrorCategory::kDevice) throw;
          EvalResult crashed;
          crashed.status = Status::kCrashed;
          crashed.detail = e.what();
          nlohmann::json j = crashed;
          return j;
        }
      },
      cfg.candidate_timeout_s, status, detail);
  EvalResult r;
  if (json) {
    r = json->get<EvalResult>();
  } else {
    r.status = status;
    r.detail = detail;
  }
  r.wall_s = seconds_since(start);
  return r;
}

void to_json(nlohmann::json& j, const EvalResult& r) {
  j = {{"status", status_name(r.status)},
       {"detail", r.detail},
       {"compile_log", utf8_prefix(r.compile_log, 16384)},
       {"compile_cached", r.compile_cached},
       {"compile_s", r.compile_s},
       {"verify_s", r.verify_s},
       {"bench_s", r.bench_s},
       {"wall_s", r.wall_s},
       {"registers_per_thread", r.stats.registers_per_thread},
       {"spilled_bytes", r.stats.spilled_bytes},
       {"static_smem_bytes", r.stats.static_smem_bytes},
       {"dynamic_smem_bytes", r.stats.dynamic_smem_bytes},
       {"occupancy", r.stats.occupancy},
       {"verify", r.verify},
       {"post_verify", r.post_verify},
       {"bench", r.bench},
       {"device_key", r.device_key},
       {"confinement", r.confinement},
       {"paired", r.paired}};
}

void from_json(const nlohmann::json& j, EvalResult& r) {
  r.status = status_from_name(j.value("status", "crashed"));
  r.detail = j.value("detail", "");
  r.compile_log = j.value("compile_log", "");
  r.compile_cached = j.value("compile_cached", false);
  r.compile_s = j.value("compile_s", 0.0);
  r.verify_s = j.value("verify_s", 0.0);
  r.bench_s = j.value("bench_s", 0.0);
  r.wall_s = j.value("wall_s", 0.0);
  r.stats.registers_per_thread = j.value("registers_per_thread", 0);
  r.stats.spilled_bytes = j.value("spilled_bytes", int64_t{0});
  r.stats.static_smem_bytes = j.value("static_smem_bytes", int64_t{0});
  r.stats.dynamic_smem_bytes = j.value("dynamic_smem_bytes", int64_t{0});
  r.stats.occupancy = j.value("occupancy", 0.0);
  if (j.contains("verify")) r.verify = j["verify"].get<verify::VerifyReport>();
  if (j.contains("post_verify")) r.post_verify = j["post_verify"].get<verify::VerifyReport>();
  if (j.contains("bench")) r.bench = j["bench"].get<bench::BenchStats>();
  r.device_key = j.value("device_key", "");
  r.confinement = j.value("confinement", "");
  if (j.contains("paired")) {
    const auto& p = j["paired"];
    r.paired.a_median_us = p.value("a_median_us", 0.0);
    r.paired.b_median_us = p.value("b_median_us", 0.0);
    r.paired.ratio = p.value("ratio", 0.0);
    r.paired.ratio_ci = p.value("ratio_ci", 0.0);
    r.paired.timed_call_check = p.value("timed_call_check", "");
    r.paired.pairs = p.value("pairs", 0);
  }
}

}  // namespace thrive::sandbox
