// ModelRunner: the logprobs of prompt tokens (prompt_logprobs, echo) once a forward computed
// them: the hidden state at each prompt position scores the next prompt token, max_num_seqs
// rows at a time, through the lm_head and the sampler (greedy rows that report their target
// token's logprob). Eager; only steps with such requests pay for it.
#include <algorithm>

#include "runner/model_runner_impl.h"

namespace gs {

namespace {

struct PromptRow {
  RequestId id;
  int position;  // of the target token
  int32_t row;   // hidden-state row of the token before it
  int32_t target;
  int num_top;
};

std::vector<PromptRow> prompt_rows(const SchedulerOutput& batch, const HostBatch& hb) {
  std::vector<PromptRow> rows;
  for (size_t ri = 0; ri < batch.requests.size(); ++ri) {
    const ScheduledRequest& r = batch.requests[ri];
    if (r.params == nullptr || r.params->prompt_logprobs < 0) continue;
    const int end = std::min(r.num_computed_tokens + r.num_new_tokens, r.num_prompt_tokens - 1);
    for (int p = r.num_computed_tokens; p < end; ++p)
      rows.push_back({r.id, p + 1, hb.query_start_loc[ri] + (p - r.num_computed_tokens), (*r.all_token_ids)[p + 1],
                      r.params->prompt_logprobs});
  }
  return rows;
}

}  // namespace

std::vector<PromptLogprob> ModelRunner::Impl::prompt_logprobs(const SchedulerOutput& batch, const HostBatch& hb) {
  const std::vector<PromptRow> rows = prompt_rows(batch, hb);
  std::vector<PromptLogprob> out;
  for (size_t b = 0; b < rows.size(); b += size_t(max_reqs)) {
    const int n = static_cast<int>(std::min(rows.size() - b, size_t(max_reqs)));
    std::vector<int32_t> logits_rows;
    std::vector<SamplingRow> params;
    for (int i = 0; i < n; ++i) {
      const PromptRow& r = rows[b + size_t(i)];
      logits_rows.push_back(r.row);
      params.push_back(SamplingRow{.temperature = 0.0f, .num_logprobs = r.num_top, .target_token = r.target});
    }
    backend->copy(buf.logits_rows.prefix({n}), Tensor::wrap(logits_rows.data(), {n}, DType::I32, Device::cpu()));
    sampler->stage(params, {});
    tail_rows = n;
    run_tail();
    std::vector<TokenLogprob> res = sampler->fetch(n);
    for (int i = 0; i < n; ++i) {
      const PromptRow& r = rows[b + size_t(i)];
      TokenLogprob& lp = res[size_t(i)];
      lp.token = r.target;  // the row reports the target's logprob; its sampled id is the argmax
      out.push_back({std::move(lp), r.id, r.position});
    }
  }
  tail_rows = 0;
  return out;
}

}  // namespace gs
