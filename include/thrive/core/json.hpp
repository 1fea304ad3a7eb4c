// JSON from outside THRIVE (checkpoint headers and configs, memory exports, prompts files).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace thrive {

/// Parses `text` without exceptions, refusing nesting deeper than `max_depth` levels: returns a
/// discarded value (`is_discarded()`) when `text` is not JSON, nests deeper, or holds a NUL byte
/// anywhere (the parser would stop there and ignore what follows). The limit keeps a hostile
/// file (100000 nested arrays) from exhausting the stack in the recursive code that walks,
/// prints or destroys the value afterwards.
nlohmann::json parse_json_bounded(std::string_view text, int max_depth = 64);

/// `value` as JSON text of at most `max_chars` characters ("..." marks a cut): for error
/// messages that quote a value from a file.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 60);

}  // namespace thrive
