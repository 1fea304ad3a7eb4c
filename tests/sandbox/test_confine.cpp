// Adversarial CPU candidates against the worker's confinement (seccomp, Landlock,
// closed inherited descriptors, address-space limit) and the verdict checks added
// around the benchmark (verification after timing). Each trick must fail while the
// candidate's honest work still passes, or the candidate must be rejected.
#include <gtest/gtest.h>

#include <filesystem>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <thread>

#include "tests/support/test_support.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"
#include "thrive/sandbox/confine.hpp"
#include "thrive/sandbox/sandbox.hpp"

namespace thrive::sandbox {
namespace {

class Confine : public ::testing::Test {
 protected:
  test::TempDir home;
  config::Config cfg = [this] {
    auto c = test::fast_config(home.path());
    c.model = test::small_model();
    c.seed = 91;
    return c;
  }();

  EvalResult run(const std::string& body, const std::string& prelude, bool bench = false) {
    EvalRequest r;
    r.kernel = backend::KernelSource::parse(test::kernel_text("rmsnorm_residual", body, prelude), "k.cpp");
    r.bench_shape = {"T=16", {{"T", 16}, {"H", cfg.model.hidden}}};
    r.bench = bench;
    return evaluate(cfg, "cpu", r);
  }
};

TEST(ConfineWorker, ForkExecSocketsSignalsAndFileWritesFailThreadsStillRun) {
  test::TempDir dir;
  const std::string victim = test::write_text(dir.path() + "/victim.txt", "keep me");
  std::filesystem::create_directories(dir.path() + "/readable");
  test::write_text(dir.path() + "/readable/ok.txt", "a compiled kernel");
  Status status{};
  std::string detail;
  const pid_t parent = getpid();
  auto out = run_isolated(
      [&] {
        setenv("ANTHROPIC_API_KEY", "sk-test-not-for-candidates", 1);
        setenv("OMP_NUM_THREADS", "2", 1);
        auto c = confine_candidate(0, candidate_readable_paths(dir.path() + "/readable"));
        nlohmann::json j;
        j["key_seen"] = getenv("ANTHROPIC_API_KEY") != nullptr;
        j["omp_kept"] = getenv("OMP_NUM_THREADS") != nullptr;
        j["read_allowed"] = open((dir.path() + "/readable/ok.txt").c_str(), O_RDONLY) >= 0;
        j["read_system"] = open("/usr/include/stdio.h", O_RDONLY) >= 0 || !std::filesystem::exists("/usr/include/stdio.h");
        j["seccomp"] = c.seccomp;
        j["landlock"] = c.landlock_abi;
        errno = 0;
        const pid_t child = fork();
        if (child == 0) _exit(0);
        j["fork"] = child;
        j["fork_errno"] = errno;
        char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
        j["exec"] = execv("/bin/true", argv);
        j["socket"] = socket(AF_INET, SOCK_STREAM, 0);
        j["io_uring"] = syscall(__NR_io_uring_setup, 8, nullptr);
        j["kill_parent"] = kill(parent, 0);
        j["kill_self"] = kill(getpid(), 0);
        j["create"] = open((dir.path() + "/new.txt").c_str(), O_CREAT | O_WRONLY, 0644);
        j["write_existing"] = open(victim.c_str(), O_WRONLY | O_TRUNC);
        j["unlink"] = unlink(victim.c_str());
        j["read_existing"] = open(victim.c_str(), O_RDONLY) >= 0;
        int sum = 0;
        std::thread t([&] { sum = 42; });
        t.join();
        j["thread"] = sum;
        return j;
      },
      30, status, detail);
  ASSERT_TRUE(out.has_value()) << detail;
  const auto& j = *out;
  EXPECT_TRUE(j["seccomp"].get<bool>());
  EXPECT_EQ(j["fork"], -1);
  EXPECT_EQ(j["fork_errno"], EPERM);
  EXPECT_EQ(j["exec"], -1);
  EXPECT_EQ(j["socket"], -1);
  EXPECT_EQ(j["io_uring"], -1);
  EXPECT_EQ(j["kill_parent"], -1);
  EXPECT_EQ(j["kill_self"], 0);
  EXPECT_EQ(j["thread"], 42);
  // the environment holds no API key, and OpenMP's settings are kept
  EXPECT_FALSE(j["key_seen"].get<bool>());
  EXPECT_TRUE(j["omp_kept"].get<bool>());
  EXPECT_TRUE(j["read_allowed"].get<bool>());
  EXPECT_TRUE(j["read_system"].get<bool>());
  if (j["landlock"].get<int>() == 0) {
    EXPECT_TRUE(j["read_existing"].get<bool>());
    GTEST_SKIP() << "this kernel has no Landlock: file confinement not checked";
  }
  // a file outside the readable paths cannot be read (a kernel could encode it into its outputs)
  EXPECT_FALSE(j["read_existing"].get<bool>());
  EXPECT_EQ(j["create"], -1);
  EXPECT_EQ(j["write_existing"], -1);
  EXPECT_EQ(j["unlink"], -1);
  EXPECT_EQ(test::slurp(victim), "keep me");
}

// The executor is a fork of a process that may hold copies of an API key (an LLM client's key and
// its "x-api-key: ..." header, a freed buffer): confinement wipes them from the fork's private
// memory, and only there; a variable not named like a credential is removed but not hunted.
TEST(ConfineWorker, CopiesOfACredentialInTheForksMemoryAreWiped) {
  const std::string key = std::string("sk-thrive-") + "wipe-test-" + std::to_string(getpid()) + "-0123456789";
  const std::string plain = std::string("plain-") + "value-" + std::to_string(getpid());
  static char data_copy[128];
  std::snprintf(data_copy, sizeof data_copy, "%s", key.c_str());
  auto* header = new std::string("x-api-key: " + key);
  char* freed = static_cast<char*>(std::malloc(256));
  std::snprintf(freed, 256, "Authorization: Bearer %s", key.c_str());
  std::free(freed);
  auto* plain_copy = new std::string(plain);
  auto* short_copy = new std::string("shortk");
  // a freed buffer's copy: the allocator wrote over its first 16 bytes, the rest is the key's
  auto* freed_like = new char[128]();
  std::memcpy(freed_like, "0123456789abcdef", 16);
  std::memcpy(freed_like + 16, key.data() + 16, key.size() - 16);
  // 10 bytes of the key: under the 12-byte fragment bound, kept
  auto* short_fragment = new std::string(key.substr(3, 10));
  // an existing path under a credential-like name (SSH_AUTH_SOCK's kind): where a secret is, not one
  test::TempDir sock_dir;
  auto* auth_path = new std::string(test::write_text(sock_dir.path() + "/agent.sock", ""));
  // a copy in a buffer of its own mapping (malloc's mmap above 128 KiB), created before the scan's
  // tables are mapped, and so above them in a top-down address space
  auto* big = static_cast<char*>(std::malloc(size_t(4) << 20));
  std::memset(big, 'b', size_t(4) << 20);
  std::memcpy(big + (size_t(1) << 20), key.data(), key.size());
  setenv("THRIVE_TEST_API_KEY", key.c_str(), 1);
  setenv("THRIVE_TEST_SHORT_TOKEN", "shortk", 1);
  setenv("THRIVE_TEST_PLAIN", plain.c_str(), 1);
  setenv("THRIVE_TEST_AUTH_SOCK", auth_path->c_str(), 1);
  test::TempDir dir;
  Status status{};
  std::string detail;
  auto out = run_isolated(
      [&] {
        confine_candidate(0, candidate_readable_paths(dir.path()));
        nlohmann::json j;
        j["header"] = header->substr(0, 11);
        j["header_tail_zero"] = std::all_of(header->begin() + 11, header->end(), [](char c) { return c == 0; });
        j["data_zero"] = data_copy[0] == 0;
        j["plain_kept"] = *plain_copy == "plain-value-" + std::to_string(getppid());
        j["short_kept"] = *short_copy == "shortk";
        j["env_gone"] = getenv("THRIVE_TEST_API_KEY") == nullptr && getenv("THRIVE_TEST_PLAIN") == nullptr;
        j["freed_prefix_kept"] = std::string(freed_like, 16) == "0123456789abcdef";
        j["freed_rest_zero"] = std::all_of(freed_like + 16, freed_like + key.size(), [](char c) { return c == 0; });
        j["short_fragment_kept"] = short_fragment->size() == 10 && (*short_fragment)[0] != 0;
        j["big_zero"] = std::all_of(big + (size_t(1) << 20), big + (size_t(1) << 20) + key.size(),
                                    [](char c) { return c == 0; });
        j["big_rest_kept"] = big[(size_t(1) << 20) - 1] == 'b' && big[(size_t(1) << 20) + key.size()] == 'b';
        j["auth_path_kept"] = *auth_path == sock_dir.path() + "/agent.sock";
        return j;
      },
      30, status, detail);
  unsetenv("THRIVE_TEST_API_KEY");
  unsetenv("THRIVE_TEST_SHORT_TOKEN");
  unsetenv("THRIVE_TEST_PLAIN");
  unsetenv("THRIVE_TEST_AUTH_SOCK");
  ASSERT_TRUE(out.has_value()) << detail;
  const auto& j = *out;
  EXPECT_EQ(j["header"], "x-api-key: ");
  EXPECT_TRUE(j["header_tail_zero"].get<bool>());
  EXPECT_TRUE(j["data_zero"].get<bool>());
  EXPECT_TRUE(j["plain_kept"].get<bool>());
  EXPECT_TRUE(j["short_kept"].get<bool>()) << "values under 8 bytes are not searched for";
  EXPECT_TRUE(j["env_gone"].get<bool>());
  EXPECT_TRUE(j["freed_prefix_kept"].get<bool>());
  EXPECT_TRUE(j["freed_rest_zero"].get<bool>()) << "a copy missing its first 16 bytes is wiped too";
  EXPECT_TRUE(j["short_fragment_kept"].get<bool>());
  EXPECT_TRUE(j["auth_path_kept"].get<bool>());
  EXPECT_TRUE(j["big_zero"].get<bool>()) << "a copy in a mapping above the scan's own";
  EXPECT_TRUE(j["big_rest_kept"].get<bool>());
  // the parent's copies are its own
  EXPECT_EQ(*header, "x-api-key: " + key);
  EXPECT_STREQ(data_copy, key.c_str());
  delete header;
  delete plain_copy;
  delete short_copy;
  delete[] freed_like;
  delete short_fragment;
  delete auth_path;
  std::free(big);
}

TEST(ConfineWorker, CredentialNamesAreMatchedByWord) {
  for (const char* yes : {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN", "PGPASSWORD", "NGROK_AUTHTOKEN",
                          "MYSQL_PWD", "REDISCLI_AUTH", "AWS_SECRET_ACCESS_KEY", "GOOGLE_CREDENTIALS", "GH_PAT",
                          "my_api_key", "SSH_AUTH_SOCK"})
    EXPECT_TRUE(names_a_credential(yes)) << yes;
  for (const char* no : {"HOME", "PATH", "PWD", "OLDPWD", "XAUTHORITY", "KEYBOARD_LAYOUT", "TOKENIZERS_PARALLELISM",
                         "PATTERN", "THRIVE_HOME"})
    EXPECT_FALSE(names_a_credential(no)) << no;
}

// A credential's value that is also part of the kernel's path: the candidate could read it there
// (its own path), so no executor starts, and the error names the variable.
TEST_F(Confine, ACredentialInsideTheKernelsPathFailsClosed) {
  setenv("THRIVE_TEST_TOKEN", home.path().substr(1).c_str(), 1);  // not a path itself: it has no leading '/'
  try {
    (void)run(test::rmsnorm_body(), "");
    ADD_FAILURE() << "a candidate ran with a credential in its path";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kUsage) << e.what();
    EXPECT_NE(std::string(e.what()).find("THRIVE_TEST_TOKEN is named like a credential"), std::string::npos) << e.what();
  }
  unsetenv("THRIVE_TEST_TOKEN");
}

TEST(ConfineWorker, WipePrivateCopiesCountsEveryCopyAndSkipsShortValues) {
  Status status{};
  std::string detail;
  auto out = run_isolated(
      [] {
        const std::string key = std::string("sk-count-") + "0123456789abcdef";
        std::vector<std::string> copies(5, "prefix " + key + " suffix");
        nlohmann::json j;
        j["wiped"] = wipe_private_copies({key, "short"});
        j["left"] = std::count_if(copies.begin(), copies.end(),
                                  [](const std::string& c) { return c.find("0123456789abcdef") != std::string::npos; });
        j["kept_text"] = copies[0].substr(0, 7) + copies[0].substr(7 + 25);
        return j;
      },
      30, status, detail);
  ASSERT_TRUE(out.has_value()) << detail;
  EXPECT_GE((*out)["wiped"].get<int>(), 6) << "five copies, the key string itself, and its temporaries";
  EXPECT_EQ((*out)["left"], 0);
  EXPECT_EQ((*out)["kept_text"], "prefix  suffix");
}

TEST(ConfineWorker, AWorkerThatClosesItsPipeAndHangsStillTimesOut) {
  Status status{};
  std::string detail;
  const auto t0 = std::chrono::steady_clock::now();
  auto out = run_isolated(
      [] {
        for (int fd = 3; fd < 1024; ++fd) close(fd);
        pause();
        return nlohmann::json();
      },
      1.0, status, detail);
  EXPECT_FALSE(out.has_value());
  EXPECT_EQ(status, Status::kTimeout) << detail;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

TEST(ConfineWorker, AFloodedResultPipeIsCutOffNotBuffered) {
  Status status{};
  std::string detail;
  auto out = run_isolated(
      [] {
        static char junk[1 << 16];
        memset(junk, ' ', sizeof junk);
        for (int i = 0; i < 4096; ++i)  // 256 MiB of whitespace
          for (int fd = 3; fd < 16; ++fd) (void)!write(fd, junk, sizeof junk);
        return nlohmann::json();
      },
      60, status, detail);
  EXPECT_FALSE(out.has_value());
  EXPECT_EQ(status, Status::kCrashed) << detail;
}

TEST(ConfineWorker, WorkersCannotReadOurStdin) {
  Status status{};
  std::string detail;
  auto out = run_isolated(
      [] {
        char c;
        return nlohmann::json(read(0, &c, 1));  // /dev/null: end of file at once
      },
      30, status, detail);
  ASSERT_TRUE(out.has_value()) << detail;
  EXPECT_EQ(out->get<int>(), 0);
}

TEST(ConfineWorker, InheritedDescriptorsAreClosedInEveryWorker) {
  test::TempDir dir;
  const int fd = open(test::write_text(dir.path() + "/f", "x").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  Status status{};
  std::string detail;
  auto out = run_isolated([&] { return nlohmann::json(fcntl(fd, F_GETFD)); }, 30, status, detail);
  close(fd);
  ASSERT_TRUE(out.has_value()) << detail;
  EXPECT_EQ(out->get<int>(), -1) << "the parent's descriptor is still open in the worker";
}

// A correct kernel that first tries every escape; if any works it corrupts its output,
// so the verdict says whether the confinement held.
TEST_F(Confine, EscapeAttemptsFailAndTheHonestWorkStillPasses) {
  const std::string prelude = R"(
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
static int escaped(void) {
  int e = 0;
  pid_t p = fork();
  if (p == 0) _exit(0);
  e += p >= 0;
  e += kill(getppid(), SIGKILL) == 0;
  e += socket(AF_INET, SOCK_DGRAM, 0) >= 0;
  struct stat st;
  for (int fd = 3; fd < 256; ++fd)  // the parent's memory.db and its WAL, log files
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) e += write(fd, "garbage", 7) > 0;
  e += open("/tmp/thrive-escape-test", O_CREAT | O_WRONLY, 0644) >= 0;
  // signals through file ownership (F_SETOWN + F_SETSIG + O_ASYNC), leaving the process group,
  // dropping the parent-death signal, and steering the worker's scheduling or limits
  int fds[2];
  if (pipe(fds) == 0) {
    e += fcntl(fds[0], F_SETOWN, getppid()) == 0;
    e += fcntl(fds[0], F_SETSIG, SIGKILL) == 0;
  }
  e += setsid() >= 0;
  e += setpgid(0, 0) == 0;
  e += prctl(PR_SET_PDEATHSIG, 0) == 0;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  e += sched_setaffinity(getppid(), sizeof one, &one) == 0;
  e += setpriority(PRIO_PROCESS, (id_t)getppid(), 19) == 0;
  struct rlimit r = {1, 1};
  e += prlimit(getppid(), RLIMIT_NOFILE, &r, NULL) == 0;
  e += (int)syscall(SYS_memfd_create, "x", 0) >= 0;
  return e;
}
)";
  const auto r = run(test::rmsnorm_body("if (escaped()) for (int64_t i = 0; i < T * H; ++i) out[i] = 0;"),
                     prelude);
  EXPECT_EQ(r.status, Status::kPassed) << r.detail;
  EXPECT_NE(r.confinement.find("seccomp"), std::string::npos) << r.confinement;
}

// A kernel reads no file outside the system's libraries and the compiled kernels, and sees no
// API key in its environment: either could be encoded into its outputs and read back from the
// verifier's messages (an adversarial helper did, 4 bytes a run, 2026-12-07).
TEST_F(Confine, KernelsReadNoUserFileAndNoApiKey) {
  const std::string secret = test::write_text(home.path() + "/../secret-" + std::to_string(getpid()) + ".txt", "SECRET");
  setenv("ANTHROPIC_API_KEY", "sk-test-not-for-candidates", 1);
  const std::string prelude = "#include <stdio.h>\n#include <stdlib.h>\n"
                              "static int leaked(void) {\n"
                              "  FILE* f = fopen(\"" + secret + "\", \"r\");\n"
                              "  if (f) { fclose(f); return 1; }\n"
                              "  return getenv(\"ANTHROPIC_API_KEY\") != NULL ? 2 : 0;\n}\n";
  const auto r = run(test::rmsnorm_body("if (leaked()) for (int64_t i = 0; i < T * H; ++i) out[i] = 0;"), prelude);
  unsetenv("ANTHROPIC_API_KEY");
  std::filesystem::remove(secret);
  if (r.confinement.find("no landlock") != std::string::npos) GTEST_SKIP() << "no Landlock here: " << r.confinement;
  EXPECT_EQ(r.status, Status::kPassed) << r.detail << " (" << r.confinement << ")";
}

// What Landlock does not govern (file metadata; truncation before its ABI 3) and what root's
// capabilities would allow: each attempt fails, the file keeps its bytes and mode, and the
// kernel, which zeroes its output when any attempt succeeds, passes (an adversarial helper did
// all of these from a kernel, 2026-12-07). kill(0, 0) probes the process group: the worker's.
TEST_F(Confine, FileMetadataTheMachineAndTheProcessGroupAreOutOfReach) {
  // in the compiled kernels' directory, which a kernel may read (and so open for an ioctl)
  std::filesystem::create_directories(home.path() + "/cache/cpu");
  const std::string victim = test::write_text(home.path() + "/cache/cpu/victim-" + std::to_string(getpid()) + ".txt", "KEEP");
  std::filesystem::permissions(victim, std::filesystem::perms(0644));
  const std::string prelude = "#include <fcntl.h>\n#include <signal.h>\n#include <sys/stat.h>\n#include <sys/syscall.h>\n"
                              "#include <sys/ioctl.h>\n#include <sys/xattr.h>\n#include <unistd.h>\n#include <linux/capability.h>\n"
                              "static int escaped(void) {\n"
                              "  const char* v = \"" + victim + "\";\n"
                              "  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};\n"
                              "  struct __user_cap_data_struct d[2] = {{0, 0, 0}, {0, 0, 0}};\n"
                              "  int n = 0;\n"
                              "  n += truncate(v, 0) == 0;\n"
                              "  n += chmod(v, 0) == 0;\n"
                              "  n += chown(v, 65534, 65534) == 0;\n"
                              "  n += utimensat(AT_FDCWD, v, 0, 0) == 0;\n"
                              "  n += setxattr(v, \"user.x\", \"1\", 1, 0) == 0;\n"
                              "  n += kill(0, 0) == 0;\n"
                              "  n += sethostname(\"x\", 0) == 0;\n"
                              // calls newer than a denylist could name: fchmodat2, setxattrat
                              "  n += syscall(452, AT_FDCWD, v, 0, 0) == 0;\n"
                              "  n += syscall(463, AT_FDCWD, v, 0, \"user.y\", (void*)0, 0) == 0;\n"
                              "  int fd = open(v, O_RDONLY);\n"
                              "  long flags = 0;\n"
                              "  if (fd >= 0) { n += ioctl(fd, 0x40086602 /* FS_IOC_SETFLAGS */, &flags) == 0; close(fd); }\n"
                              "  n += syscall(SYS_capget, &h, d) == 0 && (d[0].effective | d[0].permitted | d[1].effective) != 0;\n"
                              "  return n;\n}\n";
  const auto r = run(test::rmsnorm_body("if (escaped()) for (int64_t i = 0; i < T * H; ++i) out[i] = 0;"), prelude);
  const auto mode = std::filesystem::status(victim).permissions();
  const std::string content = read_file(victim);
  std::filesystem::remove(victim);
  EXPECT_EQ(r.status, Status::kPassed) << r.detail << " (" << r.confinement << ")";
  EXPECT_EQ(content, "KEEP");
  EXPECT_EQ(mode, std::filesystem::perms(0644));
  EXPECT_NE(r.confinement.find("no capabilities"), std::string::npos) << r.confinement;
}

TEST_F(Confine, StaticConstructorsRunConfinedToo) {
  // Code that runs when the shared object is loaded, before any entry point is called.
  const std::string prelude = R"(
#include <signal.h>
#include <unistd.h>
static int escaped_at_load = 0;
__attribute__((constructor)) static void at_load(void) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  escaped_at_load = p >= 0 || kill(getppid(), 0) == 0;
}
)";
  const auto r = run(test::rmsnorm_body("if (escaped_at_load) for (int64_t i = 0; i < T * H; ++i) out[i] = 0;"),
                     prelude);
  EXPECT_EQ(r.status, Status::kPassed) << r.detail;
}

TEST_F(Confine, GarbageWrittenToTheResultPipeEndsAsCrashedNeverPassed) {
  const std::string prelude = "#include <unistd.h>\n";
  const auto r = run(test::rmsnorm_body("for (int fd = 3; fd < 64; ++fd) (void)!write(fd, \"{\\\"status\\\":\", 11);"),
                     prelude);
  EXPECT_EQ(r.status, Status::kCrashed) << r.detail;
}

// A candidate that writes a complete passing verdict into every descriptor it has and leaves at
// once. In the worker's own process this reached the result pipe; in its executor the only
// descriptor is the command socket, and an executor that exits is a crash.
TEST_F(Confine, AForgedVerdictNeverReachesTheResultPipe) {
  const std::string prelude = "#include <string.h>\n#include <unistd.h>\n";
  const auto r = run("const char* v = \"{\\\"status\\\":\\\"passed\\\",\\\"detail\\\":\\\"forged\\\"}\";"
                     " for (int fd = 0; fd < 1024; ++fd) (void)!write(fd, v, strlen(v)); _exit(0);",
                     prelude, /*bench=*/true);
  EXPECT_EQ(r.status, Status::kCrashed) << r.detail;
  EXPECT_EQ(r.detail.find("forged"), std::string::npos) << r.detail;
}

TEST_F(Confine, TheCandidateRunsInItsOwnConfinedProcess) {
  const auto r = run(test::rmsnorm_body(), "");
  ASSERT_EQ(r.status, Status::kPassed) << r.detail;
  EXPECT_NE(r.confinement.find("own process"), std::string::npos) << r.confinement;
}

TEST_F(Confine, HugeAllocationFailsInsideTheCandidateNotTheMachine) {
  cfg.worker_memory_mb = 2048;
  const auto r = run("void* p = malloc((size_t)64 << 30); return p == 0 ? 9 : 0;", "#include <stdlib.h>\n");
  EXPECT_EQ(r.status, Status::kUnsupported) << r.detail;  // status 9: the allocation failed
  EXPECT_NE(r.detail.find("status 9"), std::string::npos) << r.detail;
}

TEST_F(Confine, AKernelThatGoesWrongAfterManyCallsIsCaughtAfterTheBenchmark) {
  cfg.bench_min_reps = 200;
  cfg.bench_max_s = 0.5;
  // Correct for the calls verification makes, wrong once the benchmark has run it a while.
  const auto r = run(test::rmsnorm_body("static int calls = 0; if (++calls > 150) out[0] ^= 0x4000;"), "",
                     /*bench=*/true);
  EXPECT_EQ(r.status, Status::kIncorrect) << r.detail;
  // Caught by the check of a timed call or by verification after the benchmark.
  EXPECT_TRUE(r.detail.find("checked call") != std::string::npos ||
              r.detail.find("after benchmarking") != std::string::npos)
      << r.detail;
}

TEST_F(Confine, AKernelThatWorksOnlyWhileOutputsLookPoisonedIsCaughtOnATimedCall) {
  // Full work when the output arrives poisoned (as in verification), half the rows
  // otherwise (as in the timed loop, where outputs hold the previous call's results).
  std::string body = test::rmsnorm_body();
  const std::string loop = "for (int64_t r = 0; r < T; ++r) {";
  ASSERT_NE(body.find(loop), std::string::npos);
  body.replace(body.find(loop), loop.size(),
               "const int64_t rows = out[0] == 0xFFFF ? T : (T + 1) / 2;\n"
               "  for (int64_t r = 0; r < rows; ++r) {");
  const auto r = run(body, "", /*bench=*/true);
  EXPECT_EQ(r.status, Status::kIncorrect) << r.detail;
  EXPECT_NE(r.detail.find("checked call"), std::string::npos) << r.detail;
}

TEST_F(Confine, AKernelThatSkipsWorkWhenItsOutputAlreadyHoldsAResultIsCaught) {
  // SwiGLU that computes only while the output looks unwritten (poison or zero) and
  // otherwise returns at once, keeping the previous call's result: fast and wrong.
  const std::string body = R"(
  const uint16_t* in = (const uint16_t*)a->tensors[0];
  uint16_t* out = (uint16_t*)a->tensors[1];
  const int64_t T = a->dims[0], I = a->dims[1];
  if (out[0] != 0xFFFF && out[0] != 0) return 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < I; ++i) {
      const float g = thrive_bf16_to_f32(in[t * 2 * I + i]);
      const float u = thrive_bf16_to_f32(in[t * 2 * I + I + i]);
      out[t * I + i] = thrive_f32_to_bf16(g / (1.0f + expf(-g)) * u);
    }
  return 0;)";
  EvalRequest req;
  req.kernel = backend::KernelSource::parse(test::kernel_text("swiglu_act", body), "k.cpp");
  req.bench_shape = {"T=16", {{"T", 16}, {"I", cfg.model.intermediate}, {"I2", 2 * cfg.model.intermediate}}};
  const auto r = evaluate(cfg, "cpu", req);
  EXPECT_EQ(r.status, Status::kIncorrect) << r.detail;
  EXPECT_NE(r.detail.find("checked call"), std::string::npos) << r.detail;
}

// Honest during verification and on the first argument sets of the benchmark (it finds them
// by their addresses), no work at all on the others: fast and wrong. The checked call after the
// timing loop lands on a random argument set.
TEST_F(Confine, AKernelThatComputesOnlyOnTheFirstArgumentSetsIsCaught) {
  const std::string prelude = "static int honest(const ThriveArgs* a) {" + test::rmsnorm_body() + "}\n";
  const std::string body = R"(
  static long long calls = 0;
  static uintptr_t lo = UINTPTR_MAX;
  const uintptr_t p = (uintptr_t)a->tensors[0];
  const uintptr_t stride = ((uintptr_t)(a->dims[0] * a->dims[1] * 2) + 255) / 256 * 256;
  if (++calls < 60) return honest(a);
  if (p < lo) lo = p;
  if ((p - lo) / stride < 10) return honest(a);
  return 0;)";
  const auto r = run(body, prelude, /*bench=*/true);
  EXPECT_EQ(r.status, Status::kIncorrect) << r.detail;
  EXPECT_NE(r.detail.find("checked call"), std::string::npos) << r.detail;
}

// Correct results, then its read-only input zeroed (once verification is over): with x = 0 and a
// reference built from what the arena holds, a later no-op would "match". Every set's inputs are
// compared with what it was given.
TEST_F(Confine, AKernelThatRewritesItsInputsDuringTheBenchmarkIsCaught) {
  const std::string prelude = "#include <string.h>\nstatic int honest(const ThriveArgs* a) {" + test::rmsnorm_body() + "}\n";
  const std::string body = R"(
  static long long calls = 0;
  const int s = honest(a);
  if (++calls > 60) memset(a->tensors[0], 0, (size_t)(a->dims[0] * a->dims[1] * 2));
  return s;)";
  const auto r = run(body, prelude, /*bench=*/true);
  EXPECT_EQ(r.status, Status::kIncorrect) << r.detail;
  EXPECT_NE(r.detail.find("changed during the benchmark"), std::string::npos) << r.detail;
}

TEST_F(Confine, AnHonestKernelPassesTheTimedCallCheck) {
  const auto r = run(test::rmsnorm_body(), "", /*bench=*/true);
  ASSERT_EQ(r.status, Status::kPassed) << r.detail;
  EXPECT_EQ(r.bench.timed_call_check, "passed");
}

TEST_F(Confine, ConfinementCanBeTurnedOffForDebugging) {
  cfg.confine = false;
  const auto r = run(test::rmsnorm_body(), "");
  EXPECT_EQ(r.status, Status::kPassed) << r.detail;
  EXPECT_TRUE(r.confinement.empty()) << r.confinement;
}

}  // namespace
}  // namespace thrive::sandbox
