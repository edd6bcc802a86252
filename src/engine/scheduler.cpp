#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace gs {

Scheduler::Scheduler(const SchedulerConfig& cfg, BlockPool& pool) : cfg_(cfg), pool_(pool) {
  GS_CHECK(cfg.max_num_seqs >= 1, "max_num_seqs must be >= 1, got {}", cfg.max_num_seqs);
  GS_CHECK(cfg.max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1, got {}",
           cfg.max_num_batched_tokens);
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
  s.sample = r->num_computed_tokens + num_new == r->num_tokens();
  s.params = &r->params;
  s.seed = r->seed;
  s.num_output_tokens = r->num_output_tokens();
  r->num_computed_tokens += num_new;
  return s;
}

void Scheduler::preempt(Request* r) {
  r->blocks.release_all(pool_);
  r->num_computed_tokens = 0;
  r->status = RequestStatus::Waiting;
  ++r->num_preemptions;
  ++num_preemptions_;
  insert_by_arrival(waiting_, r);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int budget = cfg_.max_num_batched_tokens;
  bool preempted = false;

  // Running requests, oldest first; preempt from the newest end when blocks run out.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* r = running_[i];
    int num_new = std::min(r->num_tokens() - r->num_computed_tokens, budget);
    if (num_new <= 0) {
      ++i;
      continue;
    }
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
    budget -= num_new;
    ++i;
  }

  // Waiting requests, first come first served; none after a preemption this step (the freed
  // blocks are for the running requests).
  while (!preempted && budget > 0 && !waiting_.empty() &&
         num_running() < cfg_.max_num_seqs) {
    Request* r = waiting_.front();
    int num_new = std::min(r->num_tokens() - r->num_computed_tokens, budget);
    if (!r->blocks.reserve(pool_, r->num_computed_tokens + num_new)) break;
    waiting_.pop_front();
    r->status = RequestStatus::Running;
    insert_by_arrival(running_, r);
    out.requests.push_back(make_scheduled(r, num_new));
    budget -= num_new;
  }
  return out;
}

void Scheduler::finish(Request* r) {
  auto drop = [r](std::deque<Request*>& q) { q.erase(std::remove(q.begin(), q.end(), r), q.end()); };
  drop(running_);
  drop(waiting_);
  r->blocks.release_all(pool_);
  r->status = RequestStatus::Finished;
}

}  // namespace gs
