#include "structured/grammar_walk.h"

#include <chrono>
#include <random>
#include <vector>

#include "structured/grammar_matcher.h"

namespace gs::structured {

namespace {

// Lower is preferred once the budget is spent: the end, a quote, a closing bracket, other
// single punctuation, a digit, anything else.
int closing_rank(const TokenVocab& v, int32_t id) {
  if (v.is_end(id)) return 0;
  const std::string& b = v.bytes(id);
  if (b == "\"") return 1;
  if (b == "}" || b == "]") return 2;
  if (b.size() == 1 && b != "," && b != "\\" && b != " " && b != "\n" && b != "\t" && !(b[0] >= '0' && b[0] <= '9'))
    return 3;
  if (b.size() == 1 && b[0] >= '0' && b[0] <= '9') return 4;
  return 5;
}

}  // namespace

WalkResult walk_grammar(const std::shared_ptr<const CompiledGrammar>& grammar, const WalkOptions& opts,
                        const std::function<void(double)>& on_mask) {
  GrammarMatcher m(grammar);
  const TokenVocab& v = grammar->vocab();
  std::vector<uint32_t> mask(v.mask_words());
  std::mt19937 rng(opts.seed);
  WalkResult out;
  std::string text;
  std::vector<int32_t> allowed;
  for (; out.tokens < opts.max_tokens; ++out.tokens) {
    const auto t0 = std::chrono::steady_clock::now();
    m.fill_mask(mask);
    if (on_mask) on_mask(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    allowed.clear();
    for (size_t w = 0; w < mask.size(); ++w)
      for (uint32_t bits = mask[w]; bits; bits &= bits - 1)
        allowed.push_back(static_cast<int32_t>(w * 32 + __builtin_ctz(bits)));
    if (allowed.empty()) {
      out.error = "no token allowed after: " + text;
      return out;
    }
    int32_t pick = allowed[rng() % allowed.size()];
    if (out.tokens >= opts.budget) {
      int best = 99;
      std::vector<int32_t> best_ids;
      for (int32_t id : allowed) {
        int r = closing_rank(v, id);
        if (r < best) best = r, best_ids.clear();
        if (r == best) best_ids.push_back(id);
      }
      pick = best_ids[rng() % best_ids.size()];
    }
    if (!m.accept_token(pick)) {
      out.error = "the matcher refused masked token " + std::to_string(pick) + " after: " + text;
      return out;
    }
    if (v.is_end(pick)) {
      out.text = text;
      return out;
    }
    text += v.bytes(pick);
  }
  return out;
}

}  // namespace gs::structured
