#include "thrive/verify/verify.hpp"

#include <cmath>
#include <cstring>
#include <map>
#include <utility>

#include "thrive/core/error.hpp"
#include "thrive/core/files.hpp"

namespace thrive::verify {
namespace {

constexpr int64_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kPoisonByte = 0xFF;  // bf16 0xFFFF and f32 0xFFFFFFFF are NaN

// A device buffer with guard bands on both sides.
struct GuardedBuffer {
  backend::Backend* backend = nullptr;
  uint8_t* base = nullptr;
  int64_t bytes = 0;
  void* data() const { return base + kGuardBytes; }
  GuardedBuffer(backend::Backend& b, int64_t n) : backend(&b), bytes(n) {
    base = static_cast<uint8_t*>(b.allocate(n + 2 * kGuardBytes));
    b.memset(base, kGuardByte, kGuardBytes);
    b.memset(base + kGuardBytes + n, kGuardByte, kGuardBytes);
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer() { backend->release(base); }
  bool guards_intact() const {
    std::vector<uint8_t> g(static_cast<size_t>(kGuardBytes));
    for (const uint8_t* at : {base, base + kGuardBytes + bytes}) {
      backend->download(g.data(), at, kGuardBytes);
      for (uint8_t v : g)
        if (v != kGuardByte) return false;
    }
    return true;
  }
};

OutputCheck check_output(const ops::HostTensor& got, const std::vector<double>& ref) {
  OutputCheck c;
  c.tensor = got.spec.name;
  c.elements = int64_t(ref.size());
  const ops::Tolerance tol = ops::tolerance_for(got.spec.dtype);
  double sumsq = 0;
  for (double r : ref) sumsq += std::isfinite(r) ? r * r : 0.0;
  const double rms = std::sqrt(sumsq / double(std::max<size_t>(ref.size(), 1)));
  const double floor = std::max(tol.floor_frac * rms, 1e-30);
  double err_sq = 0, err_sum = 0, err_signed = 0, abs_sum = 0, finite_sq = 0;
  int64_t finite_n = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = got.get(int64_t(i)), r = ref[i];
    double rel;
    if (!std::isfinite(r)) {
      rel = (std::isnan(r) ? std::isnan(g) : g == r) ? 0.0 : INFINITY;
    } else if (!std::isfinite(g)) {
      ++c.nan_elements;
      rel = INFINITY;
    } else {
      rel = std::abs(g - r) / std::max(std::abs(r), floor);
      err_sq += (g - r) * (g - r);
      err_sum += g - r;
      err_signed += r < 0 ? r - g : g - r;
      abs_sum += std::abs(r);
      finite_sq += r * r;
      ++finite_n;
    }
    if (!(rel <= tol.rtol)) ++c.bad_elements;
    if (!(rel <= c.max_rel_err) || c.worst_index < 0) {
      if (rel > c.max_rel_err || c.worst_index < 0) {
        c.max_rel_err = std::max(c.max_rel_err, rel);
        c.worst_index = int64_t(i);
        c.worst_got = g;
        c.worst_expected = r;
      }
    }
  }
  c.nmse = sumsq > 0 ? err_sq / sumsq : err_sq;
  if (c.nan_elements > 0) c.nmse = INFINITY;
  c.tolerance = tol.rtol;
  c.bias = abs_sum > 0 ? std::max(std::abs(err_sum), std::abs(err_signed)) / abs_sum : 0.0;
  // Noise level of the bias of honest per-element rounding errors e_i ~ |r_i| eps_i:
  // sqrt(sum r_i^2) eps / sum |r_i| = eps / sqrt(n_eff), n_eff = (sum |r|)^2 / sum r^2 <= n (the
  // participation ratio: n for equal magnitudes, fewer where a few large elements dominate).
  const double n_eff = finite_sq > 0 ? abs_sum * abs_sum / finite_sq : double(finite_n);
  c.bias_limit = std::max(tol.bias, 3.5 * tol.rtol / std::sqrt(std::max(n_eff, 1.0)));
  c.passed = c.bad_elements == 0 && c.nmse <= tol.nmse && c.nan_elements == 0 && c.bias <= c.bias_limit;
  return c;
}

}  // namespace

std::string check_call(const ops::Op& op, const ops::Shape& shape, const config::ModelDims& model,
                       const std::vector<ops::HostTensor>& before,
                       const std::vector<ops::HostTensor>& after) {
  const auto expected = op.reference(before, shape, model);
  size_t out_index = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    if (after[i].spec.role == ops::Role::kIn) continue;
    const auto c = check_output(after[i], expected[out_index++]);
    if (!c.passed)
      return fmt::format("{}: max_rel_err {:.3g} (tol {:.3g}), nmse {:.3g}, bias {:.3g} (limit {:.3g}), "
                         "{} bad / {} NaN of {} elements", c.tensor, c.max_rel_err, c.tolerance, c.nmse, c.bias,
                         c.bias_limit, c.bad_elements, c.nan_elements, c.elements);
  }
  return "";
}

std::vector<ops::ShapeCase> verification_shapes(const ops::Op& op, const config::ModelDims& model,
                                                const ops::ShapeCase* bench_shape, bool whole) {
  auto shapes = op.verify_shapes(model);
  if (bench_shape == nullptr) return shapes;
  auto add = [&](const ops::ShapeCase& c) {
    for (const auto& s : shapes)
      if (s.shape == c.shape) return;
    shapes.push_back(c);
  };
  if (op.min_bytes(bench_shape->shape) <= (whole ? kMaxWholeVerifyBytes : kMaxSmallVerifyBytes)) {
    add(*bench_shape);
  } else if (auto it = bench_shape->shape.find("L"); it != bench_shape->shape.end() && it->second > 33) {
    // Too large to verify whole: the same batch with a short, ragged context, so a kernel
    // cannot behave differently at the benchmark's batch size unseen.
    ops::ShapeCase reduced = *bench_shape;
    reduced.shape["L"] = 33;
    reduced.label = bench_shape->label + " with L=33";
    if (op.min_bytes(reduced.shape) <= (64ll << 20)) add(reduced);
  }
  return shapes;
}

VerifyReport verify_kernel(backend::Backend& backend, const ops::Op& op,
                           const backend::Module& module, const config::ModelDims& model,
                           const std::vector<ops::ShapeCase>& shapes,
                           const std::vector<ops::Distribution>& distributions, uint64_t seed) {
  VerifyReport report;
  std::mt19937_64 rng(seed);
  size_t dist_index = 0;
  // Per shape, fingerprints of the last case's candidate outputs and reference outputs.
  std::map<std::string, std::pair<std::string, std::string>> last_outputs;
  for (const auto& shape_case : shapes) {
    // Every shape runs with normal inputs, and with one more distribution in turn.
    std::vector<ops::Distribution> dists = {ops::Distribution::kNormal};
    if (distributions.size() > 1) {
      dists.push_back(distributions[1 + dist_index % (distributions.size() - 1)]);
      ++dist_index;
    }
    for (ops::Distribution dist : dists) {
      CaseResult cr;
      cr.shape_label = shape_case.label;
      cr.distribution = ops::distribution_name(dist);
      const auto& shape = shape_case.shape;
      auto host = op.make_tensors(shape, model, dist, rng, false);
      auto expected = op.reference(host, shape, model);
      std::vector<std::unique_ptr<GuardedBuffer>> bufs;
      backend::LaunchArgs args;
      for (auto& t : host) {
        bufs.push_back(std::make_unique<GuardedBuffer>(backend, int64_t(t.bytes.size())));
        if (t.spec.role == ops::Role::kOut)
          backend.memset(bufs.back()->data(), kPoisonByte, int64_t(t.bytes.size()));
        else
          backend.upload(bufs.back()->data(), t.bytes.data(), int64_t(t.bytes.size()));
        args.tensors.push_back(bufs.back()->data());
      }
      const int64_t ws_bytes = op.workspace_bytes(shape);
      GuardedBuffer workspace(backend, ws_bytes);
      backend.memset(workspace.data(), kPoisonByte, ws_bytes);
      args.symbols = shape;
      args.dims = op.dims(shape);
      args.scalars = op.scalars(shape, model);
      args.workspace = workspace.data();
      args.workspace_bytes = ws_bytes;

      auto run_and_read = [&](std::vector<ops::HostTensor>& out) {
        int status = backend.launch(module, args);
        backend.synchronize();
        out = host;
        for (size_t i = 0; i < host.size(); ++i)
          backend.download(out[i].bytes.data(), bufs[i]->data(), int64_t(out[i].bytes.size()));
        return status;
      };
      std::vector<ops::HostTensor> first, second;
      cr.kernel_status = run_and_read(first);
      if (cr.kernel_status != 0) {
        const std::string why = backend.last_error();
        cr.failure = fmt::format("{} [{}]: kernel returned status {} ({})", cr.shape_label,
                                 cr.distribution, cr.kernel_status,
                                 why.empty() ? "unsupported" : why);
        report.unsupported = true;
      } else {
        cr.guards_intact = workspace.guards_intact();
        for (const auto& b : bufs) cr.guards_intact = cr.guards_intact && b->guards_intact();
        size_t out_index = 0;
        bool outputs_ok = true;
        for (size_t i = 0; i < host.size(); ++i) {
          if (host[i].spec.role == ops::Role::kIn) {
            if (first[i].bytes != host[i].bytes) cr.inputs_unchanged = false;
            continue;
          }
          auto check = check_output(first[i], expected[out_index++]);
          outputs_ok = outputs_ok && check.passed;
          cr.outputs.push_back(check);
        }
        // Determinism: restore in/out tensors, re-poison outputs, run again.
        for (size_t i = 0; i < host.size(); ++i) {
          if (host[i].spec.role == ops::Role::kOut)
            backend.memset(bufs[i]->data(), kPoisonByte, int64_t(host[i].bytes.size()));
          else if (host[i].spec.role == ops::Role::kInOut)
            backend.upload(bufs[i]->data(), host[i].bytes.data(), int64_t(host[i].bytes.size()));
        }
        if (outputs_ok && run_and_read(second) == 0) {
          for (size_t i = 0; i < host.size(); ++i)
            if (host[i].spec.role != ops::Role::kIn && first[i].bytes != second[i].bytes)
              cr.deterministic = false;
        }
        // Input dependence: a new input set at the same shape must change the outputs
        // wherever it changes the reference's.
        std::string got_print, want_print;
        for (size_t i = 0; i < host.size(); ++i)
          if (host[i].spec.role != ops::Role::kIn) got_print += fnv1a_hex(std::string(first[i].bytes.begin(), first[i].bytes.end()));
        for (const auto& e : expected)
          want_print += fnv1a_hex(std::string(reinterpret_cast<const char*>(e.data()), e.size() * sizeof(double)));
        if (auto it = last_outputs.find(cr.shape_label); it != last_outputs.end())
          cr.input_dependent = !(it->second.first == got_print && it->second.second != want_print);
        last_outputs[cr.shape_label] = {got_print, want_print};
        cr.passed = outputs_ok && cr.guards_intact && cr.inputs_unchanged && cr.deterministic &&
                    cr.input_dependent;
        if (!cr.guards_intact)
          cr.failure = "out-of-bounds write (a guard region was overwritten)";
        else if (!cr.inputs_unchanged)
          cr.failure = "a read-only input was modified";
        else if (!outputs_ok) {
          for (const auto& o : cr.outputs)
            if (!o.passed) {
              cr.failure = fmt::format(
                  "{}: max_rel_err {:.3g} (tol {:.3g}), nmse {:.3g}, bias {:.3g} (limit {:.3g}), "
                  "{} bad / {} NaN of {} elements, worst at [{}] got {:.6g} expected {:.6g}",
                  o.tensor, o.max_rel_err, o.tolerance, o.nmse, o.bias, o.bias_limit,
                  o.bad_elements, o.nan_elements, o.elements, o.worst_index, o.worst_got, o.worst_expected);
              break;
            }
        } else if (!cr.deterministic)
          cr.failure = "two runs on the same inputs differ (race or uninitialised read)";
        else if (!cr.input_dependent)
          cr.failure = "outputs do not depend on the inputs (identical for two different input "
                       "sets whose reference outputs differ)";
        if (!cr.failure.empty())
          cr.failure = fmt::format("{} [{}]: {}", cr.shape_label, cr.distribution, cr.failure);
      }
      for (const auto& o : cr.outputs) {
        report.max_rel_err = std::max(report.max_rel_err, o.max_rel_err);
        report.nmse = std::max(report.nmse, o.nmse);
      }
      if (!cr.passed && report.failure.empty()) report.failure = cr.failure;
      report.cases.push_back(std::move(cr));
      if (!report.cases.back().passed) {
        report.passed = false;
        return report;  // first failure is the verdict; later cases add nothing
      }
    }
  }
  report.passed = !report.cases.empty();
  return report;
}

namespace {
// JSON has no infinity or NaN; a non-finite figure is written as 1e308 (NaN as 1e308 too:
// "as bad as it gets").
double finite(double v) { return std::isfinite(v) ? v : 1e308; }
// Reads a figure written by to_json; null (a NaN from an older writer) or a missing key
// reads as NaN / 0 instead of throwing.
double number_or_nan(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0.0;
  return it->is_number() ? it->get<double>() : std::nan("");
}
}  // namespace

void to_json(nlohmann::json& j, const OutputCheck& c) {
  j = {{"tensor", c.tensor},         {"max_rel_err", finite(c.max_rel_err)},
       {"nmse", finite(c.nmse)},      {"tolerance", c.tolerance},             {"bad_elements", c.bad_elements}, {"elements", c.elements},
       {"bias", finite(c.bias)},      {"bias_limit", c.bias_limit},
       {"nan_elements", c.nan_elements}, {"worst_index", c.worst_index},
       {"worst_got", finite(c.worst_got)},   {"worst_expected", finite(c.worst_expected)},
       {"passed", c.passed}};
}

void to_json(nlohmann::json& j, const CaseResult& c) {
  j = {{"shape", c.shape_label},      {"distribution", c.distribution},
       {"kernel_status", c.kernel_status}, {"guards_intact", c.guards_intact},
       {"inputs_unchanged", c.inputs_unchanged}, {"deterministic", c.deterministic},
       {"input_dependent", c.input_dependent},
       {"outputs", c.outputs},        {"passed", c.passed},
       {"failure", c.failure}};
}

void to_json(nlohmann::json& j, const VerifyReport& r) {
  j = {{"passed", r.passed},     {"cases", r.cases},         {"max_rel_err", finite(r.max_rel_err)},
       {"nmse", finite(r.nmse)},         {"unsupported", r.unsupported}, {"failure", r.failure}};
}

void from_json(const nlohmann::json& j, VerifyReport& r) {
  r.passed = j.value("passed", false);
  r.max_rel_err = number_or_nan(j, "max_rel_err");
  r.nmse = number_or_nan(j, "nmse");
  r.unsupported = j.value("unsupported", false);
  r.failure = j.value("failure", "");
  for (const auto& c : j.value("cases", nlohmann::json::array())) {
    CaseResult cr;
    cr.shape_label = c.value("shape", "");
    cr.distribution = c.value("distribution", "");
    cr.kernel_status = c.value("kernel_status", 0);
    cr.guards_intact = c.value("guards_intact", true);
    cr.inputs_unchanged = c.value("inputs_unchanged", true);
    cr.deterministic = c.value("deterministic", true);
    cr.input_dependent = c.value("input_dependent", true);
    for (const auto& o : c.value("outputs", nlohmann::json::array())) {
      OutputCheck oc;
      oc.tensor = o.value("tensor", "");
      oc.max_rel_err = number_or_nan(o, "max_rel_err");
      oc.nmse = number_or_nan(o, "nmse");
      oc.bias = o.contains("bias") ? number_or_nan(o, "bias") : 0.0;
      oc.bias_limit = o.value("bias_limit", 0.0);
      oc.tolerance = number_or_nan(o, "tolerance");
      oc.bad_elements = o.value("bad_elements", int64_t{0});
      oc.nan_elements = o.value("nan_elements", int64_t{0});
      oc.worst_index = o.value("worst_index", int64_t{-1});
      oc.worst_got = number_or_nan(o, "worst_got");
      oc.worst_expected = number_or_nan(o, "worst_expected");
      oc.passed = o.value("passed", false);
      cr.outputs.push_back(oc);
    }
    cr.passed = c.value("passed", false);
    cr.failure = c.value("failure", "");
    r.cases.push_back(cr);
  }
}

}  // namespace thrive::verify
