#include "thrive/core/json.hpp"

namespace thrive {
nlohmann::json parse_json_bounded(std::string_view text, int max_depth) {
  // nlohmann's lexer takes a NUL byte for the end of the input, so `{...}` NUL garbage would parse
  // as `{...}`; JSON (RFC 8259) has no raw NUL outside strings, and inside them it must be escaped
  if (text.find('\0') != std::string_view::npos) return nlohmann::json(nlohmann::json::value_t::discarded);
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
      if (++depth > max_depth) return nlohmann::json(nlohmann::json::value_t::discarded);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  std::string s = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

}  // namespace thrive
