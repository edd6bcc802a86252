// The schema corpus (tests/data/structured/schemas.json): every schema compiles, and every
// output generated under its token masks (random picks, then closing tokens) parses as JSON and
// validates against the schema. Unsupported keywords are rejected by name.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "json_validator.h"
#include "structured/constraint_error.h"
#include "structured/json_schema_grammar.h"
#include "structured_test_util.h"
#include "test_paths.h"

namespace gs::structured {
namespace {

using Json = nlohmann::ordered_json;

Json corpus() {
  std::ifstream in(test::source_dir() / "tests" / "data" / "structured" / "schemas.json");
  return Json::parse(in);
}

TEST(SchemaCorpus, HasAtLeastAHundredSchemas) { EXPECT_GE(corpus().size(), 100u); }

TEST(SchemaCorpus, EveryOutputValidates) {
  Json schemas = corpus();
  int completed = 0;
  for (size_t i = 0; i < schemas.size(); ++i) {
    SCOPED_TRACE("schema " + std::to_string(i) + ": " + schemas[i].dump());
    ConstraintSpec spec;
    spec.kind = ConstraintSpec::Kind::kJsonSchema;
    spec.text = schemas[i].dump();
    std::shared_ptr<const CompiledGrammar> g;
    ASSERT_NO_THROW(g = test::qwen_compiler().compile(spec));
    for (uint32_t seed = 0; seed < 2; ++seed) {
      auto text = test::walk(g, seed * 7919 + static_cast<uint32_t>(i));
      if (!text) continue;
      ++completed;
      Json value;
      ASSERT_NO_THROW(value = Json::parse(*text)) << *text;
      EXPECT_EQ(test::validate_json(value, schemas[i]), "") << *text;
    }
  }
  EXPECT_GE(completed, static_cast<int>(schemas.size()));  // most walks end
}

TEST(SchemaCorpus, UnsupportedKeywordsAreNamed) {
  for (auto [schema, keyword] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type":"object","minProperties":1})", "minProperties"},
           {R"({"type":"array","items":{"type":"integer"},"uniqueItems":true})", "uniqueItems"},
           {R"({"not":{"type":"string"}})", "not"},
           {R"({"type":"integer","multipleOf":3})", "multipleOf"},
           {R"({"type":"string","format":"ipv6"})", "format"},
           {R"({"type":"number","maximum":1.5})", "maximum"},
           {R"({"if":{"type":"string"},"then":{"minLength":1}})", "if"},
           {R"({"$ref":"#/$defs/missing"})", "$ref"}}) {
    try {
      json_schema_grammar(schema);
      ADD_FAILURE() << schema << " compiled";
    } catch (const ConstraintError& e) {
      EXPECT_NE(std::string(e.what()).find(keyword), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(json_schema_grammar("{not json"), ConstraintError);
}

TEST(SchemaCorpus, CapsTurnPathologicalSchemasIntoErrors) {
  std::string deep = R"({"type":"string"})";
  for (int i = 0; i < 100; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_THROW(json_schema_grammar(deep), ConstraintError);
  EXPECT_THROW(json_schema_grammar(R"({"type":"string","maxLength":1000000})"), ConstraintError);
  GrammarLimits small;
  small.max_rules = 5;
  EXPECT_THROW(json_schema_grammar(R"({"type":"integer","minimum":123456,"maximum":98765432})", {}, small),
               ConstraintError);
}

}  // namespace
}  // namespace gs::structured
