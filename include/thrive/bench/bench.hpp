// Timing protocol, roofline figures and the bandwidth ceiling.
//
// Method (CUTLASS/nvbench style): inputs are replicated into enough argument sets
// that cycling through them touches at least 4x the last-level cache, so every timed
// call reads from DRAM, not cache (on the H200 the same rotation defeats L2); warm-up
// cycles through every set once and is not timed; then each call is timed alone
// (Backend::time_us), and timing stops once the median's 95% confidence half-width,
// from order statistics, is below `noise` of the median, after at least `min_reps`
// samples, or at the time cap. Reported: median, min, max, GB/s from the op's minimum
// bytes, TFLOP/s, percent of the measured copy ceiling.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "thrive/backend/backend.hpp"
#include "thrive/ops/op.hpp"

namespace thrive::bench {

/// The smallest working set a CPU benchmark's argument rotation, and the copy ceiling's buffers on
/// any device, aim for, bytes (1 GiB, the anchors' copy size): past a last-level cache the
/// machine may not report. On this project's 2-core VMs lscpu said 32 MiB of L3 on 2026-12-04 and 480 MiB on
/// another day, and with the rotation at 4x the reported 32 MiB, honest CPU kernels timed at
/// 119-146% of the DRAM copy ceiling and were rejected as "suspect timing" (fresh-user run,
/// 2026-12-04). Either is capped by BenchOptions::max_rotation_bytes and a third of the CPU arena.
constexpr int64_t kDramWorkingSetBytes = int64_t{1} << 30;

/// The benchmark's measurement method as a version number (the "footing"), recorded with every
/// attempt (memory::Attempt::footing): a timing verdict measured on another footing is not
/// comparable with today's, so the search agent may try that change again (SearchAgent::run).
/// Bump it whenever a change to the timing method moves the figures.
///   0: attempts recorded before footings were (up to 2026-12-04);
///   1: never recorded (the method of those attempts, named for the history);
///   2: since 995428d (2026-12-04): CPU argument rotation and copy-ceiling buffers of at least
///      kDramWorkingSetBytes (the rotation before it, 4x a VM's reported 32 MiB of L3, timed
///      partly cache: honest kernels at 119-146% of the DRAM ceiling).
constexpr int kMeasurementFooting = 2;

/// Knobs of one timing loop (from config: THRIVE_BENCH_*).
struct BenchOptions {
  double max_s = 1.0;        ///< time cap of the timed loop, seconds
  int min_reps = 15;         ///< minimum samples
  double noise = 0.02;       ///< target relative CI half-width of the median
  int64_t max_rotation_bytes = 2ll << 30;  ///< cap on all argument sets together
  /// One timed call, at a random iteration, is checked: a few input elements are swapped
  /// before it (outside the timed region) and this gets the tensors as they were before the
  /// call and after it, at `shape`, and returns "" or one line saying what is wrong. Empty:
  /// no check. Catches stale outputs (work skipped, results cached by pointer or value).
  std::function<std::string(const ops::Shape& shape, const std::vector<ops::HostTensor>& before,
                            const std::vector<ops::HostTensor>& after)> check_timed_call;
  /// Shapes whose minimum traffic exceeds this, bytes, are checked on check_sample_rows random
  /// rows of the op's leading symbol (T or B; the swapped elements lie in those rows): the
  /// tensors led by that symbol are cut to the rows, the others (weights, tables) kept whole,
  /// and the reference runs on that smaller problem.
  int64_t check_max_bytes = 256ll << 20;
  int check_sample_rows = 4;
};

/// True when a timed-call check string (BenchStats::timed_call_check, PairedStats::
/// timed_call_check) reports wrong outputs: empty, "passed..." and "skipped..." are not failures.
bool timed_call_check_failed(const std::string& check);

/// One benchmark's figures. Times in microseconds, bandwidth in GB/s (1e9 bytes/s).
struct BenchStats {
  double median_us = 0, min_us = 0, max_us = 0;   ///< "launched": one launch per sample
  /// Per call, launch overhead excluded: under CUDA-graph replay (20 calls a graph), or on the CPU
  /// in batches of back-to-back calls in one executor command (about 1 ms a batch, 8-2000 calls:
  /// CpuBackend::time_graph_us); 0 = n/a
  double graph_us = 0, graph_min_us = 0, graph_max_us = 0;
  int reps = 0;
  double rel_ci = 0;            ///< achieved relative CI half-width of the median
  int64_t bytes = 0;            ///< the op's minimum bytes at this shape
  double bandwidth_gbps = 0;    ///< bytes / median
  double tflops = 0;
  double peak_bw_gbps = 0;      ///< the ceiling used
  double percent_of_peak = 0;   ///< 100 * bandwidth / peak
  bool below_floor = false;     ///< median under bytes / peak: suspect, never accepted
  /// "passed", "passed on <k> of <n> rows of <symbol>" (big shapes), "skipped: <why>", or
  /// what was wrong with the outputs of a timed call.
  std::string timed_call_check;
  /// True when the timed-call check ran and found wrong outputs (empty, passed and skipped
  /// are not failures). The sandbox rejects such a candidate as incorrect.
  bool timed_call_check_failed() const;
  int argument_sets = 0;        ///< rotation depth
  int64_t working_set_bytes = 0;
  /// The figure the search optimizes and GB/s is computed from: the graph time where
  /// graphs exist (launch overhead excluded, as production decode runs), else launched.
  double time_us() const { return graph_us > 0 ? graph_us : median_us; }
};

/// `stats` re-timed at `time_us` µs a call (> 0; a later measurement of the same kernel, such as a
/// paired median): every time field scaled by time_us / stats.time_us(), so the spread and the
/// launched/graph relation stay, and GB/s, TFLOP/s and percent of the ceiling recomputed from it.
/// Throws Error(kUsage) when either time is not positive.
void retime(BenchStats& stats, double time_us);

/// Times `module` running `op` at `shape`. `peak_bw_gbps` <= 0 leaves percent at 0.
/// Throws Error(kBackend) on allocation failure; a kernel returning non-zero gives
/// reps = 0 (the caller treats that as a launch failure).
BenchStats benchmark_kernel(backend::Backend& backend, const ops::Op& op,
                            const backend::Module& module, const ops::ShapeCase& shape,
                            const config::ModelDims& model, const BenchOptions& options,
                            double peak_bw_gbps, uint64_t seed);

/// Paired, interleaved timing of two kernels for one op and shape: calls alternate A, B,
/// A, B on the same rotating argument sets, so drift and noise hit both alike. `ratio` is
/// the median over pairs of time_B / time_A (below 1: B is faster), `ratio_ci` its 95% CI
/// half-width (order statistics), the spread a gain must beat.
struct PairedStats {
  double a_median_us = 0, b_median_us = 0;
  double ratio = 0, ratio_ci = 0;
  int pairs = 0;
  /// With options.check_timed_call: "passed", or what was wrong with `b`'s outputs on a
  /// checked call after the paired loop (on a random argument set).
  std::string timed_call_check;
};

/// Times `a` and `b` interleaved (same stopping rule as benchmark_kernel, on the ratio), then
/// checks one call of `b` (the candidate) on a random argument set when options.check_timed_call
/// is set. Each side of a pair is a batch timed as BenchStats::graph_us is (CUDA: 20 calls in a
/// graph; CPU: about 1 ms of back-to-back calls in one executor command), so the medians (µs per
/// call) and the ratio are on the footing of BenchStats::time_us(); where graph capture fails,
/// one launch a side. pairs = 0 when either kernel returns non-zero.
PairedStats paired_benchmark(backend::Backend& backend, const ops::Op& op, const backend::Module& a,
                             const backend::Module& b, const ops::ShapeCase& shape,
                             const config::ModelDims& model, const BenchOptions& options, uint64_t seed);

void to_json(nlohmann::json& j, const PairedStats& s);

/// Order-statistics summary of samples (sorted in place): median, min, max and the
/// relative 95% CI half-width of the median.
void summarize(std::vector<double>& samples_us, BenchStats& stats);

/// A warning for a run that times kernels on a busy CPU, or "" when there is nothing to say:
/// `load1` is the 1-minute load average (getloadavg; Linux counts runnable and I/O-waiting tasks,
/// thrive's own earlier work and, in a container, the whole host's), `cores` the machine's
/// hardware threads. Said on the cpu backend when load1 is at least half of them: other work then
/// shares the cores, caches and DRAM with the timed kernels, figures come out slower, and what
/// memory records is what was measured. The CUDA backend's timings run on the GPU: no warning.
std::string busy_cpu_note(const std::string& backend, double load1, int64_t cores);
/// The 1-minute load average now (getloadavg), NaN where it cannot be read.
double load_average_1min();

/// Bytes of each of measure_copy_bandwidth's two buffers: 8x the last-level cache, at least
/// kDramWorkingSetBytes, and on the CPU at most a third of DeviceInfo::memory_bytes (the
/// arena: 2 GiB, 4x the cache, on a 24 GiB machine with 480 MiB of L3). Throws kBackend, naming
/// THRIVE_WORKER_MEMORY_MB, when that is less than twice the cache: the figure would be cache
/// bandwidth, not DRAM.
int64_t copy_buffer_bytes(const backend::DeviceInfo& device);

/// Measures the device's copy bandwidth (reads + writes counted) on two buffers of
/// copy_buffer_bytes (DRAM, not cache; throws kBackend where they do not fit): the faster of the copy
/// kernel kernels/<backend>/copy.{cpp,cu} and the platform's own copy (Backend::copy_device:
/// cuMemcpyDtoDAsync, which is what torch's 1 GiB copy in ../shared/anchors measures; memcpy
/// on the CPU), so the ceiling is never lower than what the platform itself achieves. GB/s.
double measure_copy_bandwidth(backend::Backend& backend, const BenchOptions& options);

void to_json(nlohmann::json& j, const BenchStats& s);
void from_json(const nlohmann::json& j, BenchStats& s);

}  // namespace thrive::bench
