// parse_json_bounded: the depth limit, NUL bytes, brackets inside strings, and wide objects (a
// safetensors header or config.json of 200k members once took minutes in nlohmann's callback
// parser, which walked the parent object after every member).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "thrive/core/json.hpp"

namespace thrive {
namespace {

TEST(ParseJsonBounded, RefusesDeepNestingAndNulButCountsOnlyBracketsOutsideStrings) {
  EXPECT_EQ(parse_json_bounded(std::string(64, '[') + std::string(64, ']')).size(), 1u);
  EXPECT_TRUE(parse_json_bounded(std::string(65, '[') + std::string(65, ']')).is_discarded());
  EXPECT_TRUE(parse_json_bounded(std::string(100000, '[')).is_discarded());
  // brackets and escaped quotes inside strings do not nest
  const std::string in_string = "{\"k\\\"[\":\"" + std::string(100, '[') + "\"}";
  const auto j = parse_json_bounded(in_string);
  ASSERT_FALSE(j.is_discarded()) << in_string;
  EXPECT_EQ(j["k\"["].get<std::string>(), std::string(100, '['));
  EXPECT_TRUE(parse_json_bounded(std::string("{\"a\":1}\0{", 9)).is_discarded());
  EXPECT_TRUE(parse_json_bounded("{\"a\":1} trailing").is_discarded());
  EXPECT_TRUE(parse_json_bounded("{\"a\":NaN}").is_discarded());
}

TEST(ParseJsonBounded, SaysWhyItRefusedAText) {
  std::string why;
  EXPECT_TRUE(parse_json_bounded(std::string("{\"a\":1}\0{", 9), 64, &why).is_discarded());
  EXPECT_EQ(why, "a NUL byte at offset 7");
  EXPECT_TRUE(parse_json_bounded("[[[]]]", 2, &why).is_discarded());
  EXPECT_EQ(why, "nested deeper than 2 levels at offset 2");
  const auto bad = parse_json_bounded("{\n  \"a\": tru\n}", 64, &why);
  EXPECT_TRUE(bad.is_discarded());
  // nlohmann's message: where (line, column) and what it read
  EXPECT_NE(why.find("syntax error"), std::string::npos) << why;
  EXPECT_NE(why.find("at line "), std::string::npos) << why;
  EXPECT_NE(why.find("last read"), std::string::npos) << why;
  EXPECT_NE(json_kind(bad, why).find("not JSON (" + why), std::string::npos);
  EXPECT_EQ(json_kind(parse_json_bounded("[1]"), ""), "a JSON array");
  EXPECT_EQ(json_kind(parse_json_bounded("\"s\""), ""), "a JSON string");
  // a number past double's range is refused, not thrown (nlohmann's out_of_range 406)
  EXPECT_TRUE(parse_json_bounded("{\"eps\": 1e400}", 64, &why).is_discarded());
  EXPECT_NE(why.find("number overflow parsing '1e400'"), std::string::npos) << why;
  EXPECT_TRUE(parse_json_bounded("[1" + std::string(400, '0') + "]", 64, &why).is_discarded());
  // a key repeated in one object, with where it is; the same key in two objects is fine
  EXPECT_TRUE(parse_json_bounded("{\"hidden_size\": 64, \"hidden_size\": 128}", 64, &why).is_discarded());
  EXPECT_EQ(why, "key \"hidden_size\" appears twice in one object (at the top level)");
  EXPECT_TRUE(parse_json_bounded("{\"m\": [{\"w\": {\"a\": 1, \"a\": 2}}]}", 64, &why).is_discarded());
  EXPECT_EQ(why, "key \"a\" appears twice in one object (at m/[]/w)");
  EXPECT_FALSE(parse_json_bounded("{\"a\": {\"a\": 1}, \"b\": [{\"a\": 1}, {\"a\": 2}]}").is_discarded());
  why = "untouched";
  EXPECT_FALSE(parse_json_bounded("{}", 64, &why).is_discarded());
  EXPECT_EQ(why, "untouched");
}

TEST(ParseJsonBounded, AWideObjectParsesInLinearTime) {
  std::string text = "{";
  const int members = 200000;
  for (int i = 0; i < members; ++i) text += (i ? ",\"x" : "\"x") + std::to_string(i) + "\":{\"a\":[1]}";
  text += "}";
  const auto t0 = std::chrono::steady_clock::now();
  const auto j = parse_json_bounded(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j.size(), size_t(members));
  // about 0.3 s here (the parse and the duplicate-key pass); the callback parser took minutes at
  // half this size
  EXPECT_LT(s, 20.0) << "parsing " << text.size() << " bytes took " << s << " s";
}

}  // namespace
}  // namespace thrive
