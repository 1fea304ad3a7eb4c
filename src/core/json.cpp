#include "thrive/core/json.hpp"

#include <fmt/format.h>

#include <unordered_set>
#include <vector>

namespace thrive {
namespace {
// A SAX pass that stops at the first key an object repeats. RFC 8259 (section 4) says names
// SHOULD be unique and leaves a repeat's meaning to the reader; nlohmann keeps the last value,
// so `"hidden_size": 64, "hidden_size": 128` would read silently as 128 (and a safetensors header
// naming a tensor twice would drop one of the two entries).
class DuplicateKeyCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string duplicate;  // "key \"x\" appears twice in one object (at a/b)" once found
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override {
    levels_.push_back(Level{true, {}, {}});
    return true;
  }
  bool key(string_t& k) override {
    Level& level = levels_.back();
    if (!level.keys.insert(k).second) {
      std::string path;
      for (size_t i = 0; i + 1 < levels_.size(); ++i) {
        if (i > 0) path.push_back('/');
        path.append(levels_[i].object ? levels_[i].last : std::string_view("[]"));
      }
      duplicate = fmt::format("key \"{}\" appears twice in one object (at {})", k, path.empty() ? "the top level" : path);
      return false;
    }
    level.last = k;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    levels_.push_back(Level{false, {}, {}});
    return true;
  }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  struct Level {
    bool object;
    std::string last;                     // the key being read (objects)
    std::unordered_set<std::string> keys;  // the keys seen (objects)
  };
  bool value() { return true; }
  bool close() {
    levels_.pop_back();
    return true;
  }
  std::vector<Level> levels_;
};
}  // namespace

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
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  } catch (const nlohmann::json::exception&) {  // a number past double's range (out_of_range 406)
    j = nlohmann::json(nlohmann::json::value_t::discarded);
  }
  if (j.is_discarded()) {
    if (why) {
      // the failure path only: parse again with exceptions for the parser's message
      try {
        [[maybe_unused]] const auto again = nlohmann::json::parse(text.begin(), text.end());
        *why = "not JSON";
      } catch (const nlohmann::json::exception& e) {
        *why = e.what();
      }
    }
    return j;
  }
  // Only objects can repeat a key; a text without one needs no second pass.
  if (text.find('{') != std::string_view::npos) {
    DuplicateKeyCheck check;
    if (!nlohmann::json::sax_parse(text.begin(), text.end(), &check) && !check.duplicate.empty())
      return refuse(check.duplicate);
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
