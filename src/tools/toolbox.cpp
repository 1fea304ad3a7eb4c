#include "thrive/tools/toolbox.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "thrive/backend/backend.hpp"
#include "thrive/backend/embedded.hpp"
#include "thrive/bench/bench.hpp"
#include "thrive/core/error.hpp"
#include "thrive/core/json.hpp"
#include "thrive/core/files.hpp"
#include "thrive/verify/verify.hpp"

namespace thrive::tools {

std::string source_extension(const std::string& backend) { return backend == "cuda" ? ".cu" : ".cpp"; }
// The op's template for `backend` (kernels/<backend>/<op>/template.<ext>, embedded at build time).
backend::KernelSource template_source(const std::string& backend, const std::string& op) {
  const std::string path = backend + "/" + op + "/template" + source_extension(backend);
  return backend::KernelSource::parse(backend::embedded_file(path), "kernels/" + path);
}

std::map<std::string, std::pair<nlohmann::json, double>> seed_builtin_cards(memory::Store& store,
                                                                           const std::string& backend) {
  std::map<std::string, std::pair<nlohmann::json, double>> priors;
  const std::string path = backend + "/cards.json";
  auto paths = backend::embedded_paths(path);
  if (paths.empty()) return priors;
  auto doc = nlohmann::json::parse(backend::embedded_file(path));
  for (const auto& c : doc) {
    auto card = c.get<memory::StrategyCard>();
    card.origin = "builtin";
    const double prior = c.value("prior_failures", 0.0);
    if (!(prior >= 0 && prior <= 100))
      fail(ErrorCategory::kInternal, "kernels/{}: card {}: prior_failures {}: expected 0 to 100", path, card.id, prior);
    if (prior > 0) priors[card.id] = {card.set, prior};
    store.add_card(card);
  }
  return priors;
}

Toolbox::Toolbox(const config::Config& cfg, memory::Store& store, const std::string& backend_name)
    : cfg_(cfg), store_(store), backend_name_(backend_name) {
  ensure_writable_dir(cfg.home + "/kernels", "THRIVE_HOME");
  sandbox::Status status;
  std::string detail;
  auto info = sandbox::run_isolated(
      [&] {
        auto b = backend::make_backend(backend_name, cfg);
        const auto& d = b->device();
        return nlohmann::json{{"key", d.key()},          {"backend", d.backend},
                              {"name", d.name},          {"arch", d.arch},
                              {"driver", d.driver},      {"compute_units", d.compute_units},
                              {"cache_bytes", d.cache_bytes}};
      },
      120.0, status, detail);
  if (!info) fail(ErrorCategory::kBackend, "cannot describe the {} device: {}", backend_name, detail);
  device_ = *info;
  device_key_ = device_.value("key", "");
  arch_ = device_.value("arch", "");
  card_prior_failures_ = seed_builtin_cards(store_, backend_name_);
}

double Toolbox::card_prior_failures(const memory::StrategyCard& card) const {
  const auto it = card_prior_failures_.find(card.id);
  return it == card_prior_failures_.end() || it->second.first != card.set ? 0.0 : it->second.second;
}

std::optional<memory::KernelRecord> Toolbox::best_or_nearest(const ops::Op& op, const ops::ShapeCase& shape) {
  if (auto b = store_.best(op.name(), shape.label, device_key_)) return b;
  const double my_bytes = double(std::max<int64_t>(op.min_bytes(shape.shape), 1));
  std::optional<memory::KernelRecord> nearest;
  double best_dist = INFINITY;
  for (const auto& other : shapes_for(op)) {
    if (other.label == shape.label) continue;
    if (auto b = store_.best(op.name(), other.label, device_key_)) {
      const double d = std::abs(std::log(double(op.min_bytes(other.shape)) / my_bytes));
      if (d < best_dist) best_dist = d, nearest = *b;
    }
  }
  return nearest;
}

double Toolbox::peak_bandwidth_gbps(bool remeasure) {
  if (cfg_.peak_bw_gbps > 0) return cfg_.peak_bw_gbps;
  if (peak_ && !remeasure) return *peak_;
  const auto cached_peak = [&]() -> std::optional<double> {
    if (auto cached = store_.peak_bandwidth_gbps(device_key_); cached && *cached > 0 && std::isfinite(*cached))
      return cached;
    return std::nullopt;  // anything else (an import's 0 or -5) is measured again
  };
  if (!remeasure)
    if (auto cached = cached_peak()) return *(peak_ = *cached);
  // One measurement at a time per THRIVE_HOME: its buffers are large (bench::measure_copy_bandwidth
  // sizes them past the last-level cache), and several first runs measuring at once would share
  // the bandwidth they measure, and can exhaust host memory. A run that waited reads the value
  // the other one stored.
  FileLock lock(cfg_.home + "/bandwidth.lock");
  if (!lock.is_open()) {
    spdlog::warn("{}: cannot open ({}); measuring without it", lock.path(), std::strerror(lock.error()));
  } else if (const auto got = lock.acquire(FileLock::Mode::kExclusive, true, [&] {
               spdlog::info("{}: another thrive process is measuring the copy bandwidth; waiting for its result",
                            lock.path());
             });
             got != FileLock::Outcome::kLocked) {
    if (got == FileLock::Outcome::kFailed)
      spdlog::warn("{}: cannot lock ({}); measuring anyway", lock.path(), std::strerror(lock.error()));
    if (!remeasure)
      if (auto cached = cached_peak()) return *(peak_ = *cached);
  }
  sandbox::Status status;
  std::string detail;
  auto cfg = cfg_;
  auto result = sandbox::run_isolated(
      [&] {
        auto b = backend::make_backend(backend_name_, cfg);
        bench::BenchOptions opts{std::max(cfg.bench_max_s, 1.0), cfg.bench_min_reps, cfg.bench_noise};
        return nlohmann::json{{"gbps", bench::measure_copy_bandwidth(*b, opts)}};
      },
      std::max(cfg_.candidate_timeout_s, 120.0), status, detail);
  if (!result) fail(ErrorCategory::kBackend, "copy-bandwidth measurement failed: {}", detail);
  peak_ = result->value("gbps", 0.0);
  store_.set_peak_bandwidth_gbps(device_key_, *peak_);
  return *peak_;
}

nlohmann::json Toolbox::get_op_spec(const std::string& name) { return op_spec(cfg_, backend_name_, name); }

namespace {
// The largest minimum traffic of a shape a run takes without it being named: THRIVE_MAX_SHAPE_BYTES,
// else 256 MiB on the CPU (its float64 reference and host buffers) and no limit on a GPU.
int64_t shape_bytes_cap(const config::Config& cfg, const std::string& backend_name) {
  return cfg.max_shape_bytes > 0 ? cfg.max_shape_bytes : backend_name == "cpu" ? (256ll << 20) : INT64_MAX;
}
}  // namespace

nlohmann::json op_spec(const config::Config& cfg, const std::string& backend_name, const std::string& name) {
  const auto& op = ops::find_op(name);
  const int64_t cap = shape_bytes_cap(cfg, backend_name);
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : op.tensors())
    tensors.push_back({{"name", t.name},
                       {"dims", t.dims},
                       {"dtype", ops::dtype_name(t.dtype)},
                       {"role", ops::role_name(t.role)}});
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& s : op.bench_shapes(cfg.model))
    shapes.push_back({{"label", s.label},
                      {"shape", s.shape},
                      {"min_bytes", op.min_bytes(s.shape)},
                      {"flops", op.flops(s.shape)},
                      {"workspace_bytes", op.workspace_bytes(s.shape)},
                      {"scalars", op.scalars(s.shape, cfg.model)},
                      {"in_default_set", op.min_bytes(s.shape) <= cap}});
  nlohmann::json verify_shapes = nlohmann::json::array();
  for (const auto& s : op.verify_shapes(cfg.model)) verify_shapes.push_back(s.label);
  nlohmann::json params = nlohmann::json::array();
  try {
    for (const auto& p : template_source(backend_name, name).param_specs)
      params.push_back({{"name", p.name}, {"values", p.values}, {"default", p.default_value}, {"doc", p.doc}});
  } catch (const Error&) {
  }
  return {{"op", op.name()},
          {"summary", op.summary()},
          {"trait", ops::trait_name(op.trait())},
          {"tensors", tensors},
          {"dims", op.dim_symbols()},
          {"scalars", op.scalar_names()},
          {"shapes", shapes},
          {"verify_shapes", verify_shapes},
          {"tolerance", {{"bf16", {{"rtol", ops::tolerance_for(ops::DType::kBF16).rtol},
                                   {"nmse", ops::tolerance_for(ops::DType::kBF16).nmse},
                                   {"bias", ops::tolerance_for(ops::DType::kBF16).bias}}},
                         {"f32", {{"rtol", ops::tolerance_for(ops::DType::kF32).rtol},
                                  {"nmse", ops::tolerance_for(ops::DType::kF32).nmse},
                                  {"bias", ops::tolerance_for(ops::DType::kF32).bias}}}}},
          {"template_params", params},
          {"abi", backend::embedded_paths(backend_name + "/thrive_" + backend_name + ".h").empty()
                      ? ""
                      : backend::embedded_file(backend_name + "/thrive_" + backend_name + ".h")},
          {"backend", backend_name},
          {"max_shape_bytes", cap == INT64_MAX ? nlohmann::json() : nlohmann::json(cap)}};
}

std::vector<ops::ShapeCase> Toolbox::shapes_for(const ops::Op& op, const std::string& only) {
  const int64_t cap = shape_bytes_cap(cfg_, backend_name_);
  std::vector<ops::ShapeCase> out;
  for (const auto& s : op.bench_shapes(cfg_.model)) {
    if (!only.empty()) {
      if (s.label == only) out.push_back(s);
    } else if (op.min_bytes(s.shape) <= cap) {
      out.push_back(s);
    }
  }
  if (!only.empty() && out.empty()) {
    std::string labels;
    for (const auto& s : op.bench_shapes(cfg_.model)) labels += (labels.empty() ? "" : ", ") + s.label;
    fail(ErrorCategory::kUsage, "shape '{}' for op {}: expected one of {}", only, op.name(), labels);
  }
  return out;
}

ops::ShapeCase Toolbox::shape_or_largest(const ops::Op& op, const std::string& label) {
  auto shapes = shapes_for(op, label);
  if (shapes.empty())
    fail(ErrorCategory::kUsage, "op {}: no benchmark shape fits THRIVE_MAX_SHAPE_BYTES", op.name());
  return shapes.back();
}

Submission Toolbox::submit(const backend::KernelSource& k, const ops::ShapeCase& shape,
                           const std::string& command) {
  Submission s;
  s.result = benchmark(k, shape);
  if (s.result.status != sandbox::Status::kPassed) return s;
  s.eager_us = eager(k.op, shape).bench.time_us();
  s.record = kernel_record(k, shape, s.result, s.eager_us, command);
  s.new_best = store_.record_kernel(s.record);
  return s;
}

nlohmann::json ops_catalog(const config::ModelDims& model) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& op : ops::registry()) {
    std::vector<std::string> backends;
    for (const char* b : {"cpu", "cuda"})
      if (!backend::embedded_paths(std::string(b) + "/" + op->name() + "/template" +
                                   source_extension(b)).empty())
        backends.push_back(b);
    nlohmann::json shapes = nlohmann::json::array();
    for (const auto& s : op->bench_shapes(model))
      shapes.push_back({{"label", s.label}, {"min_bytes", op->min_bytes(s.shape)},
                        {"flops", op->flops(s.shape)}});
    out.push_back({{"op", op->name()}, {"trait", ops::trait_name(op->trait())},
                   {"summary", op->summary()}, {"shapes", shapes}, {"backends", backends}});
  }
  return out;
}

nlohmann::json leaderboard_json(memory::Store& store, const std::string& device_key,
                                const std::string& op) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& k : store.leaderboard(device_key)) {
    if (!op.empty() && k.op != op) continue;
    nlohmann::json j = k;
    j.erase("metrics");
    j.erase("source");
    out.push_back(std::move(j));
  }
  return out;
}

backend::KernelSource Toolbox::op_template(const std::string& op) { return template_source(backend_name_, op); }

backend::KernelSource Toolbox::eager_kernel(const std::string& op) {
  const std::string path = backend_name_ + "/" + op + "/eager" + source_extension(backend_name_);
  return backend::KernelSource::parse(backend::embedded_file(path), "kernels/" + path);
}

std::string Toolbox::kernel_id(const backend::KernelSource& k) const {
  // Params name the point in a template's space; the content hash tells apart two
  // different sources that declare the same params (a hand-written kernel, an edited
  // template), so one never overwrites the other's record.
  std::string tail = k.params.empty() ? "src-" + k.content_hash()
                                      : backend::params_to_string(k.params) + "~" + k.content_hash();
  return k.op + "." + k.backend + "." + arch_ + ".bf16." + tail;
}

bool suspect_timing(const sandbox::EvalResult& r) {
  return r.status == sandbox::Status::kIncorrect && r.detail.rfind(kSuspectTimingDetail, 0) == 0;
}

sandbox::EvalResult Toolbox::run(const backend::KernelSource& k, const ops::ShapeCase& shape,
                                 bool verify, bool bench, const backend::KernelSource* paired_baseline,
                                 bool verify_whole) {
  const auto& op = ops::find_op(k.op);  // throws for an unknown op, before any work
  (void)op;
  if (k.backend != backend_name_)
    fail(ErrorCategory::kUsage, "kernel backend '{}': this run uses the {} backend", k.backend,
         backend_name_);
  sandbox::EvalRequest req{k, shape, verify, bench, bench ? peak_bandwidth_gbps() : 0.0, std::nullopt};
  if (paired_baseline != nullptr) req.paired_baseline = *paired_baseline;
  req.verify_bench_shape = verify_whole;
  auto r = sandbox::evaluate(cfg_, backend_name_, req);
  if (r.bench.below_floor) {
    // Too fast to be true. First suspect the ceiling (measured once per run, maybe on a
    // loaded machine), then the candidate: it is re-verified and re-timed in a fresh
    // worker on fresh inputs, and rejected if it is still below the physical floor.
    if (!ceiling_rechecked_ && cfg_.peak_bw_gbps <= 0) {
      ceiling_rechecked_ = true;
      const double before = *peak_;
      const double now = peak_bandwidth_gbps(true);
      if (now > before) {
        req.peak_bw_gbps = now;
      } else {  // keep the higher figure: a ceiling is a maximum
        peak_ = before;
        store_.set_peak_bandwidth_gbps(device_key_, before);
      }
    }
    const double first_us = r.bench.time_us();
    r = sandbox::evaluate(cfg_, backend_name_, req);
    if (r.bench.below_floor)
      r.detail = fmt::format("{}: {:.3g} then {:.3g} us for {} "
                             "bytes, faster than the {:.1f} GB/s ceiling allows (a ceiling measured on a busy "
                             "machine is too low: THRIVE_PEAK_BW_GBPS sets it)",
                             kSuspectTimingDetail, first_us, r.bench.time_us(), r.bench.bytes, r.bench.peak_bw_gbps);
  }
  compile_s_ += r.compile_s;
  bench_s_ += r.bench_s + r.verify_s;
  ++evaluations_;
  return r;
}

sandbox::EvalResult Toolbox::compile(const backend::KernelSource& k) {
  const auto& op = ops::find_op(k.op);
  return run(k, op.bench_shapes(cfg_.model).front(), false, false);
}

sandbox::EvalResult Toolbox::verify(const backend::KernelSource& k, const ops::ShapeCase& shape, bool whole) {
  return run(k, shape, true, false, nullptr, whole);
}

sandbox::EvalResult Toolbox::benchmark(const backend::KernelSource& k, const ops::ShapeCase& shape) {
  auto r = run(k, shape, true, true);
  archive(k, shape, r);
  return r;
}

sandbox::EvalResult Toolbox::compare(const backend::KernelSource& candidate,
                                     const backend::KernelSource& baseline, const ops::ShapeCase& shape) {
  auto r = run(candidate, shape, true, true, &baseline);
  archive(candidate, shape, r);
  return r;
}

ConfirmedSpeedup Toolbox::confirm_speedup(const backend::KernelSource& best, const ops::ShapeCase& shape,
                                          const bench::BenchStats& best_bench, double unpaired_eager_us) {
  const double best_us = best_bench.time_us();
  ConfirmedSpeedup c;
  c.bandwidth_gbps = best_bench.bandwidth_gbps;
  c.percent_of_peak = best_bench.percent_of_peak;
  c.eager_us = unpaired_eager_us;
  c.best_us = best_us;
  c.speedup = best_us > 0 ? unpaired_eager_us / best_us : 0;
  const auto r = compare(best, eager_kernel(best.op), shape);
  const auto& p = r.paired;
  // wrong, not merely timed oddly: a "suspect timing" verdict (faster than the ceiling allows,
  // which a loaded machine or a ceiling measured low can also produce) leaves the best standing
  c.rejected = (r.status == sandbox::Status::kIncorrect && !suspect_timing(r)) ||
               r.status == sandbox::Status::kCrashed || r.status == sandbox::Status::kCompileFailed ||
               r.status == sandbox::Status::kLaunchFailed;
  if (r.status != sandbox::Status::kPassed || p.pairs == 0 || !(p.ratio > 0) || !std::isfinite(p.ratio)) {
    c.note = r.status != sandbox::Status::kPassed
                 ? fmt::format("not paired: the best's re-evaluation {} ({}); unpaired figures",
                               sandbox::status_name(r.status), r.detail.substr(0, 120))
                 : "not paired: no interleaved pairs were timed; unpaired figures";
    return c;
  }
  c.pairs = p.pairs;
  c.ratio_ci = p.ratio_ci;
  c.speedup = 1.0 / p.ratio;
  c.eager_us = p.a_median_us;
  c.best_us = p.b_median_us;
  if (c.best_us > 0) {
    c.bandwidth_gbps *= best_us / c.best_us;
    c.percent_of_peak *= best_us / c.best_us;
  }
  c.note = fmt::format("paired with the eager baseline over {} pairs: {:.4g} vs {:.4g} us (time ratio {:.3f} +- "
                       "{:.3f}); the eager's first measurement was {:.4g} us",
                       p.pairs, p.b_median_us, p.a_median_us, p.ratio, p.ratio_ci, unpaired_eager_us);
  return c;
}

sandbox::EvalResult Toolbox::eager_result(const std::string& op, const ops::ShapeCase& shape) {
  const std::string key = op + "|" + shape.label;
  auto it = eager_cache_.find(key);
  if (it != eager_cache_.end()) return it->second;
  auto r = run(eager_kernel(op), shape, true, true);
  if (r.status == sandbox::Status::kPassed) eager_cache_[key] = r;
  return r;
}

sandbox::EvalResult Toolbox::eager(const std::string& op, const ops::ShapeCase& shape) {
  auto r = eager_result(op, shape);
  if (r.status != sandbox::Status::kPassed)
    fail(ErrorCategory::kBackend, "eager baseline of {} at {} did not pass: {} ({})", op,
         shape.label, sandbox::status_name(r.status), r.detail);
  return r;
}

Profile Toolbox::profile(const ops::Op& op, const ops::ShapeCase& shape, const bench::BenchStats& b) {
  Profile p;
  p.time_us = b.time_us();
  p.bandwidth_gbps = b.bandwidth_gbps;
  p.percent_of_peak = b.percent_of_peak;
  p.tflops = b.tflops;
  const double peak = peak_bandwidth_gbps();
  p.floor_us = peak > 0 ? double(op.min_bytes(shape.shape)) / (peak * 1e9) * 1e6 : 0;
  p.compute_units = device_.value("compute_units", 1);
  const auto& s = shape.shape;
  p.parallel_units = s.count("B") ? s.at("B") * s.at("NKV") : s.at("T");
  // Fixed per-call cost: below this many microseconds a thread team's start-up and
  // join (a few microseconds each on the CPU) dominate.
  const double overhead_us = backend_name_ == "cpu" ? 25.0 : 5.0;
  if (p.percent_of_peak >= 70.0)
    p.bottleneck = "memory";
  else if (p.time_us < overhead_us)
    p.bottleneck = "overhead";
  else if (p.parallel_units < p.compute_units)
    p.bottleneck = "parallelism";
  else if (p.percent_of_peak < 25.0)
    p.bottleneck = "compute";
  else
    p.bottleneck = "traffic";
  p.notes = fmt::format("{:.2f} us vs roofline floor {:.2f} us; {:.1f} GB/s = {:.1f}% of {:.1f} GB/s; "
                        "{} parallel units on {} cores -> {}",
                        p.time_us, p.floor_us, p.bandwidth_gbps, p.percent_of_peak, peak,
                        p.parallel_units, p.compute_units, p.bottleneck);
  return p;
}

nlohmann::json Toolbox::read_memory(const std::string& op, const std::string& shape_class) {
  nlohmann::json j;
  auto best = store_.best(op, shape_class, device_key_);
  j["best"] = best ? nlohmann::json(*best) : nlohmann::json(nullptr);
  if (best) j["best"].erase("metrics");
  j["cards"] = store_.cards(backend_name_);
  j["evidence"] = store_.evidence();
  j["trajectory"] = store_.trajectory(0, op, shape_class, device_key_);
  return j;
}

// Cards are shared memory that every agent (search, LLM, MCP client) reads: one set of checks
// for all the ways a card arrives.
void Toolbox::record_strategy(const memory::StrategyCard& card) {
  auto printable = [](const std::string& v, size_t max) {
    if (v.empty() || v.size() > max) return false;
    for (unsigned char ch : v)
      if (ch < 0x20 || ch == 0x7f) return false;
    return true;
  };
  if (!printable(card.id, 128) || !printable(card.title, 256) || card.description.size() > 4096 ||
      card.description.find('\0') != std::string::npos)
    fail(ErrorCategory::kUsage, "card id (1 to 128 characters) and title (1 to 256) must be printable text, the "
         "description at most 4096 bytes");
  for (const auto& t : card.traits)
    if (t != "elementwise" && t != "row_reduction" && t != "attention")
      fail(ErrorCategory::kUsage, "trait '{}': expected elementwise, row_reduction or attention", t);
  if (card.traits.empty()) fail(ErrorCategory::kUsage, "argument 'traits' must name at least one trait");
  for (const auto& b : card.bottlenecks)
    if (b != "overhead" && b != "parallelism" && b != "compute" && b != "traffic" && b != "memory")
      fail(ErrorCategory::kUsage, "bottleneck '{}': expected overhead, parallelism, compute, traffic or memory", b);
  if (!card.set.is_object() || card.set.empty())
    fail(ErrorCategory::kUsage, "argument 'set' must be a non-empty object of parameter values");
  for (auto it = card.set.begin(); it != card.set.end(); ++it)
    if (!printable(it.key(), 64) || !it->is_string() || !printable(it->get<std::string>(), 64))
      fail(ErrorCategory::kUsage, "set.{}: expected a parameter name and a value, each 1 to 64 printable characters",
           utf8_prefix(it.key(), 64));
  if (!store_.add_card(card))
    fail(ErrorCategory::kUsage, "strategy card '{}' already exists", card.id);
}

memory::KernelRecord Toolbox::kernel_record(const backend::KernelSource& kernel,
                                            const ops::ShapeCase& shape,
                                            const sandbox::EvalResult& r, double eager_us,
                                            const std::string& command) const {
  memory::KernelRecord k;
  k.kernel_id = kernel_id(kernel);
  k.op = kernel.op;
  k.shape_class = shape.label;
  k.device_key = device_key_;
  k.backend = backend_name_;
  k.params = backend::params_to_string(kernel.params);
  k.source = kernel.source;
  k.time_us = r.bench.time_us();
  k.eager_us = eager_us;
  k.speedup = eager_us / k.time_us;
  k.bandwidth_gbps = r.bench.bandwidth_gbps;
  k.percent_of_peak = r.bench.percent_of_peak;
  k.max_rel_err = r.verify.max_rel_err;
  k.verified = r.status == sandbox::Status::kPassed;
  k.command = command;
  k.metrics = r;
  return k;
}

memory::Attempt Toolbox::attempt_record(const backend::KernelSource& k, const std::string& shape_class,
                                        const std::string& phase, const sandbox::EvalResult& r,
                                        double eager_us) const {
  memory::Attempt a;
  a.op = k.op;
  a.shape_class = shape_class;
  a.device_key = device_key_;
  a.phase = phase;
  a.kernel_id = kernel_id(k);
  a.change = backend::params_to_string(k.params);
  a.status = sandbox::status_name(r.status);
  a.time_us = r.status == sandbox::Status::kPassed && r.bench.reps > 0 ? r.bench.time_us() : 0;
  a.speedup = a.time_us > 0 && eager_us > 0 ? eager_us / a.time_us : 0;
  a.notes = r.detail;
  a.footing = bench::kMeasurementFooting;
  a.timing_verdict = r.status == sandbox::Status::kPassed || suspect_timing(r);
  return a;
}

void Toolbox::archive(const backend::KernelSource& k, const ops::ShapeCase& shape,
                      const sandbox::EvalResult& r) {
  const std::string id = kernel_id(k);
  if (id.find('/') != std::string::npos || id.find("..") != std::string::npos)
    fail(ErrorCategory::kInternal, "kernel id '{}' is not a safe file name", id);
  const std::string dir = cfg_.home + "/kernels/" + k.op;
  const std::string src = dir + "/" + id + source_extension(k.backend);
  if (!std::filesystem::exists(src)) write_file_atomic(src, k.source);
  const std::string meta = dir + "/" + id + ".json";
  nlohmann::json doc = nlohmann::json::object();
  if (std::filesystem::exists(meta)) {
    doc = parse_json_bounded(read_file(meta));
    const bool ok = !doc.is_discarded() && doc.is_object() &&
                    (!doc.contains("attempts") || (doc["attempts"].is_object() &&
                                                   std::all_of(doc["attempts"].begin(), doc["attempts"].end(),
                                                               [](const nlohmann::json& a) { return a.is_array(); })));
    if (!ok) {
      // a record this code cannot extend (truncated, edited): kept beside the new one, never overwritten
      std::string stamp = memory::now_iso8601();
      std::replace(stamp.begin(), stamp.end(), ':', '-');
      // never onto an earlier one (two in the same second take -2, -3, ...)
      std::string aside = meta + ".corrupt-" + stamp;
      int err = rename_no_replace(meta, aside);
      for (int n = 2; err == EEXIST && n <= 1000; ++n) {
        aside = meta + ".corrupt-" + stamp + "-" + std::to_string(n);
        err = rename_no_replace(meta, aside);
      }
      if (err != 0)
        fail(ErrorCategory::kStorage, "{}: not a kernel record this version can extend, and it cannot be moved aside "
             "to {} ({}); expected a JSON object with an \"attempts\" object of arrays", meta, aside, std::strerror(err));
      spdlog::warn("{}: not a kernel record this version can extend (truncated or edited?); moved aside to {} and "
                   "started a new record", meta, aside);
      doc = nlohmann::json::object();
    }
  }
  doc["kernel_id"] = id;
  doc["op"] = k.op;
  doc["backend"] = k.backend;
  doc["params"] = k.params;
  doc["device"] = device_key_;
  nlohmann::json attempt = r;
  attempt["at"] = memory::now_iso8601();
  doc["attempts"][shape.label].push_back(attempt);
  write_file_atomic(meta, doc.dump(2));
}

}  // namespace thrive::tools
