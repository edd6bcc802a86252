// TokenLogprob: a token with its log-probability and the best alternatives at its position. The
// one logprob type: the sampler returns it per row, the runner hands it back for sampled tokens
// (SampledToken) and prompt tokens (PromptLogprob), and the engine gives it to the server
// (RequestOutput::logprobs, prompt_logprobs), which writes the OpenAI `logprobs` objects.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace gs {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;                        // raw logprob of `token`, when asked
  std::vector<std::pair<int32_t, float>> top;  // (token, logprob), best first, when asked
};

}  // namespace gs
