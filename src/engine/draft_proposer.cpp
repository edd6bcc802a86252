// Implements engine/draft_proposer.h (DraftProposer).
#include "engine/draft_proposer.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/logging.h"
#include "model/model_factory.h"

namespace gs {

namespace {

// The draft's runner config: the target's limits and graphs, the draft's model, no LoRA and no
// speculation of its own. On a GPU the draft is built first and takes a tenth of the memory
// budget (weights and KV cache); the target plans from what is left.
RunnerConfig draft_runner_config(const EngineConfig& cfg) {
  RunnerConfig d = cfg;
  const std::string& m = cfg.speculative.model;
  if (std::filesystem::is_directory(m)) {
    d.model = m;
  } else {  // a preset name: dummy weights of that shape
    d.model.clear();
    d.preset = m;
    d.load_format = "dummy";
  }
  d.speculative = {};
  d.enable_lora = false;
  d.lora_modules.clear();
  d.gpu_memory_utilization = cfg.gpu_memory_utilization * 0.1f;
  return d;
}

// From config.json or the preset alone (nothing is loaded).
int vocab_size(const RunnerConfig& c) {
  return resolve_model_config({.dir = c.model,
                               .dummy = c.load_format == "dummy" || c.model.empty(),
                               .preset = c.preset,
                               .seed = c.seed,
                               .quantization = {}})
      .vocab_size;
}

}  // namespace

DraftProposer::DraftProposer(const EngineConfig& cfg) {
  const RunnerConfig d = draft_runner_config(cfg);
  const int vocab = vocab_size(d), target_vocab = vocab_size(cfg);
  GS_CHECK(vocab == target_vocab,
           "the draft model '{}' has a vocabulary of {} tokens but the target has {}: a draft model must share "
           "the target's tokenizer vocabulary (use a draft of the same model family)",
           cfg.speculative.model, vocab, target_vocab);
  runner_ = std::make_unique<ModelRunner>(d);
  pool_ = std::make_unique<BlockPool>(runner_->num_kv_blocks(), runner_->block_size());
  greedy_.temperature = 0.0f;
  max_tokens_ = cfg.max_num_batched_tokens;
  spdlog::info("draft model {}: {} KV blocks of {} tokens", cfg.speculative.model, runner_->num_kv_blocks(),
               runner_->block_size());
}

DraftProposer::~DraftProposer() {
  for (auto& [id, s] : states_) s.blocks.release_all(*pool_);
}

void DraftProposer::retain_only(const std::vector<RequestId>& live) {
  for (auto it = states_.begin(); it != states_.end();) {
    if (std::find(live.begin(), live.end(), it->first) == live.end()) {
      it->second.blocks.release_all(*pool_);
      it = states_.erase(it);
    } else {
      ++it;
    }
  }
}

// Room for `num_tokens`; when the pool is short the request's draft state starts over (its
// blocks go back, so other requests can go on) and it gets no proposals this step.
bool DraftProposer::reserve(State& s, int num_tokens) {
  if (s.blocks.reserve(*pool_, num_tokens)) return true;
  s.blocks.release_all(*pool_);
  s.computed = 0;
  return false;
}

ScheduledRequest DraftProposer::scheduled(State& s, RequestId id, int num_new) const {
  ScheduledRequest r;
  r.id = id;
  r.all_token_ids = &s.tokens;
  r.num_prompt_tokens = static_cast<int>(s.tokens.size());
  r.num_computed_tokens = s.computed;
  r.num_new_tokens = num_new;
  r.block_ids = &s.blocks.ids();
  r.sample = s.computed + num_new == static_cast<int>(s.tokens.size());
  r.params = &greedy_;
  return r;
}

// Chunked steps until every request's known tokens are computed; the last chunk of each samples
// its first proposal.
void DraftProposer::catch_up(const std::vector<State*>& states, const std::vector<Request*>& reqs) {
  for (;;) {
    SchedulerOutput batch;
    int budget = max_tokens_;
    for (size_t i = 0; i < states.size() && budget > 0; ++i) {
      State& s = *states[i];
      const int n = std::min(reqs[i]->num_tokens() - s.computed, budget);  // known tokens only
      if (n <= 0) continue;
      batch.requests.push_back(scheduled(s, reqs[i]->id, n));
      budget -= n;
    }
    if (batch.requests.empty()) return;
    const RunnerOutput out = runner_->execute(batch);
    size_t k = 0;
    for (size_t i = 0; i < states.size(); ++i) {
      State& s = *states[i];
      for (const ScheduledRequest& r : batch.requests)
        if (r.id == reqs[i]->id) s.computed += r.num_new_tokens;
      if (k < out.sampled.size() && out.sampled[k].id == reqs[i]->id) s.tokens.push_back(out.sampled[k++].token);
    }
  }
}

// One token for every request that still wants proposals.
void DraftProposer::decode_one(const std::vector<State*>& states, const std::vector<Request*>& reqs) {
  SchedulerOutput batch;
  for (size_t i = 0; i < states.size(); ++i) batch.requests.push_back(scheduled(*states[i], reqs[i]->id, 1));
  if (batch.requests.empty()) return;
  const RunnerOutput out = runner_->execute(batch);
  GS_CHECK(out.sampled.size() == states.size(), "internal error: the draft sampled {} of {} rows", out.sampled.size(),
           states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    ++states[i]->computed;
    states[i]->tokens.push_back(out.sampled[i].token);
  }
}

void DraftProposer::propose(const std::vector<Request*>& reqs, const std::vector<int>& ks) {
  std::vector<State*> states;
  std::vector<Request*> active;
  std::vector<int> want;
  for (size_t i = 0; i < reqs.size(); ++i) {
    Request& r = *reqs[i];
    if (ks[i] <= 0) continue;
    State& s = states_[r.id];
    s.computed = std::min(s.computed, r.num_tokens() - 1);
    s.tokens = r.tokens;
    // The draft computes every known token and the first k - 1 proposals.
    if (!reserve(s, r.num_tokens() + ks[i] - 1)) continue;
    states.push_back(&s);
    active.push_back(&r);
    want.push_back(ks[i]);
  }
  catch_up(states, active);
  for (int j = 1;; ++j) {
    std::vector<State*> more;
    std::vector<Request*> more_reqs;
    for (size_t i = 0; i < states.size(); ++i)
      if (want[i] > j && states[i]->tokens.back() >= 0) {  // (< 0: the draft's logits were not finite)
        more.push_back(states[i]);
        more_reqs.push_back(active[i]);
      }
    if (more.empty()) break;
    decode_one(more, more_reqs);
  }
  for (size_t i = 0; i < states.size(); ++i) {
    const auto& t = states[i]->tokens;  // proposals end before a sentinel
    active[i]->spec_token_ids.assign(
        t.begin() + active[i]->num_tokens(),
        std::find_if(t.begin() + active[i]->num_tokens(), t.end(), [](int32_t v) { return v < 0; }));
  }
}

}  // namespace gs
