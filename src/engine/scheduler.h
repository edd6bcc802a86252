// Scheduler: continuous batching with chunked prefill and preemption by recomputation
// (vLLM v1 style). Each step has a token budget (max_num_batched_tokens): running requests
// are served first, oldest first (a decode token, or the next prefill chunk), then waiting
// requests are admitted first-come-first-served while budget, sequence slots and KV blocks
// last. When a running request needs a block and none is free, the most recently arrived
// running request is preempted: its blocks are freed and it goes back to the front of the
// waiting queue, to recompute prompt + generated tokens later. No request is ever dropped.
//
// Speculative decoding: a running request in decode whose spec_token_ids the engine filled is
// scheduled 1 + k tokens (the last known token and the k proposals, fewer when the budget is
// short); the engine rolls back the rejected ones after the step (rollback()).
//
// Progress is guaranteed when a request of max_model_len tokens fits the KV cache alone
// (the engine ensures this). Not thread-safe.
#pragma once
#include <deque>
#include <vector>

#include "engine/request.h"
#include "kv/block_pool.h"
#include "types/scheduler_output.h"

namespace gs {

struct SchedulerConfig {
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  // Admitted requests start from the longest cached prefix of full blocks (at least one
  // token is always computed, so the request still samples). Blocks are keyed by their tokens
  // and the request's LoRA adapter (kv/prefix_hash.h).
  bool enable_prefix_caching = false;
  // > 0 when every layer attends only to its last `sliding_window` positions (the largest
  // window over the layers): blocks wholly before the window of a request's next query are
  // given back before each step, so a window-only model's KV use stays bounded (as vLLM's
  // sliding-window manager). 0: full attention somewhere, every block is kept.
  int sliding_window = 0;
  // > 0 with LoRA: at most this many distinct adapters among running requests (device slots);
  // a waiting request of another adapter waits (first come, first served).
  int max_loras = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& cfg, BlockPool& pool);

  // Queues a request (status Waiting, nothing computed). The request must outlive its stay.
  void add(Request* r);
  // Picks this step's work. The scheduled requests' num_computed_tokens already count the
  // scheduled tokens when this returns (the ScheduledRequests keep the values from before).
  SchedulerOutput schedule();
  // After a verification step: the last `num_rejected` computed tokens were rejected proposals.
  // Their KV stays in the request's blocks until accepted tokens overwrite it; they no longer
  // count as computed (nor reach the prefix cache).
  void rollback(Request* r, int num_rejected);
  // Call after the executor ran the last schedule() and the sampled tokens were appended: the
  // blocks it filled with accepted tokens become cacheable.
  void on_step_executed();
  // Removes a request (finished or aborted) from the queues and frees its blocks.
  void finish(Request* r);

  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_preemptions() const { return num_preemptions_; }
  // Prefix cache counters (vLLM's): every token of each admitted request that looked the cache up
  // (a preempted request looks it up again with its generated tokens), and of those the tokens
  // its cached blocks covered. hits <= queries.
  uint64_t prefix_cache_query_tokens() const { return prefix_query_tokens_; }
  uint64_t prefix_cache_hit_tokens() const { return prefix_hit_tokens_; }
  bool empty() const { return running_.empty() && waiting_.empty(); }

 private:
  void preempt(Request* r);
  static void insert_by_arrival(std::deque<Request*>& q, Request* r);
  static ScheduledRequest make_scheduled(Request* r, int num_new);
  bool reads_prefix_cache(const Request* r) const;
  int adopt_cached_prefix(Request* r);
  int take_proposals(Request* r, int num_new, int budget);
  void free_outside_window(Request* r);
  bool lora_fits(const Request* r) const;

  SchedulerConfig cfg_;
  BlockPool& pool_;
  std::deque<Request*> running_;  // sorted by arrival: the back is preempted first
  std::deque<Request*> waiting_;  // sorted by arrival
  int num_preemptions_ = 0;
  uint64_t prefix_query_tokens_ = 0;
  uint64_t prefix_hit_tokens_ = 0;
  std::vector<Request*> last_scheduled_;
};

}  // namespace gs
