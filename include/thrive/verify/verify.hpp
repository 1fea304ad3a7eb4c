// Correctness of a candidate kernel against the op's float64 reference.
//
// Protocol, per (shape, distribution) case: fresh random inputs from a seeded RNG
// (rounded through the tensor dtype before the reference sees them), buffers
// allocated afresh with guard regions before and after, outputs and workspace
// poisoned with an all-ones (NaN) pattern, one launch, then checks that
//   - the kernel returned 0,
//   - guard regions are intact (no out-of-bounds write),
//   - pure inputs are byte-identical to what was uploaded,
//   - every output element passes the dtype's Tolerance (ops/op.hpp); NaN never passes,
//   - a second launch on the same inputs gives bit-identical outputs (races,
//     uninitialised reads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "thrive/backend/backend.hpp"
#include "thrive/ops/op.hpp"

namespace thrive::verify {

/// Error figures of one output tensor in one case.
struct OutputCheck {
  std::string tensor;
  double max_rel_err = 0.0;   ///< max |got-ref| / max(|ref|, floor), dimensionless
  double nmse = 0.0;          ///< sum (got-ref)^2 / sum ref^2
  /// Systematic error: max(|sum (got-ref)|, |sum (got-ref) sign(ref)|) / sum |ref| (additive
  /// and multiplicative bias; round-to-nearest-even rounding has none, so an honest kernel sits
  /// at noise level ~ rtol / sqrt(n)), over elements whose reference is finite.
  double bias = 0.0;
  /// max(Tolerance::bias, 3.5 rtol / sqrt(n_eff)), n_eff = (sum |ref|)^2 / sum ref^2 (<= n, the
  /// number of elements that carry the sum); bf16: catches a 0.4% scale at n_eff >= 64
  double bias_limit = 0.0;
  int64_t bad_elements = 0;   ///< elements over tolerance (NaN included)
  int64_t nan_elements = 0;   ///< NaN/Inf where the reference is finite
  int64_t elements = 0;       ///< elements compared (the tensor's size)
  int64_t worst_index = -1;   ///< flat index of the worst element
  double worst_got = 0.0, worst_expected = 0.0;
  double tolerance = 0.0;     ///< the rtol applied (ops::tolerance_for the tensor's dtype)
  bool passed = false;
};

/// One verification case.
struct CaseResult {
  std::string shape_label;
  std::string distribution;
  int kernel_status = 0;
  bool guards_intact = true;
  bool inputs_unchanged = true;
  bool deterministic = true;
  /// False when this case's outputs are byte-identical to the previous case of the same
  /// shape although the inputs, and the reference's outputs, differ (constant or stale
  /// outputs that slipped under the tolerance).
  bool input_dependent = true;
  std::vector<OutputCheck> outputs;
  bool passed = false;
  std::string failure;        ///< one line, empty when passed
};

/// The verdict over all cases; `max_rel_err`/`nmse` are the worst seen.
struct VerifyReport {
  bool passed = false;
  std::vector<CaseResult> cases;
  double max_rel_err = 0.0;
  double nmse = 0.0;
  bool unsupported = false;   ///< the kernel returned non-zero (shape not supported)
  std::string failure;        ///< first failing case's one-line reason
};

/// Runs every shape in `shapes` with each distribution in `distributions`.
/// `seed` seeds the input RNG (pass fresh entropy to get new inputs every check).
/// Throws Error(kBackend) only for infrastructure faults (allocation failure).
VerifyReport verify_kernel(backend::Backend& backend, const ops::Op& op,
                           const backend::Module& module, const config::ModelDims& model,
                           const std::vector<ops::ShapeCase>& shapes,
                           const std::vector<ops::Distribution>& distributions, uint64_t seed);

/// Traffic (Op::min_bytes) up to which verification_shapes adds the bench shape itself: 16 MiB,
/// or with `whole` (a shape the user named) kMaxWholeVerifyBytes, 512 MiB (the host then holds the
/// inputs, the outputs and the float64 reference, about 8 times that). Larger decode-attention
/// shapes are verified at the same batch with a ragged context of 33 (when that is at most 64 MiB).
inline constexpr int64_t kMaxSmallVerifyBytes = int64_t{16} << 20;
inline constexpr int64_t kMaxWholeVerifyBytes = int64_t{512} << 20;

/// Shapes the verifier uses for `op` when benchmarking at `bench_shape`: the op's
/// verify_shapes plus the bench shape itself when its traffic is at most kMaxSmallVerifyBytes
/// (kMaxWholeVerifyBytes with `whole`), else its reduced form (above), else nothing more.
std::vector<ops::ShapeCase> verification_shapes(const ops::Op& op, const config::ModelDims& model,
                                                const ops::ShapeCase* bench_shape, bool whole = false);

/// Checks one call: the outputs in `after` (every tensor the op writes) against the
/// float64 reference computed from `before` (its inputs and in/out tensors as they were
/// before the call), with the op's per-dtype tolerance. Returns "" when all are within
/// it, else one line naming the tensor and its figures.
std::string check_call(const ops::Op& op, const ops::Shape& shape, const config::ModelDims& model,
                       const std::vector<ops::HostTensor>& before,
                       const std::vector<ops::HostTensor>& after);

void to_json(nlohmann::json& j, const OutputCheck& c);
void to_json(nlohmann::json& j, const CaseResult& c);
void to_json(nlohmann::json& j, const VerifyReport& r);
void from_json(const nlohmann::json& j, VerifyReport& r);

}  // namespace thrive::verify
