// SamplingParams: how one request picks its next tokens, and when it stops.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gs {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy
  float top_p = 1.0f;               // (0, 1]
  int top_k = 0;                    // 0 or -1 = off
  float min_p = 0.0f;               // [0, 1]
  std::optional<uint64_t> seed;     // reproducible sampling when set
  float repetition_penalty = 1.0f;  // > 0; 1 = off (HF-style, over prompt and output)
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  int max_tokens = 16;              // >= 1
  int min_tokens = 0;               // eos/stop ids are not sampled before this many tokens
  std::vector<int> stop_token_ids;
  std::vector<std::string> stop;    // stop strings; not included in the output
  bool ignore_eos = false;
  int logprobs = -1;                // -1 = none; 0..20 = the sampled token's + this many top ones
  bool skip_special_tokens = true;

  bool greedy() const { return temperature == 0.0f; }
  // Throws gs::Error naming the parameter and its valid range.
  void validate(int vocab_size) const;
};

}  // namespace gs
