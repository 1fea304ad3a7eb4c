// The op registry: what each target op computes, on which tensors, at which shapes.
//
// An Op is the contract every candidate kernel is held to. It names its tensors
// in ABI order (the order a kernel receives them), the shape symbols a kernel
// receives as `dims[]`, the scalars it receives as `scalars[]`, a byte and flop
// model, a float64 reference, a per-dtype tolerance, and the shapes it is verified
// and benchmarked at. Dimensions default to Qwen3-1.7B (config::ModelDims).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "thrive/config/config.hpp"
#include "thrive/ops/dtype.hpp"

namespace thrive::ops {

/// How a kernel uses a tensor.
enum class Role { kIn, kOut, kInOut };
const char* role_name(Role role);

/// The op's kind; strategy cards learned on one op apply to ops of the same trait.
enum class Trait { kElementwise, kRowReduction, kAttention };
const char* trait_name(Trait trait);

/// Values of an op's shape symbols, e.g. {"T": 4096, "H": 2048}.
using Shape = std::map<std::string, int64_t>;

/// Formats a shape as "H=2048,T=4096" (symbols in map order).
std::string shape_to_string(const Shape& shape);

/// One tensor of an op: name, dims as shape symbols (row-major), dtype, role.
struct TensorSpec {
  std::string name;
  std::vector<std::string> dims;
  DType dtype;
  Role role;
  /// True for inputs the benchmark need not rotate (read-only tables such as the RoPE
  /// cache, whose rows are gathered by position).
  bool shared_across_sets = false;
  int64_t elements(const Shape& shape) const;
  int64_t bytes(const Shape& shape) const { return elements(shape) * int64_t(dtype_bytes(dtype)); }
};

/// A named shape: `label` is the shape class key in memory and leaderboard (e.g. "T=4096").
struct ShapeCase {
  std::string label;
  Shape shape;
};

/// Input value distributions used by verification (several per check).
enum class Distribution { kNormal, kLargeMagnitude, kNearZero, kMixedSigns };
const char* distribution_name(Distribution d);

/// A tensor's storage on the host: raw little-endian elements of `spec.dtype`.
struct HostTensor {
  TensorSpec spec;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  int64_t elements() const;
  double get(int64_t i) const;           ///< element i as double
  void set(int64_t i, double value);     ///< stores value rounded to the dtype
};

/// Per-dtype acceptance of an output. An element passes when
/// |got - ref| <= rtol * max(|ref|, floor_frac * rms(ref)); the tensor also needs
/// NMSE = sum((got-ref)^2) / sum(ref^2) <= nmse. NaN never passes.
struct Tolerance {
  double rtol;
  double floor_frac;
  double nmse;
  /// Bound on systematic error (verify::OutputCheck::bias) at large n: rtol/8 for bf16, whose
  /// honest error is round-to-nearest-even (unbiased); rtol for f32, whose honest error is
  /// dominated by a row's fp32 reduction, shared by every element of the row (a float sum over
  /// 151936 terms errs by up to ~5e-5 relative, measured by helper review on honest softmaxes).
  double bias;
};
/// bf16: rtol 0.008 (= 2^-7 plus fp32 slack; one bf16 rounding of the output costs
/// up to 2^-8 and one of an intermediate the same again), nmse 6.4e-5.
/// f32: rtol 1e-4 (fp32 sums over up to 151936 terms), nmse 1e-8.
/// nmse = rtol^2: the error energy may not exceed every element sitting at the bound.
/// A tighter statistical bound fails legitimate double rounding (PyTorch eager's
/// bf16 intermediates) on small tensors, where a few large elements dominate.
Tolerance tolerance_for(DType dtype);

/// An op: see the file comment. Implementations live in src/ops/<name>.cpp.
class Op {
 public:
  virtual ~Op() = default;
  virtual std::string name() const = 0;
  virtual std::string summary() const = 0;   ///< the formula, one line
  virtual Trait trait() const = 0;
  /// Tensors in ABI order.
  virtual std::vector<TensorSpec> tensors() const = 0;
  /// Shape symbols passed to kernels as dims[] in this order.
  virtual std::vector<std::string> dim_symbols() const = 0;
  /// Names of the scalars passed as scalars[] (double) in this order.
  virtual std::vector<std::string> scalar_names() const = 0;
  virtual std::vector<double> scalars(const Shape& shape, const config::ModelDims& m) const = 0;
  /// Benchmark shapes at the model's dimensions (the leaderboard's shape classes).
  virtual std::vector<ShapeCase> bench_shapes(const config::ModelDims& m) const = 0;
  /// Verification shapes: the smallest, ragged sizes (including ragged model dims
  /// that are not multiples of any vector width) and one mid-size instance.
  virtual std::vector<ShapeCase> verify_shapes(const config::ModelDims& m) const = 0;
  /// Minimum bytes moved: each input read once, each output written once.
  virtual int64_t min_bytes(const Shape& shape) const;
  /// Floating-point operations of the math (not counting conversions).
  virtual double flops(const Shape& shape) const = 0;
  /// Scratch bytes a kernel may use (eager baselines keep intermediates there).
  virtual int64_t workspace_bytes(const Shape& shape) const = 0;
  /// Allocates every tensor at `shape` and fills inputs (and in/out tensors) from
  /// `rng` with distribution `d`; outputs are left zero. `full` = benchmark mode
  /// (e.g. every sequence uses the whole context).
  virtual std::vector<HostTensor> make_tensors(const Shape& shape, const config::ModelDims& m,
                                               Distribution d, std::mt19937_64& rng,
                                               bool full) const;
  /// Float64 reference: returns, for each tensor with role out or inout (in ABI
  /// order), its expected values. Inputs are read as stored (already rounded).
  virtual std::vector<std::vector<double>> reference(const std::vector<HostTensor>& tensors,
                                                     const Shape& shape,
                                                     const config::ModelDims& m) const = 0;

  /// dims[] values for `shape` in dim_symbols() order.
  std::vector<int64_t> dims(const Shape& shape) const;

 protected:
  /// Fills one tensor with values of distribution d (used by make_tensors); tensors over
  /// 4 Mi elements are filled on up to 16 threads, deterministically for a given rng state.
  static void fill(HostTensor& t, Distribution d, std::mt19937_64& rng);
};

/// All ops, in a stable order.
const std::vector<std::unique_ptr<Op>>& registry();
/// Looks an op up by name; throws Error(kUsage) "unknown op 'x': expected one of ...".
const Op& find_op(const std::string& name);
/// Names in registry order.
std::vector<std::string> op_names();

}  // namespace thrive::ops
