// JSON from outside THRIVE (checkpoint headers and configs, memory exports, prompts files).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace thrive {

/// Parses `text` without exceptions, refusing nesting deeper than `max_depth` levels: returns a
/// discarded value (`is_discarded()`) when `text` is not JSON (a number past double's range
/// included), nests deeper, repeats a key within one object (RFC 8259 leaves a repeat's meaning
/// open; nlohmann would keep the last one silently), or holds a NUL byte anywhere (the parser
/// would stop there and ignore what follows). The limit keeps a hostile
/// file (100000 nested arrays) from exhausting the stack in the recursive code that walks,
/// prints or destroys the value afterwards. Where `why` is given and the text is refused, it
/// receives the reason for an error message: the byte offset of a NUL or of the bracket that
/// nests too deep, the repeated key and where (its enclosing keys, "[]" for an array), or the
/// parser's own message (line, column, what it read).
nlohmann::json parse_json_bounded(std::string_view text, int max_depth = 64, std::string* why = nullptr);

/// What a parsed value is, for "expected a JSON object" errors: "not JSON (<why>)" for a
/// discarded value, else "a JSON array", "a JSON string", ... (nlohmann's type_name).
std::string json_kind(const nlohmann::json& value, const std::string& why);

/// `value` as JSON text of at most `max_chars` characters ("..." marks a cut): for error
/// messages that quote a value from a file.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 60);

}  // namespace thrive
