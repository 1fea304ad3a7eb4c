// Launch-plan expressions: arithmetic, functions, names, and errors that name the problem.
#include <gtest/gtest.h>

#include "thrive/backend/launch_expr.hpp"
#include "thrive/core/error.hpp"

namespace thrive::backend {
namespace {

TEST(LaunchExpr, Evaluates) {
  const std::map<std::string, int64_t> v = {{"T", 4096}, {"VEC", 8}, {"SMS", 132}, {"H", 2048}};
  struct Case {
    const char* expr;
    int64_t want;
  } cases[] = {{"1", 1},           {"T", 4096},          {"cdiv(T,3)", 1366},
               {"cdiv(0,3)", 0},   {"SMS*4", 528},       {"H/(VEC*32)", 8},
               {"min(T,SMS)", 132}, {"max(1,T-5000)", 1}, {"(T+7)/8%5", 2},
               {"-3+T", 4093},     {"2*(3+4)*2", 28}};
  for (const auto& c : cases) EXPECT_EQ(eval_launch_expr(c.expr, v), c.want) << c.expr;
}

TEST(LaunchExpr, ErrorsNameTheExpression) {
  const std::map<std::string, int64_t> v = {{"T", 4}};
  for (const char* bad : {"T/0", "X", "cdiv(T)", "pow(T,2)", "(T", "T+", "T $ 2",
                          "99999999999999999999", "cdiv(T,0)"}) {
    try {
      eval_launch_expr(bad, v);
      ADD_FAILURE() << bad << " did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInput);
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace thrive::backend
