#include "structured_test_util.h"

#include <gtest/gtest.h>

#include <optional>

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

namespace {
// After the budget: prefer the end, then tokens that close strings, objects and arrays.
int closing_rank(const std::string& bytes) {
  if (bytes.empty()) return 0;
  if (bytes == "\"") return 1;
  if (bytes == "}" || bytes == "]") return 2;
  if (bytes.size() == 1 && bytes != "," && bytes != "\\" && bytes != " " && bytes != "\n" && bytes != "\t" &&
      !(bytes[0] >= '0' && bytes[0] <= '9'))
    return 3;
  if (bytes.size() == 1 && bytes[0] >= '0' && bytes[0] <= '9') return 4;
  return 5;
}
}  // namespace

std::optional<std::string> walk(const std::shared_ptr<const structured::CompiledGrammar>& grammar, uint32_t seed,
                                int budget, int max_tokens) {
  structured::GrammarMatcher m(grammar);
  const auto& vocab = grammar->vocab();
  std::vector<uint32_t> mask(vocab.mask_words());
  std::mt19937 rng(seed);
  std::string text;
  for (int step = 0; step < max_tokens; ++step) {
    m.fill_mask(mask);
    auto allowed = allowed_tokens(mask);
    if (allowed.empty()) {
      ADD_FAILURE() << "no token allowed after: " << text;
      return std::nullopt;
    }
    int32_t pick;
    if (step < budget) {
      pick = allowed[rng() % allowed.size()];
    } else {
      int best = 99;
      std::vector<int32_t> best_ids;
      for (int32_t id : allowed) {
        int r = vocab.is_end(id) ? 0 : closing_rank(vocab.bytes(id));
        if (r < best) best = r, best_ids.clear();
        if (r == best) best_ids.push_back(id);
      }
      pick = best_ids[rng() % best_ids.size()];
    }
    if (!m.accept_token(pick)) {
      ADD_FAILURE() << "the matcher rejected masked token " << pick << " after: " << text;
      return std::nullopt;
    }
    if (vocab.is_end(pick)) return text;
    text += vocab.bytes(pick);
  }
  return std::nullopt;
}

}  // namespace gs::test
