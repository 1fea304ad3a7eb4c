#include "thrive/bench/bench.hpp"

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "thrive/backend/embedded.hpp"
#include "thrive/core/error.hpp"

namespace thrive::bench {

void summarize(std::vector<double>& s, BenchStats& stats) {
  stats.reps = int(s.size());
  if (s.empty()) return;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  stats.min_us = s.front();
  stats.max_us = s.back();
  stats.median_us = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  // 95% CI of the median by order statistics: ranks n/2 -+ 1.96 sqrt(n)/2.
  const double half = 1.96 * std::sqrt(double(n)) / 2.0;
  const size_t lo = size_t(std::max(0.0, std::floor(double(n) / 2.0 - half)));
  const size_t hi = size_t(std::min(double(n - 1), std::ceil(double(n) / 2.0 + half)));
  stats.rel_ci = stats.median_us > 0 ? (s[hi] - s[lo]) / 2.0 / stats.median_us : 0.0;
}

namespace {

// Relative 95% CI half-width of the median of `samples` (the stopping rule's figure).
double rel_ci_of(std::vector<double> samples) {
  BenchStats probe;
  summarize(samples, probe);
  return probe.rel_ci;
}

// Calls f(first, count) over `copies` copies laid `stride` bytes apart, in runs of at most
// ~64 MiB: the staging size of uploads and downloads of replicated tensors.
template <class F>
void in_runs(int64_t stride, int copies, F&& f) {
  const int per = int(std::clamp<int64_t>((int64_t{64} << 20) / std::max<int64_t>(stride, 1), 1, std::max(copies, 1)));
  for (int c = 0; c < copies; c += per) f(c, std::min(per, copies - c));
}

// Inputs replicated into argument sets until cycling through them touches 4x the
// last-level cache; device memory released on destruction.
struct ArgumentSets {
  backend::Backend& backend;
  std::vector<ops::HostTensor> host;
  std::vector<backend::LaunchArgs> args;
  std::vector<void*> allocations;
  int64_t working_set_bytes = 0;
  std::vector<std::pair<uint8_t*, int64_t>> base;  // per tensor: first copy, stride between copies

  // "" when every read-only input (role kIn) of every argument set still holds the bytes it was
  // given, else which tensor of which set changed. The arena is the candidate's to write (on the
  // CPU it shares the executor's memory), so a kernel that rewrites its inputs (zeroing them turns
  // many ops into no-ops that still "match" a reference built from the arena) is caught here.
  std::string changed_input() const {
    std::vector<uint8_t> chunk;
    for (size_t i = 0; i < host.size(); ++i) {
      const auto& t = host[i];
      if (t.spec.role != ops::Role::kIn || t.bytes.empty()) continue;
      const int copies = t.spec.shared_across_sets ? 1 : int(args.size());
      const int64_t stride = base[i].second, size = int64_t(t.bytes.size());
      std::string changed;
      in_runs(stride, copies, [&](int c, int n) {
        if (!changed.empty()) return;
        chunk.resize(size_t((n - 1) * stride + size));
        backend.download(chunk.data(), base[i].first + c * stride, int64_t(chunk.size()));
        for (int k = 0; k < n && changed.empty(); ++k)
          if (std::memcmp(chunk.data() + k * stride, t.bytes.data(), t.bytes.size()) != 0)
            changed = fmt::format("input '{}' of argument set {} changed during the benchmark (a kernel may "
                                  "not write its inputs)", t.spec.name, c + k);
      });
      if (!changed.empty()) return changed;
    }
    return "";
  }

  ArgumentSets(backend::Backend& b, const ops::Op& op, const ops::ShapeCase& shape_case,
               const config::ModelDims& model, const BenchOptions& options, std::mt19937_64& rng)
      : backend(b) {
    try {
      fill(op, shape_case, model, options, rng);
    } catch (...) {  // the destructor does not run for a half-built object
      for (void* p : allocations) backend.release(p);
      throw;
    }
  }
  ~ArgumentSets() {
    for (void* p : allocations) backend.release(p);
  }
  ArgumentSets(const ArgumentSets&) = delete;
  ArgumentSets& operator=(const ArgumentSets&) = delete;

 private:
  void fill(const ops::Op& op, const ops::ShapeCase& shape_case, const config::ModelDims& model,
            const BenchOptions& options, std::mt19937_64& rng) {
    const auto& shape = shape_case.shape;
    host = op.make_tensors(shape, model, ops::Distribution::kNormal, rng, true);
    int64_t set_bytes = 0;
    for (const auto& t : host)
      if (!t.spec.shared_across_sets) set_bytes += int64_t(t.bytes.size());
    const int64_t ws_bytes = op.workspace_bytes(shape);
    // 4x the last-level cache, and on the CPU at least kDramWorkingSetBytes: a VM may report less
    // cache than its host's socket has (this project's 2-core VMs reported 32 MiB one day and 480
    // MiB another), and a rotation inside the real cache times cache, not DRAM, while the copy
    // ceiling it is compared with is DRAM (copy_buffer_bytes). A GPU's L2 size is its own.
    const auto& dev = backend.device();
    const int64_t target =
        dev.backend == "cpu" ? std::max<int64_t>(4 * dev.cache_bytes, kDramWorkingSetBytes) : 4 * dev.cache_bytes;
    // at most max_rotation_bytes, and on the CPU a third of the arena the sets come from
    const int64_t cap = backend.device().memory_bytes > 0
                            ? std::min(options.max_rotation_bytes, backend.device().memory_bytes / 3)
                            : options.max_rotation_bytes;
    int sets = int(std::clamp<int64_t>((target + set_bytes - 1) / std::max<int64_t>(set_bytes, 1), 1,
                                       std::max<int64_t>(1, cap / std::max<int64_t>(set_bytes, 1))));
    // (at most 2^18 sets: a 25 KB set on a VM that reports 480 MiB of last-level cache needs
    // 80,240 for 4x the cache, past the 2^16 this cap was before 2026-12-06)
    sets = std::min(sets, 1 << 18);
    working_set_bytes = set_bytes * sets;
    args.resize(size_t(sets));
    // One allocation per tensor for all sets (set s at s * stride, 256-byte aligned), filled by
    // a few large uploads: tiny shapes need tens of thousands of sets, and one cuMemAlloc plus one
    // upload per set and tensor took over a minute on the H200.
    base.assign(host.size(), {nullptr, 0});
    for (size_t i = 0; i < host.size(); ++i) {
      const auto& t = host[i];
      const int64_t bytes = int64_t(t.bytes.size());
      const int64_t stride = (bytes + 255) / 256 * 256;
      const int copies = t.spec.shared_across_sets ? 1 : sets;
      auto* p = static_cast<uint8_t*>(alloc(std::max<int64_t>(stride * copies, 1)));
      base[i] = {p, stride};
      upload_replicated(p, t.bytes, stride, copies);
    }
    void* workspace = alloc(ws_bytes);
    for (int s = 0; s < sets; ++s) {
      auto& a = args[size_t(s)];
      for (size_t i = 0; i < host.size(); ++i)
        a.tensors.push_back(base[i].first + (host[i].spec.shared_across_sets ? 0 : s * base[i].second));
      a.symbols = shape;
      a.dims = op.dims(shape);
      a.scalars = op.scalars(shape, model);
      a.workspace = workspace;
      a.workspace_bytes = ws_bytes;
    }
  }
  // `copies` copies of `bytes`, `stride` apart from `device`, through a staging buffer of at
  // most ~64 MiB (one upload per staging fill).
  void upload_replicated(uint8_t* device, const std::vector<uint8_t>& bytes, int64_t stride, int copies) {
    if (bytes.empty()) return;
    std::vector<uint8_t> staging;
    in_runs(stride, copies, [&](int c, int n) {
      if (staging.empty()) {  // the first run is the longest: fill the staging buffer once
        staging.assign(size_t(stride) * size_t(n), 0);
        for (int k = 0; k < n; ++k) std::copy(bytes.begin(), bytes.end(), staging.begin() + k * stride);
      }
      // the last copy ends at its own size (the slab may hold exactly copies * stride bytes)
      backend.upload(device + c * stride, staging.data(), (n - 1) * stride + int64_t(bytes.size()));
    });
  }
  void* alloc(int64_t bytes) {
    allocations.push_back(backend.allocate(bytes));
    return allocations.back();
  }
};

// Rows of the timed-call check: every row, or (traffic over check_max_bytes) a few random rows
// of the op's leading symbol. Tensors whose first dimension is that symbol are cut to the rows
// (host copies hold the rows back to back); the other tensors travel whole.
struct RowSample {
  bool all = true;
  std::string symbol, label;
  std::vector<int64_t> rows;  // sorted, distinct (empty when all)
  ops::Shape shape;           // the checked problem's shape

  bool sliced(const ops::HostTensor& t) const { return !all && !t.spec.dims.empty() && t.spec.dims[0] == symbol; }
  // Host tensors shaped for the checked problem (contents copied only where whole).
  std::vector<ops::HostTensor> cut(const std::vector<ops::HostTensor>& full) const {
    if (all) return full;
    std::vector<ops::HostTensor> out;
    for (const auto& t : full) {
      if (!sliced(t)) {
        out.push_back(t);
        continue;
      }
      ops::HostTensor s{t.spec, t.dims, {}};
      const size_t row_bytes = t.bytes.size() / size_t(t.dims[0]);
      s.dims[0] = int64_t(rows.size());
      s.bytes.assign(row_bytes * rows.size(), 0);
      out.push_back(std::move(s));
    }
    return out;
  }
  // cut(), with the sampled rows' contents copied from `full` too.
  std::vector<ops::HostTensor> cut_copy(const std::vector<ops::HostTensor>& full) const {
    auto out = cut(full);
    for (size_t i = 0; i < full.size(); ++i) {
      if (!sliced(full[i])) continue;
      const size_t row_bytes = full[i].bytes.size() / size_t(full[i].dims[0]);
      for (size_t j = 0; j < rows.size(); ++j)
        std::memcpy(out[i].bytes.data() + j * row_bytes, full[i].bytes.data() + size_t(rows[j]) * row_bytes, row_bytes);
    }
    return out;
  }
  // Copies host tensor `t` (cut or whole) from (upload=false) or to (upload=true) the device.
  void transfer(backend::Backend& b, ops::HostTensor& t, void* device, bool upload) const {
    if (!sliced(t)) {
      if (upload) b.upload(device, t.bytes.data(), int64_t(t.bytes.size()));
      else b.download(t.bytes.data(), device, int64_t(t.bytes.size()));
      return;
    }
    const size_t row_bytes = t.bytes.size() / rows.size();
    for (size_t j = 0; j < rows.size(); ++j) {
      void* at = static_cast<uint8_t*>(device) + size_t(rows[j]) * row_bytes;
      if (upload) b.upload(at, t.bytes.data() + j * row_bytes, int64_t(row_bytes));
      else b.download(t.bytes.data() + j * row_bytes, at, int64_t(row_bytes));
    }
  }
};

RowSample sample_rows(const ops::Op& op, const ops::Shape& shape, const BenchOptions& options,
                      std::mt19937_64& rng) {
  RowSample r;
  r.shape = shape;
  const auto specs = op.tensors();
  if (op.min_bytes(shape) <= options.check_max_bytes || specs.empty() || specs[0].dims.empty()) return r;
  r.symbol = specs[0].dims[0];
  const int64_t n = shape.at(r.symbol);
  const int64_t k = std::min<int64_t>(n, std::max(1, options.check_sample_rows));
  if (k >= n) return r;
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  r.rows.assign(order.begin(), order.begin() + k);
  std::sort(r.rows.begin(), r.rows.end());
  r.all = false;
  r.shape[r.symbol] = k;
  r.label = fmt::format("{} of {} rows of {}", k, n, r.symbol);
  return r;
}

// One checked call of `module` on `args`: before it, outside any timed region, in-out tensors are
// reset to the set's original values and a few elements of that argument set's inputs are swapped
// (values stay in distribution); after it, the outputs are
// compared with the reference for the changed inputs. Stale outputs (work skipped because the
// output already holds a result, results cached by pointer, call order or sampled input values,
// work done only on some argument sets) are wrong at the changed elements. `time` wraps the call
// (the timed loop passes its timer). Returns "" when the outputs are right, else what was wrong.
// A checked call in two halves, around the call: prepare_check() reads the set's sampled rows,
// fails when a read-only input changed, restores in-out tensors to what the set was given and
// swaps a few input elements (a kept or cached result then no longer matches); finish_check()
// compares the outputs after the call with the reference and restores the read-only inputs.
struct PreparedCheck {
  const backend::LaunchArgs* args = nullptr;
  std::vector<ops::HostTensor> before, given;
  std::vector<size_t> swapped;
  std::string failure;  // found while preparing: the call need not run
};

PreparedCheck prepare_check(backend::Backend& backend, const backend::LaunchArgs& args,
                            const std::vector<ops::HostTensor>& host, const RowSample& rows, std::mt19937_64& rng) {
  PreparedCheck c;
  c.args = &args;
  c.before = rows.cut(host);
  for (size_t i = 0; i < c.before.size(); ++i) rows.transfer(backend, c.before[i], args.tensors[i], false);
  c.given = rows.cut_copy(host);  // what the read-only inputs must still hold
  for (size_t t = 0; t < c.before.size(); ++t)
    if (c.before[t].spec.role == ops::Role::kIn && c.before[t].bytes != c.given[t].bytes) {
      c.failure = fmt::format("input '{}' changed during the benchmark (a kernel may not write its inputs)",
                              c.before[t].spec.name);
      return c;
    }
  for (size_t t = 0; t < c.before.size(); ++t) {
    auto& ht = c.before[t];
    if (ht.spec.role == ops::Role::kOut || ht.spec.shared_across_sets) continue;
    // An in-out tensor has accumulated the loop's calls (residual += x each call): the check
    // runs on the values the set was given, inside the distribution the tolerances are for.
    const bool in_out = ht.spec.role == ops::Role::kInOut;
    if (in_out) ht.bytes = c.given[t].bytes;
    const size_t esize = ops::dtype_bytes(ht.spec.dtype);
    const size_t n = ht.bytes.size() / esize;
    if (n < 2) {
      if (in_out) rows.transfer(backend, ht, args.tensors[t], true);
      continue;
    }
    for (int k = 0; k < 4; ++k) {
      const size_t x = size_t(rng() % n), y = size_t(rng() % n);
      for (size_t b = 0; b < esize; ++b) std::swap(ht.bytes[x * esize + b], ht.bytes[y * esize + b]);
    }
    rows.transfer(backend, ht, args.tensors[t], true);
    c.swapped.push_back(t);
  }
  return c;
}

std::string finish_check(backend::Backend& backend, PreparedCheck& c, const RowSample& rows,
                         const std::vector<ops::HostTensor>& host, const BenchOptions& options) {
  auto after = rows.cut(host);
  for (size_t i = 0; i < after.size(); ++i) rows.transfer(backend, after[i], c.args->tensors[i], false);
  const std::string why = options.check_timed_call(rows.shape, c.before, after);
  // read-only inputs go back to what the set was given (changed_input() checks every set)
  for (size_t t : c.swapped)
    if (c.before[t].spec.role == ops::Role::kIn) {
      auto original = c.given[t];
      rows.transfer(backend, original, c.args->tensors[t], true);
    }
  backend.synchronize();
  return why;
}

std::string checked_call(backend::Backend& backend, const backend::Module& module, const backend::LaunchArgs& args,
                         const std::vector<ops::HostTensor>& host, const RowSample& rows,
                         const BenchOptions& options, std::mt19937_64& rng, int& status,
                         const std::function<void(const std::function<void()>&)>& time) {
  auto c = prepare_check(backend, args, host, rows, rng);
  if (!c.failure.empty()) return c.failure;
  backend.synchronize();
  time([&] { status |= backend.launch(module, args); });
  if (status != 0) return "";
  backend.synchronize();
  return finish_check(backend, c, rows, host, options);
}

// Per-call time of `calls` launches of `module` on the argument sets from `first` on (cycling),
// timed as one batch (Backend::time_graph_us: a CUDA graph, or one CPU executor command); on the
// CPU a batch that gives 0 (a call returned non-zero) sets `status`.
double time_batch(backend::Backend& backend, const backend::Module& module,
                  const std::vector<backend::LaunchArgs>& args, int64_t first, int calls, int& status) {
  const int64_t n = int64_t(args.size());
  const double us = backend.time_graph_us(
      [&] {
        for (int c = 0; c < calls; ++c) status |= backend.launch(module, args[size_t((first + c) % n)]);
      },
      calls);
  if (backend.device().backend == "cpu" && !(us > 0)) status |= 1;
  return us;
}

// One CPU batch (time_graph_us) of `calls` calls on distinct argument sets from `first` on (calls
// <= the number of sets), with `checks` of its positions, drawn at random, checked as
// checked_call checks one call: a kernel that skips work at some positions of a batch (it can
// tell them apart by the gaps between calls) is caught unless it skips none of the checked ones.
// `us` gets the batch's per-call time (0: a call returned non-zero, `status` then non-zero).
std::string checked_batch(backend::Backend& backend, const backend::Module& module, const ArgumentSets& sets,
                          int64_t first, int calls, int checks, const RowSample& rows, const BenchOptions& options,
                          std::mt19937_64& rng, int& status, double& us) {
  const int64_t n = int64_t(sets.args.size());
  std::vector<int> pos(static_cast<size_t>(calls));
  std::iota(pos.begin(), pos.end(), 0);
  std::shuffle(pos.begin(), pos.end(), rng);
  pos.resize(size_t(std::min(calls, checks)));
  std::vector<PreparedCheck> prepared;
  for (int p : pos) {
    prepared.push_back(prepare_check(backend, sets.args[size_t((first + p) % n)], sets.host, rows, rng));
    if (!prepared.back().failure.empty()) return prepared.back().failure;
  }
  backend.synchronize();
  us = time_batch(backend, module, sets.args, first, calls, status);
  if (status != 0) return "";
  backend.synchronize();
  for (size_t k = 0; k < prepared.size(); ++k) {
    const std::string why = finish_check(backend, prepared[k], rows, sets.host, options);
    if (!why.empty())
      return fmt::format("in a batch of {} back-to-back calls, at call {}: {}", calls, pos[k] + 1, why);
  }
  return "";
}

// After a loop of calls: every set's read-only inputs compared with what it was given, then one
// checked call of `module` on a random argument set (untimed). "" or what was wrong, naming `after`.
std::string check_after_loop(backend::Backend& backend, const backend::Module& module, const ArgumentSets& sets,
                             const RowSample& rows, const BenchOptions& options, std::mt19937_64& rng, int& status,
                             const char* after) {
  std::string why = sets.changed_input();
  if (!why.empty()) return why;
  const int late = int(rng() % uint64_t(sets.args.size()));
  why = checked_call(backend, module, sets.args[size_t(late)], sets.host, rows, options, rng, status,
                     [](const std::function<void()>& call) { call(); });
  return why.empty() ? "" : fmt::format("after the {}, on argument set {} of {}: {}", after, late, sets.args.size(), why);
}

}  // namespace

bool timed_call_check_failed(const std::string& check) {
  return !check.empty() && check.rfind("passed", 0) != 0 && check.rfind("skipped", 0) != 0;
}

bool BenchStats::timed_call_check_failed() const { return bench::timed_call_check_failed(timed_call_check); }

namespace {
// GB/s from the op's minimum bytes and time_us(), and its percent of the ceiling (0 without one).
void set_bandwidth(BenchStats& stats) {
  stats.bandwidth_gbps = double(stats.bytes) / (stats.time_us() * 1e-6) / 1e9;
  stats.percent_of_peak = stats.peak_bw_gbps > 0 ? 100.0 * stats.bandwidth_gbps / stats.peak_bw_gbps : 0.0;
}
}  // namespace

void retime(BenchStats& stats, double time_us) {
  const double was = stats.time_us();
  if (!(time_us > 0) || !(was > 0))
    fail(ErrorCategory::kUsage, "retime: {} us for a figure of {} us: both must be > 0", time_us, was);
  const double f = time_us / was;
  for (double* t : {&stats.median_us, &stats.min_us, &stats.max_us, &stats.graph_us, &stats.graph_min_us,
                    &stats.graph_max_us})
    *t *= f;
  stats.tflops /= f;
  set_bandwidth(stats);
}

BenchStats benchmark_kernel(backend::Backend& backend, const ops::Op& op,
                            const backend::Module& module, const ops::ShapeCase& shape_case,
                            const config::ModelDims& model, const BenchOptions& options,
                            double peak_bw_gbps, uint64_t seed) {
  const auto& shape = shape_case.shape;
  BenchStats stats;
  std::mt19937_64 rng(seed);
  ArgumentSets sets_(backend, op, shape_case, model, options, rng);
  const auto& host = sets_.host;
  const auto& arg_sets = sets_.args;
  const int sets = int(arg_sets.size());
  stats.argument_sets = sets;
  stats.working_set_bytes = sets_.working_set_bytes;

  // Warm-up, untimed: every set once (thread pools, TLBs, clocks), at least 3 calls, and
  // no longer than the timing cap (uploads already touched every page), so a very slow
  // kernel is measured as slow instead of timing out.
  const auto warm_start = std::chrono::steady_clock::now();
  for (int s = 0; s < std::max(sets, 3); ++s) {
    if (backend.launch(module, arg_sets[size_t(s % sets)]) != 0) return stats;
    backend.synchronize();
    if (s >= 2 && std::chrono::duration<double>(std::chrono::steady_clock::now() - warm_start)
                          .count() > options.max_s)
      break;
  }

  // The outputs of timed calls are checked too (checked_call): one at a random iteration of the
  // timed loop, and one after it on a random argument set, so a kernel that computes only on the
  // first sets or the first calls is caught wherever the loop happens to stop.
  // Big shapes are checked on a few rows of the leading symbol (see BenchOptions).
  const bool check = bool(options.check_timed_call);
  const int check_at = check ? int(rng() % uint64_t(std::max(1, options.min_reps))) : -1;
  const RowSample rows = check ? sample_rows(op, shape, options, rng) : RowSample{};
  std::string check_failure;

  std::vector<double> samples;
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  for (int i = 0;; ++i) {
    const auto& args = arg_sets[size_t(i % sets)];
    if (i == check_at) {
      check_failure = checked_call(backend, module, args, host, rows, options, rng, status,
                                   [&](const std::function<void()>& call) { samples.push_back(backend.time_us(call)); });
    } else {
      samples.push_back(backend.time_us([&] { status |= backend.launch(module, args); }));
    }
    if (status != 0) return BenchStats{};
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (int(samples.size()) >= options.min_reps) {
      if (elapsed > options.max_s) break;
      if (samples.size() % 8 == 0 && rel_ci_of(samples) < options.noise) break;
    }
  }
  summarize(samples, stats);
  // Graph mode: a batch of launches over rotating argument sets, timed per call without the
  // launch overhead. CUDA: kGraphCalls launches captured once into a graph and replayed. CPU
  // (CpuBackend::time_graph_us): the launches go to the candidate's executor as one command, so
  // the IPC round trip (and its wake-up jitter, tens of µs against kernels of a few µs) is paid
  // once a batch; a batch lasts about kCpuBatchUs (8-kCpuMaxCalls calls, never more than the
  // argument sets: each set at most once a batch, so a kernel cannot skip a set it already did
  // in the same command). A CPU call that returns non-zero in a batch fails the benchmark, as a
  // launched one does. One CPU batch, at a random position, has kChecks of its calls, drawn at
  // random, checked (checked_batch). Same stopping rule.
  const bool cpu = backend.device().backend == "cpu";
  {
    constexpr int kGraphCalls = 20, kCpuMaxCalls = 2000, kChecks = 8;
    constexpr double kCpuBatchUs = 1000;
    const int check_batch = cpu && check ? int(rng() % uint64_t(std::max(1, options.min_reps))) : -1;
    int64_t next_set = 0;
    auto batch_us = [&](int n) {
      const double us = time_batch(backend, module, arg_sets, next_set, n, status);
      next_set += n;
      return us;
    };
    // CPU batch size: from two untimed probes (as many calls as fit the sets, then as many as the
    // first suggests), since the launched median may be mostly IPC
    int calls = kGraphCalls;
    if (cpu) {
      calls = std::min(8, sets);
      for (int probe = 0; probe < 2; ++probe) {
        const double us = batch_us(calls);
        if (status != 0) return BenchStats{};
        calls = int(std::clamp(std::ceil(kCpuBatchUs / us), 8.0, double(kCpuMaxCalls)));
        calls = std::min(calls, sets);
      }
    }
    std::vector<double> graph_samples;
    const auto graph_start = std::chrono::steady_clock::now();
    for (;;) {
      double us = 0;
      if (int(graph_samples.size()) == check_batch) {
        const std::string why =
            checked_batch(backend, module, sets_, next_set, calls, kChecks, rows, options, rng, status, us);
        next_set += calls;
        if (check_failure.empty() && !why.empty()) check_failure = why;
      } else {
        us = batch_us(calls);
      }
      if (cpu && status != 0) return BenchStats{};
      if (us <= 0 || status != 0) break;
      graph_samples.push_back(us);
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - graph_start).count();
      if (int(graph_samples.size()) >= options.min_reps) {
        if (rel_ci_of(graph_samples) < options.noise || elapsed > options.max_s) break;
      }
    }
    if (!graph_samples.empty()) {
      BenchStats g;
      summarize(graph_samples, g);
      stats.graph_us = g.median_us;
      stats.graph_min_us = g.min_us;
      stats.graph_max_us = g.max_us;
    }
  }
  // After the timed and graph loops: one checked call on a random argument set, and every set's
  // read-only inputs compared with what it was given.
  if (check) {
    const std::string why = check_after_loop(backend, module, sets_, rows, options, rng, status, "timing loops");
    if (status != 0) return BenchStats{};
    if (check_failure.empty()) check_failure = why;
    stats.timed_call_check = !check_failure.empty() ? check_failure : rows.all ? "passed" : "passed on " + rows.label;
  }
  stats.bytes = op.min_bytes(shape);
  stats.tflops = op.flops(shape) / (stats.time_us() * 1e-6) / 1e12;
  stats.peak_bw_gbps = peak_bw_gbps;
  set_bandwidth(stats);
  if (peak_bw_gbps > 0) stats.below_floor = stats.bandwidth_gbps > peak_bw_gbps * 1.05;
  return stats;
}

PairedStats paired_benchmark(backend::Backend& backend, const ops::Op& op, const backend::Module& a,
                             const backend::Module& b, const ops::ShapeCase& shape,
                             const config::ModelDims& model, const BenchOptions& options, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ArgumentSets sets(backend, op, shape, model, options, rng);
  const int n = int(sets.args.size());
  PairedStats out;
  int status = 0;
  for (int s = 0; s < std::max(n, 3); ++s) {  // warm-up, both kernels
    status |= backend.launch(a, sets.args[size_t(s % n)]);
    status |= backend.launch(b, sets.args[size_t(s % n)]);
    backend.synchronize();
    if (status != 0) return out;
  }
  // Each side of a pair is timed as benchmark_kernel's graph figure, which the search optimizes
  // and BenchStats::time_us() reports: on CUDA 20 calls in a CUDA graph (launched one at a time
  // the launch overhead dominates small kernels, and an eager baseline of six launches read 49.7
  // us against its 11.3 in a graph on the H200, 2026-12-04); on the CPU a batch of calls in one
  // executor command (CpuBackend::time_graph_us): one call a side would leave each executor's
  // IPC jitter in the ratio, and that differs between two executors by which core each one wakes
  // on (the eager baseline paired with itself read 0.2x and 3.4x, 2026-12-04). A backend whose
  // graph capture fails is timed one launch a side.
  const bool cpu = backend.device().backend == "cpu";
  int calls = cpu ? 8 : 20;
  bool batched = true;
  auto side_us = [&](const backend::Module& m, int first_set) {
    if (!batched) return backend.time_us([&] { status |= backend.launch(m, sets.args[size_t(first_set % n)]); });
    return time_batch(backend, m, sets.args, first_set, calls, status);
  };
  for (int probe = 0; probe < (cpu ? 2 : 1); ++probe) {  // untimed; on the CPU: about 1 ms a side
    const double us = std::max(side_us(a, 0), side_us(b, 0));
    if (status != 0) return out;
    if (!(us > 0)) {  // graph capture failed (a CPU batch that fails sets status, above)
      batched = false;
      break;
    }
    if (cpu) calls = std::min(n, int(std::clamp(std::ceil(1000.0 / us), 8.0, 2000.0)));  // each set once a batch
  }
  if (cpu) calls = std::min(calls, n);
  // On the CPU one of the candidate's batches, at a random pair, has 8 of its calls checked
  // (checked_batch, as in benchmark_kernel): a kernel honest there could otherwise skip work here.
  const bool check_here = cpu && batched && bool(options.check_timed_call);
  const RowSample rows = options.check_timed_call ? sample_rows(op, shape.shape, options, rng) : RowSample{};
  const int check_pair = check_here ? int(rng() % uint64_t(std::max(1, options.min_reps))) : -1;
  std::vector<double> ta, tb, ratio;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    const int set = int((int64_t(i) * calls) % n);
    // Alternate which kernel goes first, so neither always runs on a warmer cache.
    const bool a_first = (i % 2) == 0;
    auto b_side = [&] {
      if (i != check_pair) return side_us(b, set);
      double us = 0;
      const std::string why = checked_batch(backend, b, sets, set, calls, 8, rows, options, rng, status, us);
      if (out.timed_call_check.empty() && !why.empty()) out.timed_call_check = why;
      return us;
    };
    double first = a_first ? side_us(a, set) : b_side();
    double second = a_first ? b_side() : side_us(a, set);
    if (!out.timed_call_check.empty()) return out;  // wrong outputs: pairs stays 0, the check says why
    if (status != 0 || (batched && !(first > 0 && second > 0))) return PairedStats{};
    const double us_a = a_first ? first : second, us_b = a_first ? second : first;
    ta.push_back(us_a);
    tb.push_back(us_b);
    ratio.push_back(us_a > 0 ? us_b / us_a : 1.0);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (int(ratio.size()) >= options.min_reps) {
      if (elapsed > 2 * options.max_s) break;
      if (ratio.size() % 8 == 0 && rel_ci_of(ratio) < options.noise / 2) break;
    }
  }
  if (options.check_timed_call) {  // the candidate's outputs, as in benchmark_kernel
    const std::string why = check_after_loop(backend, b, sets, rows, options, rng, status, "paired loop");
    if (status != 0) return PairedStats{};
    out.timed_call_check = why.empty() ? "passed" : why;
  }
  BenchStats sa, sb, sr;
  summarize(ta, sa);
  summarize(tb, sb);
  summarize(ratio, sr);
  out.a_median_us = sa.median_us;
  out.b_median_us = sb.median_us;
  out.ratio = sr.median_us;
  out.ratio_ci = sr.rel_ci * sr.median_us;
  out.pairs = sr.reps;
  return out;
}

void to_json(nlohmann::json& j, const PairedStats& s) {
  j = {{"a_median_us", s.a_median_us}, {"b_median_us", s.b_median_us}, {"ratio", s.ratio},
       {"ratio_ci", s.ratio_ci}, {"pairs", s.pairs}, {"timed_call_check", s.timed_call_check}};
}

std::string busy_cpu_note(const std::string& backend, double load1, int64_t cores) {
  if (backend != "cpu" || cores < 1 || !(load1 >= 0.5 * double(cores))) return "";
  return fmt::format("note: the machine is busy (1-minute load {:.1f} on {} core(s), thrive's own earlier work "
                     "included): whatever else runs shares the cores, caches and DRAM with the timed kernels, so "
                     "these timings can run slower than on an idle machine, and memory records them as measured",
                     load1, cores);
}

double load_average_1min() {
  double load[1] = {0.0};
  return getloadavg(load, 1) == 1 ? load[0] : std::nan("");
}

int64_t copy_buffer_bytes(const backend::DeviceInfo& device) {
  // DRAM-sized: at least 8x the last-level cache and kDramWorkingSetBytes (1 GiB, as the anchors'
  // copy; past a cache the machine may not report). On the
  // CPU both buffers come from the worker's shared arena (the copy runs in a process of its own
  // that holds nothing else): each at most a third of it. A 24 GiB machine's 6 GiB arena and 480
  // MiB of L3 give 2 GiB a buffer, 4x the cache (8x did not fit: the allocation failed).
  int64_t bytes = std::max<int64_t>(kDramWorkingSetBytes, 8 * device.cache_bytes);
  if (device.memory_bytes > 0) bytes = std::min(bytes, device.memory_bytes / 3);
  if (bytes < 2 * device.cache_bytes)
    fail(ErrorCategory::kBackend,
         "the copy ceiling needs two buffers of at least twice the last-level cache ({} MiB) to measure DRAM, not "
         "cache, but the tensor arena holds {} MiB (a third of it a buffer): raise THRIVE_WORKER_MEMORY_MB (the "
         "arena is half of it) to at least {} MiB",
         2 * device.cache_bytes >> 20, device.memory_bytes >> 20, 12 * device.cache_bytes >> 20);
  return bytes / 16 * 16;
}

double measure_copy_bandwidth(backend::Backend& backend, const BenchOptions& options) {
  const auto kernel = backend::KernelSource::parse(
      backend::embedded_file(backend.device().backend == "cpu" ? "cpu/copy.cpp" : "cuda/copy.cu"),
      "copy kernel");
  auto compiled = backend.compile(kernel);
  if (!compiled.module) {
    std::string why = compiled.log.substr(0, 400);
    std::replace(why.begin(), why.end(), '\n', ' ');  // Error messages are one line
    fail(ErrorCategory::kBackend, "copy kernel failed to compile: {}", why);
  }
  const int64_t bytes = copy_buffer_bytes(backend.device());
  // released on every path (a failed launch throws)
  struct Buffer {
    backend::Backend& be;
    void* p;
    ~Buffer() { be.release(p); }
  };
  const Buffer src_buf{backend, backend.allocate(bytes)};
  const Buffer dst_buf{backend, backend.allocate(bytes)};
  void* src = src_buf.p;
  void* dst = dst_buf.p;
  backend.memset(src, 1, bytes);
  backend.memset(dst, 0, bytes);
  backend::LaunchArgs args;
  args.tensors = {src, dst};
  args.dims = {bytes};
  // Median time of `body` after 2 warm-up calls: at least 10 samples, then until max_s / 2.
  auto median_us = [&](const std::function<void()>& body) {
    for (int i = 0; i < 2; ++i) body();
    backend.synchronize();
    std::vector<double> samples;
    const auto start = std::chrono::steady_clock::now();
    while (samples.size() < 10 ||
           (samples.size() < 200 && std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                                  start).count() < options.max_s / 2)) {
      samples.push_back(backend.time_us(body));
    }
    BenchStats s;
    summarize(samples, s);
    return s.median_us;
  };
  const double kernel_us = median_us([&] { backend.launch(*compiled.module, args); });
  const double platform_us = median_us([&] { backend.copy_device(dst, src, bytes); });
  return 2.0 * double(bytes) / (std::min(kernel_us, platform_us) * 1e-6) / 1e9;
}

namespace {
// A non-finite figure (a zero time gives infinite bandwidth) would be JSON null.
double fin(double v) { return std::isfinite(v) ? v : 0.0; }
double num(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}
}  // namespace

void to_json(nlohmann::json& j, const BenchStats& s) {
  j = {{"median_us", fin(s.median_us)},       {"min_us", fin(s.min_us)},
       {"graph_us", fin(s.graph_us)},         {"graph_min_us", fin(s.graph_min_us)},
       {"graph_max_us", fin(s.graph_max_us)}, {"time_us", fin(s.time_us())},
       {"max_us", fin(s.max_us)},             {"reps", s.reps},
       {"rel_ci", fin(s.rel_ci)},             {"bytes", s.bytes},
       {"bandwidth_gbps", fin(s.bandwidth_gbps)}, {"tflops", fin(s.tflops)},
       {"peak_bw_gbps", fin(s.peak_bw_gbps)}, {"percent_of_peak", fin(s.percent_of_peak)},
       {"below_floor", s.below_floor},   {"argument_sets", s.argument_sets},
       {"working_set_bytes", s.working_set_bytes}, {"timed_call_check", s.timed_call_check}};
}

void from_json(const nlohmann::json& j, BenchStats& s) {
  s.median_us = num(j, "median_us");
  s.min_us = num(j, "min_us");
  s.max_us = num(j, "max_us");
  s.graph_us = num(j, "graph_us");
  s.graph_min_us = num(j, "graph_min_us");
  s.graph_max_us = num(j, "graph_max_us");
  s.reps = j.value("reps", 0);
  s.rel_ci = num(j, "rel_ci");
  s.bytes = j.value("bytes", int64_t{0});
  s.bandwidth_gbps = num(j, "bandwidth_gbps");
  s.tflops = num(j, "tflops");
  s.peak_bw_gbps = num(j, "peak_bw_gbps");
  s.percent_of_peak = num(j, "percent_of_peak");
  s.below_floor = j.value("below_floor", false);
  s.argument_sets = j.value("argument_sets", 0);
  s.working_set_bytes = j.value("working_set_bytes", int64_t{0});
  s.timed_call_check = j.value("timed_call_check", "");
}

}  // namespace thrive::bench
