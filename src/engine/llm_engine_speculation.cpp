// The engine's side of speculative decoding: proposals before each step, and after it the
// accepted tokens taken, the rejected ones rolled back, and the spec-decode counters.
#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/logging.h"
#include "engine/llm_engine_impl.h"
#include "runner/sampling_inputs.h"

namespace gs {

namespace {

// One output per request and step: the outputs from `first` on (one request's tokens in order)
// become one, the last one's state (finish, counts) with every token, text and logprob.
void merge_outputs(std::vector<RequestOutput>& outs, size_t first) {
  if (outs.size() <= first + 1) return;
  RequestOutput& m = outs[first];
  for (size_t i = first + 1; i < outs.size(); ++i) {
    RequestOutput& o = outs[i];
    m.new_token_ids.insert(m.new_token_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    m.new_text += o.new_text;
    m.logprobs.insert(m.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
    m.finished = o.finished;
    m.finish_reason = o.finish_reason;
    m.stop_reason = std::move(o.stop_reason);
    m.num_output_tokens = o.num_output_tokens;
  }
  outs.resize(first + 1);
}

}  // namespace

std::string SpecDecodeStats::summary() const {
  std::string per_pos;
  for (size_t i = 0; i < accepted_per_pos.size(); ++i)
    per_pos +=
        fmt::format("{}{:.3f}", i ? ", " : "", num_drafts ? double(accepted_per_pos[i]) / double(num_drafts) : 0.0);
  return fmt::format(
      "speculative decoding: {} drafts, {} draft tokens, {} accepted ({:.1f}%), {} emitted, mean acceptance length "
      "{:.2f}, per-position acceptance [{}], proposing {:.3f} ms per step",
      num_drafts, num_draft_tokens, num_accepted_tokens, 100.0 * acceptance_rate(), num_emitted_tokens,
      mean_accepted_length(), per_pos, proposal_steps ? 1e3 * proposal_seconds / double(proposal_steps) : 0.0);
}

void LLMEngine::Impl::init_speculation() {
  const SpeculativeConfig& sc = cfg.speculative;
  if (!sc.enabled()) return;
  sc.validate();
  if (sc.method == "ngram") {
    ngram = std::make_unique<NgramProposer>(sc.prompt_lookup_min, sc.prompt_lookup_max);
    spdlog::info("speculative decoding: ngram with k = {} (prompt lookup {}..{} tokens)", sc.num_speculative_tokens,
                 sc.prompt_lookup_min, sc.prompt_lookup_max);
  } else {
    GS_CHECK(draft != nullptr, "--speculative-config method draft_model needs the real model runner (internal error)");
    spdlog::info("speculative decoding: draft model {} with k = {}", sc.model, sc.num_speculative_tokens);
  }
  spec_stats.accepted_per_pos.assign(size_t(sc.num_speculative_tokens), 0);
}

// Running requests in decode propose up to k tokens, no more than max_tokens and the context
// can still take. Requests with penalties do not speculate (their device counts would take the
// rejected tokens).
void LLMEngine::Impl::propose() {
  if (!ngram && !draft) return;
  const auto t0 = std::chrono::steady_clock::now();
  const int k_max = cfg.speculative.num_speculative_tokens;
  const int context = draft ? std::min(max_model_len, draft->max_model_len() + 1) : max_model_len;
  std::vector<Request*> reqs;
  std::vector<int> ks;
  std::vector<RequestId> live;
  for (auto& [id, er] : requests) {
    Request& r = er->request();
    live.push_back(id);
    r.spec_token_ids.clear();
    if (r.status != RequestStatus::Running || r.num_computed_tokens + 1 != r.num_tokens() ||
        needs_penalty_slot(r.params) || r.params.grammar)  // structured output does not speculate
      continue;
    const int k = std::min({k_max, r.params.max_tokens - r.num_output_tokens() - 1, context - r.num_tokens()});
    if (k <= 0) continue;
    if (ngram) r.spec_token_ids = ngram->propose(r.tokens, k);
    reqs.push_back(&r);
    ks.push_back(k);
  }
  if (draft) {
    draft->retain_only(live);
    draft->propose(reqs, ks);
  }
  if (!reqs.empty()) {
    ++spec_stats.proposal_steps;
    spec_stats.proposal_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

void LLMEngine::Impl::take_tokens(const ScheduledRequest& s, std::span<const SampledToken> tokens, double now,
                                  std::vector<RequestOutput>& outs) {
  const int proposed = s.num_spec_tokens();  // before tokens are appended
  const int accepted = static_cast<int>(tokens.size()) - 1;
  GS_CHECK(accepted >= 0 && accepted <= proposed, "internal error: request {} got {} tokens for {} proposals", s.id,
           tokens.size(), proposed);
  Request& r = requests.at(s.id)->request();
  if (proposed > 0) {
    sched.rollback(&r, proposed - accepted);
    ++spec_stats.num_drafts;
    spec_stats.num_draft_tokens += uint64_t(proposed);
    spec_stats.num_accepted_tokens += uint64_t(accepted);
    spec_stats.num_emitted_tokens += tokens.size();
    for (int j = 0; j < accepted && size_t(j) < spec_stats.accepted_per_pos.size(); ++j)
      ++spec_stats.accepted_per_pos[size_t(j)];
  }
  const size_t first = outs.size();
  for (const SampledToken& t : tokens) {
    if (requests.count(s.id) == 0) break;  // an earlier token ended the request: the rest are dropped
    take_token(s, t, now, outs);
  }
  merge_outputs(outs, first);
}

}  // namespace gs
