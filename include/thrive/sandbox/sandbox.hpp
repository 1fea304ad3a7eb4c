// Sandbox: compile, verify and benchmark one candidate in a child process.
//
// Candidate kernels are untrusted: they may crash, hang, corrupt memory or (on the
// GPU) poison the CUDA context. Each evaluation forks a worker that creates its own
// backend, does the work, writes a JSON result to a pipe and _exits. The parent
// never runs candidate code and never creates a device context, so a crash or hang
// costs one candidate (status crashed / timeout), never the optimizer.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "thrive/backend/backend.hpp"
#include "thrive/bench/bench.hpp"
#include "thrive/verify/verify.hpp"

namespace thrive::sandbox {

/// Disposition of a candidate (KTT's result status; CUTLASS's disposition).
enum class Status { kPassed, kCompileFailed, kLaunchFailed, kIncorrect, kTimeout, kCrashed, kUnsupported };
const char* status_name(Status s);
Status status_from_name(const std::string& name);

/// What to do with a candidate.
struct EvalRequest {
  backend::KernelSource kernel;
  ops::ShapeCase bench_shape;     ///< shape to benchmark at (and verify at, if small)
  bool verify = true;
  bool bench = true;
  double peak_bw_gbps = 0;        ///< ceiling for percent_of_peak
  /// When set (and the candidate passes), the two are also timed paired and interleaved
  /// at bench_shape (result in EvalResult::paired; A = this baseline, B = the candidate).
  std::optional<backend::KernelSource> paired_baseline;
  /// Verify at bench_shape whole up to verify::kMaxWholeVerifyBytes, not only when small (a
  /// shape the user named: `thrive verify --shape`).
  bool verify_bench_shape = false;
};

/// What happened. `detail` is one line for people; `compile_log` the compiler's text.
struct EvalResult {
  Status status = Status::kCrashed;
  std::string detail;
  std::string compile_log;
  bool compile_cached = false;
  double compile_s = 0;
  double verify_s = 0;
  double bench_s = 0;
  double wall_s = 0;              ///< whole evaluation, seconds
  backend::KernelStats stats;
  verify::VerifyReport verify;
  bench::BenchStats bench;
  /// Verification repeated on fresh inputs after the benchmark (smallest and bench shape).
  verify::VerifyReport post_verify;
  std::string device_key;
  std::string confinement;        ///< what confined the candidate ("" when nothing did)
  bench::PairedStats paired;      ///< against the request's paired_baseline (pairs 0: not run)
};

/// Evaluates `request` in a worker process under cfg.candidate_timeout_s.
/// The worker uses backend `backend_name` ("cpu"/"cuda", already resolved).
/// Never throws for candidate failures; throws Error(kBackend) if fork fails.
EvalResult evaluate(const config::Config& cfg, const std::string& backend_name,
                    const EvalRequest& request);

/// Runs `work` in a forked child under `timeout_s`, returning its JSON, or nullopt
/// with `status` set to kTimeout or kCrashed and `detail` naming the signal. The child dies
/// (SIGKILL) with the thread that called this (PR_SET_PDEATHSIG): a caller killed mid-run leaves
/// no worker running.
std::optional<nlohmann::json> run_isolated(const std::function<nlohmann::json()>& work,
                                           double timeout_s, Status& status, std::string& detail);

void to_json(nlohmann::json& j, const EvalResult& r);
void from_json(const nlohmann::json& j, EvalResult& r);

}  // namespace thrive::sandbox
