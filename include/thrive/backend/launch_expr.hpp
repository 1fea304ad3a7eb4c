// Integer expressions of CUDA launch plans: block, grid and dynamic shared memory
// written over an op's shape symbols, a template's parameters and device facts.
//
// Grammar: expr := term (('+'|'-') term)*; term := unary (('*'|'/'|'%') unary)*;
// unary := '-' unary | primary; primary := integer | NAME | NAME '(' expr ',' expr ')'
// | '(' expr ')'. Functions: cdiv(a,b) = ceil(a/b), min(a,b), max(a,b). '/' and '%'
// are integer division and remainder (operands must be >= 0). No spaces needed.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace thrive::backend {

/// Evaluates `expr` with `vars` (e.g. {"T": 4096, "VEC": 8, "SMS": 132}).
/// Throws Error(kInput) naming the expression and the problem (unknown name,
/// division by zero, syntax error, overflow).
int64_t eval_launch_expr(const std::string& expr, const std::map<std::string, int64_t>& vars);

}  // namespace thrive::backend
