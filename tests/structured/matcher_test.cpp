// The pushdown matcher and its token masks, on the Qwen2.5 vocabulary: masks agree with a
// token-by-token check of every token, and each frontend accepts exactly its language.
#include <gtest/gtest.h>

#include "structured/constraint_error.h"
#include "structured/ebnf_grammar.h"
#include "structured/grammar_compiler.h"
#include "structured/grammar_matcher.h"
#include "structured/regex_grammar.h"
#include "structured_test_util.h"

namespace gs::structured {
namespace {

using test::qwen_compiler;
using test::qwen_vocab;

std::shared_ptr<const CompiledGrammar> compile(ConstraintSpec::Kind kind, std::string text) {
  ConstraintSpec s;
  s.kind = kind;
  s.text = std::move(text);
  return qwen_compiler().compile(s);
}

bool full_match(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

// The mask must equal trying every token on a copy of the matcher.
void expect_mask_exact(const GrammarMatcher& m) {
  const auto& v = m.grammar().vocab();
  std::vector<uint32_t> mask(v.mask_words());
  m.fill_mask(mask);
  int mismatches = 0;
  for (int32_t id = 0; id < v.size(); ++id) {
    GrammarMatcher copy = m;
    bool ok = copy.accept_token(id);
    bool bit = mask[id >> 5] >> (id & 31) & 1;
    if (ok != bit && ++mismatches < 5)
      ADD_FAILURE() << "token " << id << " '" << v.bytes(id) << "': mask " << bit << ", matcher " << ok;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(Regex, AcceptsItsLanguage) {
  auto g = compile(ConstraintSpec::Kind::kRegex, R"(^(\d{3}-\d{4}|[A-Z][a-z]+)(,\s?x+)?$)");
  EXPECT_TRUE(full_match(g, "555-1234"));
  EXPECT_TRUE(full_match(g, "Hello, xxx"));
  EXPECT_TRUE(full_match(g, "Ab,x"));
  EXPECT_FALSE(full_match(g, "555-123"));
  EXPECT_FALSE(full_match(g, "hello"));
  EXPECT_FALSE(full_match(g, "Ab,"));
}

TEST(Regex, UnsupportedFeaturesNameThemselves) {
  EXPECT_THROW(regex_grammar("(a)\\1"), ConstraintError);
  EXPECT_THROW(regex_grammar("(?=a)b"), ConstraintError);
  EXPECT_THROW(regex_grammar("a{3"), ConstraintError);
  try {
    regex_grammar("(?<=x)y");
    FAIL();
  } catch (const ConstraintError& e) {
    EXPECT_NE(std::string(e.what()).find("lookaround"), std::string::npos);
  }
}

TEST(Ebnf, GbnfGrammar) {
  auto g = compile(ConstraintSpec::Kind::kGrammar, R"g(
    # a tiny arithmetic language
    root ::= expr
    expr ::= term (("+" | "-") term)*
    term ::= num | "(" expr ")"
    num  ::= [0-9]+
  )g");
  EXPECT_TRUE(full_match(g, "1+(22-3)"));
  EXPECT_FALSE(full_match(g, "1+"));
  EXPECT_FALSE(full_match(g, "(1"));
  EXPECT_THROW(ebnf_grammar("root ::= a\n"), ConstraintError);                   // a undefined
  EXPECT_THROW(ebnf_grammar("root ::= root \"x\" | \"y\"\n"), ConstraintError);  // left recursion
  EXPECT_THROW(ebnf_grammar("expr ::= \"x\"\n"), ConstraintError);               // no root
}

TEST(Choice, OnlyTheChoices) {
  ConstraintSpec s;
  s.kind = ConstraintSpec::Kind::kChoice;
  s.choices = {"positive", "negative", "neutral"};
  auto g = qwen_compiler().compile(s);
  EXPECT_TRUE(full_match(g, "neutral"));
  EXPECT_FALSE(full_match(g, "neutr"));
  GrammarMatcher m(g);
  expect_mask_exact(m);
}

TEST(Mask, ExactOnJsonStates) {
  auto g = compile(ConstraintSpec::Kind::kJsonSchema, R"({"type":"object","properties":{
      "name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
      "tags":{"type":"array","items":{"type":"string"},"maxItems":3}},"required":["name","age"]})");
  GrammarMatcher m(g);
  expect_mask_exact(m);
  for (std::string_view piece :
       {"{", "\"name\"", ": \"Bo", "b\\n", "\"", ", \"age\": 1", "2", ", \"tags\": [\"a\"", "]"}) {
    ASSERT_TRUE(m.accept_bytes(piece)) << piece;
    expect_mask_exact(m);
  }
  ASSERT_TRUE(m.accept_bytes("}"));
  EXPECT_TRUE(m.can_end());
}

TEST(Mask, ExactOnJsonObject) {
  auto g = compile(ConstraintSpec::Kind::kJsonObject, "");
  GrammarMatcher m(g);
  for (std::string_view piece : {"{", "\"a\": [1, {\"b\"", ": tr", "ue}", ", \"x\""}) {
    ASSERT_TRUE(m.accept_bytes(piece)) << piece;
    expect_mask_exact(m);
  }
}

TEST(Mask, RejectedTokenLeavesStateUnchanged) {
  auto g = compile(ConstraintSpec::Kind::kRegex, "ab+c");
  GrammarMatcher m(g);
  auto id = test::qwen_tokenizer().encode("xyz", false);
  EXPECT_FALSE(m.accept_token(id[0]));
  EXPECT_TRUE(m.accept_bytes("abbbc"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.accept_token(*test::qwen_tokenizer().eos_id()));
  EXPECT_TRUE(m.finished());
}

}  // namespace
}  // namespace gs::structured
