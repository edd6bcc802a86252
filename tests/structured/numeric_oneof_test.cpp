// Numeric bounds and oneOf in the schema compiler: boundary values are accepted and values just
// outside refused, for integers and numbers of either sign; disjoint oneOf compiles, and a oneOf
// whose alternatives can overlap is refused by name.
#include <gtest/gtest.h>

#include "structured/constraint_error.h"
#include "structured/grammar_compiler.h"
#include "structured/grammar_matcher.h"
#include "structured/json_schema_grammar.h"
#include "structured_test_util.h"

namespace gs::structured {
namespace {

std::shared_ptr<const CompiledGrammar> schema(const std::string& text) {
  ConstraintSpec s;
  s.kind = ConstraintSpec::Kind::kJsonSchema;
  s.text = text;
  s.any_whitespace = false;
  return test::qwen_compiler().compile(s);
}

bool matches(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

void expect_language(const std::string& text, std::vector<std::string_view> in, std::vector<std::string_view> out) {
  SCOPED_TRACE(text);
  auto g = schema(text);
  for (auto v : in) EXPECT_TRUE(matches(g, v)) << v << " should match";
  for (auto v : out) EXPECT_FALSE(matches(g, v)) << v << " should not match";
}

TEST(NumericBounds, IntegersOfEitherSign) {
  expect_language(R"({"type":"integer","minimum":-5,"maximum":5})", {"-5", "-1", "0", "5"}, {"-6", "6", "-0", "05"});
  expect_language(R"({"type":"integer","minimum":-100,"maximum":-3})", {"-100", "-3", "-57"}, {"-2", "-101", "0", "3"});
  expect_language(R"({"type":"integer","exclusiveMinimum":-10,"exclusiveMaximum":-2})", {"-9", "-3"},
                  {"-10", "-2", "-1"});
  expect_language(R"({"type":"integer","maximum":-10})", {"-10", "-12345"}, {"-9", "0", "10"});
  expect_language(R"({"type":"integer","minimum":1.5,"exclusiveMaximum":4.5})", {"2", "4"}, {"1", "5"});
  expect_language(R"({"type":"integer","minimum":0,"exclusiveMinimum":true,"maximum":3})", {"1", "3"}, {"0", "4"});
  expect_language(R"({"type":"integer","minimum":-99,"maximum":100,"exclusiveMaximum":50})", {"-99", "49"},
                  {"50", "100", "-100"});
}

TEST(NumericBounds, ProbabilityBoundaries) {
  expect_language(R"({"type":"number","minimum":0,"maximum":1})", {"0", "0.0", "0.5", "1", "1.0", "1.000", "0.999"},
                  {"1.5", "1.01", "2", "-0.5", "1e0", "-0"});
}

TEST(NumericBounds, ExclusiveAndNegativeNumbers) {
  expect_language(R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})", {"0.5", "0.001", "0.9999"},
                  {"0", "0.0", "0.000", "1", "1.0", "-0.5"});
  expect_language(R"({"type":"number","minimum":-1,"maximum":1})", {"-1", "-1.0", "-0.25", "0", "0.75", "1.0"},
                  {"-1.5", "-1.01", "1.5", "-2"});
  expect_language(R"({"type":"number","maximum":-2})", {"-2", "-2.0", "-2.5", "-300.125"}, {"-1.5", "-1.99", "0", "2"});
  expect_language(R"({"type":"number","exclusiveMinimum":-3})", {"-2.5", "-2.99", "0", "7.25"},
                  {"-3", "-3.0", "-3.5", "-4"});
  expect_language(R"({"type":"number","minimum":-10,"exclusiveMaximum":-9})", {"-10", "-9.5", "-9.01"},
                  {"-9", "-9.0", "-10.5", "-8"});
  expect_language(R"({"type":"number","minimum":0,"exclusiveMinimum":true,"maximum":5})", {"0.5", "5", "5.00"},
                  {"0", "0.0", "5.5"});
}

TEST(NumericBounds, RefusedByKeyword) {
  for (auto [text, keyword] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type":"number","maximum":1.5})", "maximum"},
           {R"({"type":"number","exclusiveMinimum":0.25})", "exclusiveMinimum"},
           {R"({"type":"number","multipleOf":0.5})", "multipleOf"},
           {R"({"type":"integer","minimum":1e300})", "minimum"},
           {R"({"type":"number","minimum":2,"maximum":1})", "minimum"},
           {R"({"type":"integer","minimum":3,"maximum":2})", "no integer"}}) {
    try {
      json_schema_grammar(text);
      ADD_FAILURE() << text << " compiled";
    } catch (const ConstraintError& e) {
      EXPECT_NE(std::string(e.what()).find(keyword), std::string::npos) << e.what();
    }
  }
}

TEST(OneOf, DisjointAlternativesCompileExactly) {
  expect_language(R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},
                    "required":["kind","x"]},{"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"]}]})",
                  {R"({"kind":"a","x":1})", R"({"kind":"b"})"}, {R"({"kind":"c"})", R"({"kind":"b","x":1})"});
  expect_language(R"({"oneOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]})", {"\"s\"", "3", "null"},
                  {"3.5", "true"});
  expect_language(R"({"oneOf":[{"enum":["x","y"]},{"enum":["z",1]}]})", {"\"x\"", "1"}, {"2"});
}

TEST(OneOf, OverlappingAlternativesAreRefused) {
  for (const std::string text : {
           R"({"oneOf":[{"type":"integer"},{"type":"number"}]})",
           R"({"oneOf":[{"type":"string"},{"maxLength":3}]})",
           R"({"oneOf":[{"enum":["a","b"]},{"enum":["b","c"]}]})",
           R"({"oneOf":[{"type":"object","properties":{"a":{"type":"string"}}},
                        {"type":"object","properties":{"b":{"type":"string"}}}]})",
           R"({"oneOf":[{"type":"object","properties":{"k":{"enum":["a","b"]}},"required":["k"]},
                        {"type":"object","properties":{"k":{"enum":["b"]}},"required":["k"]}]})",
       }) {
    try {
      json_schema_grammar(text);
      ADD_FAILURE() << text << " compiled";
    } catch (const ConstraintError& e) {
      EXPECT_NE(std::string(e.what()).find("'oneOf'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("alternatives 0 and 1"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gs::structured
