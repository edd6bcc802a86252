// SpeculativeConfig: --speculative-config as vLLM spells it (method, num_speculative_tokens,
// prompt_lookup_max/min for n-gram prompt lookup, model for a draft model).
#pragma once
#include <string>

namespace gs {

struct SpeculativeConfig {
  std::string method;              // "" (off), "ngram" or "draft_model"
  int num_speculative_tokens = 0;  // k: tokens proposed per request and step (>= 1 when on)
  int prompt_lookup_max = 0;       // n-gram: longest suffix matched (vLLM's defaults: both 5)
  int prompt_lookup_min = 0;       // n-gram: shortest suffix matched
  std::string model;               // draft_model: a model directory or a --preset name

  bool enabled() const { return !method.empty(); }
  // 1 + k with speculation (the uniform query length of a verification step), else 1.
  int uniform_query_len() const { return enabled() ? 1 + num_speculative_tokens : 1; }

  // Parses the JSON object of --speculative-config (all or nothing); "" or "{}" turns it off.
  // Throws gs::Error naming the bad key or value and listing the valid ones.
  static SpeculativeConfig parse(const std::string& json_text);
  // Throws gs::Error for an inconsistent config (also checked by parse()).
  void validate() const;
};

}  // namespace gs
