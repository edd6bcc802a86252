// Implements engine/engine_request.h (EngineRequest).
#include "engine/engine_request.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace gs {
namespace {
bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }
}  // namespace

EngineRequest::EngineRequest(RequestId id, uint64_t arrival, std::vector<int32_t> prompt, const SamplingParams& params,
                             uint64_t seed, const Tokenizer& tok, const std::vector<int>& eos_ids, double arrival_time)
    : user_stop_ids_(params.stop_token_ids),
      eos_ids_(params.ignore_eos ? std::vector<int>{} : eos_ids),
      detok_(tok, prompt, params.skip_special_tokens),
      stop_(params.stop),
      arrival_time_(arrival_time) {
  req_.id = id;
  req_.arrival = arrival;
  req_.num_prompt_tokens = static_cast<int>(prompt.size());
  req_.tokens = std::move(prompt);
  req_.params = params;
  // The sampler masks stop_token_ids below min_tokens: make that cover eos too.
  for (int e : eos_ids_)
    if (!contains(req_.params.stop_token_ids, e)) req_.params.stop_token_ids.push_back(e);
  req_.seed = seed;
  if (params.grammar) matcher_ = std::make_unique<structured::GrammarMatcher>(params.grammar);
  grammar_waits_ = matcher_ && params.grammar_after_token >= 0;
}

const std::vector<uint32_t>* EngineRequest::next_bitmask() {
  if (!matcher_ || grammar_waits_ || matcher_->finished())
    return nullptr;  // past the grammar's end only under ignore_eos
  bitmask_.resize(static_cast<size_t>(matcher_->grammar().vocab().mask_words()));
  matcher_->fill_mask(bitmask_);
  return &bitmask_;
}

RequestOutput EngineRequest::base_output() const {
  RequestOutput o;
  o.id = req_.id;
  o.num_prompt_tokens = req_.num_prompt_tokens;
  o.num_output_tokens = req_.num_output_tokens();
  o.arrival_time = arrival_time_;
  o.first_token_time = first_token_time_;
  o.scheduled_time = scheduled_time_;
  return o;
}

void EngineRequest::on_prompt_logprob(const PromptLogprob& p) {
  if (p.position == static_cast<int>(prompt_logprobs_.size()) + 1 && first_token_time_ == 0.0)
    prompt_logprobs_.push_back(p);  // its TokenLogprob
}

void EngineRequest::on_pooled(const PooledRows& p) {
  if (p.begin < pooled_upto_) return;  // recomputed after a preemption
  if (pool_sum_.empty()) pool_sum_.assign(p.sum.size(), 0.0);
  for (size_t i = 0; i < p.sum.size() && i < pool_sum_.size(); ++i) pool_sum_[i] += p.sum[i];
  pooled_upto_ = p.begin + p.rows;
  pool_rows_ += p.rows;
}

RequestOutput EngineRequest::pooled_output(double now) {
  RequestOutput o = base_output();
  if (first_token_time_ == 0.0) first_token_time_ = o.first_token_time = now;
  GS_CHECK(pool_rows_ > 0, "request {}: no hidden states were pooled", req_.id);
  o.embedding = finish_pooling(std::move(pool_sum_), pool_rows_, /*normalize=*/true);
  o.finished = true;
  o.finish_reason = FinishReason::Stop;
  return o;
}

RequestOutput EngineRequest::on_token(const SampledToken& s, int max_model_len, double now) {
  req_.tokens.push_back(s.token);
  RequestOutput o = base_output();
  if (first_token_time_ == 0.0) {
    first_token_time_ = o.first_token_time = now;
    o.prompt_logprobs = std::move(prompt_logprobs_);
  }
  o.new_token_ids = {s.token};
  if (req_.params.logprobs >= 0) o.logprobs.push_back(s);  // its TokenLogprob

  const SamplingParams& p = req_.params;
  if (grammar_waits_) {
    grammar_waits_ = s.token != p.grammar_after_token;  // the reasoning's end: the grammar starts next
  } else if (matcher_ && !matcher_->finished() && !matcher_->accept_token(s.token)) {
    // Only when the mask left nothing to sample (e.g. min_tokens holding off the end the grammar needs).
    o.finished = true;
    o.finish_reason = FinishReason::Abort;
    o.error = "structured output: the grammar allows no further token here (is min_tokens holding off its end?)";
    return o;
  }
  const bool may_stop = o.num_output_tokens >= p.min_tokens;
  bool string_stop = false;
  if (may_stop && contains(eos_ids_, s.token)) {
    o.finish_reason = FinishReason::Stop;  // eos: no stop_reason, as in vLLM
  } else if (may_stop && contains(user_stop_ids_, s.token)) {
    o.finish_reason = FinishReason::Stop;
    o.stop_reason = std::to_string(s.token);
  } else {
    auto m = stop_.feed(detok_.push(s.token));
    o.new_text = std::move(m.text);
    if (m.stop) {
      o.finish_reason = FinishReason::Stop;
      o.stop_reason = *m.stop;
      string_stop = true;
    }
  }
  if (o.finish_reason == FinishReason::None &&
      (o.num_output_tokens >= p.max_tokens || req_.num_tokens() >= max_model_len))
    o.finish_reason = FinishReason::Length;
  if (o.finish_reason != FinishReason::None) {
    o.finished = true;
    if (!string_stop) finish_text(o);  // a stop string drops what follows it
  }
  return o;
}

// Releases the text held back by the detokenizer and the stop matcher (it may still hold a
// stop string, which then ends the request with Stop).
void EngineRequest::finish_text(RequestOutput& o) {
  auto m = stop_.feed(detok_.flush());
  o.new_text += m.text;
  if (m.stop) {
    o.finish_reason = FinishReason::Stop;
    o.stop_reason = *m.stop;
  } else {
    o.new_text += stop_.flush();
  }
}

RequestOutput EngineRequest::aborted() const {
  RequestOutput o = base_output();
  o.finished = true;
  o.finish_reason = FinishReason::Abort;
  return o;
}

}  // namespace gs
