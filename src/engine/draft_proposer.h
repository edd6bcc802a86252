// DraftProposer: speculative proposals from a smaller draft model that shares the target's
// vocabulary (--speculative-config method draft_model).
//
// It owns its own ModelRunner (weights, KV cache, captured graphs) and block pool; each request
// has a draft block table and a count of tokens the draft has computed. propose() serves every
// decoding request at once: catch-up steps compute the tokens the draft has not seen (the whole
// prompt the first time, afterwards the accepted tokens of the last verification; chunked to the
// token budget) and sample the first proposal, then k - 1 steps of one token per request (plain
// uniform decode batches: the draft's FULL graphs) sample the rest. Proposals are the draft's
// greedy tokens: q is a point mass, for which spec/verification.h is exact rejection sampling.
//
// The draft's KV is valid up to the request's last accepted token: tokens are only appended and
// a verification replaces at most the token after the accepted run, so propose() first cuts each
// request's draft count to num_tokens - 1.
#pragma once
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/request.h"
#include "executor/engine_config.h"
#include "kv/block_pool.h"
#include "runner/model_runner.h"

namespace gs {

class DraftProposer {
 public:
  // Builds the draft's runner from the target's config with cfg.speculative.model: a model
  // directory (loaded as --load-format says) or a --preset name (dummy weights). Built before the
  // target (on a GPU it takes a tenth of the memory budget first). Throws gs::Error, before
  // loading anything, when the draft's vocabulary is not the target's.
  explicit DraftProposer(const EngineConfig& cfg);
  ~DraftProposer();

  int max_model_len() const { return runner_->max_model_len(); }

  // Fills reqs[i]->spec_token_ids with up to ks[i] proposals (none when the draft's KV cache has
  // no room for the request).
  void propose(const std::vector<Request*>& reqs, const std::vector<int>& ks);
  // Drops the draft state of requests that are no longer in `live` (finished or aborted).
  void retain_only(const std::vector<RequestId>& live);

  RunnerStats stats() const { return runner_->stats(); }

 private:
  struct State {
    BlockTable blocks;
    int computed = 0;             // tokens whose draft KV is valid
    std::vector<int32_t> tokens;  // the request's tokens, then this step's proposals
  };
  bool reserve(State& s, int num_tokens);
  void catch_up(const std::vector<State*>& states, const std::vector<Request*>& reqs);
  void decode_one(const std::vector<State*>& states, const std::vector<Request*>& reqs);
  ScheduledRequest scheduled(State& s, RequestId id, int num_new) const;

  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<BlockPool> pool_;
  SamplingParams greedy_;
  int max_tokens_ = 0;  // the draft's token budget per step
  std::unordered_map<RequestId, State> states_;
};

}  // namespace gs
