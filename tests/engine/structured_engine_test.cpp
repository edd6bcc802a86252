// Structured output in the engine, on random tiny weights with Qwen2.5's vocabulary: a grammar
// that waits for the reasoning's end token (SamplingParams::grammar_after_token) leaves the tokens
// up to that one free, and constrains every token after it.
#include <gtest/gtest.h>

#include <regex>

#include "engine/llm_engine.h"
#include "qwen_vocab_config.h"
#include "structured/grammar_compiler.h"
#include "tokenizer/tokenizer.h"

namespace gs {
namespace {

std::vector<int32_t> run(LLMEngine& engine, const SamplingParams& p) {
  RequestId id = engine.add_request(std::string("The answer is"), p);
  std::vector<int32_t> out;
  for (bool done = false; !done;)
    for (const auto& o : engine.step()) {
      EXPECT_EQ(o.id, id);
      EXPECT_TRUE(o.error.empty()) << o.error;
      out.insert(out.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      done = o.finished;
    }
  return out;
}

TEST(StructuredEngine, GrammarWaitsForTheReasoningEnd) {
  LLMEngine engine(test::qwen_vocab_config());
  structured::ConstraintSpec spec;
  spec.kind = structured::ConstraintSpec::Kind::kRegex;
  spec.text = "[0-9]{3}";
  const std::vector<int32_t> hello = engine.tokenizer().encode("Hello", false);
  ASSERT_EQ(hello.size(), 1u);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 12;
  p.logit_bias = {{hello[0], 100.0f}};  // the free model says "Hello" whenever it may
  p.grammar = engine.compile_constraint(spec);

  // From the first token the grammar forbids "Hello": three digits, then the end.
  std::vector<int32_t> constrained = run(engine, p);
  const std::string text = engine.tokenizer().decode(constrained, true);
  EXPECT_TRUE(std::regex_match(text, std::regex("[0-9]{3}"))) << text;

  // Waiting for "Hello" as the reasoning's end: it comes first (free), then the digits.
  p.grammar_after_token = hello[0];
  std::vector<int32_t> waited = run(engine, p);
  ASSERT_GE(waited.size(), 2u);
  EXPECT_EQ(waited[0], hello[0]);
  const std::string after = engine.tokenizer().decode(std::vector<int32_t>(waited.begin() + 1, waited.end()), true);
  EXPECT_TRUE(std::regex_match(after, std::regex("[0-9]{3}"))) << after;
}

}  // namespace
}  // namespace gs
