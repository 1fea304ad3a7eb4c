#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <numeric>

#include "thrive/core/error.hpp"
#include "thrive/ops/op.hpp"

namespace thrive::ops {

size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return 2;
    case DType::kF32: return 4;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "bf16";
    case DType::kF32: return "f32";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType d : {DType::kBF16, DType::kF32, DType::kI32, DType::kI64})
    if (name == dtype_name(d)) return d;
  fail(ErrorCategory::kInput, "dtype '{}': expected one of bf16, f32, i32, i64", name);
}

void floats_to_bf16_checked(const float* f, size_t n, uint16_t* out, const std::string& what) {
  uint16_t bad = 0;  // a branch-free pass first: the engine converts every weight through here
  for (size_t i = 0; i < n; ++i) {
    out[i] = float_to_bf16(f[i]);
    bad |= uint16_t((out[i] & 0x7f80u) == 0x7f80u);
  }
  if (bad == 0) return;
  for (size_t i = 0; i < n; ++i)
    if ((out[i] & 0x7f80u) == 0x7f80u)
      fail(ErrorCategory::kInput, "{}: element {} = {} does not fit bf16 (largest finite about 3.39e38)", what, i, f[i]);
}

const char* role_name(Role role) {
  switch (role) {
    case Role::kIn: return "in";
    case Role::kOut: return "out";
    case Role::kInOut: return "inout";
  }
  return "?";
}

const char* trait_name(Trait trait) {
  switch (trait) {
    case Trait::kElementwise: return "elementwise";
    case Trait::kRowReduction: return "row_reduction";
    case Trait::kAttention: return "attention";
  }
  return "?";
}

const char* distribution_name(Distribution d) {
  switch (d) {
    case Distribution::kNormal: return "normal";
    case Distribution::kLargeMagnitude: return "large";
    case Distribution::kNearZero: return "near_zero";
    case Distribution::kMixedSigns: return "mixed_signs";
  }
  return "?";
}

std::string shape_to_string(const Shape& shape) {
  std::string s;
  for (const auto& [k, v] : shape) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

int64_t TensorSpec::elements(const Shape& shape) const {
  int64_t n = 1;
  for (const auto& d : dims) {
    auto it = shape.find(d);
    if (it == shape.end())
      fail(ErrorCategory::kInternal, "tensor {} needs symbol {} missing from shape {}", name, d,
           shape_to_string(shape));
    n *= it->second;
  }
  return n;
}

int64_t HostTensor::elements() const {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

double HostTensor::get(int64_t i) const {
  const uint8_t* p = bytes.data() + i * int64_t(dtype_bytes(spec.dtype));
  switch (spec.dtype) {
    case DType::kBF16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return bf16_to_float(v);
    }
    case DType::kF32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kI32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kI64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return double(v);
    }
  }
  return 0;
}

void HostTensor::set(int64_t i, double value) {
  uint8_t* p = bytes.data() + i * int64_t(dtype_bytes(spec.dtype));
  switch (spec.dtype) {
    case DType::kBF16: {
      uint16_t v = float_to_bf16(float(value));
      std::memcpy(p, &v, 2);
      break;
    }
    case DType::kF32: {
      float v = float(value);
      std::memcpy(p, &v, 4);
      break;
    }
    case DType::kI32: {
      int32_t v = int32_t(value);
      std::memcpy(p, &v, 4);
      break;
    }
    case DType::kI64: {
      int64_t v = int64_t(value);
      std::memcpy(p, &v, 8);
      break;
    }
  }
}

Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return {0.008, 1e-2, 6.4e-5, 0.001};
    case DType::kF32: return {1e-4, 1e-3, 1e-8, 1e-4};
    default: return {0.0, 0.0, 0.0, 0.0};  // integers must match exactly
  }
}

int64_t Op::min_bytes(const Shape& shape) const {
  int64_t total = 0;
  for (const auto& t : tensors()) total += t.bytes(shape) * (t.role == Role::kInOut ? 2 : 1);
  return total;
}

std::vector<int64_t> Op::dims(const Shape& shape) const {
  std::vector<int64_t> out;
  for (const auto& s : dim_symbols()) {
    auto it = shape.find(s);
    if (it == shape.end())
      fail(ErrorCategory::kInternal, "op {}: shape {} lacks symbol {}", name(),
           shape_to_string(shape), s);
    out.push_back(it->second);
  }
  return out;
}

namespace {

// Draws elements [lo, hi) of `t` from distribution `d` with `rng`.
void fill_range(HostTensor& t, Distribution d, std::mt19937_64& rng, int64_t lo, int64_t hi) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int64_t i = lo; i < hi; ++i) {
    double v = normal(rng);
    switch (d) {
      case Distribution::kNormal: break;
      case Distribution::kLargeMagnitude: v *= 300.0; break;
      case Distribution::kNearZero: v *= 1e-3; break;
      case Distribution::kMixedSigns: v = (unit(rng) < 0.5 ? -1 : 1) * std::exp(4.0 * unit(rng) - 2.0); break;
    }
    t.set(i, v);
  }
}

}  // namespace

void Op::fill(HostTensor& t, Distribution d, std::mt19937_64& rng) {
  // Up to 4 Mi elements: one stream, in order. Larger tensors (benchmark inputs of the big
  // decode shapes: 268 Mi elements per KV cache at B=256, L=1024, ~7 s single-threaded) are cut
  // into 4 Mi-element blocks, each with its own generator seeded from `rng` in block order and
  // filled on several threads: the values depend on the seed only, not on the thread count.
  constexpr int64_t kBlock = int64_t(1) << 22;
  const int64_t n = t.elements();
  if (n <= kBlock) {
    fill_range(t, d, rng, 0, n);
    return;
  }
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<uint64_t> seeds(size_t(blocks), 0);
  for (auto& s : seeds) s = rng();
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t b; (b = next.fetch_add(1)) < blocks;) {
      std::mt19937_64 local(seeds[size_t(b)]);
      fill_range(t, d, local, b * kBlock, std::min(n, (b + 1) * kBlock));
    }
  };
  const unsigned hw = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < std::min<unsigned>(hw, unsigned(blocks)); ++i) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

std::vector<HostTensor> Op::make_tensors(const Shape& shape, const config::ModelDims&,
                                         Distribution d, std::mt19937_64& rng, bool) const {
  std::vector<HostTensor> out;
  for (const auto& spec : tensors()) {
    HostTensor t{spec, {}, {}};
    for (const auto& s : spec.dims) t.dims.push_back(shape.at(s));
    t.bytes.assign(size_t(t.elements()) * dtype_bytes(spec.dtype), 0);
    if (spec.role != Role::kOut) fill(t, d, rng);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace thrive::ops
