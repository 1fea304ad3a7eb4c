#include "thrive/core/error.hpp"
#include "thrive/ops/op.hpp"
#include "src/ops/op_impls.hpp"

namespace thrive::ops {

const std::vector<std::unique_ptr<Op>>& registry() {
  static const std::vector<std::unique_ptr<Op>> ops = [] {
    std::vector<std::unique_ptr<Op>> v;
    v.push_back(make_rmsnorm_residual());
    v.push_back(make_swiglu_act());
    v.push_back(make_rope());
    v.push_back(make_softmax());
    v.push_back(make_gqa_decode_attention());
    return v;
  }();
  return ops;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const auto& op : registry()) names.push_back(op->name());
  return names;
}

const Op& find_op(const std::string& name) {
  for (const auto& op : registry())
    if (op->name() == name) return *op;
  std::string all;
  for (const auto& n : op_names()) all += (all.empty() ? "" : ", ") + n;
  fail(ErrorCategory::kUsage, "unknown op '{}': expected one of {}", name, all);
}

}  // namespace thrive::ops
