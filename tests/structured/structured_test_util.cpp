#include "structured_test_util.h"

#include <gtest/gtest.h>

#include <optional>

#include "structured/grammar_walk.h"
#include "test_paths.h"

namespace gs::test {

const Tokenizer& qwen_tokenizer() {
  static const Tokenizer tok = Tokenizer::from_dir(golden_dir() / "tokenizers" / "qwen2.5-instruct");
  return tok;
}

std::shared_ptr<const structured::TokenVocab> qwen_vocab() {
  static const auto vocab = [] {
    const Tokenizer& tok = qwen_tokenizer();
    return std::make_shared<const structured::TokenVocab>(tok, tok.size(), std::vector<int32_t>{*tok.eos_id()});
  }();
  return vocab;
}

structured::GrammarCompiler& qwen_compiler() {
  static structured::GrammarCompiler c(qwen_vocab());
  return c;
}

std::vector<int32_t> allowed_tokens(const std::vector<uint32_t>& mask) {
  std::vector<int32_t> out;
  for (size_t w = 0; w < mask.size(); ++w)
    for (int b = 0; b < 32; ++b)
      if (mask[w] >> b & 1) out.push_back(static_cast<int32_t>(w * 32 + b));
  return out;
}

std::optional<std::string> walk(const std::shared_ptr<const structured::CompiledGrammar>& grammar, uint32_t seed,
                                int budget, int max_tokens) {
  auto r = structured::walk_grammar(grammar, {seed, budget, max_tokens});
  if (!r.error.empty()) ADD_FAILURE() << r.error;
  return r.text;
}

}  // namespace gs::test
