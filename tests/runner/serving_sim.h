// A minimal continuous-batching driver for ModelRunner tests: requests arrive over time, prefill
// in chunks under a token budget alongside other requests' decodes, and take fresh KV blocks
// from block 0 upwards (so a padded row that wrote KV would corrupt the first request's cache).
#pragma once
#include <algorithm>
#include <vector>

#include "runner/model_runner.h"

namespace gs::test {

struct SimRequest {
  std::vector<int32_t> prompt;
  int max_new_tokens = 16;
  int arrival_step = 0;
  SamplingParams params;  // greedy by default (set below)
  int lora_id = 0;        // the LoRA adapter (1 + its index in RunnerConfig::lora_modules), 0: none
};

struct SimResult {
  std::vector<std::vector<int32_t>> outputs;  // generated tokens per request
  std::vector<std::vector<float>> logprobs;   // per request: each sampled token's logprob, then its top ones
  int steps = 0;
};

inline SimRequest greedy_request(std::vector<int32_t> prompt, int max_new, int arrival) {
  SimRequest r{std::move(prompt), max_new, arrival, {}, 0};
  r.params.temperature = 0.0f;
  return r;
}

inline SimResult simulate(ModelRunner& runner, const std::vector<SimRequest>& reqs, int token_budget) {
  struct Live {
    std::vector<int32_t> tokens, blocks;
    int computed = 0, generated = 0;
  };
  std::vector<Live> live(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) live[i].tokens = reqs[i].prompt;
  int next_block = 0;
  const int bs = runner.block_size();
  SimResult res;
  res.outputs.resize(reqs.size());
  res.logprobs.resize(reqs.size());
  for (int step = 0;; ++step) {
    SchedulerOutput so;
    int budget = token_budget;
    bool pending = false;
    for (size_t i = 0; i < reqs.size(); ++i) {
      Live& l = live[i];
      if (l.generated >= reqs[i].max_new_tokens) continue;
      pending = true;
      if (reqs[i].arrival_step > step || budget == 0) continue;
      const int n = std::min<int>(int(l.tokens.size()) - l.computed, budget);
      budget -= n;
      while (int(l.blocks.size()) * bs < l.computed + n) l.blocks.push_back(next_block++);
      ScheduledRequest sr;
      sr.id = i;
      sr.all_token_ids = &l.tokens;
      sr.num_prompt_tokens = int(reqs[i].prompt.size());
      sr.num_computed_tokens = l.computed;
      sr.num_new_tokens = n;
      sr.block_ids = &l.blocks;
      sr.sample = l.computed + n == int(l.tokens.size());
      sr.params = &reqs[i].params;
      sr.seed = 1234 + i;
      sr.num_output_tokens = l.generated;
      sr.lora_id = reqs[i].lora_id;
      so.requests.push_back(sr);
    }
    if (!pending) break;
    if (so.requests.empty()) continue;
    const RunnerOutput out = runner.execute(so);
    for (const auto& sr : so.requests) live[sr.id].computed += sr.num_new_tokens;
    for (const SampledToken& t : out.sampled) {
      live[t.id].tokens.push_back(t.token);
      live[t.id].generated++;
      res.outputs[t.id].push_back(t.token);
      res.logprobs[t.id].push_back(t.logprob);
      for (const auto& [tok, lp] : t.top) res.logprobs[t.id].push_back(lp);
    }
    res.steps = step + 1;
  }
  return res;
}

}  // namespace gs::test
