// Implements types/sampling_params.h (SamplingParams).
#include "types/sampling_params.h"

#include <cmath>

#include "core/error.h"

namespace gs {

void SamplingParams::validate(int vocab_size) const {
  GS_CHECK(std::isfinite(temperature) && temperature >= 0.0f,
           "temperature must be a finite number >= 0 (0 = greedy), got {}", temperature);
  GS_CHECK(top_p > 0.0f && top_p <= 1.0f, "top_p must be in (0, 1], got {}", top_p);
  GS_CHECK(top_k >= -1, "top_k must be -1 or 0 (off) or a positive number of tokens, got {}", top_k);
  GS_CHECK(min_p >= 0.0f && min_p <= 1.0f, "min_p must be in [0, 1], got {}", min_p);
  GS_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f,
           "repetition_penalty must be > 0 (1 = off), got {}", repetition_penalty);
  GS_CHECK(presence_penalty >= -2.0f && presence_penalty <= 2.0f, "presence_penalty must be in [-2, 2], got {}",
           presence_penalty);
  GS_CHECK(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f, "frequency_penalty must be in [-2, 2], got {}",
           frequency_penalty);
  GS_CHECK(logit_bias.size() <= kMaxLogitBias, "logit_bias: at most {} tokens may be biased, got {}", kMaxLogitBias,
           logit_bias.size());
  for (const auto& [token, bias] : logit_bias) {
    GS_CHECK(token >= 0 && token < vocab_size, "logit_bias: {} is not a token id (valid: 0..{})", token,
             vocab_size - 1);
    GS_CHECK(std::isfinite(bias) && bias >= -100.0f && bias <= 100.0f,
             "logit_bias: the bias of token {} must be in [-100, 100], got {}", token, bias);
  }
  GS_CHECK(stop_token_ids.size() <= kMaxStopTokenIds, "stop_token_ids: at most {} ids, got {}", kMaxStopTokenIds,
           stop_token_ids.size());
  GS_CHECK(max_tokens >= 1, "max_tokens must be >= 1, got {}", max_tokens);
  GS_CHECK(min_tokens >= 0 && min_tokens <= max_tokens, "min_tokens must be in [0, max_tokens = {}], got {}",
           max_tokens, min_tokens);
  for (int id : stop_token_ids)
    GS_CHECK(id >= 0 && id < vocab_size, "stop_token_ids: {} is not a token id (valid: 0..{})", id, vocab_size - 1);
  for (const auto& s : stop) GS_CHECK(!s.empty(), "stop: stop strings must not be empty");
  GS_CHECK(logprobs >= -1 && logprobs <= 20, "logprobs must be in [0, 20] (or -1 for none), got {}", logprobs);
  GS_CHECK(prompt_logprobs >= -1 && prompt_logprobs <= 20,
           "prompt_logprobs must be in [0, 20] (or -1 for none), got {}", prompt_logprobs);
}

}  // namespace gs
