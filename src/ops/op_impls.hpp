// Factories of the concrete ops (one file each under src/ops/).
#pragma once
#include <memory>

#include "thrive/ops/op.hpp"

namespace thrive::ops {
std::unique_ptr<Op> make_rmsnorm_residual();
std::unique_ptr<Op> make_swiglu_act();
std::unique_ptr<Op> make_rope();
std::unique_ptr<Op> make_softmax();
std::unique_ptr<Op> make_gqa_decode_attention();
}  // namespace thrive::ops
