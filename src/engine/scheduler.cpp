// Implements engine/scheduler.h (Scheduler).
#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "kv/prefix_hash.h"

namespace gs {

Scheduler::Scheduler(const SchedulerConfig& cfg, BlockPool& pool) : cfg_(cfg), pool_(pool) {
  GS_CHECK(cfg.max_num_seqs >= 1, "max_num_seqs must be >= 1, got {}", cfg.max_num_seqs);
  GS_CHECK(cfg.max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1, got {}", cfg.max_num_batched_tokens);
}

void Scheduler::add(Request* r) {
  r->status = RequestStatus::Waiting;
  r->num_computed_tokens = 0;
  insert_by_arrival(waiting_, r);
}

void Scheduler::insert_by_arrival(std::deque<Request*>& q, Request* r) {
  auto pos = std::upper_bound(q.begin(), q.end(), r,
                              [](const Request* a, const Request* b) { return a->arrival < b->arrival; });
  q.insert(pos, r);
}

ScheduledRequest Scheduler::make_scheduled(Request* r, int num_new) {
  ScheduledRequest s;
  s.id = r->id;
  s.all_token_ids = &r->tokens;
  s.num_prompt_tokens = r->num_prompt_tokens;
  s.num_computed_tokens = r->num_computed_tokens;
  s.num_new_tokens = num_new;
  s.block_ids = &r->blocks.ids();
  s.sample = r->num_computed_tokens + num_new >= r->num_tokens();
  s.spec_token_ids = &r->spec_token_ids;
  s.params = &r->params;
  s.seed = r->seed;
  s.num_output_tokens = r->num_output_tokens();
  s.lora_id = r->lora_id;
  r->num_computed_tokens += num_new;
  return s;
}

void Scheduler::preempt(Request* r) {
  r->blocks.release_all(pool_);
  r->num_registered_blocks = 0;
  r->num_computed_tokens = 0;
  r->spec_token_ids.clear();
  r->status = RequestStatus::Waiting;
  ++r->num_preemptions;
  ++num_preemptions_;
  insert_by_arrival(waiting_, r);
}

// Prompt logprobs need every prompt position computed: such a request takes no cached prefix.
bool Scheduler::reads_prefix_cache(const Request* r) const {
  return cfg_.enable_prefix_caching && r->params.prompt_logprobs < 0;
}

// Takes the cached blocks of the request's longest cached prefix; returns the tokens covered.
int Scheduler::adopt_cached_prefix(Request* r) {
  if (!reads_prefix_cache(r) || r->blocks.num_blocks() > 0) return 0;
  extend_prefix_hashes(r->tokens, pool_.block_size(), r->block_hashes, uint64_t(r->lora_id));
  const int max_hits = (r->num_tokens() - 1) / pool_.block_size();
  int hits = 0;
  for (; hits < max_hits; ++hits) {
    auto id = pool_.lookup(r->block_hashes[hits]);
    if (!id) break;
    r->blocks.append_cached(pool_, *id);
  }
  r->num_registered_blocks = hits;
  return hits * pool_.block_size();
}

// The next query is at position num_computed_tokens and reads (p - window, p]: every block
// wholly before that goes back to the pool (registered prefix blocks stay cached there).
void Scheduler::free_outside_window(Request* r) {
  if (cfg_.sliding_window <= 0) return;
  r->blocks.free_before(pool_, r->num_computed_tokens - cfg_.sliding_window + 1);
}

// Whether admitting r keeps the running requests within max_loras distinct adapters.
bool Scheduler::lora_fits(const Request* r) const {
  if (cfg_.max_loras <= 0 || r->lora_id == 0) return true;
  std::vector<int> ids;
  for (const Request* x : running_)
    if (x->lora_id != 0 && std::find(ids.begin(), ids.end(), x->lora_id) == ids.end()) ids.push_back(x->lora_id);
  return std::find(ids.begin(), ids.end(), r->lora_id) != ids.end() || int(ids.size()) < cfg_.max_loras;
}

// A decoding request verifies its proposals in this step (1 + k tokens), as many as the budget
// leaves; a prefilling one drops them. Returns the proposed tokens scheduled.
int Scheduler::take_proposals(Request* r, int num_new, int budget) {
  auto& spec = r->spec_token_ids;
  if (num_new != 1 || r->num_computed_tokens + 1 != r->num_tokens()) spec.clear();
  if (spec.size() > size_t(budget - num_new)) spec.resize(size_t(std::max(0, budget - num_new)));
  return static_cast<int>(spec.size());
}

void Scheduler::rollback(Request* r, int num_rejected) {
  GS_CHECK(num_rejected >= 0 && num_rejected <= r->num_computed_tokens,
           "internal error: rolling back {} of {} computed tokens", num_rejected, r->num_computed_tokens);
  r->num_computed_tokens -= num_rejected;
  r->spec_token_ids.clear();
}

void Scheduler::on_step_executed() {
  if (cfg_.enable_prefix_caching)
    for (Request* r : last_scheduled_) {
      if (r->status != RequestStatus::Running) continue;
      extend_prefix_hashes(r->tokens, pool_.block_size(), r->block_hashes, uint64_t(r->lora_id));
      const int full = r->num_computed_tokens / pool_.block_size();
      for (int j = std::max(r->num_registered_blocks, r->blocks.num_freed()); j < full; ++j)
        pool_.register_hash(r->blocks.ids()[j], r->block_hashes[j]);
      r->num_registered_blocks = std::max(r->num_registered_blocks, full);
    }
  last_scheduled_.clear();
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  last_scheduled_.clear();
  int budget = cfg_.max_num_batched_tokens;
  bool preempted = false;

  // Running requests, oldest first; preempt from the newest end when blocks run out.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* r = running_[i];
    int num_new = std::min(r->num_tokens() - r->num_computed_tokens, budget);
    num_new += take_proposals(r, num_new, budget);
    if (num_new <= 0) {
      ++i;
      continue;
    }
    free_outside_window(r);
    bool self_preempted = false;
    while (!r->blocks.reserve(pool_, r->num_computed_tokens + num_new)) {
      Request* victim = running_.back();
      running_.pop_back();
      preempt(victim);
      preempted = true;
      if (victim == r) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    out.requests.push_back(make_scheduled(r, num_new));
    last_scheduled_.push_back(r);
    budget -= num_new;
    ++i;
  }

  // Waiting requests, first come first served; none after a preemption this step (the freed
  // blocks are for the running requests).
  while (!preempted && budget > 0 && !waiting_.empty() && num_running() < cfg_.max_num_seqs) {
    Request* r = waiting_.front();
    if (!lora_fits(r)) break;
    const int cached = adopt_cached_prefix(r);
    int num_new = std::min(r->num_tokens() - cached, budget);
    if (!r->blocks.reserve(pool_, cached + num_new)) {
      r->blocks.release_all(pool_);  // cached blocks go back to the cache
      r->num_registered_blocks = 0;
      break;
    }
    r->num_computed_tokens = cached;
    if (reads_prefix_cache(r)) {
      prefix_query_tokens_ += uint64_t(r->num_tokens());
      prefix_hit_tokens_ += uint64_t(cached);
    }
    waiting_.pop_front();
    r->status = RequestStatus::Running;
    insert_by_arrival(running_, r);
    out.requests.push_back(make_scheduled(r, num_new));
    last_scheduled_.push_back(r);
    budget -= num_new;
  }
  return out;
}

void Scheduler::finish(Request* r) {
  auto drop = [r](std::deque<Request*>& q) { q.erase(std::remove(q.begin(), q.end(), r), q.end()); };
  drop(running_);
  drop(waiting_);
  last_scheduled_.erase(std::remove(last_scheduled_.begin(), last_scheduled_.end(), r), last_scheduled_.end());
  r->blocks.release_all(pool_);
  r->num_registered_blocks = 0;
  r->status = RequestStatus::Finished;
}

}  // namespace gs
