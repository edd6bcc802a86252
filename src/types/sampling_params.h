// SamplingParams: how one request picks its next tokens, and when it stops.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "types/pooling.h"
#include "types/sampling_limits.h"

namespace gs {

namespace structured {
class CompiledGrammar;
}

// Each request's logit adjustments (bias entries + stop ids masked below min_tokens, + a few eos
// ids) must fit one device row of kMaxAdjustmentsPerRow.
constexpr size_t kMaxLogitBias = 768;
constexpr size_t kMaxStopTokenIds = 128;
static_assert(kMaxLogitBias + kMaxStopTokenIds + 64 <= size_t(kMaxAdjustmentsPerRow));

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy
  float top_p = 1.0f;               // (0, 1]
  int top_k = 0;                    // 0 or -1 = off
  float min_p = 0.0f;               // [0, 1]
  std::optional<uint64_t> seed;     // reproducible sampling when set
  float repetition_penalty = 1.0f;  // > 0; 1 = off (HF-style, over prompt and output)
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  // Added to the logits of these tokens before sampling (OpenAI's logit_bias), each in [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias;
  int max_tokens = 16;  // >= 1
  int min_tokens = 0;   // eos/stop ids are not sampled before this many tokens
  std::vector<int> stop_token_ids;
  std::vector<std::string> stop;  // stop strings; not included in the output
  bool ignore_eos = false;
  int logprobs = -1;         // -1 = none; 0..20 = the sampled token's + this many top ones
  int prompt_logprobs = -1;  // -1 = none; 0..20 = each prompt token's (but the first) + top ones
  bool skip_special_tokens = true;
  // A pooling request (--runner pooling): its prompt's hidden states are pooled into an
  // embedding (RequestOutput::embedding) and no token is kept.
  Pooling pooling = Pooling::None;
  // Structured output: the grammar the output follows (compiled off the engine thread by
  // LLMEngine::compile_constraint); null: unconstrained.
  std::shared_ptr<const structured::CompiledGrammar> grammar;
  // With a grammar: the token that ends the model's reasoning (</think>), after which the grammar
  // applies; the reasoning before it is free. -1: the grammar applies from the first token.
  int32_t grammar_after_token = -1;

  // Temperatures under kGreedyTemperature (1e-5) take the argmax, as 0 does.
  bool greedy() const { return temperature < kGreedyTemperature; }
  // Throws gs::Error naming the parameter and its valid range.
  void validate(int vocab_size) const;
};

}  // namespace gs
