#include "thrive/core/json.hpp"

#include <fmt/format.h>

namespace thrive {
nlohmann::json parse_json_bounded(std::string_view text, int max_depth, std::string* why) {
  const auto refuse = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return nlohmann::json(nlohmann::json::value_t::discarded);
  };
  // nlohmann's lexer takes a NUL byte for the end of the input, so `{...}` NUL garbage would parse
  // as `{...}`; JSON (RFC 8259) has no raw NUL outside strings, and inside them it must be escaped
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    return refuse(fmt::format("a NUL byte at offset {}", nul));
  // The nesting depth by one linear pass over the brackets outside strings (the parser validates
  // the rest). nlohmann's depth callback would do it too, but its callback parser walks the
  // parent object after every member: an object of 100k members took minutes.
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return refuse(fmt::format("nested deeper than {} levels at offset {}", max_depth, i));
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() && why) {
    // the failure path only: parse again with exceptions for the parser's message
    try {
      [[maybe_unused]] const auto again = nlohmann::json::parse(text.begin(), text.end());
      *why = "not JSON";
    } catch (const nlohmann::json::parse_error& e) {
      *why = e.what();
    }
  }
  return j;
}

std::string json_kind(const nlohmann::json& value, const std::string& why) {
  if (value.is_discarded()) return fmt::format("not JSON ({})", why.empty() ? "unparsable" : why);
  return fmt::format("a JSON {}", value.type_name());
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  std::string s = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

}  // namespace thrive
