// EngineRequest: one request as the engine tracks it: the scheduler's Request plus what turns
// its tokens into outputs (incremental detokenizer, stop strings and ids, limits, timing).
#pragma once
#include <optional>
#include <vector>

#include "engine/llm_engine.h"
#include "engine/request.h"
#include "engine/stop_strings.h"
#include "structured/grammar_matcher.h"
#include "tokenizer/tokenizer.h"

namespace gs {

class EngineRequest {
 public:
  // `params` as the user gave them; `eos_ids` the model's (ignored when params.ignore_eos).
  EngineRequest(RequestId id, uint64_t arrival, std::vector<int32_t> prompt, const SamplingParams& params,
                uint64_t seed, const Tokenizer& tok, const std::vector<int>& eos_ids, double arrival_time);

  Request& request() { return req_; }
  // Appends a sampled token and decides whether the request is done, in vLLM's order: eos
  // (unless ignore_eos) or a stop token id once min_tokens are out (neither is put in the
  // text), then stop strings (the text ends before them; min_tokens does not hold them off),
  // then max_tokens or prompt + output reaching `max_model_len` (Length).
  RequestOutput on_token(const SampledToken& s, int max_model_len, double now);
  // Adds a step's pooled hidden-state rows (a recomputation after preemption repeats them: ignored).
  void on_pooled(const PooledRows& p);
  // A pooling request's end: its embedding (the pooled rows' mean, L2-normalised), finished.
  RequestOutput pooled_output(double now);
  // Records a prompt token's logprob (a recomputation after preemption repeats them: ignored).
  void on_prompt_logprob(const PromptLogprob& p);
  // The output of an aborted request.
  RequestOutput aborted() const;
  // Structured output: the tokens the next sampled token may be (its grammar's mask after the
  // tokens so far), or null for an unconstrained request.
  const std::vector<uint32_t>* next_bitmask();
  // Records the first time the scheduler ran the request (queue time ends, prefill begins).
  void on_scheduled(double now) {
    if (scheduled_time_ == 0.0) scheduled_time_ = now;
  }

 private:
  RequestOutput base_output() const;
  void finish_text(RequestOutput& out);

  Request req_;
  std::vector<int> user_stop_ids_;
  std::vector<int> eos_ids_;
  IncrementalDetokenizer detok_;
  StopStringMatcher stop_;
  double arrival_time_ = 0.0;
  double first_token_time_ = 0.0;
  double scheduled_time_ = 0.0;
  std::vector<TokenLogprob> prompt_logprobs_;  // handed out with the first token
  std::vector<double> pool_sum_;               // pooling: the sum of the rows pooled so far
  int pooled_upto_ = 0;                        // pooling: prompt positions pooled so far
  int pool_rows_ = 0;
  std::unique_ptr<structured::GrammarMatcher> matcher_;  // structured output
  std::vector<uint32_t> bitmask_;
  bool grammar_waits_ = false;  // the grammar waits for SamplingParams::grammar_after_token
};

}  // namespace gs
