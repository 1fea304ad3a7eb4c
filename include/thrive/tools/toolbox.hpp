// The agent tools: one implementation behind every agent (search, LLM, MCP).
//
// get_op_spec, compile, verify, benchmark, profile, read_memory, record_strategy.
// Every candidate goes through the sandbox (compile -> verify -> benchmark in a
// worker process); every attempt is archived under $THRIVE_HOME/kernels/<op>/ and
// verified measurements go into the memory store.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "thrive/backend/kernel.hpp"
#include "thrive/config/config.hpp"
#include "thrive/memory/store.hpp"
#include "thrive/ops/op.hpp"
#include "thrive/sandbox/sandbox.hpp"

namespace thrive::tools {

/// How the detail of a "suspect timing" verdict begins: a candidate timed faster than the copy
/// ceiling allows, twice, in fresh workers (Toolbox::run rejects it as kIncorrect with this text).
inline constexpr const char* kSuspectTimingDetail = "suspect timing, twice in fresh workers";
/// Whether `r` is that verdict: a rejection on its timing, not on its outputs.
bool suspect_timing(const sandbox::EvalResult& r);

/// The analyst's reading of a measurement.
struct Profile {
  double time_us = 0;
  double floor_us = 0;            ///< min_bytes / peak bandwidth (the roofline floor)
  double bandwidth_gbps = 0;
  double percent_of_peak = 0;
  double tflops = 0;
  int64_t parallel_units = 0;     ///< independent rows / sequence-head groups
  int compute_units = 0;          ///< cores (cpu) or SMs (cuda)
  std::string bottleneck;         ///< overhead | parallelism | compute | traffic | memory
  std::string notes;              ///< one line for people and the trajectory
};
/// A profile as the agents' tools return it (MCP `profile`, the LLM agent's `profile`): an object
/// with the fields' names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Profile, time_us, floor_us, bandwidth_gbps, percent_of_peak, tflops, parallel_units,
                                   compute_units, bottleneck, notes)

/// A kernel submitted for the record (`thrive bench --kernel`, MCP `benchmark`).
struct Submission {
  sandbox::EvalResult result;   ///< compile -> verify -> benchmark verdict
  double eager_us = 0;          ///< eager baseline at the same shape, µs (0 if not passed)
  memory::KernelRecord record;  ///< the memory row (recorded only when passed)
  bool new_best = false;        ///< it became the best kernel of its op/shape/device
};

/// A task's reported speedup over the eager baseline, from paired timing (Toolbox::confirm_speedup).
struct ConfirmedSpeedup {
  double speedup = 0;   ///< 1 / the median per-pair time ratio (best / eager): about eager_us / best_us
  double eager_us = 0;  ///< µs a call: the eager baseline's paired median, or the unpaired figure given
  double best_us = 0;   ///< µs a call: the best's paired median, or the best_us given (pairs == 0)
  double bandwidth_gbps = 0;   ///< GB/s: the best's benchmark figure, scaled to best_us
  double percent_of_peak = 0;  ///< the same, as % of the measured ceiling
  double ratio_ci = 0;  ///< relative 95% CI half-width of the median ratio (paired only)
  int pairs = 0;        ///< interleaved pairs timed; 0: no pairing (note says why), unpaired figures stand
  std::string note;     ///< one line for people
  /// The best's re-evaluation found it wrong (incorrect, crashed, no longer compiles; e.g. a
  /// kernel that behaves differently when paired): the caller must not report or keep it.
  bool rejected = false;
};

class Toolbox {
 public:
  /// `backend_name` must be resolved ("cpu"/"cuda"). Throws Error(kBackend) if the
  /// device cannot be described, Error(kStorage) if THRIVE_HOME is unusable.
  Toolbox(const config::Config& cfg, memory::Store& store, const std::string& backend_name);

  const config::Config& config() const { return cfg_; }
  memory::Store& store() { return store_; }
  const std::string& backend_name() const { return backend_name_; }
  const std::string& device_key() const { return device_key_; }
  const nlohmann::json& device() const { return device_; }
  /// A builtin card's `prior_failures` in kernels/<backend>/cards.json: failures its author
  /// expects before any evidence (a change known to break tolerances: 2-4), which the search
  /// agent adds to the card's failure count so an untried risky card ranks below an untried
  /// safe one; evidence then outweighs it. It follows the change, not the origin: `card` gets it
  /// when its id and `set` are the embedded card's (however it reached memory: seeded, or
  /// imported before the first seeding); 0 for any other card.
  double card_prior_failures(const memory::StrategyCard& card) const;

  /// Op contract as JSON: formula, tensors (ABI order), dims, scalars, shapes,
  /// bytes/flops per shape, tolerances, template parameters and the ABI text (op_spec with this
  /// toolbox's configuration and backend).
  nlohmann::json get_op_spec(const std::string& op);

  /// The op's benchmark shapes this run covers: all of op.bench_shapes whose minimum
  /// bytes fit THRIVE_MAX_SHAPE_BYTES (default 256 MiB on cpu). `only` filters by label.
  std::vector<ops::ShapeCase> shapes_for(const ops::Op& op, const std::string& only = "");

  /// The template of `op` for this backend (kernels/<backend>/<op>/template.cpp).
  backend::KernelSource op_template(const std::string& op);
  /// The eager baseline kernel of `op` for this backend.
  backend::KernelSource eager_kernel(const std::string& op);

  /// Compile only (in the sandbox).
  sandbox::EvalResult compile(const backend::KernelSource& k);
  /// Compile + verify (at the op's verification shapes plus `shape` if small; with `whole`, a
  /// shape the user named, `shape` up to verify::kMaxWholeVerifyBytes: verification_shapes).
  sandbox::EvalResult verify(const backend::KernelSource& k, const ops::ShapeCase& shape, bool whole = false);
  /// Compile + verify + benchmark at `shape`; archives the attempt.
  sandbox::EvalResult benchmark(const backend::KernelSource& k, const ops::ShapeCase& shape);
  /// benchmark(), plus paired, interleaved timing against `baseline` in the same worker
  /// (EvalResult::paired: ratio = candidate / baseline time per pair, with its spread).
  sandbox::EvalResult compare(const backend::KernelSource& candidate,
                              const backend::KernelSource& baseline, const ops::ShapeCase& shape);
  /// The eager baseline's evaluation at `shape` as it came out (any status; a passing one is
  /// measured once per Toolbox and cached).
  sandbox::EvalResult eager_result(const std::string& op, const ops::ShapeCase& shape);
  /// eager_result() that must pass: throws Error(kBackend) naming the op, shape, status and
  /// why otherwise (the search and tune have no speedup to report without it).
  sandbox::EvalResult eager(const std::string& op, const ops::ShapeCase& shape);

  /// The speedup a task reports for its best kernel `best` (benchmarked as `best_bench` at `shape`):
  /// the best and the eager baseline timed paired and interleaved in one fresh worker
  /// (compare(): A = eager, B = best), so that load on the machine or clock drift between the
  /// eager's one cached measurement at the task's start and the best's cannot inflate or deflate
  /// the ratio (on a shared CPU a busy neighbour made an eager baseline of 27.7 µs read 53.7 ms).
  /// When the pairing does not run (the re-evaluation fails, or the best timed below the
  /// floor), returns the unpaired figures (`unpaired_eager_us` / its time) with pairs = 0 and a
  /// note saying why. Throws only what compare() throws (infrastructure faults).
  ConfirmedSpeedup confirm_speedup(const backend::KernelSource& best, const ops::ShapeCase& shape,
                                   const bench::BenchStats& best_bench, double unpaired_eager_us);

  /// The analyst's diagnosis of a benchmarked result.
  Profile profile(const ops::Op& op, const ops::ShapeCase& shape, const bench::BenchStats& b);

  /// Best kernel, cards with evidence and this task's trajectory, as JSON.
  nlohmann::json read_memory(const std::string& op, const std::string& shape_class);
  /// The best verified kernel in memory for `op` at `shape` on this device; when there is none,
  /// the best of the nearest other benchmark shape of the op (by |log| of the min-bytes ratio);
  /// nullopt when memory has neither. The caller re-verifies before trusting it.
  std::optional<memory::KernelRecord> best_or_nearest(const ops::Op& op, const ops::ShapeCase& shape);
  /// Adds a learned strategy card (id must be new).
  void record_strategy(const memory::StrategyCard& card);

  /// Device memory bandwidth ceiling in GB/s: THRIVE_PEAK_BW_GBPS, else the value
  /// cached for this device in memory, else measured now (copy kernel) and cached.
  /// `remeasure` measures again and replaces the cached value. A benchmark faster than
  /// the cached ceiling triggers one re-measurement per toolbox before it is judged
  /// suspect (a ceiling measured on a loaded machine would otherwise stick). Processes sharing
  /// a THRIVE_HOME measure one at a time (an exclusive flock on THRIVE_HOME/bandwidth.lock); one
  /// that waited takes the value the other stored. Throws Error(kBackend) when the measurement fails.
  double peak_bandwidth_gbps(bool remeasure = false);

  /// Canonical key: "<op>.<backend>.<arch>.bf16.<params>" (or "src-<hash>" when the
  /// kernel carries no params).
  std::string kernel_id(const backend::KernelSource& k) const;

  /// The memory row for a benchmarked kernel on this device: times from
  /// `r.bench.time_us()`, speedup against `eager_us`, verified iff `r` passed.
  memory::KernelRecord kernel_record(const backend::KernelSource& k, const ops::ShapeCase& shape,
                                     const sandbox::EvalResult& r, double eager_us,
                                     const std::string& command) const;

  /// The shape labelled `label` of `op`, or its largest benchmark shape that fits when
  /// `label` is empty. Throws Error(kUsage) naming the label and the valid ones.
  ops::ShapeCase shape_or_largest(const ops::Op& op, const std::string& label);

  /// Benchmarks `k` at `shape` (compile -> verify -> benchmark in the sandbox); when it
  /// passes, measures the eager baseline and records the kernel in memory (the best per
  /// op/shape/device is kept). `command` is stored as the reproducing command.
  Submission submit(const backend::KernelSource& k, const ops::ShapeCase& shape,
                    const std::string& command);

  /// The memory row of one attempt of `k` on this device: kernel id, its params as the
  /// change, the verdict's status and detail as notes, time_us (µs, when it passed and was
  /// timed, else 0) and speedup over `eager_us` (0 when either is 0). Callers add run,
  /// pass, round and card where they have them.
  memory::Attempt attempt_record(const backend::KernelSource& k, const std::string& shape_class,
                                 const std::string& phase, const sandbox::EvalResult& r,
                                 double eager_us) const;

  /// Writes source and the attempt's verdict/metrics under $THRIVE_HOME/kernels/<op>/.
  void archive(const backend::KernelSource& k, const ops::ShapeCase& shape,
               const sandbox::EvalResult& r);

  /// Seconds spent in compile and benchmark across this toolbox's evaluations (cost
  /// of a search run).
  double compile_seconds() const { return compile_s_; }
  double bench_seconds() const { return bench_s_; }
  int evaluations() const { return evaluations_; }

 private:
  sandbox::EvalResult run(const backend::KernelSource& k, const ops::ShapeCase& shape,
                          bool verify, bool bench,
                          const backend::KernelSource* paired_baseline = nullptr, bool verify_whole = false);
  config::Config cfg_;
  memory::Store& store_;
  std::string backend_name_;
  /// builtin cards' prior_failures, by id, with the `set` they were declared for
  std::map<std::string, std::pair<nlohmann::json, double>> card_prior_failures_;
  std::string device_key_;
  std::string arch_;
  nlohmann::json device_;
  std::optional<double> peak_;
  bool ceiling_rechecked_ = false;
  std::map<std::string, sandbox::EvalResult> eager_cache_;
  double compile_s_ = 0, bench_s_ = 0;
  int evaluations_ = 0;
};

/// ".cu" for cuda kernels, ".cpp" for cpu kernels (templates, archive files).
std::string source_extension(const std::string& backend);

/// The template of `op` for `backend` ("cpu" or "cuda"): kernels/<backend>/<op>/template.<ext>,
/// embedded at build time. Error(kInternal) if it is not embedded.
backend::KernelSource template_source(const std::string& backend, const std::string& op);

/// One op's contract as JSON at `cfg.model`'s dimensions for `backend` (see Toolbox::get_op_spec);
/// needs no device, memory or THRIVE_HOME. Error(kUsage) for an unknown op.
nlohmann::json op_spec(const config::Config& cfg, const std::string& backend, const std::string& op);

/// The target ops at `model`'s dimensions: one object per op with op, trait, summary,
/// shapes (label, min_bytes, flops) and the backends that have a template.
nlohmann::json ops_catalog(const config::ModelDims& model);

/// The leaderboard as JSON: one object per (op, shape, device) best verified kernel
/// (KernelRecord fields without source and metrics), optionally only `op` / `device_key`.
nlohmann::json leaderboard_json(memory::Store& store, const std::string& device_key = "",
                                const std::string& op = "");

/// Loads kernels/<backend>/cards.json into memory as builtin cards (idempotent: a card already
/// stored is kept) and returns their `prior_failures` by id with each card's `set` (cards with
/// none left out). Error(kInternal) for a prior outside 0-100 (the file is THRIVE's own,
/// embedded at build time).
std::map<std::string, std::pair<nlohmann::json, double>> seed_builtin_cards(memory::Store& store,
                                                                           const std::string& backend);

}  // namespace thrive::tools
