// The sandbox: every way a candidate can go wrong ends as a status, never as a
// crash or hang of the caller.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "tests/support/test_support.hpp"
#include "thrive/backend/cpu_backend.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/process.hpp"
#include "thrive/sandbox/sandbox.hpp"

namespace thrive::sandbox {
namespace {

class SandboxTest : public ::testing::Test {
 protected:
  test::TempDir home;
  config::Config cfg = [this] {
    auto c = test::fast_config(home.path());
    c.model = test::small_model();
    c.seed = 77;
    return c;
  }();

  EvalRequest request(const std::string& body, const std::string& prelude = "") {
    EvalRequest r;
    r.kernel = backend::KernelSource::parse(test::kernel_text("rmsnorm_residual", body, prelude), "k.cpp");
    r.bench_shape = {"T=16", {{"T", 16}, {"H", cfg.model.hidden}}};
    return r;
  }
};

struct Outcome {
  const char* name;
  std::string body;
  Status status;
  std::string detail_mentions;
};

void PrintTo(const Outcome& o, std::ostream* os) { *os << o.name; }

class SandboxOutcome : public SandboxTest, public ::testing::WithParamInterface<Outcome> {};

TEST_P(SandboxOutcome, EndsAsAStatus) {
  const auto& p = GetParam();
  auto req = request(p.body);
  req.bench = false;  // statuses come from compile and verify; timing is tested below
  const auto r = evaluate(cfg, "cpu", req);
  EXPECT_EQ(r.status, p.status) << status_name(r.status) << ": " << r.detail;
  EXPECT_NE(r.detail.find(p.detail_mentions), std::string::npos) << r.detail;
  EXPECT_TRUE(test::is_one_line(r.detail)) << r.detail;
  EXPECT_GT(r.wall_s, 0.0);
}

INSTANTIATE_TEST_SUITE_P(
    Candidates, SandboxOutcome,
    ::testing::Values(
        Outcome{"segfault", "*(volatile int*)0 = 1; return 0;", Status::kCrashed, "signal"},
        Outcome{"abort", "__builtin_trap(); return 0;", Status::kCrashed, "signal"},
        Outcome{"exits", "_Exit(0);", Status::kCrashed, "exited"},
        Outcome{"incorrect", test::rmsnorm_body("for (int64_t i = 0; i < T * H; ++i) out[i] = 0;"),
                Status::kIncorrect, "max_rel_err"},
        Outcome{"unsupported", "return 7;", Status::kUnsupported, "status 7"},
        Outcome{"compile_error", "return undeclared_name;", Status::kCompileFailed, "error"},
        Outcome{"correct", test::rmsnorm_body(), Status::kPassed, "verified"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(SandboxTest, CompileErrorCarriesTheLog) {
  const auto r = evaluate(cfg, "cpu", request("return undeclared_name;"));
  EXPECT_EQ(r.status, Status::kCompileFailed);
  EXPECT_NE(r.compile_log.find("undeclared_name"), std::string::npos) << r.compile_log;
  EXPECT_NE(r.compile_log.find("error"), std::string::npos) << r.compile_log;
  EXPECT_NE(r.detail.find("error"), std::string::npos) << r.detail;
}

TEST_F(SandboxTest, CorrectKernelPassesAndIsTimed) {
  const auto r = evaluate(cfg, "cpu", request(test::rmsnorm_body()));
  ASSERT_EQ(r.status, Status::kPassed) << r.detail;
  EXPECT_TRUE(r.verify.passed);
  EXPECT_GT(r.bench.reps, 0);
  EXPECT_GE(r.bench.reps, cfg.bench_min_reps);
  EXPECT_GT(r.bench.median_us, 0.0);
  EXPECT_EQ(r.bench.bytes, ops::find_op("rmsnorm_residual").min_bytes(request("").bench_shape.shape));
  EXPECT_EQ(r.device_key.rfind("cpu:", 0), 0u) << r.device_key;
  EXPECT_GT(r.verify_s, 0.0);
  EXPECT_GT(r.bench_s, 0.0);
  // The second evaluation of the same source hits the compile cache.
  const auto again = evaluate(cfg, "cpu", request(test::rmsnorm_body()));
  EXPECT_TRUE(again.compile_cached);
  EXPECT_EQ(again.status, Status::kPassed);
}

TEST_F(SandboxTest, TimingAboveTheCeilingIsRejected) {
  auto req = request(test::rmsnorm_body());
  req.peak_bw_gbps = 1e-6;  // any real kernel "beats" this ceiling
  const auto r = evaluate(cfg, "cpu", req);
  EXPECT_EQ(r.status, Status::kIncorrect) << r.detail;
  EXPECT_TRUE(r.bench.below_floor);
  EXPECT_NE(r.detail.find("ceiling"), std::string::npos) << r.detail;
}

TEST_F(SandboxTest, InfiniteLoopTimesOut) {
  const std::string body = "for (;;) __asm__ volatile(\"\" ::: \"memory\");\n  return 0;";
  auto req = request(body);
  // Compile first (in this process) so the timeout covers the loop, not the compiler.
  {
    backend::CpuBackend b(cfg);
    ASSERT_TRUE(b.compile(req.kernel).module);
  }
  cfg.candidate_timeout_s = 2.0;
  const auto start = std::chrono::steady_clock::now();
  const auto r = evaluate(cfg, "cpu", req);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, Status::kTimeout) << r.detail;
  EXPECT_GE(took, 2.0);
  EXPECT_LT(took, 4.0);
  EXPECT_NE(r.detail.find("2.0 s"), std::string::npos) << r.detail;
}

// Pids of live processes whose command line mentions `marker`.
std::vector<pid_t> processes_mentioning(const std::string& marker) {
  std::vector<pid_t> found;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = test::slurp(e.path().string() + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(marker) != std::string::npos && std::stoi(name) != getpid())
      found.push_back(std::stoi(name));
  }
  return found;
}

TEST_F(SandboxTest, HungCompilerDiesWithTheWorker) {
  // A "compiler" that answers --version and then hangs.
  const std::string cxx = test::write_text(home.path() + "/hung-cxx",
                                           "#!/bin/sh\n"
                                           "case \"$1\" in --version) exec c++ --version;; esac\n"
                                           "sleep 30\n"
                                           "exit 1\n");
  ASSERT_EQ(chmod(cxx.c_str(), 0755), 0);
  cfg.cxx = cxx;
  cfg.candidate_timeout_s = 2.0;
  const auto r = evaluate(cfg, "cpu", request("return 0;"));
  EXPECT_EQ(r.status, Status::kTimeout) << r.detail;
  // the worker's session is SIGKILLed as the timeout ends; on a loaded machine the kernel may
  // take a moment to reap it: up to 3 s
  auto left = processes_mentioning(cxx);
  for (int i = 0; i < 30 && !left.empty(); ++i) {
    usleep(100 * 1000);
    left = processes_mentioning(cxx);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " compiler process(es) outlived the worker";
  for (pid_t p : left) kill(p, SIGKILL);  // ours: do not leave them running
}

TEST_F(SandboxTest, KernelOutputNeverReachesOurStdout) {
  auto req = request(test::rmsnorm_body("printf(\"CANDIDATE-SAYS-HI\\n\"); fflush(stdout);"
                                        "(void)!write(1, \"RAW-WRITE\\n\", 10);"),
                     "#include <stdio.h>\n#include <unistd.h>\n");
  req.bench = false;
  // Point our fd 1 at a file for the duration of the evaluation.
  test::TempDir dir;
  const std::string capture = dir.path() + "/stdout";
  std::fflush(stdout);
  const int saved = dup(1);
  const int fd = open(capture.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  dup2(fd, 1);
  close(fd);
  const auto r = evaluate(cfg, "cpu", req);
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  EXPECT_EQ(r.status, Status::kPassed) << r.detail;
  const std::string seen = test::slurp(capture);
  EXPECT_EQ(seen.find("CANDIDATE-SAYS-HI"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("RAW-WRITE"), std::string::npos) << seen;
}

TEST(Status, NamesRoundTrip) {
  const Status all[] = {Status::kPassed,  Status::kCompileFailed, Status::kLaunchFailed,
                        Status::kIncorrect, Status::kTimeout,     Status::kCrashed,
                        Status::kUnsupported};
  std::set<std::string> names;
  for (Status s : all) {
    EXPECT_EQ(status_from_name(status_name(s)), s);
    EXPECT_TRUE(names.insert(status_name(s)).second);
  }
  EXPECT_STREQ(status_name(Status::kCompileFailed), "compile_failed");
  try {
    status_from_name("exploded");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInput);
    EXPECT_NE(std::string(e.what()).find("exploded"), std::string::npos);
  }
}

TEST(RunIsolated, ReturnsTheLambdasJson) {
  Status status = Status::kPassed;
  std::string detail;
  const int parent = getpid();
  auto j = run_isolated(
      [] {
        std::printf("noise on stdout\n");
        return nlohmann::json{{"answer", 42}, {"pid", getpid()}};
      },
      10.0, status, detail);
  ASSERT_TRUE(j.has_value()) << detail;
  EXPECT_EQ(j->value("answer", 0), 42);
  EXPECT_NE(j->value("pid", parent), parent) << "ran in a child";
}

TEST(RunIsolated, LargeResultsArriveWhole) {
  Status status;
  std::string detail;
  auto j = run_isolated([] { return nlohmann::json{{"blob", std::string(1 << 20, 'x')}}; }, 20.0,
                        status, detail);
  ASSERT_TRUE(j.has_value()) << detail;
  EXPECT_EQ(j->value("blob", std::string()).size(), size_t(1) << 20);
}

// A worker's prints (a candidate printing in a loop: a 40 MB flood was seen) reach our stderr
// only up to 64 KiB, with a note of what was dropped, never our stdout; the verdict still arrives
// and the flood costs no timeout.
TEST(RunIsolated, WorkerOutputIsCappedOnOurStderr) {
  Status status = Status::kPassed;
  std::string detail;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  auto j = run_isolated(
      [] {
        const std::string line(1023, 'p');
        for (int i = 0; i < 8192; ++i) {  // 8 MiB, half on stdout and half on stderr
          const std::string l = line + "\n";
          if (!write_all(i % 2 ? 2 : 1, l.data(), l.size())) break;
        }
        return nlohmann::json{{"answer", 7}};
      },
      30.0, status, detail);
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(j.has_value()) << detail;
  EXPECT_EQ(j->value("answer", 0), 7);
  EXPECT_EQ(out, "");
  EXPECT_LT(err.size(), size_t(65536 + 4096 + 200));
  EXPECT_NE(err.find("output was cut after 65536 bytes (8318976 more bytes dropped; its last 4096 bytes follow)"),
            std::string::npos)
      << err.substr(err.size() > 300 ? err.size() - 300 : 0);
}

// What a worker writes last (the executor's protocol violation, say) survives a flood before it;
// control characters of candidate text (ANSI escapes) never reach our terminal.
TEST(RunIsolated, TheLastOutputSurvivesAFloodAndEscapesAreNeutralized) {
  Status status = Status::kPassed;
  std::string detail;
  testing::internal::CaptureStderr();
  auto j = run_isolated(
      [] {
        const std::string flood(1 << 20, 'f');
        write_all(2, flood.data(), flood.size());
        const std::string last = "\x1b[8mhidden\x1b[0m\r\xc2\x9b" "2Jthe last line\n";
        write_all(2, last.data(), last.size());
        return nlohmann::json{{"answer", 3}};
      },
      30.0, status, detail);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(j.has_value()) << detail;
  EXPECT_NE(err.find("?[8mhidden?[0m???2Jthe last line\n"), std::string::npos) << err.substr(err.size() > 200 ? err.size() - 200 : 0);
  EXPECT_EQ(err.find('\x1b'), std::string::npos);
}

// Our stderr may be a pipe nobody drains (a paused terminal, an MCP client that never reads it):
// the relay drops what it cannot write at once, so the verdict still comes back.
TEST(RunIsolated, AStderrNobodyReadsNeverStallsTheWorkersVerdict) {
  int pp[2];
  ASSERT_EQ(pipe(pp), 0);
  const int saved = dup(2);
  dup2(pp[1], 2);
  Status status = Status::kPassed;
  std::string detail;
  const auto t0 = std::chrono::steady_clock::now();
  auto j = run_isolated(
      [] {
        const std::string flood(size_t(8) << 20, 'f');
        write_all(1, flood.data(), flood.size());
        return nlohmann::json{{"answer", 5}};
      },
      20.0, status, detail);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  dup2(saved, 2);
  close(saved);
  close(pp[0]);
  close(pp[1]);
  ASSERT_TRUE(j.has_value()) << detail;
  EXPECT_EQ(j->value("answer", 0), 5);
  EXPECT_LT(s, 10.0);
}

TEST(RunIsolated, SmallWorkerOutputPassesWhole) {
  Status status = Status::kPassed;
  std::string detail;
  testing::internal::CaptureStderr();
  auto j = run_isolated(
      [] {
        std::fprintf(stderr, "warning from the worker\n");
        std::fflush(stderr);
        return nlohmann::json{{"answer", 1}};
      },
      10.0, status, detail);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(j.has_value()) << detail;
  EXPECT_EQ(err, "warning from the worker\n");
}

TEST(RunIsolated, CrashAndTimeoutAreStatuses) {
  Status status = Status::kPassed;
  std::string detail;
  auto crashed = run_isolated(
      []() -> nlohmann::json {
        raise(SIGSEGV);
        return {};
      },
      10.0, status, detail);
  EXPECT_FALSE(crashed.has_value());
  EXPECT_EQ(status, Status::kCrashed);
  EXPECT_NE(detail.find("signal"), std::string::npos) << detail;

  const auto start = std::chrono::steady_clock::now();
  auto hung = run_isolated(
      []() -> nlohmann::json {
        for (;;) pause();
      },
      0.5, status, detail);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(hung.has_value());
  EXPECT_EQ(status, Status::kTimeout);
  EXPECT_LT(took, 3.0);
}

// A caller killed while its worker runs (kill -9 of a thrive process) takes the worker with it:
// an orphaned worker kept running a candidate, or a bandwidth measurement whose lock had gone with
// its parent, for up to its whole timeout.
TEST(RunIsolated, TheWorkerDiesWithItsCaller) {
  test::TempDir dir;
  const std::string pid_file = dir.path() + "/worker.pid";
  std::fflush(nullptr);
  const pid_t caller = fork();
  ASSERT_GE(caller, 0);
  if (caller == 0) {
    Status st = Status::kPassed;
    std::string detail;
    run_isolated(
        [&]() -> nlohmann::json {
          test::write_text(pid_file + ".tmp", std::to_string(getpid()));
          std::rename((pid_file + ".tmp").c_str(), pid_file.c_str());
          for (;;) pause();
        },
        60.0, st, detail);
    _exit(0);
  }
  pid_t worker = 0;
  for (int i = 0; i < 200 && worker == 0; ++i) {
    if (const auto text = test::slurp(pid_file); !text.empty()) worker = std::stoi(text);
    else std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  kill(caller, SIGKILL);
  waitpid(caller, nullptr, 0);
  ASSERT_GT(worker, 0) << "the worker never started";
  // gone, or a zombie waiting for whichever process reaps orphans here
  const auto running = [&] {
    const std::string stat = test::slurp("/proc/" + std::to_string(worker) + "/stat");
    const auto close_paren = stat.rfind(')');
    return close_paren != std::string::npos && close_paren + 2 < stat.size() && stat[close_paren + 2] != 'Z';
  };
  bool alive = true;
  for (int i = 0; i < 100 && (alive = running()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (alive) kill(worker, SIGKILL);
  EXPECT_FALSE(alive) << "worker " << worker << " outlived its caller by 5 s";
}

TEST(RunIsolated, ErrorsCrossTheProcessBoundaryWithTheirCategory) {
  Status status;
  std::string detail;
  try {
    run_isolated([]() -> nlohmann::json { fail(ErrorCategory::kStorage, "disk on fire"); }, 10.0,
                 status, detail);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kStorage);
    EXPECT_STREQ(e.what(), "disk on fire");
  }
}

TEST(EvalResult, JsonRoundTrip) {
  EvalResult r;
  r.status = Status::kIncorrect;
  r.detail = "x";
  r.compile_log = "log";
  r.bench.median_us = 3.5;
  r.bench.reps = 9;
  r.verify.failure = "bad";
  r.device_key = "cpu:x:y";
  const auto back = nlohmann::json(r).get<EvalResult>();
  EXPECT_EQ(back.status, r.status);
  EXPECT_EQ(back.detail, r.detail);
  EXPECT_EQ(back.compile_log, r.compile_log);
  EXPECT_EQ(back.bench.median_us, 3.5);
  EXPECT_EQ(back.bench.reps, 9);
  EXPECT_EQ(back.verify.failure, "bad");
  EXPECT_EQ(back.device_key, r.device_key);
}

}  // namespace
}  // namespace thrive::sandbox
