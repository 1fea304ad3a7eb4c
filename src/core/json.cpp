#include "thrive/core/json.hpp"

namespace thrive {
namespace {
struct TooDeep {};
}  // namespace

nlohmann::json parse_json_bounded(std::string_view text, int max_depth) {
  // nlohmann's lexer takes a NUL byte for the end of the input, so `{...}` NUL garbage would parse
  // as `{...}`; JSON (RFC 8259) has no raw NUL outside strings, and inside them it must be escaped
  if (text.find('\0') != std::string_view::npos) return nlohmann::json(nlohmann::json::value_t::discarded);
  try {
    return nlohmann::json::parse(
        text.begin(), text.end(),
        [max_depth](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
          if (depth > max_depth) throw TooDeep{};
          return true;
        },
        false);
  } catch (const TooDeep&) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

std::string json_excerpt(const nlohmann::json& value, size_t max_chars) {
  std::string s = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

}  // namespace thrive
