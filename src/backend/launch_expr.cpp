#include "thrive/backend/launch_expr.hpp"

#include <cctype>
#include <limits>

#include "thrive/core/error.hpp"

namespace thrive::backend {
namespace {

class Parser {
 public:
  Parser(const std::string& s, const std::map<std::string, int64_t>& vars) : s_(s), vars_(vars) {}

  int64_t parse() {
    int64_t v = expr();
    skip();
    if (pos_ != s_.size()) error("unexpected '" + s_.substr(pos_, 1) + "'");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(ErrorCategory::kInput, "launch expression '{}': {} at offset {}", s_, what, pos_);
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  static bool overflows(__int128 v) {
    return v > std::numeric_limits<int64_t>::max() || v < std::numeric_limits<int64_t>::min();
  }
  int64_t checked(__int128 v) const {
    if (overflows(v)) error("integer overflow");
    return int64_t(v);
  }
  int64_t expr() {
    int64_t v = term();
    for (;;) {
      if (eat('+')) v = checked(__int128(v) + term());
      else if (eat('-')) v = checked(__int128(v) - term());
      else return v;
    }
  }
  int64_t term() {
    int64_t v = unary();
    for (;;) {
      if (eat('*')) {
        v = checked(__int128(v) * unary());
      } else if (eat('/')) {
        int64_t d = unary();
        if (d == 0) error("division by zero");
        v /= d;
      } else if (eat('%')) {
        int64_t d = unary();
        if (d == 0) error("remainder by zero");
        v %= d;
      } else {
        return v;
      }
    }
  }
  int64_t unary() {
    if (eat('-')) return checked(-__int128(unary()));
    return primary();
  }
  int64_t primary() {
    skip();
    if (eat('(')) {
      int64_t v = expr();
      if (!eat(')')) error("expected ')'");
      return v;
    }
    if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      __int128 v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        v = v * 10 + (s_[pos_++] - '0');
        if (overflows(v)) error("integer overflow");
      }
      return int64_t(v);
    }
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    if (start == pos_) error(pos_ < s_.size() ? "unexpected '" + s_.substr(pos_, 1) + "'" : "unexpected end");
    const std::string name = s_.substr(start, pos_ - start);
    if (eat('(')) {
      int64_t a = expr();
      if (!eat(',')) error("expected ',' in " + name + "()");
      int64_t b = expr();
      if (!eat(')')) error("expected ')' after " + name + "(");
      if (name == "cdiv") {
        if (b <= 0) error("cdiv divisor must be positive");
        return a >= 0 ? (a + b - 1) / b : a / b;
      }
      if (name == "min") return std::min(a, b);
      if (name == "max") return std::max(a, b);
      error("unknown function '" + name + "' (expected cdiv, min or max)");
    }
    auto it = vars_.find(name);
    if (it == vars_.end()) error("unknown name '" + name + "'");
    return it->second;
  }

  const std::string& s_;
  const std::map<std::string, int64_t>& vars_;
  size_t pos_ = 0;
};

}  // namespace

int64_t eval_launch_expr(const std::string& expr, const std::map<std::string, int64_t>& vars) {
  return Parser(expr, vars).parse();
}

}  // namespace thrive::backend
